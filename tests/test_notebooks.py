"""Every notebook in notebooks/ runs, small, without error; committed notebooks carry no outputs.

The notebooks check their own prose: *claim check* cells assert the qualitative claims
at any size, so running them small here is what keeps the prose honest in CI.

Executing needs the ``notebooks`` extra (papermill, nbclient, nbformat, ipykernel);
without it the execution tests skip (CI installs the extra, so they run there).  The
no-outputs tests only need nbformat's JSON, so they read the files with ``json``.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("*.ipynb"))

#: Small parameters for CI, per notebook.  Every notebook must be listed: running one
#: at full size in CI would take minutes.  Keep ``SEEDS >= 2`` in policy_comparison:
#: its claim checks compare medians over start offsets and switch off below 2.
SMALL_PARAMETERS: dict[str, dict[str, object]] = {
    "policy_comparison.ipynb": {
        "SEEDS": 3,
        "WORKERS": 1,
        "SCALE_SEEDS": 2,
        "SCALE_FACTORS": [1.1, 2.0],
    },
    "checkpoint_interval.ipynb": {
        "SEEDS": 2,
        "SYNTHETIC_FAILURES": 300,
        "INTERVAL_POINTS": 5,
    },
    # already small: it re-simulates the bundled measurement (no executor run)
    "sim_vs_real.ipynb": {"OUT_DIR": "sim-vs-real-ci"},
    # one workload (its claim checks hold on each) and a 2-hour Philly window
    "cluster_scheduling.ipynb": {
        "WORKLOADS": ["pollux-workload-8"],
        "PHILLY": "philly:start_h=40:hours=2",
    },
}


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _parameter_names(notebook: dict) -> set[str]:
    cells = [c for c in notebook["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "exactly one cell must be tagged 'parameters'"
    source = "".join(cells[0]["source"])
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def test_there_are_notebooks():
    expected = {
        "policy_comparison.ipynb",
        "checkpoint_interval.ipynb",
        "sim_vs_real.ipynb",
        "cluster_scheduling.ipynb",
    }
    assert expected <= {p.name for p in PATHS}


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_committed_notebook_has_no_outputs(path):
    notebook = _load(path)
    stale = [
        i
        for i, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
    assert not stale, f"{path.name}: clear the outputs of cells {stale} before committing"


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_small_parameters_exist_in_the_parameters_cell(path):
    assert path.name in SMALL_PARAMETERS, (
        f"{path.name}: add its small CI parameters to SMALL_PARAMETERS in {Path(__file__).name}"
    )
    unknown = set(SMALL_PARAMETERS[path.name]) - _parameter_names(_load(path))
    assert not unknown, f"{path.name}: no such parameters {sorted(unknown)}"


@pytest.mark.timeout(150)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_notebook_runs_small(path, tmp_path):
    papermill = pytest.importorskip("papermill")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    output = tmp_path / path.name
    papermill.execute_notebook(
        str(path),
        str(output),
        parameters=SMALL_PARAMETERS.get(path.name, {}),
        cwd=str(tmp_path),
        progress_bar=False,
        execution_timeout=120,
        kernel_name="python3",
    )
    executed = _load(output)
    errors = [
        o
        for c in executed["cells"]
        if c["cell_type"] == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors  # papermill raises first; this guards against a swallowed error
    # outputs go to a temporary folder or the one given (OUT_DIR), never beside the notebook
    given = {str(v) for k, v in SMALL_PARAMETERS.get(path.name, {}).items() if k == "OUT_DIR"}
    stray = {p.name for p in tmp_path.iterdir()} - {output.name} - given
    assert not stray, f"{path.name} wrote {sorted(stray)} into its working folder"

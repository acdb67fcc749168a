"""Property tests of the workload parser: valid files round-trip, any bad cell is located."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasim.traces import TraceError
from elasim.traces.cluster import WORKLOAD_COLUMNS, load_application
from elasim.traces.workloads import load_workload

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

rows = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.sampled_from(["cifar10", "bert", "ncf"]),
        st.integers(1, 64),
        st.integers(1, 1 << 16),
    ),
    min_size=1,
    max_size=30,
)


def _write(path: Path, body: list[tuple[int, str, int, int]]) -> None:
    lines = [",".join(WORKLOAD_COLUMNS)]
    lines += [f"job-{i},{t},{a},{r},{b}" for i, (t, a, r, b) in enumerate(body)]
    path.write_text("\n".join(lines) + "\n")


@SETTINGS
@given(body=rows)
def test_valid_workloads_round_trip(tmp_path: Path, body: list[tuple[int, str, int, int]]) -> None:
    path = tmp_path / "w.csv"
    _write(path, body)
    jobs = load_workload(path, {"cifar10", "bert", "ncf"})
    assert len(jobs) == len(body)
    by_name = {job.name: job for job in jobs}
    for i, (t, a, r, b) in enumerate(body):
        job = by_name[f"job-{i}"]
        assert (job.arrival_s, job.application, job.requested_gpus, job.requested_batch_size) == (
            t,
            a,
            r,
            b,
        )
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)


@SETTINGS
@given(
    body=rows,
    data=st.data(),
    bad=st.sampled_from(["x", "", "-3", "1.5e", "nan", "inf"]),
)
def test_a_bad_cell_is_located(tmp_path: Path, body, data, bad: str) -> None:
    path = tmp_path / "w.csv"
    _write(path, body)
    lines = path.read_text().splitlines()
    row = data.draw(st.integers(1, len(body)))
    col = data.draw(st.sampled_from([2, 4, 5]))  # time, num_replicas, batch_size
    cells = lines[row].split(",")
    cells[col - 1] = bad
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as err:
        load_workload(path)
    assert (err.value.line, err.value.column) == (row + 1, col)
    assert str(err.value).startswith(f"{path}:{row + 1}:{col}: {WORKLOAD_COLUMNS[col - 1]}")


def test_bad_application_profiles(tmp_path: Path) -> None:
    app = tmp_path / "toy"
    app.mkdir()
    (app / "placements.csv").write_text(
        "placement,local_bsz,step_time,sync_time\n1,32,0.1,0.0\n10,32,0.1,0.0\n"
    )
    with pytest.raises(TraceError, match=r"toy/placements.csv:3:1: placement"):
        load_application(app)
    (app / "placements.csv").write_text("placement,local_bsz,step_time,sync_time\n1,32,0.1,0.0\n")
    with pytest.raises(TraceError, match="no validation-<batch>.csv"):
        load_application(app)
    (app / "validation-32.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n1,1,0.5,1,1\n0.5,2,0.6,1,1\n"
    )
    with pytest.raises(TraceError, match=r"validation-32.csv:3:1: progress: decreases"):
        load_application(app)
    with pytest.raises(TraceError, match="no such application"):
        load_application(tmp_path / "missing")

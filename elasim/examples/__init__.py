"""Measured example data shipped with elasim (installed with the package).

``sim_vs_real``: three repeats of one executor run on CPU gloo and the profile
calibrated on the same machine just before them, so ``notebooks/sim_vs_real.ipynb``
and the tests can compare the simulator with a real measurement without running
torch.  Its ``README.md`` says
where, when and with which commands it was measured.  The data is measured, not
invented; re-measure on your own machine with ``elasim calibrate`` and
``elasim compare --trace ... --profile ...``.

``my_policy.py``: the policy file ``elasim policies --template`` prints, a start for
a policy of one's own (tested: it runs as written).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["policy_template", "sim_vs_real_dir", "sim_vs_real_runs"]


def policy_template() -> str:
    """The source of ``my_policy.py``, a policy to start one's own from."""
    return resources.files(__name__).joinpath("my_policy.py").read_text(encoding="utf-8")


def sim_vs_real_dir() -> Path:
    """Folder of the measured example: ``profile.json`` and ``real-1/`` ... ``real-3/``."""
    return Path(str(resources.files(__name__).joinpath("sim_vs_real")))


def sim_vs_real_runs() -> list[Path]:
    """The measured repeats (``elasim run --out`` folders), in the order they ran."""
    return sorted(sim_vs_real_dir().glob("real-*"), key=lambda p: int(p.name.split("-")[1]))

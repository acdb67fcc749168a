"""The windows of ``benchmarks/bench_spot_policies.py``, for tests that replay one.

A test that pins a benchmark window (a trace, a start offset, a node count and a
deadline factor) builds its job with the benchmark's own builder
(``bench_spot_policies.window``), so a window quoted in a test is the benchmark's.
"""

from __future__ import annotations

from pathlib import Path

from repo_scripts import load_script

_BENCH = load_script(Path(__file__).resolve().parents[1] / "benchmarks" / "bench_spot_policies.py")

#: ``(spec, job)`` of one benchmark window (``nodes``, ``factor``, ``start_offset_s``,
#: further ``JobSpec`` fields): the benchmark's builder itself.
benchmark_window = _BENCH.window

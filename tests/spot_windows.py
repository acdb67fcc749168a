"""The windows of ``benchmarks/bench_spot_policies.py``, for tests that replay one.

A test that pins a benchmark window (a trace, a start offset, a node count and a
deadline factor) builds its job here, as the benchmark does: the ResNet-50 preset on
up to ``nodes`` nodes, p3.2xlarge prices, the deadline ``factor`` times its fastest
time from the start.  One place, so a window quoted in a test is the benchmark's.
"""

from __future__ import annotations

from typing import Any

from elasim.job import load_job
from elasim.jobmodel import JobSpec
from elasim.sim import fastest_finish_h

JOB = "resnet50_v100"
#: The benchmark's prices (USD per node-hour), those of the bundled p3.2xlarge traces.
SPOT_PRICE, ON_DEMAND_PRICE = 0.918, 3.06


def benchmark_window(nodes: int, factor: float, start_offset_s: float, **spec: Any):
    """``(spec, job)`` of one benchmark window; ``spec``: further ``JobSpec`` fields."""
    job = load_job(JOB).with_nodes(1, nodes)
    window = JobSpec(
        job=JOB,
        max_nodes=nodes,
        deadline_s=factor * fastest_finish_h(job, JobSpec()) * 3600.0,
        start_offset_s=start_offset_s,
        on_demand_price_per_hour=ON_DEMAND_PRICE,
        spot_price_per_hour=SPOT_PRICE,
        **spec,
    )
    return window, job

"""A cluster workload from a job trace: Pollux's GPU-time mapping, seeded and documented."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from elasim.cli import app
from elasim.traces.model import JobTrace
from elasim.traces.philly_workload import (
    PhillyMapping,
    application_configurations,
    map_job_trace,
    parse_philly_spec,
)
from elasim.traces.workloads import load_workload

RAW_PHILLY = Path(__file__).resolve().parents[2] / "shared/traces-real/pollux-philly/philly.csv"
H = 3600.0


def _trace(duration_s, gpus, submit=None) -> JobTrace:
    n = len(duration_s)
    return JobTrace(
        name="t",
        submit_time_s=np.asarray(submit if submit is not None else np.arange(n) * 10.0, float),
        duration_s=np.asarray(duration_s, float),
        num_gpus=np.asarray(gpus, np.int64),
    )


def test_applications_follow_pollux_gpu_time_classes_and_its_filter():
    # GPU-hours: 0.5, 5, 50, 500 kept; 30 s and 2,000 GPU-h dropped by Pollux's filter
    trace = _trace([0.5 * H, 5 * H, 25 * H, 125 * H, 30.0, 500 * H], [1, 1, 2, 4, 1, 4])
    jobs = map_job_trace(trace, PhillyMapping(seed=3))
    assert [j.name.rsplit("-", 1)[1] for j in jobs] == ["0", "1", "2", "3"]
    assert jobs[0].application in {"cifar10", "ncf"}
    assert jobs[1].application in {"deepspeech2", "bert"}
    assert jobs[2].application == "yolov3"
    assert jobs[3].application == "imagenet"
    configs = application_configurations()
    for job in jobs:
        assert (job.requested_gpus, job.requested_batch_size) in configs[job.application]
    unfiltered = map_job_trace(trace, PhillyMapping(seed=3, pollux_filter=False))
    assert len(unfiltered) == 6 and unfiltered[-1].application == "imagenet"


def test_configurations_are_the_ones_of_the_pollux_workloads():
    configs = application_configurations()
    assert set(configs) == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert configs["ncf"] == ((1, 32768),)
    assert (4, 64) in configs["yolov3"]


def test_same_seed_same_workload_and_a_window_keeps_each_jobs_draw():
    trace = _trace(np.full(400, 0.4 * H), np.ones(400, int), submit=np.arange(400) * 60.0)
    a = map_job_trace(trace, PhillyMapping(seed=7))
    assert a == map_job_trace(trace, PhillyMapping(seed=7))
    assert [j.application for j in a] != [
        j.application for j in map_job_trace(trace, PhillyMapping(seed=8))
    ]
    # hours 1 to 3: jobs 60..179 of the whole trace, with the same applications
    window = map_job_trace(trace, PhillyMapping(seed=7, start_h=1.0, hours=2.0))
    assert len(window) == 120 and window[0].arrival_s == 0.0
    assert [j.application for j in window] == [j.application for j in a[60:180]]
    sample = map_job_trace(trace, PhillyMapping(seed=7, max_jobs=25))
    assert len(sample) == 25
    assert [j.arrival_s for j in sample] == sorted(j.arrival_s for j in sample)


def test_spec_parsing_and_its_one_line_errors():
    assert parse_philly_spec("philly") == ("philly_jobs.csv", PhillyMapping())
    trace, mapping = parse_philly_spec("philly:/x/philly.csv:seed=2:hours=8:max_jobs=160")
    assert trace == "/x/philly.csv"
    assert mapping == PhillyMapping(seed=2, hours=8.0, max_jobs=160)
    assert parse_philly_spec("philly:pollux_filter=false")[1].pollux_filter is False
    with pytest.raises(ValueError, match="unknown option 'sed'"):
        parse_philly_spec("philly:sed=2")
    with pytest.raises(ValueError, match="hours='x' is not"):
        parse_philly_spec("philly:hours=x")
    with pytest.raises(ValueError, match="max_jobs must be >= 1"):
        parse_philly_spec("philly:max_jobs=0")


def test_the_bundled_week_maps_deterministically():
    jobs = load_workload("philly")
    assert len(jobs) == 3314  # 3,370 jobs, 56 under 60 s
    assert jobs == load_workload("philly:seed=0")
    assert len({j.name for j in jobs}) == len(jobs)


@pytest.mark.skipif(not RAW_PHILLY.is_file(), reason="needs ../shared/traces-real/pollux-philly")
def test_the_full_raw_philly_table_maps_to_pollux_filtered_job_count():
    jobs = load_workload(f"philly:{RAW_PHILLY}")
    assert len(jobs) == 74428  # SOURCE.md: what Pollux's filter keeps


@pytest.mark.timeout(120)
def test_cli_simulates_a_mapped_workload_and_rejects_bad_specs_in_one_line():
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["cluster", "simulate", "-w", "philly:max_jobs=12", "-p", "fifo", "--json"],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["jobs"] == 12 and summary["jobs_completed"] == 12
    for spec, needle in (
        ("philly:bogus=1", "unknown option 'bogus'"),
        ("philly:no_such_trace.csv", "no_such_trace.csv"),
        ("philly:spot_us_east.csv", "not a job trace"),
    ):
        bad = runner.invoke(app, ["cluster", "simulate", "-w", spec, "-p", "fifo"])
        assert bad.exit_code == 2, (spec, bad.output)
        assert needle in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
        assert "Traceback" not in bad.output

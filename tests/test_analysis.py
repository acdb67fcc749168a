"""Tests of elasim.analysis: every expectation is either arithmetic or a hand-made table.

The tiny job (tests/data/tiny_job.toml) makes ``n`` samples/s on ``n`` nodes, needs
36,000 samples, writes a checkpoint in 100 s and has no rescale costs, so grid and
sweep results below are computed by hand.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from conftest import DATA, capacity  # noqa: E402

from elasim import analysis  # noqa: E402
from elasim.policies import policy_names  # noqa: E402
from elasim.sim import young_daly_interval_s  # noqa: E402
from elasim.traces import JobTrace, load_trace, summarize, write_capacity_trace  # noqa: E402

H = 3600.0
TINY_JOB = str(DATA / "tiny_job.toml")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# -- names -------------------------------------------------------------------------------


#: Every name ``elasim/analysis.py`` defined before it became a package (notebooks and
#: other code import them from ``elasim.analysis``).
NAMES_BEFORE_THE_SPLIT = """
    GRID_KEYS WASTE_COMPONENTS _WASTE_COLORS YoungDaly log resolve_policies resolve_seeds
    resolve_traces capacity_trace_names job_trace_names _job uninterrupted_completion_h
    mean_background_gpus describe_traces run_grid subset _aggregate waste_breakdown
    deadline_hit_rate paired_effect pareto_table median_table check_quoted interval_grid
    synthetic_failure_trace _capacity mean_time_between_drops_s young_daly_optimum
    checkpoint_interval_sweep interval_curve best_interval_s checkpoint_summary
    experienced_mtbf_s policy_colors _panels _cost_axis plot_pareto_ax plot_pareto_panels
    plot_waste plot_waste_panels _grouped_bars _figure_legend plot_convergence_cost
    plot_deadline_hit_rate plot_notice_and_mechanism plot_checkpoint_sweep
""".split()


def test_every_name_of_the_old_module_is_still_importable():
    missing = [name for name in NAMES_BEFORE_THE_SPLIT if not hasattr(analysis, name)]
    assert not missing
    # the Pareto front and its sweep figure came from elasim.sweep (a grid runner that
    # imported the analysis back: an import cycle)
    assert set(analysis.__all__) <= {*NAMES_BEFORE_THE_SPLIT, "pareto_front", "plot_pareto"}
    assert all(hasattr(analysis, name) for name in analysis.__all__)


def test_resolve_policies():
    assert analysis.resolve_policies("all") == tuple(policy_names())
    assert analysis.resolve_policies(" greedy, fixed ,") == ("greedy", "fixed")
    assert analysis.resolve_policies(["price"]) == ("price",)
    with pytest.raises(ValueError, match="no policies"):
        analysis.resolve_policies(" , ")


def test_resolve_seeds():
    assert analysis.resolve_seeds(3) == (0, 1, 2)
    assert analysis.resolve_seeds([7, 5]) == (7, 5)
    with pytest.raises(ValueError):
        analysis.resolve_seeds(0)
    with pytest.raises(ValueError):
        analysis.resolve_seeds([])


def test_resolve_traces_all_is_every_bundled_trace_capacity_first():
    capacity_names = analysis.capacity_trace_names()
    jobs = analysis.job_trace_names()
    assert "spot_us_east.csv" in capacity_names and "philly_jobs.csv" in jobs
    assert not set(capacity_names) & set(jobs)
    assert analysis.resolve_traces("all") == (*capacity_names, *jobs)
    assert analysis.resolve_traces("a.csv,b.csv") == ("a.csv", "b.csv")


def test_uninterrupted_completion_is_work_over_best_goodput(tiny_job):
    # 36,000 samples at 4 samples/s on the job's 4 nodes
    assert analysis.uninterrupted_completion_h(tiny_job) == pytest.approx(2.5)
    assert analysis.uninterrupted_completion_h(TINY_JOB, max_nodes=2) == pytest.approx(5.0)


def test_mean_background_gpus_is_gpu_hours_over_span():
    trace = JobTrace(
        name="t",
        submit_time_s=np.array([0.0, 7200.0]),
        duration_s=np.array([3600.0, 3600.0]),
        num_gpus=np.array([2, 4]),
    )
    # (2 + 4) GPU-hours over 2 h of submissions
    assert analysis.mean_background_gpus(trace) == pytest.approx(3.0)
    with pytest.raises(ValueError, match="not a job trace"):
        analysis.mean_background_gpus(capacity([0.0], [1], duration_s=10.0))


# -- grids -------------------------------------------------------------------------------


@pytest.fixture
def two_node_trace(tmp_path):
    """2 nodes at 1.5 USD/h for 100 h: the tiny job takes 5 h and 15 USD."""
    path = tmp_path / "two.csv"
    write_capacity_trace(capacity([0.0], [2], [1.5], duration_s=100 * H), path)
    return str(path)


@pytest.fixture
def drop_trace(tmp_path):
    """2 nodes until 3,600 s, then 1 (no price)."""
    path = tmp_path / "drop.csv"
    write_capacity_trace(capacity([0.0, 3600.0], [2, 1], duration_s=100 * H), path)
    return str(path)


def test_run_grid_rows_and_added_columns(two_node_trace):
    frame = analysis.run_grid(
        [two_node_trace],
        "greedy,fixed",
        2,
        job=TINY_JOB,
        deadline_h=6.0,
        checkpoint_interval_s=math.inf,
        workers=1,
    )
    assert len(frame) == 2 * 2
    assert set(frame["policy"]) == {"greedy", "fixed"}
    greedy = frame[frame["policy"] == "greedy"]
    # 36,000 samples at 2/s on 2 nodes, wherever the run starts in a constant trace
    assert greedy["completion_time_h"].tolist() == pytest.approx([5.0, 5.0])
    assert greedy["cost_usd"].tolist() == pytest.approx([15.0, 15.0])
    assert greedy["node_hours"].tolist() == pytest.approx([10.0, 10.0])
    assert greedy["waste_h"].tolist() == pytest.approx([0.0, 0.0])
    assert (frame["trace_kind"] == "capacity").all()
    assert frame["priced"].all()
    assert (frame["deadline_h"] == 6.0).all()
    # fixed wants the job's 4 nodes, which never come: it never finishes (nor in time)
    fixed = frame[frame["policy"] == "fixed"]
    assert not fixed["completed"].any()
    assert greedy["deadline_met"].tolist() == [True, True]
    assert fixed["deadline_met"].tolist() == [False, False]


def test_run_grid_is_reproducible(two_node_trace):
    kwargs = dict(job=TINY_JOB, workers=1, checkpoint_interval_s=math.inf)
    a = analysis.run_grid([two_node_trace], "greedy", 3, **kwargs)
    b = analysis.run_grid([two_node_trace], "greedy", 3, **kwargs)
    pd.testing.assert_frame_equal(a, b)
    assert a["start_offset_s"].nunique() == 3  # each seed starts elsewhere


def test_run_grid_needs_cluster_gpus_for_job_traces():
    with pytest.raises(ValueError, match="philly_jobs.csv.*cluster_gpus"):
        analysis.run_grid(["philly_jobs.csv"], "greedy", 1, workers=1)


def test_run_grid_unpriced_trace_is_flagged(drop_trace):
    frame = analysis.run_grid([drop_trace], "greedy", 1, job=TINY_JOB, workers=1)
    assert not frame["priced"].any()
    assert frame["cost_usd"].tolist() == [0.0]


def test_notice_and_mechanism_effects_by_hand(drop_trace):
    # Free checkpoints every 1,000 s of running; the drop at 3,600 s takes one of 2 nodes.
    frame = analysis.run_grid(
        [drop_trace],
        "greedy",
        1,
        job=TINY_JOB,
        notice_s=(0.0, 120.0),
        rescale=("inplace", "restart"),
        checkpoint_interval_s=1000.0,
        checkpoint_cost_s=0.0,
        start_offset_s=0.0,
        workers=1,
    )
    assert len(frame) == 4
    mech = analysis.paired_effect(
        analysis.subset(frame, notice_s=0.0), "rescale", "inplace", "restart", "lost_work_h"
    )
    row = mech.iloc[0]
    # in place, the survivor loses the step in flight: 1 sample at 2 samples/s = 0.5 s;
    # restart rolls back to the checkpoint at 3,000 s: 600 s on 2 nodes
    assert row["baseline_median"] == pytest.approx(0.5 / H)
    assert row["alternative_median"] == pytest.approx(600 / H)
    assert row["share_higher"] == 1.0 and row["pairs"] == 1
    notice = analysis.paired_effect(frame, "notice_s", 0.0, 120.0, "lost_work_h", by=("rescale",))
    # 120 s of notice is enough to leave gracefully in both mechanisms: nothing is lost
    assert notice["alternative_mean"].tolist() == [0.0, 0.0]
    assert notice["share_lower"].tolist() == [1.0, 1.0]


def test_subset():
    frame = pd.DataFrame({"a": [1, 1, 2], "b": ["x", "y", "x"]})
    assert analysis.subset(frame, a=1, b="x").index.tolist() == [0]
    with pytest.raises(KeyError, match="no column 'c'"):
        analysis.subset(frame, c=1)


# -- tables ------------------------------------------------------------------------------


def _runs(**columns):
    """A hand-made grid frame; unspecified numeric columns are 0."""
    n = len(next(iter(columns.values())))
    base = {
        "trace": ["t"] * n,
        "policy": ["p"] * n,
        "seed": list(range(n)),
        "notice_s": [0.0] * n,
        "rescale": ["inplace"] * n,
        "completed": [True] * n,
        "completion_time_h": [1.0] * n,
        "convergence_cost_h": [0.0] * n,
        "deadline_met": [None] * n,
    }
    for column, _ in analysis.WASTE_COMPONENTS:
        base[column] = [0.0] * n
    base.update(columns)
    return pd.DataFrame(base)


def test_waste_breakdown_medians_per_component():
    frame = _runs(
        policy=["a", "a", "a", "b"],
        lost_work_h=[1.0, 2.0, 9.0, 0.5],
        idle_h=[0.0, 4.0, 4.0, 1.0],
        completed=[True, True, False, True],
        completion_time_h=[10.0, 20.0, 30.0, 5.0],
        convergence_cost_h=[1.0, 1.0, 1.0, 2.0],
    )
    out = analysis.waste_breakdown(frame).set_index("policy")
    assert out.loc["a", "lost_work_h"] == 2.0
    assert out.loc["a", "idle_h"] == 4.0
    assert out.loc["a", "waste_h"] == 6.0  # sum of the component medians
    assert out.loc["a", "completion_time_h"] == 20.0
    assert out.loc["a", "runs"] == 3
    assert out.loc["a", "completed_share"] == pytest.approx(2 / 3)
    assert out.loc["b", "waste_h"] == 1.5 and out.loc["b", "convergence_cost_h"] == 2.0
    mean = analysis.waste_breakdown(frame, stat="mean").set_index("policy")
    assert mean.loc["a", "lost_work_h"] == pytest.approx(4.0)
    with pytest.raises(ValueError, match="stat"):
        analysis.waste_breakdown(frame, stat="mode")


def test_deadline_hit_rate_counts_only_runs_with_a_deadline():
    frame = _runs(
        policy=["a", "a", "a", "a", "b"],
        deadline_met=[True, False, True, None, False],
    )
    out = analysis.deadline_hit_rate(frame).set_index("policy")
    assert out.loc["a", "hits"] == 2 and out.loc["a", "runs"] == 3
    assert out.loc["a", "hit_rate"] == pytest.approx(2 / 3)
    assert out.loc["b", "hit_rate"] == 0.0
    with pytest.raises(ValueError, match="no run has a deadline"):
        analysis.deadline_hit_rate(_runs(deadline_met=[None, None]))


def test_paired_effect_pairs_on_the_other_keys():
    frame = pd.concat(
        [
            _runs(rescale=["inplace"] * 3, lost_work_h=[1.0, 2.0, 3.0]),
            _runs(rescale=["restart"] * 3, lost_work_h=[1.0, 5.0, 2.0]),
        ],
        ignore_index=True,
    )
    out = analysis.paired_effect(frame, "rescale", "inplace", "restart", "lost_work_h")
    row = out.iloc[0]
    assert row["pairs"] == 3
    assert row["baseline_median"] == 2.0 and row["alternative_median"] == 2.0
    assert row["alternative_mean"] == pytest.approx(8 / 3)
    assert row["median_difference"] == 0.0  # differences 0, +3, -1
    assert row["share_higher"] == pytest.approx(1 / 3)
    assert row["share_lower"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="factor"):
        analysis.paired_effect(frame, "job", "a", "b", "lost_work_h")
    with pytest.raises(ValueError, match="no pairs"):
        analysis.paired_effect(frame, "rescale", "inplace", "other", "lost_work_h")


def test_median_table():
    frame = _runs(policy=["a", "a", "a", "b"], idle_h=[1.0, 2.0, 6.0, 3.0])
    table = analysis.median_table(frame, "idle_h")
    assert table.loc["t", "a"] == 2.0 and table.loc["t", "b"] == 3.0


def test_check_quoted_names_every_stale_number():
    table = pd.DataFrame({"a": [1.234, 10.0]}, index=["x", "y"])
    analysis.check_quoted(table, {("x", "a"): 1.23, ("y", "a"): 10.05})  # within 1 %
    with pytest.raises(AssertionError, match=r"\('x', 'a'\): quoted 1.3.*\('y', 'a'\)"):
        analysis.check_quoted(table, {("x", "a"): 1.3, ("y", "a"): 12.0})
    series = pd.Series({"k": 0.0})
    analysis.check_quoted(series, {"k": 0.004})  # absolute tolerance near zero
    with pytest.raises(AssertionError):
        analysis.check_quoted(series, {"k": 0.01})


def test_pareto_table_uses_node_hours_without_a_price():
    frame = pd.DataFrame(
        {
            "trace": ["p", "p", "p", "u", "u"],
            "policy": ["a", "b", "c", "a", "b"],
            "completion_time_h": [1.0, 2.0, 3.0, 1.0, 2.0],
            "cost_usd": [5.0, 1.0, 6.0, 0.0, 0.0],
            "node_hours": [9.0, 9.0, 9.0, 4.0, 3.0],
            "priced": [True, True, True, False, False],
        }
    )
    table = analysis.pareto_table(frame).set_index(["trace", "policy"])
    assert table["on_front"].to_dict() == {
        ("p", "a"): True,
        ("p", "b"): True,
        ("p", "c"): False,  # slower and dearer than a
        ("u", "a"): True,
        ("u", "b"): True,
    }
    assert table.loc[("u", "b"), "cost"] == 3.0
    assert table.loc[("u", "b"), "cost_metric"] == "node_hours"
    assert table.loc[("p", "b"), "cost_metric"] == "cost_usd"


def test_waste_breakdown_names_the_largest_component():
    frame = _runs(policy=["a", "b"], idle_h=[3.0, 0.0], rescale_overhead_h=[1.0, 0.5])
    out = analysis.waste_breakdown(frame).set_index("policy")
    assert out["largest"].to_dict() == {"a": "idle_h", "b": "rescale_overhead_h"}


def test_describe_traces_caps_at_the_job_size():
    table = analysis.describe_traces(["spot_p3_bamboo.csv", "philly_jobs.csv"]).set_index("trace")
    bamboo = table.loc["spot_p3_bamboo.csv"]
    # a 16-node job sees min(available, 16)
    assert bamboo["mean_available"] <= 16
    mtbf_s, drops = analysis.mean_time_between_drops_s("spot_p3_bamboo.csv", 16)
    assert bamboo["drops"] == drops and bamboo["mtbf_h"] == pytest.approx(mtbf_s / H)
    assert bamboo["availability_fraction"] == 1.0  # bamboo never drops below 10 nodes
    assert not bamboo["priced"]
    philly = table.loc["philly_jobs.csv"]
    assert philly["kind"] == "jobs" and philly["jobs"] == 3370
    assert philly["mean_background_gpus"] == pytest.approx(
        philly["gpu_hours"] / philly["duration_h"]
    )


# -- checkpoint intervals ----------------------------------------------------------------


def test_interval_grid_is_log_spaced_and_adds_extras():
    assert analysis.interval_grid(60, 3840, 7) == [60, 120, 240, 480, 960, 1920, 3840]
    assert analysis.interval_grid(60, 240, 3, extra=[100.5]) == [60, 100.5, 120, 240]
    assert analysis.interval_grid(50, 50, 1) == [50]
    with pytest.raises(ValueError):
        analysis.interval_grid(100, 10, 3)


def test_synthetic_failure_trace_is_labelled_and_has_the_known_rate():
    trace = analysis.synthetic_failure_trace(1000.0, 8, downtime_s=50.0, failures=4000, seed=1)
    assert trace.metadata.synthetic is True
    assert trace.metadata.source.startswith("SYNTHETIC")
    assert "SYNTHETIC" in trace.name
    assert trace.available[0] == 8
    assert trace.available[1::2].tolist() == [0] * 4000  # every failure takes every node
    assert trace.available[2::2].tolist() == [8] * 4000
    assert np.diff(trace.time_s)[1::2] == pytest.approx(50.0)  # the downtime
    up_s = np.diff(np.append(trace.time_s, trace.duration_s))[0::2]
    # exponential up-times: mean within 5 % (3 standard errors) of the parameter
    assert up_s.mean() == pytest.approx(1000.0, rel=0.05)
    assert np.std(up_s) == pytest.approx(1000.0, rel=0.1)
    mtbf_s, drops = analysis.mean_time_between_drops_s(trace)
    assert drops == 4000
    assert mtbf_s == pytest.approx(trace.duration_s / 4000)
    with pytest.raises(ValueError):
        analysis.synthetic_failure_trace(0.0, 8)


def test_synthetic_failure_trace_is_reproducible():
    a = analysis.synthetic_failure_trace(500.0, 4, seed=3, failures=10)
    b = analysis.synthetic_failure_trace(500.0, 4, seed=3, failures=10)
    assert a.time_s.tolist() == b.time_s.tolist() and a.duration_s == b.duration_s


def test_mean_time_between_drops_caps_and_wraps():
    trace = capacity([0.0, 10.0, 20.0, 30.0], [4, 2, 3, 1], duration_s=40.0)
    assert analysis.mean_time_between_drops_s(trace) == (20.0, 2)  # 4->2, 3->1
    # a 2-node job sees 2, 2, 2, 1: one drop
    assert analysis.mean_time_between_drops_s(trace, max_nodes=2) == (40.0, 1)
    # the replay repeats: ending above the start is a drop at the wrap-around
    wrap = capacity([0.0, 10.0], [1, 3], duration_s=20.0)
    assert analysis.mean_time_between_drops_s(wrap) == (20.0, 1)
    flat = capacity([0.0], [3], duration_s=20.0)
    assert analysis.mean_time_between_drops_s(flat) == (math.inf, 0)


def test_mean_time_between_drops_matches_summarize_on_bamboo():
    # uncapped and without a wrap-around drop (it ends at 10 nodes, starts at 18)
    trace = load_trace("spot_p3_bamboo.csv")
    mtbf_s, _ = analysis.mean_time_between_drops_s(trace)
    assert mtbf_s / H == pytest.approx(summarize(trace)["mean_time_between_drops_h"])


def test_young_daly_optimum_by_hand():
    optimum = analysis.young_daly_optimum(50.0, mtbf_s=10_000.0)
    assert optimum.young_s == pytest.approx(1000.0)  # sqrt(2 * 50 * 10,000)
    # Daly: 1000 * (1 + sqrt(50 / 20,000) / 3 + 50 / 180,000) - 50
    assert optimum.daly_s == pytest.approx(1000 * (1 + 0.05 / 3 + 50 / 180_000) - 50)
    assert optimum.daly_s == young_daly_interval_s(50.0, 10_000.0)
    trace = capacity([0.0, 10.0, 20.0, 30.0], [4, 2, 3, 1], duration_s=40.0)
    from_trace = analysis.young_daly_optimum(5.0, trace=trace)
    assert from_trace.mtbf_s == 20.0 and from_trace.label == "trace MTBF"
    with pytest.raises(ValueError, match="exactly one"):
        analysis.young_daly_optimum(5.0)
    with pytest.raises(ValueError, match="no failures"):
        analysis.young_daly_optimum(5.0, trace=capacity([0.0], [3], duration_s=20.0))


def test_checkpoint_interval_sweep_by_hand(tiny_job):
    # 4 nodes, no failures: 9,000 s of work, a 100 s checkpoint every `interval` s of
    # running, none at the very end.  1,000 s -> 8 checkpoints, 3,000 s -> 2.
    trace = capacity([0.0], [4], duration_s=100 * H)
    sweep = analysis.checkpoint_interval_sweep(
        trace, tiny_job, [1000.0, 3000.0, None], seeds=2, rescale="restart"
    )
    assert len(sweep) == 3 * 2
    by_interval = sweep[~sweep["auto"]].groupby("interval_s")
    assert by_interval["checkpoints"].max().tolist() == [8, 2]
    assert by_interval["completion_time_h"].mean().tolist() == pytest.approx([9800 / H, 9200 / H])
    assert (sweep["checkpoint_cost_s"] == 100.0).all()
    assert (sweep["preemptions"] == 0).all()
    # auto without failures: Daly with a one-day MTBF prior, about 4,100 s -> 2 checkpoints
    auto = sweep[sweep["auto"]]
    assert auto["interval_s"].isna().all()
    assert auto["checkpoints"].tolist() == [2, 2]
    curve = analysis.interval_curve(sweep)
    assert curve["interval_s"].tolist() == [1000.0, 3000.0]
    assert curve["completion_sem_h"].tolist() == [0.0, 0.0]
    assert analysis.best_interval_s(curve) == 3000.0
    assert analysis.experienced_mtbf_s(sweep) == math.inf


def test_checkpoint_interval_sweep_rolls_back_on_failures(tiny_job):
    # All 4 nodes lost at 1,800 s for 60 s.  Free checkpoints every 1,000 s: the
    # rollback loses the 800 s since the one at 1,000 s; the restore reads for 10 s
    # (100 B at 10 B/s) and the remaining 8,000 s of work follow.
    trace = capacity([0.0, 1800.0, 1860.0], [4, 0, 4], duration_s=100 * H)
    sweep = analysis.checkpoint_interval_sweep(
        trace, tiny_job, [1000.0], checkpoint_cost_s=0.0, seeds=[0], start_offset_s=0.0
    )
    row = sweep.iloc[0]
    assert row["preemptions"] == 1
    assert row["lost_work_h"] == pytest.approx(800 / H)
    assert row["completion_time_h"] == pytest.approx((1860 + 10 + 8000) / H)
    assert row["idle_h"] == pytest.approx(60 / H)
    assert row["exposed_h"] == pytest.approx((1800 + 10 + 8000) / H)
    assert analysis.experienced_mtbf_s(sweep) == pytest.approx(1800 + 10 + 8000)


def test_checkpoint_summary_excess_over_the_best():
    sweep = pd.DataFrame(
        {
            "interval_s": [10.0, 100.0, 1000.0, np.nan],
            "auto": [False, False, False, True],
            "completion_time_h": [3.0, 2.0, 2.5, 2.1],
            "lost_work_h": [0.0] * 4,
            "checkpoint_overhead_h": [0.0] * 4,
            "rescale_overhead_h": [0.0] * 4,
        }
    )
    # Daly's interval for C = 1 s, M = 900 s is 41.8 s; on a log scale it is closer to
    # 100 s (|log(100 / 41.8)| = 0.87) than to 10 s (|log(41.8 / 10)| = 1.43)
    optimum = analysis.young_daly_optimum(1.0, mtbf_s=900.0)
    summary = analysis.checkpoint_summary(sweep, optimum)
    assert summary["best_interval_s"] == 100.0 and summary["best_completion_mean_h"] == 2.0
    assert summary["daly_swept_interval_s"] == 100.0 and summary["daly_excess"] == 0.0
    assert summary["shortest_excess"] == pytest.approx(0.5)
    assert summary["longest_excess"] == pytest.approx(0.25)
    assert summary["auto_excess"] == pytest.approx(0.05)


def test_interval_curve_and_experienced_mtbf_from_a_table():
    sweep = pd.DataFrame(
        {
            "interval_s": [10.0, 10.0, 20.0, 20.0, np.nan],
            "auto": [False, False, False, False, True],
            "completion_time_h": [3.0, 5.0, 2.0, 2.0, 1.0],
            "lost_work_h": [1.0, 1.0, 0.0, 2.0, 0.0],
            "checkpoint_overhead_h": [0.5, 0.5, 0.2, 0.2, 0.0],
            "rescale_overhead_h": [0.0] * 5,
            "preemptions": [1, 1, 1, 1, 0],
            "exposed_h": [1.0, 1.0, 1.0, 1.0, 2.0],
        }
    )
    curve = analysis.interval_curve(sweep).set_index("interval_s")
    assert curve.loc[10.0, "completion_mean_h"] == 4.0
    assert curve.loc[10.0, "completion_sem_h"] == pytest.approx(1.0)  # sd sqrt(2), 2 runs
    assert curve.loc[20.0, "lost_work_mean_h"] == 1.0
    assert analysis.best_interval_s(curve.reset_index()) == 20.0
    # 6 exposed hours over 4 preemptions
    assert analysis.experienced_mtbf_s(sweep) == pytest.approx(1.5 * H)


# -- plots -------------------------------------------------------------------------------


def test_policy_colors_are_stable():
    a = analysis.policy_colors()
    b = analysis.policy_colors(["mine"])
    assert a["greedy"] == b["greedy"]
    assert "mine" in b and "mine" not in a


def test_plot_waste_stacks_the_components():
    breakdown = pd.DataFrame(
        {
            "trace": ["t", "t"],
            "policy": ["b", "a"],
            "lost_work_h": [1.0, 2.0],
            "rescale_overhead_h": [0.5, 0.0],
            "checkpoint_overhead_h": [0.25, 1.0],
            "idle_h": [3.0, 0.0],
        }
    )
    fig, ax = plt.subplots()
    analysis.plot_waste(ax, breakdown, "t")
    # bars are drawn per component in WASTE_COMPONENTS order, policies sorted: a, b
    tops = [patch.get_y() + patch.get_height() for patch in ax.patches]
    assert tops == pytest.approx([2.0, 1.0, 2.0, 1.5, 3.0, 1.75, 3.0, 4.75])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    two = pd.concat([breakdown, breakdown.assign(trace="u")])
    with pytest.raises(ValueError, match="several traces"):
        analysis.plot_waste(ax, two)
    assert len(analysis.plot_waste_panels(two).axes) >= 2


def test_plot_pareto_ax_marks_the_front():
    frame = pd.DataFrame(
        {
            "trace": ["t"] * 6,
            "policy": ["fast", "fast", "cheap", "cheap", "bad", "bad"],
            "completion_time_h": [1.0, 1.0, 3.0, 3.0, 4.0, 4.0],
            "cost_usd": [10.0, 10.0, 2.0, 2.0, 11.0, 11.0],
            "node_hours": [1.0] * 6,
            "priced": [True] * 6,
        }
    )
    fig, ax = plt.subplots()
    medians = analysis.plot_pareto_ax(ax, frame, title="t").set_index("policy")
    assert medians["on_front"].to_dict() == {"bad": False, "cheap": True, "fast": True}
    assert ax.get_ylabel() == "cost (USD)"
    unpriced = frame.assign(priced=False, node_hours=frame["cost_usd"], cost_usd=0.0)
    medians = analysis.plot_pareto_ax(ax, unpriced).set_index("policy")
    assert medians["on_front"].to_dict() == {"bad": False, "cheap": True, "fast": True}
    assert "node-hours" in ax.get_ylabel()
    assert len(analysis.plot_pareto_panels(frame).axes) == 1


def test_plot_deadline_hit_rate_bar_heights():
    rates = pd.DataFrame(
        {"trace": ["t", "t", "u"], "policy": ["a", "b", "a"], "hit_rate": [0.5, 1.0, 0.25]}
    )
    fig = analysis.plot_deadline_hit_rate(rates, deadline_h=3.0)
    heights = [p.get_height() for p in fig.axes[0].patches]
    # policy a: t, u; policy b: t, u (missing -> NaN)
    assert heights[:3] == [0.5, 0.25, 1.0] and math.isnan(heights[3])


def test_figure_helpers_run_on_a_real_small_grid(tmp_path, drop_trace):
    # (every trace here has a drop: a notice on a trace without one hangs the
    # simulator's notice schedule, reported to the lead)
    priced = tmp_path / "priced_drop.csv"
    write_capacity_trace(
        capacity([0.0, 1800.0], [3, 1], [1.0, 2.0], duration_s=10 * H, od_price=3.0), priced
    )
    frame = analysis.run_grid(
        [str(priced), drop_trace],
        "greedy,hysteresis",
        2,
        job=TINY_JOB,
        notice_s=(0.0, 120.0),
        rescale=("inplace", "restart"),
        workers=1,
    )
    assert len(analysis.plot_convergence_cost(frame).axes) == 2
    assert len(analysis.plot_notice_and_mechanism(frame).axes) == 2
    assert len(analysis.plot_pareto_panels(frame).axes) == 2


def test_plot_checkpoint_sweep(tiny_job):
    trace = capacity([0.0, 1800.0, 1860.0], [4, 0, 4], duration_s=3 * H)
    sweep = analysis.checkpoint_interval_sweep(trace, tiny_job, [300.0, 900.0, None], seeds=2)
    optimum = analysis.young_daly_optimum(100.0, trace=trace, label="trace")
    fig = analysis.plot_checkpoint_sweep(sweep, [optimum], title="x")
    left = fig.axes[0]
    labels = [text.get_text() for text in left.get_legend().get_texts()]
    assert any(label.startswith("Daly, trace") for label in labels)
    assert any(label.startswith("auto") for label in labels)


# -- preemption losses ---------------------------------------------------------------------


@pytest.fixture
def partial_then_total_trace(tmp_path):
    """2 nodes, 1 from 3,600 s (a partial drop), 0 from 5,400 s (a total one), 2 from 7,200 s."""
    path = tmp_path / "drops.csv"
    write_capacity_trace(
        capacity([0.0, 3600.0, 5400.0, 7200.0], [2, 1, 0, 2], duration_s=100 * H), path
    )
    return str(path)


def test_preemption_losses_split_by_hand(partial_then_total_trace):
    # Free checkpoints every 1,000 s of running, the tiny job (1 sample/s per node).
    losses = analysis.preemptions.preemption_losses(
        [partial_then_total_trace],
        1,
        job=TINY_JOB,
        checkpoint_interval_s=1000.0,
        checkpoint_cost_s=0.0,
        start_offset_s=0.0,
    )
    rows = losses.set_index("rescale")
    assert list(rows.index) == ["inplace", "restart"]
    assert (rows["preemptions"] == 2).all() and (rows["total_preemptions"] == 1).all()
    parts = rows["partial_lost_work_h"] + rows["total_lost_work_h"] + rows["other_lost_work_h"]
    assert parts.tolist() == pytest.approx(rows["lost_work_h"].tolist())
    assert rows["other_lost_work_h"].abs().max() < 1e-12
    # in place: the survivor loses the step in flight (0.5 s); at 5,400 s the last node
    # goes 400 s after the checkpoint at 5,000 s
    assert rows.loc["inplace", "partial_lost_work_h"] * H == pytest.approx(0.5)
    assert rows.loc["inplace", "total_lost_work_h"] * H == pytest.approx(400.0)
    # restart: the partial drop rolls back to 3,000 s (600 s); the job never stopped, so
    # its timer (600 s at the drop) fires after 400 s more running, past the 10 s restore:
    # checkpoints at 4,010 and 5,010 s, and the total drop loses 390 s
    assert rows.loc["restart", "partial_lost_work_h"] * H == pytest.approx(600.0)
    assert rows.loc["restart", "total_lost_work_h"] * H == pytest.approx(390.0)
    table = analysis.preemptions.preemption_loss_table(losses)
    share = table.loc[(partial_then_total_trace, "inplace"), "total_share"]
    assert share == pytest.approx(400.0 / 400.5)


def test_preemption_losses_needs_cluster_gpus_for_job_traces():
    with pytest.raises(ValueError, match="philly_jobs.csv needs cluster_gpus"):
        analysis.preemptions.preemption_losses(["philly_jobs.csv"], 1)

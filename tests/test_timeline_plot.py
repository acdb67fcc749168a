"""The timeline a user reads (issue 24): read from the figure's artists, not its pixels.

A deadline line where the deadline is, whole node counts on the node axis, a legend
that hides no data, and the policy in the colour it has in every other plot.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from typer.testing import CliRunner

from elasim.analysis.plots import policy_colors
from elasim.cli import app
from elasim.output import timeline_figure

runner = CliRunner()


@pytest.fixture(scope="module")
def one_node_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """greedy on one node with a 30 h deadline: a node axis of 0-1, where 0.25 ticks came."""
    out = tmp_path_factory.mktemp("timeline") / "run"
    result = runner.invoke(
        app,
        [
            "simulate", "-t", "spot_us_east.csv", "-p", "greedy", "--max-nodes", "1",
            "--deadline-h", "30", "--no-yardstick", "--no-plot", "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return out


def figure_of(out: Path, **options: object):
    timeline = pd.read_parquet(out / "timeline.parquet")
    events = pd.read_parquet(out / "events.parquet")
    fig = timeline_figure(timeline, events, title="t", **options)
    FigureCanvasAgg(fig).draw()  # lays it out, as saving it does
    return fig, events


def test_the_node_axis_has_whole_nodes_only(one_node_run: Path):
    fig, _ = figure_of(one_node_run)
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    ticks = [t for t in ax.get_yticks() if low <= t <= high]
    assert len(ticks) >= 2
    assert all(float(t).is_integer() for t in ticks), ticks


def test_a_deadline_draws_a_line_at_the_deadline(one_node_run: Path):
    fig, _ = figure_of(one_node_run, deadline_s=30 * 3600.0)
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if line.get_label().startswith("deadline")]
    assert len(lines) == 1
    assert set(lines[0].get_xdata()) == {30.0}  # hours, on the time axis
    assert not [
        line
        for line in figure_of(one_node_run)[0].axes[0].get_lines()
        if "deadline" in line.get_label()
    ]


def test_the_legend_covers_no_data(one_node_run: Path):
    fig, events = figure_of(one_node_run, deadline_s=30 * 3600.0)
    renderer = fig.canvas.get_renderer()
    legends = [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend())]
    assert legends
    ax = fig.axes[0]
    first = events.iloc[0]
    x_px, y_px = ax.transData.transform((first["time_s"] / 3600.0, first["nodes_after"]))
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert not box.contains(x_px, y_px), "the legend covers the first marker"
        assert not box.overlaps(ax.get_window_extent(renderer)), "the legend is over the data"


def test_nodes_are_drawn_in_the_policy_colour(one_node_run: Path):
    from matplotlib.colors import to_rgba

    fig, _ = figure_of(one_node_run, policy="greedy")
    held = [line for line in fig.axes[0].get_lines() if line.get_label() == "nodes held"]
    assert len(held) == 1
    assert to_rgba(held[0].get_color()) == to_rgba(policy_colors()["greedy"])


def test_simulate_passes_its_deadline_and_policy_to_the_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import elasim.output  # write_result imports it when it writes (no pandas before)

    seen: dict[str, object] = {}

    def plot(path: Path, timeline: object, events: object, **options: object) -> Path:
        seen.update(options)
        return Path(path)

    monkeypatch.setattr(elasim.output, "plot_timeline", plot)
    result = runner.invoke(
        app,
        [
            "simulate", "-t", "spot_us_east.csv", "-p", "greedy", "--max-nodes", "2",
            "--deadline-h", "30", "--no-yardstick", "--out", str(tmp_path / "run"),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert seen.get("deadline_s") == 30 * 3600.0 and seen.get("policy") == "greedy"

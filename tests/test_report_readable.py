"""``report.html`` shows its plots legibly, and says near the top that they are there.

The Pareto plot was drawn two panels a row at 100 dpi with 7-point legends, so in the
page the legends came out about 6 px high, and the plots sat below every table, out
of sight, with nothing at the top pointing to them.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from elasim.analysis.plots import PARETO_DPI, pareto_figure  # noqa: E402
from elasim.analysis.report import report_html  # noqa: E402

#: the report's column is 70em of 16 px; a plot narrower than that is shown unscaled
PAGE_PX = 70 * 16


def _frame() -> pd.DataFrame:
    rows = []
    for trace in ("a.csv", "b.csv"):
        for policy, hours, usd in (("greedy", 10.0, 100.0), ("deadline", 20.0, 40.0)):
            for seed in range(3):
                rows.append(
                    {
                        "trace": trace,
                        "policy": policy,
                        "seed": seed,
                        "completion_time_h": hours + seed,
                        "cost_usd": usd + seed,
                        "priced": True,
                    }
                )
    return pd.DataFrame(rows)


def test_pareto_legends_are_legible_at_the_size_the_page_shows():
    fig = pareto_figure(_frame(), by=["trace"])
    try:
        width_px = fig.get_figwidth() * PARETO_DPI
        assert width_px <= PAGE_PX  # shown as drawn, not shrunk
        assert width_px >= 0.8 * PAGE_PX  # and using the page's width
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            for text in legend.get_texts():
                points = text.get_fontsize()
                assert points * PARETO_DPI / 72 >= 12, points  # at least 12 px high
    finally:
        plt.close(fig)


def test_the_report_links_its_plots_from_the_top():
    page = report_html(title="t", tables=[], answers=[], images=[("cost vs time", b"png")])
    assert 'id="plots"' in page
    link = page.index('href="#plots"')
    assert link < page.index("<h2>Answers</h2>") or link < page.index("Answers")
    without = report_html(title="t", tables=[], answers=[])
    assert 'href="#plots"' not in without  # no link to plots that are not there

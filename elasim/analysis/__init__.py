"""Analysis behind the notebooks: policy grids, waste tables, deadline hit rates, checkpoint sweeps.

The notebooks in ``notebooks/`` hold parameters, calls into this package, plots and
prose; every number they show is computed here, where it is unit-tested
(``tests/test_analysis.py``).  Everything goes through the public API: grids through
:func:`elasim.sweep.run_sweep`, single runs through :func:`elasim.sim.simulate`, traces
through :mod:`elasim.traces`.

The modules, split by what changes together (every name is re-exported here, so
notebooks keep writing ``from elasim import analysis``):

* :mod:`.resolve`: notebook parameters (``"all"``, comma-separated strings, counts)
  turned into policy, seed and trace names.
* :mod:`.trace_stats`: what a trace looks like to a job (:func:`describe_traces`,
  :func:`mean_time_between_drops_s`) and the clearly labelled SYNTHETIC
  :func:`synthetic_failure_trace`.
* :mod:`.grids`: policy grids (:func:`run_grid`) and :func:`subset`.
* :mod:`.tables`: the tables drawn from a grid: :func:`waste_breakdown`,
  :func:`deadline_hit_rate`, :func:`paired_effect`, :func:`pareto_table`, and
  :func:`check_quoted`, which keeps a notebook's prose honest.
* :mod:`.preemptions`: a run's lost work split by the kind of preemption that lost it
  (:func:`.preemptions.preemption_losses`; not re-exported, call it through the module).
* :mod:`.checkpoint`: checkpoint intervals: :func:`checkpoint_interval_sweep`,
  :func:`interval_curve`, :func:`young_daly_optimum`, :func:`experienced_mtbf_s`.
* :mod:`.plots` (``plot_*``).  matplotlib is imported inside them only, so importing
  this package stays cheap; figures are created through pyplot (so a notebook shows
  them) and returned; the caller closes them.

Library code: nothing here prints, reads the environment or writes files.
"""

from __future__ import annotations

import logging

from . import plots, resolve, tables
from . import preemptions as preemptions  # called through the module, like tables
from .checkpoint import (
    YoungDaly,
    best_interval_s,
    checkpoint_interval_sweep,
    checkpoint_summary,
    experienced_mtbf_s,
    interval_curve,
    interval_grid,
    young_daly_optimum,
)
from .grids import GRID_KEYS, WASTE_COMPONENTS, run_grid, subset, uninterrupted_completion_h
from .plots import (
    plot_checkpoint_sweep,
    plot_convergence_cost,
    plot_deadline_hit_rate,
    plot_notice_and_mechanism,
    plot_pareto,
    plot_pareto_ax,
    plot_pareto_panels,
    plot_waste,
    plot_waste_panels,
    policy_colors,
)
from .resolve import (
    capacity_trace_names,
    job_trace_names,
    resolve_policies,
    resolve_seeds,
    resolve_traces,
)
from .tables import (
    check_quoted,
    deadline_hit_rate,
    median_table,
    paired_effect,
    pareto_front,
    pareto_table,
    waste_breakdown,
)
from .trace_stats import (
    describe_traces,
    mean_background_gpus,
    mean_time_between_drops_s,
    synthetic_failure_trace,
)

# the private helpers lived in this module before the split; imports of them keep working
_WASTE_COLORS = plots._WASTE_COLORS
_aggregate = tables._aggregate
_capacity = resolve._capacity
_cost_axis = tables._cost_axis
_figure_legend = plots._figure_legend
_grouped_bars = plots._grouped_bars
_job = resolve._job
_panels = plots._panels

__all__ = [
    "GRID_KEYS",
    "WASTE_COMPONENTS",
    "YoungDaly",
    "best_interval_s",
    "capacity_trace_names",
    "checkpoint_summary",
    "check_quoted",
    "checkpoint_interval_sweep",
    "deadline_hit_rate",
    "describe_traces",
    "experienced_mtbf_s",
    "interval_curve",
    "interval_grid",
    "job_trace_names",
    "mean_background_gpus",
    "mean_time_between_drops_s",
    "median_table",
    "paired_effect",
    "pareto_front",
    "pareto_table",
    "plot_checkpoint_sweep",
    "plot_convergence_cost",
    "plot_deadline_hit_rate",
    "plot_notice_and_mechanism",
    "plot_pareto",
    "plot_pareto_ax",
    "plot_pareto_panels",
    "plot_waste",
    "plot_waste_panels",
    "policy_colors",
    "resolve_policies",
    "resolve_seeds",
    "resolve_traces",
    "run_grid",
    "subset",
    "synthetic_failure_trace",
    "uninterrupted_completion_h",
    "waste_breakdown",
    "young_daly_optimum",
]

log = logging.getLogger(__name__)

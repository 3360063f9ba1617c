"""The report's distribution plot: the first recorded distributions' quantile bands over steps.

One panel per distribution (at most :data:`MAX_PANELS`, in the order the monitor's
distribution tab cycles them; the tab, key 8, shows each): the min-max, q5-q95 and
q25-q75 bands shaded, the median as a line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tuidiag.diagnosis.distributions import NO_DISTRIBUTIONS, distribution_label, distribution_names, nonfinite_name
from tuidiag.diagnosis.view import RunView
from tuidiag.report import plotkit as kit

MAX_PANELS = 4
"""Distributions drawn at most; the note says how many the run holds."""
BANDS = (("q0", "q100", 0.15, "min-max"), ("q5", "q95", 0.3, "q5-q95"), ("q25", "q75", 0.55, "q25-q75"))
"""(low quantile, high quantile, opacity, label) of each shaded band, outermost first."""


def draw_distributions(view: RunView, path: Path) -> str:
    """Quantile bands of the first :data:`MAX_PANELS` distributions, one panel each."""
    names = distribution_names(view.run.metric_names, view.param_order)
    if not names:
        raise kit.SkipPlot(NO_DISTRIBUTIONS)
    shown = names[:MAX_PANELS]
    fig, axes = kit.new_figure(rows=len(shown), height=2.6)
    nonfinite = []
    for ax, name in zip(axes, shown):
        for low, high, alpha, label in BANDS:
            steps, lo = view.series(f"{name}/{low}")
            hi = view.series(f"{name}/{high}")[1]
            n = min(len(lo), len(hi))
            ok = np.isfinite(lo[:n]) & np.isfinite(hi[:n])
            ax.fill_between(steps[:n][ok], lo[:n][ok], hi[:n][ok], color=kit.SMOOTH, alpha=alpha, linewidth=0, label=label)
        steps, median = view.series(f"{name}/q50")
        ok = np.isfinite(median)
        ax.plot(steps[ok], median[ok], color=kit.SMOOTH, linewidth=1.5, label="median")
        if np.any(view.series(nonfinite_name(name))[1] > 0):
            nonfinite.append(name)
        kit.title(ax, kit.plot_text(distribution_label(name), 80), view.run.name)
    axes[-1].set_xlabel("step")
    kit.legend(axes[-1], ncol=4)
    kit.save(fig, path)
    notes = [f"{kit.plural(len(names), 'distribution')} recorded, the first {len(shown)} drawn"
             if len(names) > len(shown) else kit.plural(len(names), "distribution")]
    notes += [f"{len(nonfinite)} of those drawn had NaN/Inf elements, left out of their quantiles"] if nonfinite else []
    return "; ".join(notes)

"""Plots of the gradients: total norm with the clip threshold, per-layer norms, gradient flow, clipping.

Each ``draw_*`` function writes one PNG and returns a short note for the caption,
or raises :class:`~tuidiag.report.plotkit.SkipPlot` when its data is missing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tuidiag.diagnosis.stats import median
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.report import plotkit as kit
from tuidiag.report.series import (
    finite_part,
    layer_grad_curves,
    layer_grad_medians,
    moving_average,
    orders_apart,
    rolling_share,
    smoothing_window,
)

MAX_LEGEND = 14
"""Per-layer legends list at most this many layers (first and last always)."""


def draw_grad_total(view: RunView, path: Path) -> str:
    """Total gradient norm (before clipping) per step, its moving average and the clip threshold."""
    steps, norms = view.grad_total
    good_steps, good = finite_part(steps, norms)
    if not len(good):
        raise kit.SkipPlot("no grad_norm/total recorded (call rec.watch(model) and rec.step after backward)")
    fig, (ax,) = kit.new_figure()
    window = smoothing_window(len(good))
    positive = bool((good > 0).all())
    ax.plot(good_steps, good, color=kit.RAW, linewidth=0.8, label="total gradient norm, every step")
    ax.plot(good_steps, moving_average(good, window, positive), color=kit.SMOOTH, linewidth=2,
            label=f"moving average ({window} steps)")
    threshold = float(view.clip_threshold.value) if view.clip_threshold else None
    if threshold is not None:
        ax.axhline(threshold, color=kit.BAD, linestyle="--", linewidth=1.5, label=f"clip threshold max_norm={fmt(threshold)}")
    log = kit.log_if_wide(ax, np.append(good, threshold) if threshold else good)
    bad = kit.mark_nonfinite(ax, steps, norms, "gradient norm")
    ax.set_xlabel("step")
    ax.set_ylabel("L2 norm of all gradients, before clipping" + (" (log)" if log else ""), fontsize=9)
    kit.title(ax, "Total gradient norm", view.run.name)
    kit.legend(ax)
    kit.save(fig, path)
    notes = [f"median {fmt(median(good))}, max {fmt(float(good.max()))}"]
    notes.append(f"clip threshold {fmt(threshold)}" if threshold is not None else "no clip threshold recorded")
    notes += ["log scale"] if log else []
    notes += [f"{kit.plural(bad, 'non-finite step')} marked in red"] if bad else []
    return "; ".join(notes)


def _layer_colors(n: int) -> list[tuple[float, float, float, float]]:
    """Colors from the input layer (dark blue) to the output layer (yellow-green)."""
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.9 * i / max(1, n - 1)) for i in range(n)]


def _legend_every(n: int) -> int:
    return max(1, int(np.ceil(n / MAX_LEGEND)))


def draw_grad_layers(view: RunView, path: Path) -> str:
    """One line per weight layer (moving average of its gradient norm), input to output, log y."""
    curves = {n: c for n, c in layer_grad_curves(view).items() if (c[1] > 0).any()}
    if not curves:
        raise kit.SkipPlot("no per-layer gradient norms (grad_norm/<param>) recorded for weight layers")
    fig, (ax,) = kit.new_figure(width=10.5)
    colors, every, names = _layer_colors(len(curves)), _legend_every(len(curves)), list(curves)
    lows, highs = [], []
    for i, name in enumerate(names):
        steps, values = curves[name]
        keep = values > 0
        smooth = moving_average(values[keep], smoothing_window(int(keep.sum())), log=True)
        lows.append(smooth.min())
        highs.append(smooth.max())
        shown = i % every == 0 or i == len(names) - 1
        where = " (input)" if i == 0 else " (output)" if i == len(names) - 1 else ""
        ax.plot(steps[keep], smooth, color=colors[i], linewidth=1.6, label=kit.plot_text(name, 40) + where if shown else None)
    ax.set_yscale("log")
    kit.span_decades(ax, float(min(lows)), float(max(highs)))
    ax.set_xlabel("step")
    ax.set_ylabel("gradient L2 norm (moving average, log)", fontsize=9)
    kit.title(ax, "Gradient norm per layer", view.run.name)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="layer, input to output",
              title_fontsize=8, frameon=False)
    kit.save(fig, path)
    listed = "" if every == 1 else f"; legend lists every {every}th layer"
    return f"{len(names)} weight layers in model order{listed}"


def draw_grad_flow(view: RunView, path: Path) -> str:
    """Median gradient norm of each weight layer as a bar, input to output, log y."""
    medians = {n: m for n, m in layer_grad_medians(view).items() if np.isfinite(m) and m > 0}
    if len(medians) < 2:
        raise kit.SkipPlot("fewer than 2 weight layers with a positive recorded gradient norm")
    names, values = list(medians), np.array(list(medians.values()))
    fig, (ax,) = kit.new_figure(width=max(7.0, min(14.0, 0.55 * len(names) + 3)))
    x = np.arange(len(names))
    ax.bar(x, values, color=_layer_colors(len(names)), edgecolor="black", linewidth=0.4)
    ax.set_yscale("log")
    ax.set_xticks(x, [kit.plot_text(n, 24) for n in names], rotation=45 if len(names) > 6 else 0,
                  ha="right" if len(names) > 6 else "center", fontsize=8)
    if len(names) <= 24:
        for xi, v in zip(x, values):
            ax.annotate(fmt(float(v)), (xi, v), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    spread = orders_apart(medians) or 0.0
    kit.span_decades(ax, float(values.min()), float(values.max()))
    ax.set_xlabel("weight layer, input → output")
    ax.set_ylabel("median gradient L2 norm (log)")
    kit.title(ax, "Gradient flow", view.run.name)
    healthy = spread < 2
    ax.annotate(f"{spread:.1f} orders of magnitude between layers " + ("(healthy: within 2)" if healthy else "(more than 2: gradients vanish or explode)"),
                xy=(0.01, 0.97), xycoords="axes fraction", ha="left", va="top", fontsize=9,
                color="black" if healthy else kit.BAD,
                bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9})
    kit.save(fig, path)
    return f"{len(names)} layers; {spread:.1f} orders of magnitude between the largest and smallest median"


def draw_clip_rate(view: RunView, path: Path) -> str:
    """Rolling share of steps whose gradient was clipped, with the over-clipping line at 80%."""
    steps, clipped = view.series("grad/clipped")
    if not len(clipped):
        raise kit.SkipPlot("no grad/clipped recorded (pass max_grad_norm to rec.watch to record clipping)")
    window = max(10, smoothing_window(len(clipped)))
    share = rolling_share(clipped, window) * 100
    fig, (ax,) = kit.new_figure(height=3.4)
    ax.fill_between(steps, share, color=kit.RAW, step="post")
    ax.plot(steps, share, color=kit.SMOOTH, linewidth=1.6, drawstyle="steps-post", label=f"share clipped, last {window} steps")
    ax.axhline(80, color=kit.BAD, linestyle="--", linewidth=1.2, label="80%: over-clipping, raise max_norm or lower LR")
    ax.set_ylim(0, 105)
    ax.set_xlabel("step")
    ax.set_ylabel("steps clipped (%)")
    overall = float(np.mean(clipped != 0))
    kit.title(ax, f"Gradient clipping frequency (overall {overall:.0%})", view.run.name)
    kit.legend(ax)
    kit.save(fig, path)
    return f"clipped on {overall:.0%} of {len(clipped)} steps; rolling window {window} steps"

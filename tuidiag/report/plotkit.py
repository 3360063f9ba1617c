"""Matplotlib helpers shared by the report's plots: figures, scales, markers, saving.

Figures are built with the object API (``matplotlib.figure.Figure``), never
``pyplot``: no GUI backend is touched, nothing global changes, and it works on a
headless box. matplotlib is imported on first use, so importing the report
package stays cheap for commands that draw nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tuidiag.report.series import nonfinite_steps, spans_decades
from tuidiag.store.safe_write import write_atomic
from tuidiag.text.safe import clean

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

RAW = "#9ecae1"
"""Light blue: a metric at every step."""
SMOOTH = "#08519c"
"""Dark blue: its moving average."""
VAL = "#e6550d"
"""Orange: validation."""
LR_COLOR = "#31a354"
"""Green: learning rate."""
BAD = "#cb181d"
"""Red: non-finite values and thresholds."""
RESUMED = "#636363"
"""Grey: where a later session continued the run."""
DPI = 110


class SkipPlot(Exception):
    """The data a plot needs was not recorded; the message says what is missing."""


def plot_text(value: object, max_len: int = 60) -> str:
    """Text from a run for a figure: no control characters, no mathtext (``$`` escaped)."""
    return clean(value, max_len).replace("$", r"\$")


def new_figure(rows: int = 1, height: float = 4.2, width: float = 9.0, **kwargs: Any) -> tuple[Figure, list[Axes]]:
    """A headless figure with ``rows`` stacked axes sharing the x axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False, **kwargs)[:, 0]
    for ax in axes:
        ax.grid(True, which="major", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, list(axes)


def log_if_wide(ax: Axes, values: np.ndarray, axis: str = "y") -> bool:
    """Switch ``axis`` to log scale when the values span more than two decades; True if switched."""
    if not spans_decades(values):
        return False
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    return True


def mark_nonfinite(ax: Axes, steps: np.ndarray, values: np.ndarray, what: str) -> int:
    """Mark the steps where ``values`` is NaN/Inf: red triangles along the top edge, a shaded band over each
    stretch of them (so the x axis reaches the run's last step) and a label at the first; returns their count."""
    bad = nonfinite_steps(steps, values)
    if len(bad):
        ax.axvline(bad[0], color=BAD, linestyle=":", linewidth=1.2)
        for first, last in nonfinite_stretches(steps, values)[:MAX_BANDS]:
            ax.axvspan(first, last, color=BAD, alpha=0.08, linewidth=0)
        ax.scatter(bad, np.full(len(bad), 0.97), transform=ax.get_xaxis_transform(), marker="v", s=36,
                   color=BAD, zorder=5, label=f"{what} NaN/Inf ({plural(len(bad), 'step')}, first at {bad[0]})")
        ax.annotate(f"{what} not finite from step {bad[0]}", xy=(bad[0], 0.5), xycoords=ax.get_xaxis_transform(), rotation=90,
                    xytext=(-3, 0), textcoords="offset points", ha="right", va="center", fontsize=8, color=BAD)
    return len(bad)


MAX_BANDS = 50
"""Stretches of non-finite steps shaded at most (the triangles still mark every step)."""


def nonfinite_stretches(steps: np.ndarray, values: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)`` step of each run of consecutive recorded points whose value is NaN/Inf."""
    bad = ~np.isfinite(values)
    edges = np.flatnonzero(np.diff(np.concatenate([[False], bad, [False]]).astype(int)))
    return [(int(steps[a]), int(steps[b - 1])) for a, b in zip(edges[::2], edges[1::2])]


def mark_resumes(ax: Axes, steps: tuple[int, ...]) -> int:
    """Dashed grey lines where a later session continued the run; returns their count."""
    for i, step in enumerate(steps):
        ax.axvline(step, color=RESUMED, linestyle="--", linewidth=1.0, label=f"resumed ({plural(len(steps), 'time')})" if i == 0 else None)
    return len(steps)


def title(ax: Axes, text: str, run_name: str) -> None:
    """Axes title: what the plot shows, then the run's name."""
    ax.set_title(f"{text}  ·  {plot_text(run_name)}", loc="left", fontsize=11, fontweight="bold")


def save(fig: Figure, path: Path) -> Path:
    """Write the figure as PNG and free it (light compression: a third faster, files ~12% larger)."""
    write_atomic(path, lambda handle: fig.savefig(handle, format="png", dpi=DPI, facecolor="white", pil_kwargs={"compress_level": 1}))
    fig.clear()
    return path


def legend(ax: Axes, handles: list[Any] | None = None, ncol: int = 3) -> None:
    """A legend in a row below the axes, where it can never hide the data; only when something is labelled."""
    handles = handles if handles is not None else ax.get_legend_handles_labels()[0]
    if handles:
        ax.legend(handles, [h.get_label() for h in handles], fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  ncol=min(ncol, len(handles)), frameon=False)


def clip_runaway(ax: Axes, values: np.ndarray, start: float, factor: float = 100.0, note_at: str = "upper left",
                 steps: np.ndarray | None = None) -> bool:
    """Cap the y axis where the values run away, a little above the range they kept before (:func:`runaway_cap`).

    A diverging loss (1e32) would otherwise flatten everything before the blow-up into
    a line; the cap keeps the informative part readable, a red note gives the maximum and,
    with ``steps``, a dotted line marks the step the values first leave the axis.
    """
    good = values[np.isfinite(values)]
    top = runaway_cap(good, start, factor, ax.get_yscale() == "log")
    if top is None:
        return False
    positive = good[good > 0]
    if ax.get_yscale() == "log" and len(positive):
        ax.set_ylim(bottom=positive.min() / 1.5, top=top)
    else:
        low = float(good[good <= top].min())
        ax.set_ylim(bottom=low - 0.05 * (top - low), top=top)
    upper, left = note_at.startswith("upper"), note_at.endswith("left")
    where = ""
    if steps is not None and len(steps) == len(values):
        first = int(steps[np.flatnonzero(np.isfinite(values) & (values > top))[0]])
        ax.axvline(first, color=BAD, linestyle=(0, (1, 3)), linewidth=1.2, label=f"leaves the axis at step {first}")
        where = f" from step {first}"
    ax.annotate(f"y axis capped: values run off the top{where}, up to {good.max():.3g}", xy=(0.0 if left else 1.0, 1.0 if upper else 0.0),
                xycoords="axes fraction", xytext=(6 if left else -6, -6 if upper else 6), textcoords="offset points",
                ha="left" if left else "right", va="top" if upper else "bottom", fontsize=8, color=BAD,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": BAD, "alpha": 0.9})
    return True


def runaway_cap(good: np.ndarray, start: float, factor: float = 100.0, log: bool = True) -> float | None:
    """The top of the y axis for finite ``good`` values that run away (None: they do not).

    The values run away when they pass a bar set by their first tenth (its maximum x ``factor`` / 10 on a
    log axis; on a linear one its median plus ``factor`` / 10 of its scale: ``start``'s size or its spread).
    The axis then keeps the range of the values before the run-up (5th to 95th percentile; the run-up starts
    after the last value within the first tenth's range) and room above it:
    one decade on a log axis (at most ``factor`` x ``start``), as much again (at least a scale) on a linear one.
    """
    if not len(good):
        return None
    head = good[: max(10, len(good) // 10)]
    if log:
        bar = float(head.max()) * factor / 10
        scale = 0.0
    else:
        scale = max(abs(float(start)) if np.isfinite(start) else 0.0, float(np.ptp(np.percentile(head, [10, 90]))))
        if not scale > 0:
            return None
        bar = float(np.median(head)) + factor / 10 * scale
    out = np.flatnonzero(good > bar)
    if not len(out) or out[0] == 0:
        return None
    calm = np.flatnonzero(good[: out[0]] <= head.max())  # the run-up starts after the last value within the start's range
    low, high = np.percentile(good[: calm[-1] + 1] if len(calm) else head, [5, 95])
    if log:
        return float(min(10 * high, factor * start)) if start > 0 else float(10 * high)
    return float(high + max(high - low, scale))


def span_decades(ax: Axes, low: float, high: float, decades: float = 2.0, headroom: float = 0.6) -> None:
    """On a log y axis, show [low, high] with room for labels above, and at least ``decades`` in all.

    A narrow range would otherwise get ticks like 3.2x10^-1; powers of ten read at a glance.
    """
    if not (low > 0 and high >= low):
        return
    bottom, top = np.log10(low) - 0.3, np.log10(high) + headroom
    extra = max(0.0, decades - (top - bottom)) / 2
    ax.set_ylim(10 ** (bottom - extra), 10 ** (top + extra))


def plural(n: int, word: str) -> str:
    """``1 step``, ``2 steps``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"

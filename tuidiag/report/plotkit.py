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
    """Red triangles along the top edge at steps where ``values`` is NaN/Inf; returns their count."""
    bad = nonfinite_steps(steps, values)
    if len(bad):
        ax.axvline(bad[0], color=BAD, linestyle=":", linewidth=1.2)
        ax.scatter(bad, np.full(len(bad), 0.97), transform=ax.get_xaxis_transform(), marker="v", s=36,
                   color=BAD, zorder=5, label=f"{what} NaN/Inf ({plural(len(bad), 'step')}, first at {bad[0]})")
    return len(bad)


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


def clip_runaway(ax: Axes, values: np.ndarray, start: float, factor: float = 100.0, note_at: str = "upper left") -> bool:
    """Cap the y axis at ``factor`` x the starting level when the values run away beyond it.

    A diverging loss (1e32) would otherwise flatten everything before the blow-up into
    a line; the cap keeps the informative part readable and a red note gives the maximum.
    """
    good = values[np.isfinite(values)]
    if not len(good) or not start > 0 or good.max() <= factor * start:
        return False
    positive = good[good > 0]
    bottom = positive.min() / 1.5 if ax.get_yscale() == "log" and len(positive) else None
    ax.set_ylim(bottom=bottom, top=factor * start)
    upper, left = note_at.startswith("upper"), note_at.endswith("left")
    ax.annotate(f"y axis capped: values run off the top, up to {good.max():.3g}", xy=(0.0 if left else 1.0, 1.0 if upper else 0.0),
                xycoords="axes fraction", xytext=(6 if left else -6, -6 if upper else 6), textcoords="offset points",
                ha="left" if left else "right", va="top" if upper else "bottom", fontsize=8, color=BAD,
                bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": BAD, "alpha": 0.9})
    return True


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

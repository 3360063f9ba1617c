"""The report's plots: which files, what each shows, and drawing them all into a directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tuidiag.diagnosis.view import RunView
from tuidiag.report.plotkit import SkipPlot
from tuidiag.report.plots_dist import draw_distributions
from tuidiag.report.plots_grads import draw_clip_rate, draw_grad_flow, draw_grad_layers, draw_grad_total
from tuidiag.report.plots_loss import draw_loss, draw_lr_loss, draw_train_val


@dataclass(frozen=True)
class PlotSpec:
    """One plot: its file, its heading in the report, how to read it, and how to draw it."""

    filename: str
    heading: str
    how_to_read: str
    draw: Callable[[RunView, Path], str]


@dataclass(frozen=True)
class PlotResult:
    """A plot that was drawn (``note`` set) or skipped (``skipped`` says why)."""

    spec: PlotSpec
    note: str | None = None
    skipped: str | None = None

    @property
    def drawn(self) -> bool:
        """True when the PNG was written."""
        return self.skipped is None


PLOTS: list[PlotSpec] = [
    PlotSpec("loss.png", "Training loss",
             "Light line: the loss at every step; dark line: its moving average. A healthy loss falls fast, then "
             "flattens. Oscillation that grows, or a jump to NaN (red), points at a learning rate that is too high.",
             draw_loss),
    PlotSpec("train_val_loss.png", "Train vs validation loss",
             "Blue: training loss; orange: validation loss, star at its best. Validation turning up while training "
             "keeps falling is overfitting: the best checkpoint is at the star.",
             draw_train_val),
    PlotSpec("lr_loss.png", "Learning rate and loss",
             "Green (right axis): the learning rate of each optimizer group; blue (left): the smoothed loss. Look for "
             "the loss reacting to LR changes: warmup, decay, or a schedule that reaches its floor too early.",
             draw_lr_loss),
    PlotSpec("grad_norm.png", "Total gradient norm",
             "The L2 norm of all gradients before clipping, with the clip threshold (dashed red) when one was given. "
             "Healthy norms sit roughly between 0.1 and 10 and stay steady; a norm that grows by orders of magnitude "
             "is exploding.",
             draw_grad_total),
    PlotSpec("grad_norm_layers.png", "Gradient norm per layer",
             "One line per weight layer, dark (input) to light (output). Lines far apart, with the early layers at "
             "the bottom, mean the gradient vanishes on its way back to the input.",
             draw_grad_layers),
    PlotSpec("grad_flow.png", "Gradient flow",
             "The median gradient norm of each weight layer, input on the left. Bars of similar height: the gradient "
             "reaches every layer. A staircase rising to the right by several decades: vanishing gradients.",
             draw_grad_flow),
    PlotSpec("clip_rate.png", "Gradient clipping frequency",
             "The share of recent steps whose gradient norm exceeded max_norm and was clipped. Above 80% the "
             "optimizer never sees the true gradient: raise max_norm or lower the LR.",
             draw_clip_rate),
    PlotSpec("distributions.png", "Distributions",
             "Weights, gradients or logged tensors over steps: the median (line), the middle half (q25-q75, dark), "
             "q5-q95 and the whole range (lighter). A band that widens by orders of magnitude, or a maximum far above "
             "the q95, points at outliers; a gradient band that shrinks to zero, at a layer that stopped learning.",
             draw_distributions),
]


def draw_all(view: RunView, out_dir: Path) -> list[PlotResult]:
    """Draw every plot into ``out_dir``; a plot without data is skipped and a stale PNG of it removed."""
    results = []
    for spec in PLOTS:
        path = out_dir / spec.filename
        try:
            results.append(PlotResult(spec, note=spec.draw(view, path)))
        except SkipPlot as exc:
            path.unlink(missing_ok=True)
            results.append(PlotResult(spec, skipped=str(exc)))
        except Exception as exc:  # one bad plot must not cost the whole report
            path.unlink(missing_ok=True)
            results.append(PlotResult(spec, skipped=f"could not be drawn: {type(exc).__name__}: {exc}"))
    return results

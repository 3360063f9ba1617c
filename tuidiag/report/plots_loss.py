"""Plots of the loss: the training curve, train against validation, and the LR schedule.

Each ``draw_*`` function writes one PNG and returns a short note for the caption,
or raises :class:`~tuidiag.report.plotkit.SkipPlot` when its data is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import TRAIN_ACC_NAMES, VAL_ACC_NAMES, VAL_LOSS_NAMES, RunView, natural_key
from tuidiag.report import plotkit as kit
from tuidiag.report.series import finite_part, moving_average, nonfinite_steps, smoothing_window, spans_decades

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _train_curve(ax: Axes, view: RunView, raw: bool = True) -> tuple[np.ndarray, int]:
    """Draw the training loss (raw light, moving average dark); return its finite values and window."""
    steps, loss = finite_part(*view.loss)
    if not len(loss):
        raise kit.SkipPlot("no finite train/loss recorded")
    window = smoothing_window(len(loss))
    log = spans_decades(loss)
    if raw:
        ax.plot(steps, loss, color=kit.RAW, linewidth=0.8, label="train loss, every step")
    ax.plot(steps, moving_average(loss, window, log), color=kit.SMOOTH, linewidth=2,
            label=f"train loss, moving average ({window} steps)")
    return loss, window


def draw_loss(view: RunView, path: Path) -> str:
    """Training loss per step with its moving average; NaN/Inf steps and a runaway marked."""
    if not len(view.loss[1]):
        raise kit.SkipPlot("no train/loss recorded (pass the loss to rec.step)")
    fig, (ax,) = kit.new_figure()
    notes = plot_loss(ax, view)
    kit.save(fig, path)
    return "; ".join(notes)


def plot_loss(ax: Axes, view: RunView) -> list[str]:
    """Draw :func:`draw_loss`'s plot on ``ax``; return its caption's notes.

    A diverged loss keeps its finite part readable: a log axis over many decades, the y axis capped
    where the loss runs away (a dotted red line where it leaves the axis), and the steps where it is
    NaN/Inf shaded and labelled, the x axis reaching the run's last step."""
    loss, window = _train_curve(ax, view)
    log = kit.log_if_wide(ax, loss)
    capped = kit.clip_runaway(ax, loss, _start_level(loss), steps=finite_part(*view.loss)[0])
    bad = kit.mark_nonfinite(ax, *view.loss, "loss")
    resumed = kit.mark_resumes(ax, view.resume_steps)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss" + (" (log scale)" if log else ""))
    kit.title(ax, "Training loss", view.run.name)
    kit.legend(ax)
    notes = [f"moving average over {window} steps"]
    notes += ["log scale: the loss spans more than two decades"] if log else []
    notes += [f"y axis capped {'at most a decade' if log else 'a little'} above the loss before it ran away (dotted red: where it "
              f"leaves the axis); it ran away to {fmt(float(loss.max()))}"] if capped else []
    notes += [f"{kit.plural(bad, 'non-finite step')} marked in red, the first at step {nonfinite_steps(*view.loss)[0]}"] if bad else []
    shown = ", ".join(map(str, view.resume_steps[:5])) + (" ..." if resumed > 5 else "")
    notes += [f"resumed at step {shown} (dashed grey)"] if resumed else []
    return notes


def _start_level(loss: np.ndarray) -> float:
    """The loss at the start of training: median of the first 10 finite values."""
    return float(np.median(loss[:10])) if len(loss) else float("nan")


def draw_train_val(view: RunView, path: Path) -> str:
    """Training loss against validation loss, with accuracy below when it was logged."""
    val_name = view.first_present(VAL_LOSS_NAMES)
    if val_name is None:
        raise kit.SkipPlot("no validation loss logged (" + ", ".join(VAL_LOSS_NAMES) + ")")
    acc_names = [n for n in (view.first_present(TRAIN_ACC_NAMES), view.first_present(VAL_ACC_NAMES)) if n]
    fig, axes = kit.new_figure(rows=2 if acc_names else 1, height=3.6 if acc_names else 4.2)
    ax = axes[0]
    loss, _ = _train_curve(ax, view)
    v_steps, val = view.series(val_name)
    ax.plot(v_steps, val, color=kit.VAL, marker="o", markersize=3.5, linewidth=1.8, label=kit.plot_text(val_name))
    best = _mark_best(ax, *finite_part(v_steps, val), lower_is_better=True)
    both = np.concatenate([loss, val[np.isfinite(val)]])
    log = kit.log_if_wide(ax, both)
    kit.clip_runaway(ax, both, _start_level(loss))
    kit.mark_nonfinite(ax, *view.loss, "train loss")
    kit.mark_nonfinite(ax, v_steps, val, "validation")
    ax.set_ylabel("loss" + (" (log scale)" if log else ""))
    kit.title(ax, "Train vs validation loss", view.run.name)
    kit.legend(ax, ncol=4)
    if acc_names:
        _accuracy_panel(axes[1], view, acc_names)
    axes[-1].set_xlabel("step")
    kit.save(fig, path)
    return f"{val_name} logged {len(val)} times; " + best


def _mark_best(ax: Axes, steps: np.ndarray, values: np.ndarray, lower_is_better: bool) -> str:
    """A star at the best value, labelled; returns the same as text."""
    if not len(values):
        return "no finite validation value"
    i = int(np.argmin(values) if lower_is_better else np.argmax(values))
    label = f"best {fmt(float(values[i]))} at step {steps[i]}"
    ax.scatter([steps[i]], [values[i]], marker="*", s=160, color=kit.VAL, edgecolor="black", zorder=6, label=label)
    return label


def _accuracy_panel(ax: Axes, view: RunView, names: list[str]) -> None:
    """Accuracy curves (training light, validation with markers)."""
    for name in names:
        steps, acc = view.series(name)
        is_val = name in VAL_ACC_NAMES
        ax.plot(steps, acc, color=kit.VAL if is_val else kit.SMOOTH, marker="o" if is_val else None,
                markersize=3.5, linewidth=1.8 if is_val else 1.0, label=kit.plot_text(name))
        if is_val:
            _mark_best(ax, *finite_part(steps, acc), lower_is_better=False)
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy", loc="left", fontsize=10)
    kit.legend(ax, ncol=4)


def draw_lr_loss(view: RunView, path: Path) -> str:
    """The LR schedule (right axis) over the training loss (left axis)."""
    groups = sorted((n for n in view.run.metric_names if n.startswith("lr/group")), key=natural_key)
    if not groups:
        raise kit.SkipPlot("no learning rate recorded (pass the optimizer to rec.watch)")
    fig, (ax,) = kit.new_figure()
    loss, _ = _train_curve(ax, view, raw=False)
    loss_log = kit.log_if_wide(ax, loss)
    kit.clip_runaway(ax, loss, _start_level(loss), note_at="lower right")
    ax.set_ylabel("training loss (moving average)" + (", log scale" if loss_log else ""), color=kit.SMOOTH)
    lr_ax = ax.twinx()
    lr_ax.spines[["top"]].set_visible(False)
    all_lr = []
    for i, name in enumerate(groups[:6]):
        steps, lr = view.series(name)
        all_lr.append(lr)
        lr_ax.plot(steps, lr, color=kit.LR_COLOR, linewidth=2, linestyle="-" if i == 0 else "--",
                   drawstyle="steps-post", label=f"learning rate ({kit.plot_text(name)})")
    values = np.concatenate(all_lr)
    lr_log = kit.log_if_wide(lr_ax, values)
    lr_ax.set_ylabel("learning rate" + (" (log scale)" if lr_log else ""), color=kit.LR_COLOR)
    if not lr_log:
        lr_ax.set_ylim(0, 1.25 * float(np.nanmax(values)) if np.nanmax(values) > 0 else None)
    ax.set_xlabel("step")
    kit.title(ax, "Learning rate and loss", view.run.name)
    kit.legend(ax, ax.get_legend_handles_labels()[0] + lr_ax.get_legend_handles_labels()[0])
    kit.save(fig, path)
    good = values[np.isfinite(values)]
    if len(good) and np.ptp(good) == 0:
        return f"constant learning rate {fmt(float(good[0]))}"
    return f"learning rate from {fmt(float(all_lr[0][0]))} to {fmt(float(all_lr[0][-1]))}, peak {fmt(float(np.nanmax(values)))}"

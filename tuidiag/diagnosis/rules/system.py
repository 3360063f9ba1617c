"""Rules about how the run executes: train/eval mode, data loading, GPU utilisation."""

from __future__ import annotations

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import recent
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView


def train_mode_bug(view: RunView) -> Finding | None:
    """The model is in eval mode during training steps."""
    steps, training = view.series("model/training")
    if len(training) < 10:
        return None
    eval_share = float((training[1:] == 0).mean())
    if eval_share < 0.5:
        return None
    has_effect = view.model.get("has_dropout") or view.model.get("has_norm")
    evidence = [f"model.training is False on {eval_share:.0%} of training steps"]
    evidence.append("the model has dropout/normalization layers, which behave differently in eval mode" if has_effect
                    else "the model has no dropout or normalization, so this changes nothing yet")
    fix = "call model.train() at the top of each epoch (and model.eval() only inside validation)"
    return Finding("train_mode_bug", "Model in eval mode while training", 0.93 if has_effect else 0.5,
                   "warning" if has_effect else "info", evidence, fix, int(steps[1 + int((training[1:] == 0).argmax())]))


def data_loading_bottleneck(view: RunView) -> Finding | None:
    """The run is slow because steps wait for data."""
    _, wait = view.series("time/data_wait")
    _, step = view.series("time/step")
    if len(wait) < 20 or len(step) < 20:
        return None
    wait_s, step_s = median(recent(wait, 0.3)), median(recent(step, 0.3))
    if not step_s > 0 or wait_s / step_s < 0.3 or step_s < 2e-3:
        return None
    evidence = [f"waiting for data takes {wait_s / step_s:.0%} of each step ({fmt(wait_s * 1e3)} of {fmt(step_s * 1e3)} ms)",
                f"{fmt(1 / step_s)} steps/s"]
    util = view.series("sys/gpu_util")[1]
    if len(util):
        evidence.append(f"GPU utilization median {median(util):.0f}%")
    fix = "DataLoader(num_workers=4-8, pin_memory=True, persistent_workers=True, prefetch_factor=4); move decoding/augmentation off the main process; faster storage"
    confidence = min(0.9, 0.5 + wait_s / step_s * 0.6)
    return Finding("data_loading_bottleneck", "Data loading is the bottleneck", confidence, "warning", evidence, fix, int(view.series("time/data_wait")[0][0]))


def low_gpu_utilization(view: RunView) -> Finding | None:
    """The GPU is mostly idle while data loading is not the cause."""
    steps, util = view.series("sys/gpu_util")
    if len(util) < 10 or median(util) >= 40:
        return None
    evidence = [f"GPU utilization median {median(util):.0f}% over {len(util)} samples"]
    fix = "raise the batch size, use mixed precision (torch.autocast), compile the model (torch.compile), and look for host-side work per step"
    return Finding("low_gpu_utilization", "GPU mostly idle", 0.5, "info", evidence, fix, int(steps[0]))


RULES = [train_mode_bug, data_loading_bottleneck, low_gpu_utilization]

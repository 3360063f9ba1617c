"""Rules about how the run executes: train/eval mode, data loading, GPU utilisation."""

from __future__ import annotations

from tuidiag.diagnosis.rules.data_wait import DATA_WAIT, STEP_TIME, data_wait_share
from tuidiag.diagnosis.evidence import Compare, Evidence, Fact, Level, Measure, measure
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import BATCH_UP, WORKERS_UP, fix_text
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import SYS_GPU_UTIL


def train_mode_bug(view: RunView) -> Finding | None:
    """The model is in eval mode during training steps."""
    steps, training = view.series("model/training")
    if len(training) < 10:
        return None
    share = measure("model/training", steps[1:], training[1:], "share_equal", 0.0)
    if share.value < 0.5:
        return None
    has_effect = bool(view.model.get("has_dropout") or view.model.get("has_norm"))
    facts = tuple(Fact("manifest", f"model.{key}", view.model.get(key)) for key in ("has_dropout", "has_norm"))
    evidence: list[str] = [
        Evidence(f"model.training is False on {share.value:.0%} of the training steps {share.where}", Level(share)),
        Evidence("the model has dropout/normalization layers, which behave differently in eval mode" if has_effect
                 else "the model has no dropout or normalization, so this changes nothing yet", *facts)]
    fix = "call model.train() at the top of each epoch (and model.eval() only inside validation)"
    return Finding("train_mode_bug", "Model in eval mode while training", 0.93 if has_effect else 0.5,
                   "warning" if has_effect else "info", evidence, fix, int(steps[1 + int((training[1:] == 0).argmax())]))


def _gpu_line(util: Measure) -> Evidence:
    return Evidence(f"GPU utilization median {util.value:.0f}% over {util.where}", Level(util))


def data_loading_bottleneck(view: RunView) -> Finding | None:
    """The run is slow because of the time between steps: waiting for the next batch, or other work in the loop.

    ``time/data_wait`` (:mod:`tuidiag.recorder.step_timer`) runs from the end of the previous step's
    ``optimizer.step()`` (its ``rec.step()`` when the optimizer is not watched) to the next ``rec.batch()``,
    so a sleep, logging or checkpointing there counts as much as a slow DataLoader; the finding says so.

    Its evidence states step times over the steps it names, not a rate: the run's rate is the run view's
    steps/s (steps per wall-clock second over the newest 30 s, pauses between steps included), and a
    second rate over another window could contradict it at the same moment."""
    found = data_wait_share(view)
    w_steps, wait = view.series(DATA_WAIT)
    if found is None or len(wait) < 20 or len(view.series(STEP_TIME)[1]) < 20:
        return None
    wait_m, step_m = found.wait, found.step
    wait_s, step_s = wait_m.value, step_m.value
    if not step_s > 0 or found.share < 0.3 or step_s < 2e-3:
        return None
    evidence: list[str] = [
        Evidence(f"the time between steps takes {found.percent} of each step ({fmt(wait_s * 1e3)} of {fmt(step_s * 1e3)} ms, "
                 f"medians over {found.where}): from the end of one step's optimizer.step() (or rec.step() when the optimizer "
                 "is not watched) to the next rec.batch(), waiting for the next batch or other work the loop does there",
                 Compare(wait_m, step_m)),
        Evidence(f"median step time {fmt(step_s * 1e3)} ms over {step_m.where}, the time between steps included "
                 f"(the run view's steps/s also counts the time between steps)", Level(step_m))]
    u_steps, util = view.series(SYS_GPU_UTIL)
    if len(util):
        evidence.append(_gpu_line(measure(SYS_GPU_UTIL, u_steps, util, "median")))
    fix = fix_text((WORKERS_UP, "if the batches come from a DataLoader: DataLoader(num_workers=4-8, pin_memory=True, "
                                "persistent_workers=True, prefetch_factor=4), decoding/augmentation off the main process, "
                                "faster storage"),
                   "otherwise, shorten what the loop does between optimizer.step() and the next batch (sleeps, logging, "
                   "checkpointing, evaluation, host-side work)")
    confidence = min(0.9, 0.5 + found.share * 0.6)
    return Finding("data_loading_bottleneck", "Time between steps is the bottleneck (data loading or loop work)", confidence,
                   "warning", evidence, fix, int(w_steps[0]))


def low_gpu_utilization(view: RunView) -> Finding | None:
    """The GPU is mostly idle while data loading is not the cause."""
    steps, util = view.series(SYS_GPU_UTIL)
    if len(util) < 10:
        return None
    level = measure(SYS_GPU_UTIL, steps, util, "median")
    if level.value >= 40:
        return None
    count = measure(SYS_GPU_UTIL, steps, util, "count")
    text = f"GPU utilization median {level.value:.0f}% over {len(util)} samples ({level.where})"
    evidence: list[str] = [Evidence(text, Level(level), Level(count))]
    fix = fix_text((BATCH_UP, "raise the batch size"),
                   "use mixed precision (torch.autocast), compile the model (torch.compile), and look for host-side work per step")
    return Finding("low_gpu_utilization", "GPU mostly idle", 0.5, "info", evidence, fix, int(steps[0]))


RULES = [train_mode_bug, data_loading_bottleneck, low_gpu_utilization]

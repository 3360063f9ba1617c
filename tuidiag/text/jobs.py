"""Plain-text reports of job results for the terminal, with plotext charts.

Text that comes from the run or the user's code (module names, source lines)
passes through :func:`tuidiag.text.safe.clean`. Charts are colourless unless
``color`` is set (the CLI sets it on a terminal).
"""

from __future__ import annotations

import math
from typing import Any

import plotext as plt

from tuidiag import job_kinds
from tuidiag.job_kinds.configs import MIN_DROP, overfit_informative
from tuidiag.text.safe import clean


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if math.isfinite(value) else str(value)
    return "-" if value is None else clean(value, 200)


def _decades(lo: float, hi: float) -> list[float]:
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    step = max(1, (last - first) // 8)
    return [10.0 ** e for e in range(first, last + 1, step)]


def _finish(color: bool) -> str:
    text = plt.build()
    plt.clear_figure()
    return text if color else plt.uncolorize(text)


SUGGESTED_GLYPH = "│"
"""The vertical line at the suggested LR (its legend entry says so)."""
RUN_LR_GLYPH = "┊"
"""The vertical line at the run's LR (else the factory optimizer's) when the sweep reaches it (named in the legend)."""
_MARK_ROWS = 64
"""Points a vertical marker is drawn with: more than a chart has rows, so it is a whole line."""


def lr_markers(result: dict[str, Any], lo: float, hi: float) -> list[tuple[float, str, str]]:
    """The vertical lines of the LR chart within ``lo..hi``: (LR, glyph, legend label); each one named in the legend."""
    marks = []
    suggested, run_lr = _number(result.get("suggested_lr")), _number(result.get("run_lr"))
    whose = "run's" if run_lr is not None else "optimizer's"
    run_lr = run_lr if run_lr is not None else _number(result.get("optimizer_lr"))
    if suggested is not None:
        marks.append((suggested, SUGGESTED_GLYPH, f"suggested LR {suggested:.2g}"))
    if run_lr is not None:
        marks.append((run_lr, RUN_LR_GLYPH, f"{whose} LR {run_lr:.2g}"))
    return [mark for mark in marks if lo <= mark[0] <= hi]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0 else None


def lr_chart(result: dict[str, Any], width: int = 76, height: int = 18, color: bool = False) -> str:
    """Smoothed loss against LR on a log axis; vertical lines at the suggested LR and the run's, named in the legend."""
    points = [(lr, v) for lr, v in zip(result["lrs"], result["smoothed"]) if isinstance(v, float) and math.isfinite(v)]
    if len(points) < 2:
        return "(too few finite points to draw)"
    lrs, losses = [p[0] for p in points], [p[1] for p in points]
    plt.clear_figure()
    plt.plot_size(width, height)
    plt.theme("clear")
    plt.plot(lrs, losses, marker="braille", label="smoothed loss")
    plt.xscale("log")
    ticks = _decades(lrs[0], lrs[-1])
    plt.xticks(ticks, [f"{t:.0e}" for t in ticks])
    low, high = min(losses), max(losses)
    ys = [low + (high - low) * i / (_MARK_ROWS - 1) for i in range(_MARK_ROWS)]
    for (lr, glyph, label), colour in zip(lr_markers(result, lrs[0], lrs[-1]), ("red", "blue")):
        plt.scatter([lr] * _MARK_ROWS, ys, marker=glyph, color=colour, label=label)
    plt.xlabel("learning rate (log)")
    plt.ylabel("loss")
    return _finish(color)


def step_ticks(last: int, most: int = 8) -> list[int]:
    """Whole-number ticks from 0 to ``last`` (a step count): every step when few, else a round stride (1, 2, 5 x 10^k)."""
    stride = 1
    while last // stride + 1 > most:
        stride = next(m * 10 ** k for k in range(20) for m in (1, 2, 5) if m * 10 ** k > stride)
    return list(range(0, last + 1, stride))


def loss_chart(losses: list[float], width: int = 76, height: int = 14, color: bool = False) -> str:
    """Loss against step (log y when every value is positive), whole steps on the x axis."""
    points = [(step, v) for step, v in enumerate(losses) if isinstance(v, float) and math.isfinite(v)]
    if not points:
        return "(no finite loss to draw)"
    steps, values = [p[0] for p in points], [p[1] for p in points]
    plt.clear_figure()
    plt.plot_size(width, height)
    plt.theme("clear")
    plt.plot(steps, values, marker="braille", label="loss")
    if len(values) == 1:  # one point spans no range: plotext would draw a reversed log axis
        half = abs(values[0]) / 2 or 1.0
        plt.ylim(values[0] - half, values[0] + half)
    elif min(values) > 0:
        plt.yscale("log")
    ticks = step_ticks(max(1, steps[-1]))
    plt.xlim(0, max(1, steps[-1]))
    plt.xticks(ticks, [str(t) for t in ticks])
    plt.xlabel("step")
    return _finish(color)


def render_lr_find(result: dict[str, Any], color: bool = False) -> str:
    """The LR range test: chart, suggestions, stop reason and the comparison with the run's LR."""
    s = result["suggestions"]
    rule = clean(str(result.get("rule", "steepest")), 40)  # results saved before the rule was named used steepest
    lines = [lr_chart(result, color=color), ""]
    unreliable = " - NOT RELIABLE, see the warning" if result.get("suggested_lr") is not None and not result.get("reliable", True) else ""
    lines.append(f"Suggested LR (rule {rule}): {_fmt(result.get('suggested_lr'))}{unreliable}")
    if result.get("warning"):
        lines.append(f"  WARNING: {clean(result['warning'], 900)}")
    others = [f"{clean(str(name), 40)} {_fmt(lr)}" for name, lr in s.items() if name not in ("window", rule)]
    lines.append("  other rules: " + ", ".join(others) + " (docs/lr_finder.md compares them)")
    lines.extend(_checks(result))
    first = _fmt(result["lrs"][0]) if result["lrs"] else "-"
    lines.append(f"Sweep: {result['steps_run']} steps from {first}, stopped: {result['stopped']}")
    lines += [clean(text) for text in _lr_comparisons(result)]
    return "\n".join(lines)


def _lr_comparisons(result: dict[str, Any]) -> list[str]:
    """The suggestion against the run's LR at the job's step, then against the optimizer's LR when that
    is another one (a factory's optimizer holds the initial LR, not the schedule's); each line once."""
    run_text, optimizer_text = result.get("run_comparison"), result.get("comparison")
    same_lr = run_text and result.get("run_lr") is not None and result.get("run_lr") == result.get("optimizer_lr")
    return [str(text) for text in dict.fromkeys((run_text, None if same_lr else optimizer_text)) if text]


def _checks(result: dict[str, Any]) -> list[str]:
    """The reliability checks of an LR sweep: distinct batches and the suggestion's spread over resamples."""
    found = []
    if isinstance(result.get("batches"), int):
        found.append(f"{result['batches']} distinct batches")
    check = result.get("stability")
    shown = "spans" in str(result.get("warning") or "")  # the warning gave the spread already
    if isinstance(check, dict) and check.get("low") is not None and check.get("high") is not None and not shown:
        found.append(f"over {_fmt(check.get('resamples'))} resamples of the batch noise the middle 80% of suggestions "
                     f"spans {_fmt(check['low'])}..{_fmt(check['high'])}")
    return [f"  checks: {'; '.join(found)}"] if found else []


def _stats_line(name: str, stats: dict[str, Any]) -> str:
    keys = ("shape", "dtype", "nan", "posinf", "neginf", "min", "max", "mean", "abs_max")
    parts = [f"{k}={_fmt(stats[k]) if not isinstance(stats[k], list) else stats[k]}" for k in keys if k in stats]
    return f"    {clean(name, 80)}: " + " ".join(parts)


def _stats_block(title: str, group: dict[str, Any] | None) -> list[str]:
    if not group:
        return []
    return [f"  {title}:"] + [_stats_line(name, stats) for name, stats in group.items()]


STATS_BLOCKS = (("inputs", "inputs"), ("parameters", "parameters"), ("output", "output"),
                ("incoming gradient", "grad_output"), ("gradient returned", "grad_input"), ("batch", "tensors"))


def _op_line(result: dict[str, Any]) -> str:
    """``op: exp (created 3 inf)``, ``op: linear (created 2 inf; ATen addmm)`` or ``op: masked_fill (passed in ...)``."""
    new = result.get("new") or {}
    notes = []
    if new:
        counts = [f"{new[k]} {'NaN' if k == 'nan' else 'inf'}" for k in ("inf", "nan") if new.get(k)]
        notes.append("created " + " and ".join(counts))
    elif result.get("created") is False:
        notes.append("passed in from an argument: a fill value, a constant or a buffer")
    if result.get("aten_op") and result["aten_op"] != result["op"]:
        notes.append(f"ATen {clean(result['aten_op'])}")
    return f"  op: {clean(result['op'])}" + (f" ({'; '.join(notes)})" if notes else "")


def _culprit_lines(result: dict[str, Any]) -> list[str]:
    """Module, pass, op and the source lines of the NaN hunt's culprit."""
    lines = []
    if result.get("module") is not None:
        module = clean(result["module"] or "(root module)")
        lines.append(f"  module: {module} ({clean(result.get('module_type'))}), pass: {result.get('pass')}")
    if result.get("op"):
        lines.append(_op_line(result))
    lines += [f"    at {clean(frame, 300)}" for frame in result.get("op_stack") or []]
    if result.get("first_nan_op"):
        nan_op = result["first_nan_op"]
        where = f" at {clean(nan_op['stack'][-1], 300)}" if nan_op["stack"] else ""
        lines.append(f"  first NaN from: {clean(nan_op['op'])}{where}")
    origins = result.get("ops") or []
    if len(origins) > 1:
        named = [f"{clean(o['op'])} ({'created' if o.get('created') else 'passed in'} {o.get('produced')})" for o in origins]
        lines.append("  origins that reached the loss, in order: " + ", ".join(named))
    return lines


def _hunt_heading(result: dict[str, Any]) -> str:
    """``NaN hunt at step 412``; without a step (an armed window that passed, no capture) the summary says what happened."""
    step = result.get("step")
    return f"NaN hunt at step {step}" if isinstance(step, int) and not isinstance(step, bool) else "NaN hunt"


def render_nan_hunt(result: dict[str, Any], color: bool = False) -> str:
    """The NaN hunt's verdict, culprit, op, source line and statistics."""
    lines = [f"{_hunt_heading(result)}: {clean(result['summary'])}"] + _culprit_lines(result)
    for title, key in STATS_BLOCKS:
        if isinstance(result.get(key), dict):
            lines += _stats_block(title, result[key])
    if isinstance(result.get("parameters"), list) and result["parameters"]:
        lines.append("  non-finite parameters: " + clean(", ".join(result["parameters"][:20])))
    if result.get("how_to_capture"):
        lines.append(clean(result["how_to_capture"], 1000))
    lines += [f"  note: {clean(n, 400)}" for n in result.get("notes") or []]
    return "\n".join(lines)


_OLD_PASS_NOTE = (f"the starting loss was within {MIN_DROP:g} times of the target, so reaching it says little about "
                  f"whether the model can fit; run the test again, which now asks for a {MIN_DROP:g}-times drop")


def _target_text(result: dict[str, Any]) -> str:
    """``target 0.01``, or ``target 0.000492 = start/100, below the set 0.01`` when the start lowered it."""
    target, set_target = result.get("target", result["config"]["target"]), result["config"]["target"]
    if target == set_target:
        return f"target {_fmt(target)}"
    return f"target {_fmt(target)} = start/{result.get('min_drop', MIN_DROP):g}, below the set {_fmt(set_target)}"


def render_overfit(result: dict[str, Any], color: bool = False) -> str:
    """Pass/fail, steps and the loss curve of the overfit-one-batch test."""
    if result.get("blocked"):
        return (f"Overfit one batch: FAIL ({result['reason']}: {clean(result['blocked']['code'])}), nothing trained\n"
                f"  {clean(result['blocked']['explanation'], 600)}")
    informative = overfit_informative(result)
    verdict = "NOT INFORMATIVE" if not informative else "PASS" if result["passed"] else "FAIL"
    frozen = result.get("frozen_parameters") or []
    note = [f"  note: {len(frozen)} parameter tensors are frozen (requires_grad=False): "
            + clean(", ".join(frozen[:8]) + (" ..." if len(frozen) > 8 else ""), 400)] if frozen else []
    lines = [loss_chart(result["losses"], color=color), ""]
    lines.append(f"Overfit one batch: {verdict} ({result['reason']}) after {result['steps']} steps, "
                 f"loss {_fmt(result['initial_loss'])} -> {_fmt(result['final_loss'])} "
                 f"({_target_text(result)}, {result['optimizer']} lr {_fmt(result['lr'])})")
    if not informative:
        lines.append("  " + clean(result.get("uninformative_reason") or _OLD_PASS_NOTE, 600))
    if result.get("advice"):
        lines.append(clean(result["advice"], 600))
    return "\n".join(lines + note)


def _weights_line(result: dict[str, Any]) -> str:
    """Which weights a job measured (``result["weights"]``, :mod:`tuidiag.jobs.weights`); empty for older results."""
    weights = result.get("weights")
    if not isinstance(weights, dict) or not isinstance(weights.get("text"), str):
        return ""
    hint = "; tuidiag sharpness RUN --checkpoint PATH measures trained ones" if weights.get("kind") == "factory" else ""
    return f"\n  weights: {clean(weights['text'], 400)}{hint}"


def render_sharpness(result: dict[str, Any], color: bool = False) -> str:
    """Flat or sharp, with the loss increase ratio and the weights measured."""
    cfg = result["config"]
    if result.get("blocked"):
        return f"Sharpness: {result['verdict'].upper()}, {clean(result['summary'], 700)}{_weights_line(result)}"
    verdict = result["verdict"].upper()
    if result.get("diverged"):  # what it measured comes second: the weights it measured had blown up
        verdict = f"NOT INFORMATIVE, {clean(result['diverged'], 600)}\n  measured {verdict}"
    return (f"Sharpness: {verdict} (loss increase ratio {_fmt(result['ratio'])}, "
            f"threshold {_fmt(cfg['threshold'])})\n"
            f"  base loss {_fmt(result['base_loss'])}, perturbed mean {_fmt(result['mean_perturbed_loss'])}, "
            f"max {_fmt(result['max_perturbed_loss'])} over {cfg['samples']} samples at {_fmt(cfg['epsilon'])} x ||w|| "
            f"on {result['batches_used']} batches{_weights_line(result)}")


def render(job: str, result: dict[str, Any], color: bool = False) -> str:
    """The text of ``job``'s ``result``, by the renderer its kind names (:mod:`tuidiag.job_kinds`)."""
    return job_kinds.load(job_kinds.get(job).renderer)(result, color)

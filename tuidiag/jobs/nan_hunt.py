"""The NaN hunt: replay the captured failing step and name where the first non-finite value appeared.

Input: a capture ``captures/nan-r<rank>-step<step>.pt`` (format: docs/format.md,
section 7), loaded with ``torch.load(weights_only=True)``, and the factory's parts
for the model's architecture and the loss. The capture's model/optimizer state
and RNG are loaded, then, in order:

1. parameters or buffers already non-finite -> verdict ``parameters``;
2. the batch already non-finite -> verdict ``batch``;
3. forward replay with hooks (:class:`tuidiag.jobs.nan_trace.Tracer`) -> verdict
   ``forward`` when the loss is non-finite: the first op that created a non-finite
   value which reached the loss (rule: :mod:`tuidiag.jobs.nonfinite_rule`), its
   module (or ``loss_fn``) and the user's source line;
4. backward replay with node hooks -> verdict ``backward``;
5. otherwise ``not_reproduced`` (e.g. the capture was taken after the step, on CUDA),
   naming the parameters whose finite gradients have a norm that overflows to inf in
   their dtype (what a recorder of gradient norms reads as non-finite).

The parts are restored exactly afterwards.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from tuidiag.format import CAPTURES_DIR
from tuidiag.jobs.job_handle import JobError
from tuidiag.jobs.tensors import all_finite, as_xy, named_stats, to_device
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.isolation import isolated
from tuidiag.jobs.nan_trace import ForwardCulprit, Hit, Tracer, nonfinite_buffers, nonfinite_parameters
from tuidiag.jobs.nonfinite_rule import KINDS

CAPTURE_RE = re.compile(r"^nan-r(\d+)-step(\d+)\.pt$")
CAPTURE_KEYS = ("model_state", "optimizer_state", "batch", "step")

HOW_TO_CAPTURE = (
    "The recorder saves a capture at the first non-finite loss or gradient norm when the training "
    "calls rec.watch(model, optimizer) and rec.batch(x, y) every step (capture_nonfinite=True is the default). "
    "Re-run the training with the recorder until it fails, then run the NaN hunt again. "
    "(Arming a live run to capture its next steps is not available yet.)"
)


def find_capture(run_dir: str | Path) -> Path | None:
    """The capture of the earliest failing step in ``RUN/captures`` (lowest rank on ties), or None."""
    found = []
    for path in (Path(run_dir) / CAPTURES_DIR).glob("nan-r*-step*.pt"):
        match = CAPTURE_RE.match(path.name)
        if match:
            found.append((int(match[2]), int(match[1]), path))
    return min(found)[2] if found else None


def load_capture(path: str | Path) -> dict[str, Any]:
    """Load a capture safely (``weights_only=True``, on the CPU) and check its keys."""
    try:
        capture = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise JobError(f"cannot load capture {path}: {type(exc).__name__}: {exc}") from exc
    missing = [k for k in CAPTURE_KEYS if not isinstance(capture, dict) or k not in capture]
    if missing:
        raise JobError(f"{path} is not a tuidiag capture (missing {', '.join(missing)})")
    return capture


def no_capture(run_dir: str | Path) -> dict[str, Any]:
    """The result when a run has no capture yet."""
    summary = f"no NaN capture in {Path(run_dir) / CAPTURES_DIR}"
    return {"verdict": "no_capture", "summary": summary, "how_to_capture": HOW_TO_CAPTURE}


def _load_states(parts: Parts, capture: dict[str, Any]) -> list[str]:
    """Load the capture's model and optimizer state; notes on what could not be loaded."""
    notes = []
    if capture["model_state"]:
        try:
            parts.model.load_state_dict(capture["model_state"])
        except RuntimeError as exc:
            raise JobError(f"the factory's model does not match the capture: {exc}") from exc
    else:
        notes.append("the capture holds no model state: replaying with the factory's weights")
    if capture["optimizer_state"]:
        try:
            parts.optimizer.load_state_dict(capture["optimizer_state"])
        except (ValueError, KeyError, RuntimeError) as exc:
            notes.append(f"optimizer state not loaded ({exc}); the replay does not need it")
    return notes


def _load_rng(capture: dict[str, Any], device: torch.device) -> None:
    """Set the torch (and, on CUDA, the CUDA) generators to the capture's states."""
    if isinstance(capture.get("cpu_rng_state"), torch.Tensor):
        torch.set_rng_state(capture["cpu_rng_state"])
    cuda_states = capture.get("cuda_rng_states") or []
    if device.type == "cuda" and len(cuda_states) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_states)


POST_STEP_NOTE = ("the state was captured after the failing step (asynchronous detection on CUDA): "
                  "parameters may already be non-finite and the batch may be a later one")
DROPOUT_NOTE = "RNG restored as at capture time (after the step's forward): dropout masks may differ from the failing step"


def restore_capture(parts: Parts, capture: dict[str, Any], device: torch.device) -> list[str]:
    """Load the capture's model/optimizer state and RNG into ``parts``; return notes for the report."""
    notes = _load_states(parts, capture)
    _load_rng(capture, device)
    if not capture.get("state_is_pre_step", True):
        notes.append(POST_STEP_NOTE)
    if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in parts.model.modules()):
        notes.append(DROPOUT_NOTE)
    return notes


def _verdict(kind: str, summary: str, **fields: Any) -> dict[str, Any]:
    return {"verdict": kind, "summary": summary, **fields}


def _label(module: str) -> str:
    return "(root module)" if module == "" else module


def _count_text(new: dict[str, int]) -> str:
    """``{"inf": 3, "nan": 1}`` -> ``"3 inf and 1 NaN"`` (in the order of :data:`KINDS`)."""
    return " and ".join(f"{new[k]} {'NaN' if k == 'nan' else 'inf'}" for k in KINDS if new.get(k))


def forward_verdict(found: ForwardCulprit) -> dict[str, Any]:
    """The report of a forward culprit: the op, its module, its source line and the other origins."""
    hit, first = found.hit, found.origin
    culprit = f"{_label(hit.module)} ({hit.module_type})"
    where = f" at {first.stack[-1]}" if first.stack else ""
    if first.created:
        summary = (f"forward pass: op {first.op} in {culprit} created {_count_text(first.new)} "
                   f"that its inputs did not hold{where}")
    else:
        summary = (f"forward pass: no op created a non-finite value on its own; the loss is non-finite from "
                   f"{'NaN' if first.produced == 'nan' else 'inf'} that op {first.op} in {culprit} took from "
                   f"its arguments (a fill value, a constant or a buffer){where}")
    if not found.traced:
        summary += "; its path to the loss could not be followed (written through a view?): first op to create one"
    nans = [o for o in found.reached if o.created and o.new.get("nan")]
    first_nan = nans[0] if nans and not first.new.get("nan") else None
    return _verdict(
        "forward", summary, **{"pass": "forward"}, module=hit.module, module_type=hit.module_type,
        op=first.op, aten_op=first.aten, created=first.created, new=dict(first.new), op_stack=first.stack,
        first_nan_op=first_nan.to_json() if first_nan else None, traced=found.traced,
        ops=[o.to_json() for o in found.reached[:4]], **hit.details,
    )


def backward_verdict(hit: Hit) -> dict[str, Any]:
    """The report of a backward culprit (an autograd node and the module that created it)."""
    details = dict(hit.details)
    op = details.pop("op")
    culprit = f"{_label(hit.module)} ({hit.module_type}), op {op}"
    summary = f"backward pass: {culprit}, returned non-finite gradients from finite incoming gradients"
    return _verdict("backward", summary, **{"pass": "backward"}, module=hit.module, module_type=hit.module_type, op=op, **details)


def replay(parts: Parts, x: Any, y: Any) -> dict[str, Any]:
    """Forward and backward of one batch under the tracer; the verdict of the first culprit found."""
    for p in parts.model.parameters():
        p.grad = None
    tracer = Tracer(parts)
    try:
        loss = tracer.forward(x, y)
        if tracer.forward_hit is not None:
            return forward_verdict(tracer.forward_hit)
        if not all_finite(loss):
            return _verdict("forward", "forward pass: the loss is non-finite, but no torch op of the replay created "
                            "or passed in a non-finite value", **{"pass": "forward"}, module=None, op=None)
        if not (isinstance(loss, torch.Tensor) and loss.requires_grad):
            return _verdict("not_reproduced", "the replay's loss is finite and has no grad_fn (every parameter frozen, "
                            "or the graph detached): there is no backward pass to check", loss=float(loss))
        tracer.backward(loss)
        if tracer.backward_hit is not None:
            return backward_verdict(tracer.backward_hit)
    finally:
        tracer.close()
    bad = [n for n, p in parts.model.named_parameters() if p.grad is not None and not all_finite(p.grad)]
    if bad:
        return _verdict("backward", f"backward pass: gradients of {', '.join(bad[:5])} are non-finite (accumulation overflow)",
                        **{"pass": "backward"}, module=None, op="AccumulateGrad", parameters_with_bad_grad=bad)
    return not_reproduced(parts, float(loss.detach()))


def not_reproduced(parts: Parts, loss: float) -> dict[str, Any]:
    """The replay stayed finite; names the parameters whose finite gradients have a float32 norm that
    overflows to inf (elements above ~1e19): a recorder of gradient norms reads those as non-finite."""
    overflow = [n for n, p in parts.model.named_parameters()
                if p.grad is not None and p.grad.is_floating_point() and not bool(torch.isfinite(p.grad.norm()))]
    summary = f"the replay stayed finite (loss {loss:.6g})"
    if not overflow:
        return _verdict("not_reproduced", summary, loss=loss)
    grads = {n: p.grad for n, p in parts.model.named_parameters() if n in overflow}
    largest = max(float(g.abs().max()) for g in grads.values())
    dtypes = sorted({str(g.dtype).replace("torch.", "") for g in grads.values()})
    summary += (f"; the gradients of {', '.join(overflow[:5])}{' ...' if len(overflow) > 5 else ''} are finite, but so large "
                f"(largest |g| {largest:.3g}) that their {'/'.join(dtypes)} norm overflows to inf, which reads as a "
                "non-finite gradient norm")
    return _verdict("not_reproduced", summary, loss=loss, overflowing_grad_norms=overflow, largest_grad=largest)


BUFFER_NOTE = ("non-finite buffers in the capture: {names}; buffers such as BatchNorm running statistics "
               "are updated by the failing step's own forward pass, before the capture is taken")


def hunt(parts: Parts, capture: dict[str, Any], device: torch.device, training: bool = True) -> dict[str, Any]:
    """Steps 1-5 of the module docstring, on a model that already holds the capture's state."""
    bad_params = nonfinite_parameters(parts)
    if capture.get("batch") is None and not bad_params:
        return _verdict("no_batch", "the capture holds no batch (the training did not call rec.batch(x, y)); cannot replay")
    x, y = as_xy(capture["batch"]) if capture.get("batch") is not None else (None, None)
    bad_batch = {name: v for name, v in (("x", x), ("y", y)) if not all_finite(v)}
    if bad_batch:
        stats = {k: v for name, value in bad_batch.items() for k, v in named_stats(value, name).items()}
        summary = f"the batch was already non-finite ({', '.join(bad_batch)})"
        return _verdict("batch", summary, tensors=stats, parameters=bad_params)
    if bad_params:
        return _verdict("parameters", f"parameters were already non-finite: {', '.join(bad_params[:5])}", parameters=bad_params)
    parts.model.train(training)
    return replay(parts, *to_device((x, y), device))


def nan_hunt(parts: Parts, capture: dict[str, Any], device: torch.device, training: bool = True) -> dict[str, Any]:
    """Load ``capture`` into ``parts`` (on ``device``), hunt, restore the parts; return the report."""
    with isolated(parts.model, parts.optimizer):
        notes = restore_capture(parts, capture, device)
        bad_buffers = nonfinite_buffers(parts)
        result = hunt(parts, capture, device, training)
    if bad_buffers:
        notes.append(BUFFER_NOTE.format(names=", ".join(bad_buffers[:5])))
    result.update(step=capture.get("step"), rank=capture.get("rank"), notes=notes)
    result["state_is_pre_step"] = capture.get("state_is_pre_step")
    return result

"""Instrumented replay of one training step: where did the first non-finite value come from?

Forward pass: a forward hook on every module records the first module whose
output is non-finite while its inputs and its own parameters are finite (hooks
fire innermost first, so that is the deepest culprit); a ``TorchFunctionMode``
sees every torch operation and records those whose output turned non-finite
from finite inputs (the op and the user's source line).

Backward pass: each node of the autograd graph is attributed to the module
whose forward created it (or to the loss function), and a hook on every node
records the first one that returned a non-finite gradient from finite incoming
gradients. The forward runs under ``torch.autograd.detect_anomaly`` so each node
carries the traceback of the forward line that created it.
"""

from __future__ import annotations

import re
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from tuidiag.jobs.common import all_finite, float_tensors, has_nan, iter_tensors, named_stats, tensor_stats
from tuidiag.jobs.factory import Parts

LOSS_FN = "loss_fn"
"""The name the report uses for the loss function (it is not a module of the model)."""

_TORCH_DIR = str(Path(torch.__file__).parent)
_TUIDIAG_DIR = str(Path(__file__).parent.parent)


def user_frames(frames: list[tuple[str, int, str, str]], limit: int = 4) -> list[str]:
    """The innermost ``limit`` frames called from tuidiag's replay, without torch's own frames.

    ``frames`` are ``(file, line, function, code)`` from the outermost to the innermost;
    the innermost ones inside torch or tuidiag (the hook that asks) are dropped first.
    """
    while frames and frames[-1][0].startswith((_TORCH_DIR, _TUIDIAG_DIR)):
        frames = frames[:-1]
    last_ours = max((i for i, f in enumerate(frames) if f[0].startswith(_TUIDIAG_DIR)), default=-1)
    inner = [f for f in frames[last_ours + 1:] if not f[0].startswith(_TORCH_DIR)]
    return [f"{file}:{line} in {func}: {code.strip()}" for file, line, func, code in inner[-limit:]]


def user_stack(limit: int = 4) -> list[str]:
    """:func:`user_frames` of the current stack."""
    return user_frames([(f.filename, f.lineno or 0, f.name, f.line or "") for f in traceback.extract_stack()], limit)


def op_name(func: Any) -> str:
    """A readable name for a torch function (``__truediv__`` -> ``truediv``)."""
    return str(getattr(func, "__name__", func)).strip("_")


@dataclass
class OpHit:
    """An operation whose output became non-finite (or NaN) from finite (or NaN-free) inputs."""

    op: str
    module: str
    produced: str
    stack: list[str]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"op": self.op, "module": self.module, "produced": self.produced, "stack": self.stack}


@dataclass
class Hit:
    """The first culprit of one pass: a module (or the loss function) and the evidence."""

    module: str
    module_type: str
    details: dict[str, Any] = field(default_factory=dict)


class OpWatch(TorchFunctionMode):
    """Sees every torch function call during the replay (see :class:`Tracer`)."""

    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not self.tracer.paused:
            self.tracer.on_op(func, (args, kwargs), out)
        return out


class Tracer:
    """Hooks on a model and its loss for one replayed step; see the module docstring."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.paused = False
        self.stack: list[str] = []
        self.names = {id(m): name for name, m in parts.model.named_modules()}
        self.types = {name: type(m).__name__ for name, m in parts.model.named_modules()}
        self.source_ops: list[OpHit] = []
        self.nan_ops: list[OpHit] = []
        self.forward_hit: Hit | None = None
        self.backward_hit: Hit | None = None
        self.owner: dict[Any, str] = {}
        self.inputs: dict[str, Any] = {}
        self._handles: list[Any] = []

    # ---- forward --------------------------------------------------------------------
    def on_op(self, func: Any, inputs: Any, out: Any) -> None:
        """Attribute the op's autograd node to the current module; note a non-finite birth."""
        module = self.stack[-1] if self.stack else LOSS_FN
        for t in iter_tensors(out):
            if t.grad_fn is not None and t.grad_fn not in self.owner:
                self.owner[t.grad_fn] = module
        if len(self.source_ops) >= 8 or all_finite(out):
            return
        if all_finite(inputs):
            self.source_ops.append(OpHit(op_name(func), module, "nan" if has_nan(out) else "inf", user_stack()))
        elif has_nan(out) and not has_nan(inputs):
            self.nan_ops.append(OpHit(op_name(func), module, "nan", user_stack()))

    def _pre_hook(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        self.stack.append(self.names.get(id(module), type(module).__name__))

    def _post_hook(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        self.paused = True
        try:
            name = self.stack.pop() if self.stack else self.names.get(id(module), "?")
            self.inputs[name] = (args, kwargs)
            self.claim([t.grad_fn for t in iter_tensors(output)], name)
            own_params = list(module.parameters(recurse=False))
            if self.forward_hit is None and not all_finite(output) and all_finite((args, kwargs, own_params)):
                self.forward_hit = self.module_hit(name, module, output)
        finally:
            self.paused = False

    def claim(self, roots: list[Any], owner: str) -> None:
        """Attribute every not yet attributed autograd node behind ``roots`` to ``owner``."""
        todo = [r for r in roots if r is not None]
        while todo:
            node = todo.pop()
            if node in self.owner:
                continue
            self.owner[node] = owner
            todo.extend(n for n, _ in node.next_functions if n is not None)

    def module_hit(self, name: str, module: nn.Module, output: Any) -> Hit:
        """The forward culprit with statistics of its inputs, parameters and output."""
        args, kwargs = self.inputs[name]
        details = {
            "inputs": named_stats((args, kwargs), "input"),
            "parameters": {n: tensor_stats(p) for n, p in module.named_parameters(recurse=False)},
            "output": named_stats(output, "output"),
        }
        return Hit(name, type(module).__name__, details)

    def forward(self, x: Any, y: Any) -> torch.Tensor:
        """Run model and loss with every hook and the op watch installed."""
        model = self.parts.model
        for module in model.modules():
            self._handles.append(module.register_forward_pre_hook(self._pre_hook, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post_hook, with_kwargs=True))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly(check_nan=False), OpWatch(self):
                output = self.parts.output(x)
                self.stack.clear()
                loss = self.parts.loss_fn(output, y)
        self.paused = True
        self.claim([t.grad_fn for t in iter_tensors(loss)], LOSS_FN)
        if self.forward_hit is None and all_finite(output) and not all_finite(loss):
            self.forward_hit = Hit(LOSS_FN, _callable_name(self.parts.loss_fn), {
                "inputs": {**named_stats(output, "output"), **named_stats(y, "target")},
                "parameters": {}, "output": named_stats(loss, "loss"),
            })
        self.paused = False
        return loss

    # ---- backward -------------------------------------------------------------------
    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate ``loss`` with a hook on every node of its graph."""
        for node in list(self.owner):
            if node.name() != "torch::autograd::AccumulateGrad":
                self._handles.append(node.register_hook(self._node_hook(node)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly(check_nan=False):
                loss.backward()

    def _node_hook(self, node: Any) -> Any:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if self.backward_hit is None and not all_finite(grad_inputs) and all_finite(grad_outputs):
                self.backward_hit = self.node_hit(node, grad_inputs, grad_outputs)
        return hook

    def node_hit(self, node: Any, grad_inputs: Any, grad_outputs: Any) -> Hit:
        """The backward culprit: the node's op, module, gradients and forward traceback."""
        module = self.owner.get(node, LOSS_FN)
        modules = dict(self.parts.model.named_modules())
        details: dict[str, Any] = {
            "op": node.name(),
            "op_stack": _forward_traceback(node),
            "grad_output": named_stats([g for g in grad_outputs if g is not None], "grad_output"),
            "grad_input": named_stats([g for g in grad_inputs if g is not None], "grad_input"),
        }
        if module in self.inputs:
            details["inputs"] = named_stats(self.inputs[module], "input")
        if module in modules:
            details["parameters"] = {n: tensor_stats(p) for n, p in modules[module].named_parameters(recurse=False)}
        kind = self.types.get(module, _callable_name(self.parts.loss_fn))
        return Hit(module, kind, details)

    def close(self) -> None:
        """Remove every hook."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()


_FRAME_RE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n?(?P<code>.*)$', re.DOTALL)


def _forward_traceback(node: Any, limit: int = 4) -> list[str]:
    """The user frames of the forward line that created ``node`` (recorded by anomaly mode)."""
    lines = getattr(node, "metadata", {}).get("traceback_", [])
    frames = []
    for entry in lines if isinstance(lines, list) else []:
        match = _FRAME_RE.match(str(entry))
        if match:
            frames.append((match["file"], int(match["line"]), match["func"].strip(), match["code"]))
    return user_frames(frames, limit)


def _callable_name(fn: Any) -> str:
    """The class name of a loss module, else the function's name."""
    if isinstance(fn, nn.Module):
        return type(fn).__name__
    return str(getattr(fn, "__qualname__", getattr(fn, "__name__", type(fn).__name__)))


def nonfinite_parameters(parts: Parts) -> list[str]:
    """Names of the model's parameters that hold NaN or inf."""
    return [n for n, p in parts.model.named_parameters() if not all_finite(p)]


def nonfinite_buffers(parts: Parts) -> list[str]:
    """Names of the model's floating-point buffers that hold NaN or inf."""
    return [n for n, b in parts.model.named_buffers() if float_tensors(b) and not all_finite(b)]

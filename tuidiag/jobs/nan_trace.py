"""Instrumented replay of one training step: where did the first non-finite value come from?

Forward pass: a ``TorchDispatchMode`` sees every ATen op and applies the rule of
:mod:`tuidiag.jobs.nonfinite_rule` to each: an op whose output holds NaN or inf
that its inputs did not carry *created* it (an *origin*); an op that took a
non-finite value from an argument with no traced origin (a ``-inf`` fill value, a
constant, a buffer) *passed it in* (also an origin, by design). Every non-finite
tensor remembers the origins its values came from, so when the loss is
non-finite the culprit is the first op that created a value which reached the
loss; the module is the innermost module running at that op. A
``TorchFunctionMode`` gives each ATen op the name of the torch call the user
wrote (``linear`` for ``addmm``, ``div_`` for ``/=``) and attributes autograd
nodes to modules; source lines are the user's own frames between the replay and
the op (:func:`user_frames`).

Backward pass: each node of the autograd graph is attributed to the module
whose forward created it (or to the loss function), and a hook on every node
records the first one that returned a non-finite gradient from finite incoming
gradients. The forward runs under ``torch.autograd.detect_anomaly`` so each node
carries the traceback of the forward line that created it.
"""

from __future__ import annotations

import re
import sysconfig
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from tuidiag.jobs.tensors import all_finite, float_tensors, iter_tensors, named_stats, tensor_stats
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.lazy_stats import LazyStats
from tuidiag.jobs.nan_modes import FaultWatch, OpWatch
from tuidiag.jobs.nan_origins import ForwardCulprit, Hit, Origin
from tuidiag.jobs.nonfinite_rule import KINDS, KindCache, OpCall

LOSS_FN = "loss_fn"
"""The name the report uses for the loss function (it is not a module of the model)."""
FORWARD_FN = "forward_fn"
"""The name the report uses for the factory's ``forward(model, x)``, outside the model's modules."""

MAX_ORIGINS = 64
"""Origins recorded per replay; later ones still propagate, but are not named."""

_TORCH_DIR = str(Path(torch.__file__).parent)
_TUIDIAG_DIR = str(Path(__file__).parent.parent)
_STDLIB_DIR = str(Path(sysconfig.get_paths()["stdlib"]))


def _library(file: str) -> bool:
    """True for frames that are not the user's own: torch, tuidiag, the standard library, ``<frozen ...>``."""
    if file.startswith("<"):
        return True
    if file.startswith((_TORCH_DIR, _TUIDIAG_DIR)):
        return True
    return file.startswith(_STDLIB_DIR) and "-packages" not in file[len(_STDLIB_DIR):]


def user_frames(frames: list[tuple[str, int, str, str]], limit: int = 4) -> list[str]:
    """The innermost ``limit`` frames of the user's code between the replay and the op.

    ``frames`` are ``(file, line, function, code)`` from the outermost to the innermost.
    Only frames inside the replay's entry (:meth:`Tracer.forward`) count, and of those
    only the user's own (not torch, tuidiag, the standard library or ``<frozen ...>``):
    an op inside a built-in module called by another built-in module has none, and
    launchers, ``runpy`` and the caller of the NaN hunt are never reported.
    """
    entry = max((i for i, f in enumerate(frames) if (f[0], f[2]) == _REPLAY_ENTRY), default=None)
    if entry is None:
        return []
    inner = [f for f in frames[entry + 1:] if not _library(f[0])]
    return [f"{file}:{line} in {func}: {code.strip()}" for file, line, func, code in inner[-limit:]]


def user_stack(limit: int = 4) -> list[str]:
    """:func:`user_frames` of the current stack."""
    return user_frames([(f.filename, f.lineno or 0, f.name, f.line or "") for f in traceback.extract_stack()], limit)


class Tracer:
    """Hooks on a model and its loss for one replayed step; see the module docstring."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.paused = False
        self.stack: list[str] = []
        self.calls: list[str] = []
        self.outside = FORWARD_FN if parts.forward is not None else LOSS_FN
        self.names = {id(m): name for name, m in parts.model.named_modules()}
        self.types = {name: type(m).__name__ for name, m in parts.model.named_modules()}
        self.origins: list[Origin] = []
        self.sources: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.kinds = KindCache()
        self.forward_hit: ForwardCulprit | None = None
        self.backward_hit: Hit | None = None
        self.owner: dict[Any, str] = {}
        self.inputs = LazyStats()
        self.outputs = LazyStats()
        self._handles: list[Any] = []

    # ---- forward --------------------------------------------------------------------
    def current_module(self) -> str:
        """The innermost module running now (or the loss / forward function outside the model)."""
        return self.stack[-1] if self.stack else self.outside

    def on_call(self, out: Any) -> None:
        """Attribute the autograd nodes of a torch call's output to the current module."""
        module = self.current_module()
        for t in iter_tensors(out):
            if t.grad_fn is not None and t.grad_fn not in self.owner:
                self.owner[t.grad_fn] = module

    def before_write(self, tensors: list[torch.Tensor]) -> None:
        """An in-place op is about to write into ``tensors``: take the stats of kept values they share memory with."""
        self.paused = True
        try:
            self.inputs.before_write(tensors)
            self.outputs.before_write(tensors)
        finally:
            self.paused = False

    def on_op(self, call: OpCall, out: Any) -> None:
        """Apply the rule to one ATen op; remember which origins each non-finite output came from."""
        for t in call.written:
            self.kinds.forget(t)
        outputs = [t for t in float_tensors(out) if t.numel()]
        bad = [(t, self.kinds.kinds(t)) for t in outputs]
        bad = [(t, kinds) for t, kinds in bad if kinds]
        if not bad:
            if call.mutable:
                for t in outputs:
                    self.sources.pop(t, None)
            return
        kinds = set().union(*(k for _, k in bad))
        came_from: set[int] = set()
        passed_in = bool(kinds & call.numbers)
        for kind in KINDS:  # values derived from any non-finite input come from its origins (inf / inf is NaN)
            for t in call.holders(kind):
                known = self.sources.get(t)
                if known is not None:
                    came_from |= known
                elif kind in kinds:
                    passed_in = True
        new = call.new_elements([t for t, _ in bad])
        if (new or passed_in) and len(self.origins) < MAX_ORIGINS:
            produced = "nan" if new.get("nan") or (not new and "nan" in kinds) else "inf"
            op = self.calls[-1] if self.calls else call.name
            origin = Origin(len(self.origins), op, call.name, self.current_module(), produced, new, user_stack())
            self.origins.append(origin)
            came_from.add(origin.index)
        sources = frozenset(came_from)
        for t, _ in bad:
            self.sources[t] = sources
            if call.mutable and t._base is not None:
                self.sources[t._base] = self.sources.get(t._base, frozenset()) | sources

    def _pre_hook(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        name = self.names.get(id(module), type(module).__name__)
        self.stack.append(name)
        self.inputs.keep(name, input=(args, kwargs))

    def _post_hook(self, module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        self.paused = True
        try:
            name = self.stack.pop() if self.stack else self.names.get(id(module), "?")
            self.claim([t.grad_fn for t in iter_tensors(output)], name)
            self.outputs.keep(name, output=output)
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

    def module_hit(self, name: str) -> Hit:
        """The culprit module (or loss / forward function) with statistics of its inputs, parameters and output."""
        modules = dict(self.parts.model.named_modules())
        if name in modules:
            params = {n: tensor_stats(p) for n, p in modules[name].named_parameters(recurse=False)}
            kind = self.types[name]
        else:
            params = {}
            kind = _callable_name(self.parts.loss_fn if name == LOSS_FN else self.parts.forward)
        details = {"inputs": self.inputs.get(name), "parameters": params, "output": self.outputs.get(name)}
        return Hit(name, kind, details)

    def forward(self, x: Any, y: Any) -> torch.Tensor:
        """Run model and loss with every hook and both op watches installed."""
        model = self.parts.model
        for module in model.modules():
            self._handles.append(module.register_forward_pre_hook(self._pre_hook, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._post_hook, with_kwargs=True))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autograd.detect_anomaly(check_nan=False), OpWatch(self), FaultWatch(self):
                self._enter(x)
                output = self.parts.output(x)
                self.stack.clear()
                self._hand_over(output, y)
                loss = self.parts.loss_fn(output, y)
        self.paused = True
        self.claim([t.grad_fn for t in iter_tensors(loss)], LOSS_FN)
        if not all_finite(loss):
            self.outputs.keep(LOSS_FN, loss=loss)
            self.forward_hit = self.culprit(loss)
        self.paused = False
        return loss

    def _enter(self, x: Any) -> None:
        """Keep the input of the factory's ``forward(model, x)`` (ops outside the model belong to it)."""
        if self.outside == FORWARD_FN:
            self.inputs.keep(FORWARD_FN, input=x)

    def _hand_over(self, output: Any, y: Any) -> None:
        """Keep what the loss takes (``output``, ``y``); ops from here on belong to the loss."""
        if self.outside == FORWARD_FN:
            self.outputs.keep(FORWARD_FN, output=output)
        self.inputs.keep(LOSS_FN, output=output, target=y)
        self.outside = LOSS_FN

    def culprit(self, loss: Any) -> ForwardCulprit | None:
        """The first origin whose values reached the non-finite ``loss``, preferring those that created them.

        When no origin reached it through a traced path (a value written through a
        view, say), the first origin that created a value anywhere stands in.
        """
        reached_ids = sorted(set().union(*(self.sources.get(t, frozenset()) for t in float_tensors(loss))))
        reached = [self.origins[i] for i in reached_ids]
        traced = bool(reached)
        candidates = reached or self.origins
        created = [o for o in candidates if o.created]
        chosen = created or candidates
        if not chosen:
            return None
        origin = chosen[0]
        return ForwardCulprit(self.module_hit(origin.module), origin, candidates, traced)

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
            details["inputs"] = self.inputs.get(module)
        if module in modules:
            details["parameters"] = {n: tensor_stats(p) for n, p in modules[module].named_parameters(recurse=False)}
        kind = self.types.get(module, _callable_name(self.parts.forward if module == FORWARD_FN else self.parts.loss_fn))
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


_REPLAY_ENTRY = (Tracer.forward.__code__.co_filename, Tracer.forward.__code__.co_name)
"""The frame that starts the replay: only frames inside it are the user's (see :func:`user_frames`)."""


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

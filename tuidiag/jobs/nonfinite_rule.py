"""When does an operation *create* a non-finite value? The NaN hunt's culprit rule, per op.

Two kinds of non-finite value: NaN and infinity (either sign: ``-x`` of a ``-inf``
carries the same infinity). An element of an op's output of kind K is **new**
when the inputs it was computed from hold no K:

- pointwise ops (ATen's ``pointwise`` tag: ``exp``, ``log``, ``div``, ``pow``,
  ``where``, ``masked_fill``...): the inputs' elements at the same position, after
  broadcasting;
- any other op (``addmm``, reductions, softmax, indexing, views...): any element of
  any input.

The inputs are the op's tensor arguments, as they were *before* the op ran for an
in-place op (``x /= s``, ``x.log_()``: their values are snapshotted first), and its
number arguments: ``masked_fill(mask, -inf)`` carries infinity in its fill value, so
the ``-inf`` it writes is not new, and ``exp`` of that ``-inf`` is 0, which is finite.
The old contents of an ``out=`` tensor are not an input. Allocations (``empty``...)
return uninitialised memory, which is never new.

The checks run at the ATen level (:class:`OpCall` is built inside a
``TorchDispatchMode``), where every op has a schema that says whether it mutates
its arguments and tags that say whether it is pointwise.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.utils.weak import WeakIdKeyDictionary

from tuidiag.jobs.tensors import iter_tensors

KINDS = ("nan", "inf")
"""The kinds of non-finite value, in the order reports name them."""

UNINITIALISED = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted",
                           "resize_", "resize_as_", "set_"})
"""ATen ops whose output holds uninitialised memory: whatever it holds is not created by a computation."""


def is_float(t: torch.Tensor) -> bool:
    """True for floating-point and complex tensors (the only ones that can hold NaN or inf)."""
    return t.is_floating_point() or t.is_complex()


def kind_mask(t: torch.Tensor, kind: str) -> torch.Tensor:
    """Boolean mask of the elements of ``t`` of ``kind`` (``"nan"`` or ``"inf"``)."""
    return torch.isnan(t) if kind == "nan" else torch.isinf(t)


def tensor_kinds(t: torch.Tensor) -> set[str]:
    """The kinds of non-finite value ``t`` holds somewhere (none for tensors that cannot be read: meta, sparse...)."""
    try:
        if not is_float(t) or bool(torch.isfinite(t).all()):
            return set()
        return {kind for kind in KINDS if bool(kind_mask(t, kind).any())}
    except (RuntimeError, NotImplementedError, TypeError):
        return set()


class KindCache:
    """:func:`tensor_kinds` remembered per tensor until it is written to (its version counter moves).

    Most inputs of an op are outputs of the op before; this saves scanning them twice.
    The version counter is shared by a tensor and its views, so a write through a view
    also invalidates the base.
    """

    def __init__(self) -> None:
        self._known: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def kinds(self, t: torch.Tensor) -> set[str]:
        """The kinds of non-finite value ``t`` holds now."""
        try:
            version = t._version
        except RuntimeError:  # inference tensors have no version counter
            return tensor_kinds(t)
        known = self._known.get(t)
        if known is not None and known[0] == version:
            return known[1]
        kinds = tensor_kinds(t)
        self._known[t] = (version, kinds)
        return kinds

    def forget(self, t: torch.Tensor) -> None:
        """Drop what is known of ``t``: an in-place op just wrote it (its version moves only after the op returns)."""
        self._known.pop(t, None)


def number_kinds(value: Any) -> set[str]:
    """The kinds held by the Python numbers nested in ``value`` (``float('-inf')`` -> ``{"inf"}``)."""
    if isinstance(value, (int, torch.Tensor)):
        return set()
    if isinstance(value, (float, complex)):
        z = complex(value)
        return ({"nan"} if math.isnan(z.real) or math.isnan(z.imag) else set()) | (
            {"inf"} if math.isinf(z.real) or math.isinf(z.imag) else set())
    if isinstance(value, (list, tuple)):
        return set().union(*(number_kinds(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return number_kinds(list(value.values()))
    return set()


def aten_name(func: Any) -> str:
    """The ATen op's name without its overload (``aten.div_.Tensor`` -> ``div_``)."""
    packet = getattr(func, "overloadpacket", None)
    return str(getattr(packet, "__name__", getattr(func, "__name__", func)))


class OpCall:
    """One ATen op call as the rule sees it: what it read, and (in place) what that held before.

    Build it *before* running the op: for an op that mutates its arguments, the
    non-finite masks of every tensor it reads are snapshotted then.
    """

    def __init__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], cache: KindCache | None = None) -> None:
        self.cache = cache or KindCache()
        schema = getattr(func, "_schema", None)
        self.name = aten_name(func)
        self.mutable = bool(schema is not None and schema.is_mutable)
        self.pointwise = torch.Tag.pointwise in getattr(func, "tags", ())
        arguments = list(schema.arguments) if schema is not None else []
        out_names = {a.name for a in arguments if getattr(a, "is_out", False)}
        read = [v for i, v in enumerate(args) if i >= len(arguments) or arguments[i].name not in out_names]
        read += [v for k, v in kwargs.items() if k not in out_names]
        self.tensors = [t for t in iter_tensors(read) if is_float(t)]
        self.numbers = number_kinds(read)
        self.written: list[torch.Tensor] = []
        self.before: dict[int, dict[str, torch.Tensor]] | None = None
        self._masks: dict[tuple[int, str], torch.Tensor | None] = {}
        if self.mutable:
            written = {a.name for a in arguments if a.alias_info is not None and a.alias_info.is_write}
            self.written = [t for i, v in enumerate(args) if i < len(arguments) and arguments[i].name in written
                            for t in iter_tensors(v)]
            self.written += [t for k, v in kwargs.items() if k in written for t in iter_tensors(v)]
            self.before = {}
            for t in self.tensors:
                held = self.cache.kinds(t)
                if held:
                    self.before[id(t)] = {kind: kind_mask(t, kind).clone() for kind in held}

    def input_mask(self, t: torch.Tensor, kind: str) -> torch.Tensor | None:
        """Where input ``t`` held ``kind`` when the op started (None: nowhere)."""
        if self.before is not None:
            return self.before.get(id(t), {}).get(kind)
        key = (id(t), kind)
        if key not in self._masks:
            mask = kind_mask(t, kind) if kind in self._kinds(t) else None
            self._masks[key] = mask
        return self._masks[key]

    def _kinds(self, t: torch.Tensor) -> set[str]:
        return self.cache.kinds(t)

    def holders(self, kind: str) -> list[torch.Tensor]:
        """The input tensors that held ``kind`` somewhere when the op started."""
        return [t for t in self.tensors if self.input_mask(t, kind) is not None]

    def new_elements(self, outputs: list[torch.Tensor]) -> dict[str, int]:
        """How many elements of each kind the op created in ``outputs`` (the module docstring's rule)."""
        counts: dict[str, int] = {}
        if self.name in UNINITIALISED:
            return counts
        for out in outputs:
            for kind in KINDS:
                n = self._new_in(out, kind)
                if n:
                    counts[kind] = counts.get(kind, 0) + n
        return counts

    def _new_in(self, out: torch.Tensor, kind: str) -> int:
        mask = kind_mask(out, kind)
        if kind in self.numbers or not bool(mask.any()):
            return 0
        held = [m for t in self.tensors if (m := self.input_mask(t, kind)) is not None]
        if not held:
            return int(mask.sum())
        if not self.pointwise:
            return 0
        carried = torch.zeros_like(mask)
        for m in held:
            try:
                carried |= m.to(mask.device).broadcast_to(mask.shape)
            except RuntimeError:  # not broadcastable after all: count it as carried anywhere
                return 0
        return int((mask & ~carried).sum())

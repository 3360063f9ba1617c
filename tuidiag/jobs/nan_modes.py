"""The torch modes that let the NaN hunt's replay see every call: the torch functions the user wrote and every ATen op.

Both hand what they see to :class:`tuidiag.jobs.nan_trace.Tracer` (see that module's docstring).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from tuidiag.jobs.nonfinite_rule import OpCall

if TYPE_CHECKING:
    from tuidiag.jobs.nan_trace import Tracer


def op_name(func: Any) -> str:
    """A readable name for a torch function: ``__truediv__`` -> ``truediv``; in-place ``div_`` stays ``div_``."""
    name = str(getattr(func, "__name__", func))
    return name[2:-2] if name.startswith("__") and name.endswith("__") and len(name) > 4 else name


class OpWatch(TorchFunctionMode):
    """Sees every torch function call the user wrote during the replay (see :class:`Tracer`)."""

    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.tracer.calls.append(op_name(func))
        try:
            out = func(*args, **(kwargs or {}))
        finally:
            self.tracer.calls.pop()
        if not self.tracer.paused:
            self.tracer.on_call(out)
        return out


class FaultWatch(TorchDispatchMode):
    """Sees every ATen op during the replay and hands it to :meth:`Tracer.on_op`."""

    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.tracer.paused:
            return func(*args, **kwargs)
        call = OpCall(func, args, kwargs, self.tracer.kinds)
        if call.written:
            self.tracer.before_write(call.written)
        out = func(*args, **kwargs)
        self.tracer.on_op(call, out)
        return out

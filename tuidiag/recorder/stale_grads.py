"""Whether gradients are zeroed between optimizer steps, checked directly on sampled steps.

After every :data:`EVERY`-th ``optimizer.step()`` the probe puts a hook on each of the
optimizer's parameters. Autograd calls a parameter's hook with the new gradient
*before* adding it to ``param.grad``, so the hook sees what ``param.grad`` still held
when the next backward began: ``None`` or zeros when ``zero_grad()`` ran in between
(``set_to_none`` either way, on the optimizer or the model), the previous step's
gradient when it did not. The norm is taken on the device inside the hook; the next
``rec.step()`` stacks the norms into ``grad/stale_norm`` and removes the hooks.
Gradient accumulation on purpose (several backwards per optimizer step, zeroed after
each step) reads 0: only the first backward after an optimizer step is looked at.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidiag.format import GRAD_STALE_NORM
from tuidiag.recorder.probe_parts import ProbeParts

EVERY = 10
"""The check runs after every 10th optimizer step."""


class StaleGradProbe:
    """Measures the gradient left over from before the last optimizer step, on sampled steps."""

    def __init__(self, optimizer: Any, device: torch.device, paused: Callable[[], bool],
                 report: Callable[[str, BaseException], None]) -> None:
        seen: set[int] = set()
        self._params: list[torch.Tensor] = []
        for group in getattr(optimizer, "param_groups", []):
            for p in group.get("params", []):
                if isinstance(p, torch.Tensor) and p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    self._params.append(p)
        self._device, self._paused, self._report = device, paused, report
        self._steps = 0
        self._hooks: list[Any] = []
        self._fired: list[bool] = []
        self._norms: list[torch.Tensor] = []
        hookable = self._params and hasattr(optimizer, "register_step_post_hook")
        self._handle = optimizer.register_step_post_hook(self._after_optimizer_step) if hookable else None

    def parts(self) -> ProbeParts:
        """``grad/stale_norm`` once a backward ran after the armed optimizer step (the hooks then go)."""
        parts = ProbeParts()
        if not self._hooks or not any(self._fired):
            return parts
        try:
            norms = [n.to(self._device) for n in self._norms]
            total = torch.linalg.vector_norm(torch.stack(norms)) if norms else torch.zeros((), device=self._device)
            parts.dev_names.append(GRAD_STALE_NORM)
            parts.dev_values.append(total)
        finally:
            self._disarm()
        return parts

    def close(self) -> None:
        """Remove every hook."""
        self._disarm()
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _disarm(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks, self._fired, self._norms = [], [], []

    def _after_optimizer_step(self, *_: Any) -> None:
        if self._paused():
            return
        self._steps += 1
        if self._steps % EVERY or self._hooks:
            return
        try:
            self._fired = [False] * len(self._params)
            self._hooks = [p.register_hook(self._make_hook(i, p)) for i, p in enumerate(self._params)]
        except Exception as exc:
            self._disarm()
            self._report("stale_grad_probe", exc)

    def _make_hook(self, i: int, param: torch.Tensor) -> Callable[[torch.Tensor], None]:
        def hook(_new: torch.Tensor) -> None:
            if (self._fired[i] if i < len(self._fired) else True) or self._paused():
                return
            try:
                self._fired[i] = True
                held = param.grad
                if held is not None:
                    with torch.no_grad():
                        values = held._values() if held.is_sparse else held
                        self._norms.append(torch.linalg.vector_norm(values.detach()).float())
            except Exception as exc:  # never into the user's backward
                self._report("stale_grad_probe", exc)

        return hook

"""Run a function at the end of a backward pass, after DDP's all-reduce and before anything clips.

The Hugging Face ``Trainer`` clips gradients before any callback runs, so a
callback only sees clipped gradients. This module reaches the moment between:
every trainable parameter gets a post-accumulate-grad hook; the first one that
fires in a backward pass queues a callback on the autograd engine, which runs
once the whole backward pass is done. If the pass is to be recorded, that
callback queues a second one: DDP queues its own finaliser (which writes the all-reduced
gradients into ``.grad``) during the backward pass, and engine callbacks run in
the order they were queued, so the second callback runs after DDP's finaliser.

Limitation: with *reentrant* activation checkpointing (``use_reentrant=True``;
Transformers uses the non-reentrant kind), a pass whose first gradient lands on a
parameter inside a checkpointed segment would end early, at the end of that
segment's inner backward pass.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

QueueCallback = Callable[[Callable[[], None]], None]


def _engine_queue_callback() -> QueueCallback:
    """The autograd engine's ``queue_callback`` (what DDP and FSDP use to finish a backward pass)."""
    return torch.autograd.Variable._execution_engine.queue_callback  # type: ignore[attr-defined]


class BackwardEnd:
    """Calls ``fire()`` once at the end of each backward pass for which ``wanted()`` is true.

    Args:
        model: whose trainable parameters are hooked.
        wanted: asked once per backward pass, when it is done; false skips that pass.
        fire: called with all gradients of the pass accumulated (and all-reduced under DDP).
        report: receives any exception raised by ``wanted`` or ``fire`` (never raised into backward).
    """

    def __init__(self, model: torch.nn.Module, wanted: Callable[[], bool], fire: Callable[[], None],
                 report: Callable[[str, BaseException], None]) -> None:
        self._wanted, self._fire, self._report = wanted, fire, report
        self._queue = _engine_queue_callback()
        self._pending = False
        self._handles = [
            p.register_post_accumulate_grad_hook(self._on_grad) for p in model.parameters() if p.requires_grad
        ]

    def reset(self) -> None:
        """Forget a pass whose end never came (a backward pass that raised)."""
        self._pending = False

    def remove(self) -> None:
        """Remove every hook."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _on_grad(self, _param: Any) -> None:
        if self._pending:
            return
        try:
            self._pending = True
            self._queue(self._after_backward)
        except Exception as exc:
            self._pending = False
            self._report("backward_hook", exc)

    def _after_backward(self) -> None:
        try:
            if self._wanted():
                self._queue(self._run)  # after every callback queued during the pass (DDP's finaliser)
                return
        except Exception as exc:
            self._report("backward_end", exc)
        self._pending = False

    def _run(self) -> None:
        self._pending = False
        try:
            self._fire()
        except Exception as exc:
            self._report("backward_end", exc)

"""What ``Recorder.watch`` sets up: per-step gradient statistics, optimizer hooks, and the silent-bug probes.

Everything is computed on the parameters' device and gathered into one vector
per step, so a step costs a few kernel launches and one asynchronous copy, and
never a host-device synchronisation.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from tuidiag.format import GRAD_NORM_PREFIX, UPDATE_RATIO_PREFIX, WEIGHT_NORM_PREFIX
from tuidiag.recorder.activations import ActivationProbe
from tuidiag.recorder.device import norms
from tuidiag.recorder.loss_probe import LossProbe
from tuidiag.recorder.probe_parts import ProbeParts
from tuidiag.recorder.stale_grads import StaleGradProbe


class TorchWatch:
    """Gradient, weight and update statistics of one model and optimizer."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer | None,
        weights_every: int,
        activations_every: int,
        on_weights: Callable[[list[str], torch.Tensor], None],
        current_step: Callable[[], int],
        on_optimizer_step: Callable[[], None] | None = None,
        loss_fn: Any = None,
        report: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.named_params = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        self.device = self.named_params[0][1].device if self.named_params else torch.device("cpu")
        self.weights_every = weights_every
        self.probe = ActivationProbe(model) if activations_every > 0 else None
        self.activations_every = activations_every
        self._on_weights = on_weights
        self._current_step = current_step
        self._snapshot: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        self._handles: list[Any] = []
        self._use_hooks: list[Any] = []
        self.paused = False
        """While True (a job runs on the live model) the optimizer hooks record nothing."""
        if optimizer is not None and weights_every > 0:
            self._handles.append(optimizer.register_step_pre_hook(self._before_optimizer_step))
            self._handles.append(optimizer.register_step_post_hook(self._after_optimizer_step))
        if optimizer is not None and on_optimizer_step is not None:
            self._handles.append(optimizer.register_step_post_hook(lambda *_: None if self.paused else on_optimizer_step()))
        report = self._report = report or (lambda where, exc: None)
        self.loss_probe = LossProbe(loss_fn, lambda: self.paused, report) if loss_fn is not None else None
        self.loss_fn = self.loss_probe.loss_fn if self.loss_probe is not None else None
        """What the recorder calls the loss function by: the module itself, or a function wrapped so its inputs are checked."""
        self.stale_probe = StaleGradProbe(optimizer, self.device, lambda: self.paused, report) if optimizer is not None else None

    def grad_parts(self) -> tuple[list[str], list[torch.Tensor], list[str]]:
        """Metric names and 0-d device tensors of per-parameter gradient norms.

        Returns ``(names, norms, params_without_grad)``. The total norm is derived
        from these on the writer thread, which saves a kernel launch per step.
        """
        names, grads, missing = [], [], []
        for name, param in self.named_params:
            if param.grad is None:
                missing.append(name)
            else:
                names.append(GRAD_NORM_PREFIX + name)
                grads.append(param.grad)
        return names, norms(grads) if grads else [], missing

    def mark_backward_ends(self, mark: Callable[[], None]) -> None:
        """Call ``mark`` whenever a backward pass has added a gradient to a watched parameter (the newest call is where
        the pass ended). Installed once, when steps take several batches (gradient accumulation), so the data wait
        of each further batch is counted from the end of the previous one's backward (see :mod:`.step_timer`)."""
        if self._use_hooks or not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
            return
        self._use_hooks = [p.register_post_accumulate_grad_hook(lambda _: None if self.paused else mark())
                           for _, p in self.named_params]

    def arm_activations(self, next_step: int) -> None:
        """Install activation hooks when ``next_step`` is a sampled step (and arm the loss function's check on its own)."""
        if self.probe is not None and next_step % self.activations_every == 0:
            self.probe.arm()
        if self.loss_probe is not None:
            self.loss_probe.arm(next_step)

    def probe_parts(self) -> ProbeParts:
        """What the silent-bug probes saw since the last step: stale gradients, the loss function's inputs."""
        parts = ProbeParts()
        for probe in (self.stale_probe, self.loss_probe):
            if probe is not None:
                try:
                    parts.add(probe.parts())
                except Exception as exc:  # a probe's failure costs its own values, not the step's
                    self._report("probe_parts", exc)
        return parts

    def activation_parts(self) -> tuple[list[str], list[torch.Tensor]]:
        """Collect (and remove) the activation hooks' results, if any were armed."""
        if self.probe is None or not self.probe.armed:
            return [], []
        return self.probe.collect()

    def close(self) -> None:
        """Remove every hook this watch installed."""
        for handle in (*self._handles, *self._use_hooks):
            handle.remove()
        self._handles.clear()
        self._use_hooks.clear()
        if self.probe is not None:
            self.probe.collect()
        for bug_probe in (self.stale_probe, self.loss_probe):
            if bug_probe is not None:
                bug_probe.close()

    def _before_optimizer_step(self, *_: Any) -> None:
        """The optimizer's pre-step hook: the weights to compare after it. Runs inside the training's
        ``optimizer.step()``: what it raises is reported, never raised there."""
        try:
            self._snapshot = []
            if self.paused or self._current_step() % self.weights_every != 0:
                return
            with torch.no_grad():
                self._snapshot = [(n, p, p.detach().clone()) for n, p in self.named_params if p.grad is not None]
        except Exception as exc:  # a parameter whose .grad raises, a device error: this step's update ratios only
            self._snapshot = []
            self._report("weights", exc)

    def _after_optimizer_step(self, *_: Any) -> None:
        """The optimizer's post-step hook: weight norms and update ratios (what it raises is reported, never raised)."""
        try:
            self._update_ratios()
        except Exception as exc:
            self._report("weights", exc)
        finally:
            self._snapshot = []

    def _update_ratios(self) -> None:
        if self.paused or not self._snapshot:
            return
        with torch.no_grad():
            params = [p.detach() for _, p, _ in self._snapshot]
            deltas = [before.sub_(p) for p, (_, _, before) in zip(params, self._snapshot)]
            weights = torch.stack(norms(params))
            updates = torch.stack(norms(deltas))
            ratios = updates / weights.clamp_min(1e-12)
        names = [n for n, _, _ in self._snapshot]
        self._snapshot = []
        self._on_weights(
            [WEIGHT_NORM_PREFIX + n for n in names] + [UPDATE_RATIO_PREFIX + n for n in names],
            torch.cat([weights, ratios]),
        )

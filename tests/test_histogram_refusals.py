"""``histograms_every`` over odd parameters: each tensor is recorded true to itself or refused, counted and shown.

Hypothesis builds a real model from a real ``Linear`` and a few odd parameters (dtypes
float16 to complex64, shapes from 0-d to empty, non-finite fills, meta tensors, sparse or
non-finite gradients, one tensor larger than the quantile sample)
and trains it through the recorder. At every step: the step's own rows are all there; each
tensor that can be summarised has its summary rows, its non-finite count exact and its
median as numpy's; each one that cannot is refused, once per step, counted in
``rejected_values``, reported once by name as a ``rejected_value`` event and shown in the
run's losses (``tuidiag ls``/``status``/monitor/diagnose all print :meth:`RecorderLosses.text`).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
import tuidiag
from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX, EVENT_REJECTED, LOSS, SUMMARY_SUFFIXES
from tuidiag.store.recorder_losses import run_losses

STEPS = 3
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64)
SHAPES = ((), (1,), (0,), (5,), (2, 3), (0, 4), ((1 << 16) + 3,))
FILLS = ("normal", "nan", "inf", "mixed")
GRADS = ("none", "dense", "nonfinite", "sparse")


class RaisingGrad(torch.nn.Parameter):
    """A parameter whose ``.grad`` raises, as a broken tensor subclass might."""

    @property
    def grad(self) -> Any:  # type: ignore[override]
        raise RuntimeError("grad unavailable")


@dataclass(frozen=True)
class Odd:
    """One odd parameter: its dtype, shape, values, device and gradient."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    fill: str
    meta: bool
    grad: str

    def tensor(self, seed: int) -> torch.Tensor:
        """The parameter's values (``fill``: NaN, inf or both among normal ones)."""
        gen = torch.Generator().manual_seed(seed)
        values = torch.randn(self.shape, generator=gen, dtype=torch.float64)
        flat = values.reshape(-1)
        if flat.numel():
            if self.fill in ("nan", "mixed"):
                flat[::3] = math.nan
            if self.fill in ("inf", "mixed"):
                flat[1::4] = -math.inf
        values = values.to(self.dtype)
        return values.to("meta") if self.meta else values

    def refused(self) -> bool:
        """Whether the weights cannot be summarised."""
        return self.meta or self.dtype.is_complex or math.prod(self.shape) == 0

    def grad_refused(self) -> bool:
        """Whether the gradient cannot be read or summarised (one is set only beside weights that can be)."""
        return self.grad == "sparse" and self.shape != () and not self.refused()


odd = st.builds(Odd, st.sampled_from(DTYPES), st.sampled_from(SHAPES), st.sampled_from(FILLS), st.booleans(),
                st.sampled_from(GRADS))


def _model(odds: list[Odd]) -> torch.nn.Module:
    model = torch.nn.Module()
    model.lin = torch.nn.Linear(3, 1)  # first: the device of the watched model, and the step's own rows
    for i, o in enumerate(odds):
        model.register_parameter(f"odd{i}", torch.nn.Parameter(o.tensor(i)))
    return model


def _set_grads(model: torch.nn.Module, odds: list[Odd], step: int) -> dict[str, torch.Tensor]:
    """Give each odd parameter its gradient of this step; returns the dense ones set."""
    grads = {}
    for i, o in enumerate(odds):
        param = getattr(model, f"odd{i}")
        if o.grad == "none" or o.refused():
            continue
        if o.grad == "sparse":
            dense = torch.zeros(param.shape, dtype=param.dtype)
            param.grad = dense.to_sparse() if dense.dim() else None
            continue
        grad = torch.full(param.shape, float(step + 1), dtype=param.dtype)
        if o.grad == "nonfinite":
            grad.reshape(-1)[::2] = math.inf
        param.grad = grads[f"odd{i}"] = grad
    return grads


def _train(run_dir: Path, odds: list[Odd]) -> tuple[Any, dict[tuple[int, str], np.ndarray]]:
    torch.manual_seed(0)
    model = _model(odds)
    opt = torch.optim.SGD(model.lin.parameters(), 0.01)
    seen: dict[tuple[int, str], np.ndarray] = {}
    with tuidiag.Recorder(run_dir, histograms_every=1) as rec:
        rec.watch(model, opt)
        for s in range(STEPS):
            loss = model.lin(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            for name, grad in _set_grads(model, odds, s).items():
                seen[(s, DIST_GRAD_PREFIX + name)] = grad.double().numpy().ravel()
            for i, o in enumerate(odds):
                if not o.refused():
                    seen[(s, f"{DIST_WEIGHT_PREFIX}odd{i}")] = getattr(model, f"odd{i}").detach().double().numpy().ravel()
            assert rec.step(loss) == s
    return rec, seen


def _check_summary(run: Any, key: str, steps: list[int], seen: dict[tuple[int, str], np.ndarray]) -> None:
    """The summary rows of ``key``: at each step, its non-finite count exact, its median numpy's."""
    for suffix in SUMMARY_SUFFIXES:
        assert run.series(f"{key}/{suffix}").steps.tolist() == steps, (key, suffix)
    nonfinite, median = run.series(f"{key}/nonfinite"), run.series(f"{key}/q50")
    for s, count, q50 in zip(steps, nonfinite.values, median.values):
        values = seen[(s, key)]
        finite = values[np.isfinite(values)]
        assert count == len(values) - len(finite), key
        if len(values) <= (1 << 16) and len(finite):  # larger ones: the median of a sample
            assert q50 == pytest.approx(float(np.quantile(finite, 0.5)), rel=1e-2, abs=1e-3), key
        elif not len(finite):
            assert math.isnan(q50), key


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(odd, min_size=1, max_size=4))
def test_every_histogram_tensor_is_recorded_or_refused_and_counted(odds: list[Odd]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "r"
        rec, seen = _train(run_dir, odds)
        run = tuidiag.open_run(run_dir)
        steps = list(range(STEPS))
        assert run.series(LOSS).steps.tolist() == steps  # no refusal costs the step's own rows
        for name in ("lin.weight", "lin.bias"):
            for prefix in (DIST_WEIGHT_PREFIX, DIST_GRAD_PREFIX):
                assert run.series(f"{prefix}{name}/q50").steps.tolist() == steps
        events = run.events
        refused = set()
        for i, o in enumerate(odds):
            weights, grad = f"{DIST_WEIGHT_PREFIX}odd{i}", f"{DIST_GRAD_PREFIX}odd{i}"
            if o.refused():
                refused.add(weights)
            else:
                _check_summary(run, weights, steps, seen)
            if o.grad_refused():
                refused.add(grad)
            elif o.grad in ("dense", "nonfinite") and not o.refused():
                _check_summary(run, grad, steps, seen)
            for key in (weights, grad):
                assert key not in run.metric_names  # never a bare row: a summary or nothing
        errors = [e.message for e in events if e.kind == "recorder_error"]
        assert not any("histograms" in m for m in errors)
        if not any(o.meta for o in odds):  # a non-finite step's capture cannot copy a meta tensor: its own error
            assert rec.errors.count == 0
        assert rec.rejected_values == STEPS * len(refused)
        named = {e.data["key"] for e in events if e.kind == EVENT_REJECTED}
        assert named == refused
        messages = [e.message for e in events if e.kind == EVENT_REJECTED]
        assert all("histograms:" in m and "not recorded: it " in m for m in messages)
        shown = run_losses(run).text()
        assert (f"{STEPS * len(refused)} values rejected" in shown) == bool(refused)


def test_a_failure_while_summarising_is_a_recorder_error_that_costs_no_row(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Anything raised in the histogram path past the tensors' own refusals: a recorder error, shown, the step kept."""
    import tuidiag.recorder.distributions as distributions

    def broken(*_: Any) -> Any:
        raise MemoryError("injected")

    monkeypatch.setattr(distributions, "distribution_values", broken)  # a fault no real parameter provokes
    model = torch.nn.Linear(3, 1)
    with tuidiag.Recorder(tmp_path / "r", histograms_every=1) as rec:
        rec.watch(model, None)
        for _ in range(STEPS):
            rec.step(model(torch.randn(2, 3)).pow(2).mean())
    run = tuidiag.open_run(tmp_path / "r")
    assert run.series(LOSS).steps.tolist() == list(range(STEPS))
    assert rec.errors.count == STEPS
    assert any(e.kind == "recorder_error" and "histograms" in e.message for e in run.events)
    assert run_losses(run).text() == f"{STEPS} recorder errors"


def test_a_tensor_that_cannot_be_read_is_refused_alone() -> None:
    """A parameter whose ``.grad`` raises (a broken tensor subclass): its gradient refused with why, the rest summarised."""
    from tuidiag.recorder.distributions import distribution_values

    good, bad = torch.nn.Parameter(torch.randn(4)), RaisingGrad(torch.randn(3))
    good.grad = torch.ones(4)
    out = distribution_values([("good", good), ("bad", bad)], torch)
    assert out.rejected == [(f"{DIST_GRAD_PREFIX}bad", "could not be read (RuntimeError: grad unavailable)")]
    assert out.dev_names == [f"{key}/{suffix}" for key in (f"{DIST_WEIGHT_PREFIX}good", f"{DIST_GRAD_PREFIX}good",
                                                             f"{DIST_WEIGHT_PREFIX}bad") for suffix in SUMMARY_SUFFIXES]


def test_a_sparse_embedding_training_keeps_every_row(tmp_path: Path) -> None:
    """``nn.Embedding(sparse=True)``: its gradient's norm is recorded (its stored values' norm), its histogram refused."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 8, sparse=True), torch.nn.Flatten(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), 0.1)
    norms = []
    with tuidiag.Recorder(tmp_path / "r", histograms_every=2) as rec:
        rec.watch(model, opt)
        for _ in range(6):
            loss = model(torch.randint(0, 50, (4, 2))).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            norms.append(float(model[0].weight.grad.to_dense().norm()))
            opt.step()
            rec.step(loss)
    run = tuidiag.open_run(tmp_path / "r")
    assert run.series(LOSS).steps.tolist() == list(range(6)) and rec.errors.count == 0
    assert run.series("grad_norm/0.weight").values == pytest.approx(norms, rel=1e-5)
    assert rec.rejected_values == 3  # dist/grad/0.weight at steps 0, 2, 4
    assert run_losses(run).text() == "3 values rejected"  # the monitor's, ls's and diagnose's words
    from tuidiag.cli.status_cmd import status_line
    from tuidiag.store.manifest import read_manifest

    assert "3 values rejected" in status_line(tmp_path / "r", read_manifest(tmp_path / "r"), None)  # the status bar's


def test_the_watch_s_optimizer_hooks_never_raise_into_optimizer_step(tmp_path: Path) -> None:
    """The weight-norm hooks run inside the training's ``optimizer.step()``: a parameter whose ``.grad`` raises
    is a recorder error there, not the training's; every step's own rows are kept."""
    model = torch.nn.Module()
    model.lin = torch.nn.Linear(3, 1)
    model.broken = RaisingGrad(torch.randn(2))
    opt = torch.optim.SGD(model.lin.parameters(), 0.1)
    with tuidiag.Recorder(tmp_path / "r", grads_every=0, weights_every=1, histograms_every=1) as rec:
        rec.watch(model, opt)
        for s in range(STEPS):
            loss = model.lin(torch.randn(2, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()  # raised RuntimeError("grad unavailable") from the pre-step hook before
            assert rec.step(loss) == s
    run = tuidiag.open_run(tmp_path / "r")
    assert run.series(LOSS).steps.tolist() == list(range(STEPS))
    assert rec.errors.count == STEPS and rec.rejected_values == STEPS  # the hook's errors; the histogram's refusals
    assert run_losses(run).text() == f"{STEPS} values rejected, {STEPS} recorder errors"

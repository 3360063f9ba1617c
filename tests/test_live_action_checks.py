"""Live actions count only when the next recorded steps show them (issue 11, item 8).

Real tiny trainings in this process, real requests through ``RUN/control``: an LR change
that a scheduler not passed to ``rec.watch``, or the training code, puts back is reported
failed with the reason; one whose scheduler was passed holds; the recorded LRs after the
action are compared with the same training without it, which is the truth the action's
event must agree with. Clipping that never reaches ``optimizer.step()`` is failed too.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from torch import nn

import tuidiag
from tuidiag.format import EVENT_ACTION, GRAD_MAX_NORM
from tuidiag.store import control_channel as ctl
from tuidiag.store import open_run

torch.set_num_threads(1)
STEPS, AT = 9, 2
"""Steps of each training, and the step at whose end the action is applied (checked over AT+1..AT+3)."""
S = torch.optim.lr_scheduler
SCHEDULES: dict[str, Callable[[torch.optim.Optimizer], Any]] = {
    # every schedule moves the LR at each step; none jumps inside the checked steps
    "StepLR": lambda o: S.StepLR(o, step_size=6, gamma=0.5),
    "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=40, eta_min=1e-3),
    "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=100),
    "LambdaLR": lambda o: S.LambdaLR(o, lambda s: min(1.0, (s + 1) / 5) * 0.5 * (1 + math.cos(math.pi * s / 50))),
    "ExponentialLR": lambda o: S.ExponentialLR(o, gamma=0.9),
    "ReduceLROnPlateau": lambda o: S.ReduceLROnPlateau(o, factor=0.5, patience=4),
    "SequentialLR": lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.2, total_iters=4), S.CosineAnnealingLR(o, T_max=40)],
                                            milestones=[4]),
    "CosineAnnealingWarmRestarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=20),
}
CODE = {
    "": lambda group, step: None,
    "sets the LR": lambda group, step: group.__setitem__("lr", 0.1 * 0.95**step),
    "decays the LR": lambda group, step: group.__setitem__("lr", group["lr"] * 0.95),
}
"""What the training loop itself does to ``group["lr"]`` at the start of every step."""
FACTORS = (0.5, 3.0)


def _cases() -> list[Any]:
    cases = [pytest.param("", None, False, 0.5, id="no scheduler")]
    for i, name in enumerate(SCHEDULES):
        cases.append(pytest.param("", name, True, FACTORS[i % 2], id=f"{name} passed"))
        cases.append(pytest.param("", name, False, FACTORS[(i + 1) % 2], id=f"{name} not passed"))
    cases += [pytest.param("sets the LR", None, False, 3.0, id="code sets the LR"),
              pytest.param("decays the LR", None, False, 0.5, id="code decays the LR"),
              pytest.param("sets the LR", "ExponentialLR", True, 0.5, id="code sets the LR over a passed scheduler")]
    return cases


def _train(code: str, schedule: str | None, passed: bool, run_dir: Path | None = None,
           action: tuple[str, dict[str, Any]] | None = None, steps: int = STEPS) -> tuple[list[float], str | None]:
    """The LR each step trains with at ``rec.step`` time; recorded (with an action at step AT) when ``run_dir`` is given."""
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = SCHEDULES[schedule](optimizer) if schedule else None
    lrs, request_id = [], None
    rec = tuidiag.Recorder(run_dir, flush_interval=30.0, weights_every=0, activations_every=0) if run_dir else None
    try:
        if rec is not None:
            rec.watch(model, optimizer, scheduler=scheduler if passed else None)
        for step in range(steps):
            for group in optimizer.param_groups:
                CODE[code](group, step)
            if rec is not None and step == AT and action is not None:
                request_id = ctl.write_request(run_dir, *action)
                rec.flush()  # the writer thread picks requests up at a flush
            model(torch.ones(8, 4)).pow(2).mean().backward()
            lrs.append(float(optimizer.param_groups[0]["lr"]))
            if rec is not None:
                rec.step(1.0)
            optimizer.step()
            optimizer.zero_grad()
            if isinstance(scheduler, S.ReduceLROnPlateau):
                scheduler.step(1.0)  # a loss that never improves: the LR halves after `patience` steps
            elif scheduler is not None:
                scheduler.step()
    finally:
        if rec is not None:
            rec.close()
    return lrs, request_id


def _action_event(run_dir: Path) -> Any:
    events = [e for e in open_run(run_dir).events if e.kind == EVENT_ACTION]
    assert len(events) == 1, events
    return events[0]


@pytest.mark.parametrize(("code", "schedule", "passed", "factor"), _cases())
def test_lr_change_is_applied_only_when_the_recorded_lr_keeps_it(tmp_path: Path, code: str, schedule: str | None,
                                                                 passed: bool, factor: float) -> None:
    reference, _ = _train(code, schedule, passed)
    _, request_id = _train(code, schedule, passed, tmp_path / "r", ("scale_lr", {"factor": factor}))
    recorded = open_run(tmp_path / "r").series("lr/group0")
    assert list(recorded.steps) == list(range(STEPS))
    ratio = recorded.values / np.array(reference)
    assert ratio[: AT + 1] == pytest.approx(1.0)  # recorded before the action
    held = bool(np.allclose(ratio[AT + 1:], factor, rtol=0.02))
    undone = bool(np.allclose(ratio[-1], 1.0, rtol=0.02))
    assert held != undone, ratio  # the truth, from the same training without the action

    event, status = _action_event(tmp_path / "r"), ctl.read_status(tmp_path / "r", request_id)
    assert event.step == AT and f"group0 {reference[AT]:.3g} -> {reference[AT] * factor:.3g}" in event.message
    assert (event.data["status"], status["state"]) == (("applied", "done") if held else ("failed", "failed"))
    if held:
        assert "held through step" in status["message"] and "FAILED" not in event.message
    else:
        scheduler_left_out = schedule is not None and not passed
        reason = "undone by your LR scheduler: pass scheduler= to rec.watch" if scheduler_left_out else \
            "undone by your training code, which sets the LR each step"
        assert event.data["reason"].startswith(reason) and reason in status["message"] and event.severity == "error"


@pytest.mark.parametrize("passed", [True, False])
def test_a_schedule_jump_right_after_the_change_is_not_claimed_as_kept(tmp_path: Path, passed: bool) -> None:
    """A warm restart at the step after the change hides whether it held: not confirmed, unless the scheduler was passed."""
    SCHEDULES["restart"] = lambda o: S.CosineAnnealingWarmRestarts(o, T_0=AT + 1)
    try:
        reference, _ = _train("", "restart", passed)
        _, request_id = _train("", "restart", passed, tmp_path / "r", ("scale_lr", {"factor": 0.5}))
    finally:
        del SCHEDULES["restart"]
    ratio = open_run(tmp_path / "r").series("lr/group0").values / np.array(reference)
    event = _action_event(tmp_path / "r")
    if passed:
        assert event.data["status"] == "applied" and ratio[AT + 1:] == pytest.approx(0.5)
    else:
        assert ratio[-1] == pytest.approx(1.0)  # the restart put the old LR back
        assert event.data["status"] == "failed" and event.data["reason"].startswith("not confirmed")
        assert "pass scheduler= to rec.watch" in ctl.read_status(tmp_path / "r", request_id)["message"]


class _OwnScheduler:
    """A scheduler that is not a torch one: it sets the LR from its own peak each step."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer, self.peak, self.n = optimizer, 0.1, 0

    def step(self) -> None:
        self.n += 1
        for group in self.optimizer.param_groups:
            group["lr"] = self.peak * 0.97**self.n


class _PeakLR(S.LRScheduler):
    """A torch LRScheduler subclass that keeps its peak LR in an attribute tuidiag does not know."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.peak = 0.1
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [self.peak * 0.97**self.last_epoch for _ in self.optimizer.param_groups]


@pytest.mark.parametrize(("scheduler", "state", "said"), [
    (_OwnScheduler, "refused", "is not a torch.optim.lr_scheduler scheduler"),
    (_PeakLR, "undone", "undone by your LR scheduler (_PeakLR), which keeps its LR somewhere tuidiag does not scale"),
])
def test_a_scheduler_tuidiag_cannot_scale_is_never_reported_as_scaled(tmp_path: Path, scheduler: Any, state: str, said: str) -> None:
    SCHEDULES["own"] = scheduler
    try:
        reference, _ = _train("", "own", True)
        _, request_id = _train("", "own", True, tmp_path / "r", ("scale_lr", {"factor": 0.5}))
    finally:
        del SCHEDULES["own"]
    status = ctl.read_status(tmp_path / "r", request_id)
    assert status["state"] == "failed" and said in status["message"]
    assert open_run(tmp_path / "r").series("lr/group0").values[-1] == pytest.approx(reference[-1])
    events = [e for e in open_run(tmp_path / "r").events if e.kind == EVENT_ACTION]
    assert (events == []) if state == "refused" else (events[0].data["status"] == "failed")


def _train_clip(run_dir: Path, order: str, set_to_none: bool, max_norm: float, own: float | None = None) -> tuple[str, list[float]]:
    """A training whose ``rec.step`` comes before or after ``optimizer.step``; returns the request and the
    norms of the gradients ``optimizer.step()`` used."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    used: list[float] = []
    optimizer.register_step_pre_hook(lambda *_: used.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm())))
    with tuidiag.Recorder(run_dir, flush_interval=30.0, weights_every=0, activations_every=0) as rec:
        rec.watch(model, optimizer, max_grad_norm=own)
        for step in range(STEPS):
            if step == AT:
                request_id = ctl.write_request(run_dir, "clip_grad", {"max_norm": max_norm})
                rec.flush()
            optimizer.zero_grad(set_to_none=set_to_none)
            model(torch.randn(16, 8) * 10).pow(2).mean().backward()
            if order == "before":
                rec.step(1.0)
            if own is not None:
                nn.utils.clip_grad_norm_(model.parameters(), own)
            optimizer.step()
            if order == "after":
                rec.step(1.0)
    return request_id, used


@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("order", ["before", "after"])
def test_clipping_counts_only_when_optimizer_step_uses_the_clipped_gradients(tmp_path: Path, order: str, set_to_none: bool) -> None:
    request_id, used = _train_clip(tmp_path / "r", order, set_to_none, 0.5)
    reached = all(n <= 0.5 + 1e-4 for n in used[AT + 1:])  # the truth: what optimizer.step() got
    assert reached == (order == "before")
    status, event = ctl.read_status(tmp_path / "r", request_id), _action_event(tmp_path / "r")
    assert (status["state"], event.data["status"]) == (("done", "applied") if reached else ("failed", "failed"))
    if not reached:
        assert "call rec.step(loss) after backward() and before optimizer.step()" in event.data["reason"]
    assert list(open_run(tmp_path / "r").series(GRAD_MAX_NORM).values) == [0.5] * (STEPS - AT - 1)


@pytest.mark.parametrize(("own", "max_norm", "said"), [
    (1.0, 5.0, "no effect: the training already clips at 1"),
    (None, 0.0, "tuidiag is not clipping the gradients: nothing to turn off"),
])
def test_clipping_that_would_change_nothing_is_refused(tmp_path: Path, own: float | None, max_norm: float, said: str) -> None:
    request_id, _ = _train_clip(tmp_path / "r", "before", True, max_norm, own)
    status = ctl.read_status(tmp_path / "r", request_id)
    assert status["state"] == "failed" and said in status["message"]
    assert not [e for e in open_run(tmp_path / "r").events if e.kind == EVENT_ACTION]
    max_norms = open_run(tmp_path / "r").series(GRAD_MAX_NORM).values
    assert list(max_norms) == ([own] * STEPS if own else [])


@pytest.mark.parametrize("action", [("scale_lr", {"factor": 0.5}), ("clip_grad", {"max_norm": 1.0})])
def test_changes_are_refused_in_a_distributed_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       action: tuple[str, dict[str, Any]]) -> None:
    """Actions reach rank 0 only: changing its LR or clipping alone would make its replica drift."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    reference, _ = _train("", "ExponentialLR", True)
    _, request_id = _train("", "ExponentialLR", True, tmp_path / "r", action)
    status = ctl.read_status(tmp_path / "r", request_id)
    assert status["state"] == "failed" and "2 ranks" in status["message"]
    assert list(open_run(tmp_path / "r").series("lr/group0").values) == pytest.approx(reference)


def test_cli_act_reports_an_lr_change_the_scheduler_undid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tuidiag.cli.main import main

    run_dir, stop = tmp_path / "live", threading.Event()

    def train() -> None:
        model = nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = S.LambdaLR(optimizer, lambda s: 1.0 / (1 + 0.01 * s))
        with tuidiag.Recorder(run_dir, flush_interval=0.1, weights_every=0, activations_every=0) as rec:
            rec.watch(model, optimizer)  # the scheduler is not passed
            while not stop.is_set():
                model(torch.ones(8, 4)).pow(2).mean().backward()
                rec.step(1.0)
                optimizer.step()
                optimizer.zero_grad()
                scheduler.step()
                time.sleep(0.005)

    thread = threading.Thread(target=train)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and '"control"' not in ((run_dir / "run.json").read_text() if (run_dir / "run.json").exists() else ""):
            time.sleep(0.05)
        code = main(["act", str(run_dir), "--scale-lr", "0.5"])
    finally:
        stop.set()
        thread.join(60)
    err = capsys.readouterr().err
    assert code == 2 and "undone by your LR scheduler: pass scheduler= to rec.watch" in err


async def test_the_monitor_marks_and_lists_a_failed_action(tmp_path: Path) -> None:
    from textual.widgets import Static

    from tests.app_helpers import wait_for
    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.live_action import LiveActionScreen
    from tuidiag.app.screens.run_screen import RunScreen
    from tuidiag.app.widgets.chart import MetricChart
    from tuidiag.app.widgets.events_panel import EventsPanel
    from tuidiag.viewmodel.actions import Proposal, past_actions

    _train("", "LambdaLR", False, tmp_path / "r", ("scale_lr", {"factor": 0.5}))
    app = TuidiagApp(tmp_path / "r")
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None, timeout=60)
        chart = app.screen.detail.charts["lr"]
        assert (chart.failed_actions, chart.actions) == ((AT,), ())
        await pilot.press("3")
        await pilot.pause(0.2)
        assert "failed action at red x" in str(app.screen.query_one("#chart-lr", MetricChart).render())
        await pilot.press("6")
        panel = app.screen.query_one("#events", EventsPanel)
        row = next(panel.get_row_at(i) for i in range(panel.row_count) if str(panel.get_row_at(i)[1]) == EVENT_ACTION)
        assert "FAILED: undone by your LR scheduler: pass scheduler= to rec.watch" in str(row[2])
        past = tuple(past_actions(open_run(tmp_path / "r").events))
        app.push_screen(LiveActionScreen("r", "the training", [Proposal("save a checkpoint now", "checkpoint")], past))
        await pilot.pause(0.2)
        text = str(app.screen.query_one(Static).render())
        assert "FAILED" in text and "pass scheduler= to rec.watch" in text


def test_demo_live_passes_its_scheduler_so_an_lr_change_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: ``tuidiag demo --live`` did not pass its LambdaLR, which put the old LR back after every change."""
    import ctypes

    from tuidiag.cli.main import main

    run_dir = tmp_path / "live-healthy"
    demo = threading.Thread(target=main, args=(["demo", str(tmp_path), "--live", "--pace", "0.005"],))
    demo.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and '"control"' not in ((run_dir / "run.json").read_text() if (run_dir / "run.json").exists() else ""):
            time.sleep(0.05)
        code = main(["act", str(run_dir), "--scale-lr", "0.5"])
    finally:  # Ctrl-C, as a user stops it: the demo catches KeyboardInterrupt and closes the run
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(demo.ident), ctypes.py_object(KeyboardInterrupt))
        demo.join(60)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "LambdaLR scaled too" in out.out and "held through step" in out.out
    event = _action_event(run_dir)
    lr = open_run(run_dir).series("lr/group0")
    before = lr.values[lr.steps == event.step][0]
    after = lr.values[(lr.steps > event.step) & (lr.steps <= event.step + 3)]
    assert len(after) == 3 and after / before == pytest.approx(0.5, rel=1e-3)  # its cosine over 10000 steps moves < 0.1%


def test_lightning_callback_passes_the_scheduler(tmp_path: Path) -> None:
    pl = pytest.importorskip("lightning.pytorch")
    from tests.lightning_helpers import TinyRegressor, loaders
    from tuidiag.integrations.lightning import TuidiagCallback

    run_dir, callback, sent = tmp_path / "run", TuidiagCallback(tmp_path / "run", flush_interval=30.0), []

    class Act(pl.Callback):
        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            if trainer.global_step == AT and not sent:
                sent.append(ctl.write_request(run_dir, "scale_lr", {"factor": 0.5}))
                callback.recorder.flush()

    class Regressor(TinyRegressor):
        def configure_optimizers(self) -> dict:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.01)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": S.LambdaLR(optimizer, lambda s: 1 / (1 + s)), "interval": "step"}}

    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(callbacks=[callback, Act()], accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, max_steps=AT + 5)
    trainer.fit(Regressor(), *loaders())
    status = ctl.read_status(run_dir, sent[0])
    assert status["state"] == "done" and "LambdaLR scaled too" in status["message"]
    lr = open_run(run_dir).series("lr/group0")
    assert list(lr.values) == pytest.approx([0.01 / (1 + s) * (0.5 if s > AT else 1) for s in lr.steps])


def test_transformers_callback_passes_the_scheduler(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    from tests.transformers_helpers import SEQ, VOCAB, TokenDataset
    from tuidiag.integrations.transformers import TuidiagCallback

    run_dir, callback, sent = tmp_path / "run", TuidiagCallback(tmp_path / "run", flush_interval=30.0), []

    class Act(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step == AT + 2 and not sent:  # after the warmup
                sent.append(ctl.write_request(run_dir, "scale_lr", {"factor": 0.5}))
                callback.recorder.flush()

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], max_steps=STEPS, learning_rate=5e-3,
                             per_device_train_batch_size=4, save_strategy="no", disable_tqdm=True, lr_scheduler_type="linear",
                             warmup_steps=2, seed=0)
    Trainer(model=model, args=args, train_dataset=TokenDataset(64, 1), callbacks=[callback, Act()]).train()
    status = ctl.read_status(run_dir, sent[0])
    assert status["state"] == "done" and "LambdaLR scaled too" in status["message"]
    lr = open_run(run_dir).series("lr/group0")
    decay = [5e-3 * (STEPS - s) / (STEPS - 2) for s in lr.steps]  # linear from the end of the warmup to 0
    assert list(lr.values[lr.steps > AT + 2]) == pytest.approx([d * 0.5 for d, s in zip(decay, lr.steps) if s > AT + 2])

"""The recorder on real CPU trainings: what it records, non-finite capture, errors contained."""

from __future__ import annotations

import subprocess
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tuidiag
from tests.helpers import train
from tuidiag.recorder.writer import Layout, MetricBatch, ShardWriter


def test_records_loss_lr_grads_weights_activations_inputs_and_timing(run_dir) -> None:
    train(run_dir, steps=60, weights_every=10, activations_every=50)
    run = tuidiag.open_run(run_dir)
    assert len(run.series("train/loss")) == 60
    assert np.allclose(run.series("lr/group0").values, 0.01)
    for param in ("0.weight", "0.bias", "2.weight", "2.bias"):
        assert len(run.series(f"grad_norm/{param}")) == 60
        assert run.series(f"weight_norm/{param}").steps.tolist() == [0, 10, 20, 30, 40, 50]
    per_param = np.stack([run.series(f"grad_norm/{p}").values for p in ("0.weight", "0.bias", "2.weight", "2.bias")])
    assert np.allclose(np.sqrt((per_param**2).sum(0)), run.series("grad_norm/total").values, rtol=1e-5)
    assert run.series("act/dead_frac/1").steps.tolist() == [0, 50]
    assert run.series("act/saturated_frac/3").steps.tolist() == [0, 50]
    assert len(run.series("input/mean")) == 60 and run.series("input/nonfinite").values.max() == 0
    assert len(run.series("time/data_wait")) == 59 and (run.series("time/step").values > 0).all()
    assert run.series("model/training").values.min() == 1.0
    assert run.series("val/acc").values.tolist() == [0.5] * 6


def test_clipped_flag_follows_the_pre_clip_norm(run_dir) -> None:
    train(run_dir, steps=40)
    run = tuidiag.open_run(run_dir)
    total = run.series("grad_norm/total").values
    assert run.series("grad/clipped").values.tolist() == (total > 0.5).astype(float).tolist()


def test_update_ratio_matches_sgd_update(run_dir) -> None:
    train(run_dir, steps=11, lr=0.05, weights_every=10)
    run = tuidiag.open_run(run_dir)
    grad = run.series("grad_norm/0.weight").values[[0, 10]]
    weight = run.series("weight_norm/0.weight").values
    ratio = run.series("update_ratio/0.weight").values
    assert np.allclose(ratio, 0.05 * grad / weight, rtol=1e-4)


def test_first_nonfinite_step_gives_one_event_and_a_pre_step_capture(run_dir) -> None:
    model = train(run_dir, steps=20, poison_at=12)
    run = tuidiag.open_run(run_dir)
    nonfinite = [e for e in run.events if e.kind == "nonfinite"]
    assert len(nonfinite) == 1 and nonfinite[0].step == 12
    assert set(nonfinite[0].data["params"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    captures = [e for e in run.events if e.kind == "nan_capture"]
    assert captures[0].step == 12 and captures[0].data["pre_step"] is True
    payload = torch.load(run_dir / captures[0].data["path"], weights_only=True)
    assert payload["step"] == 12 and payload["state_is_pre_step"]
    assert torch.isnan(payload["batch"][0]).any()
    assert all(torch.isfinite(t).all() for t in payload["model_state"].values())  # before the NaN update
    assert not all(torch.isfinite(p).all() for p in model.parameters())  # the live model did get NaN


def test_capture_can_be_switched_off(run_dir) -> None:
    train(run_dir, steps=15, poison_at=5, capture_nonfinite=False)
    assert not (run_dir / "captures").exists()
    assert [e.kind for e in tuidiag.open_run(run_dir).events].count("nonfinite") == 1


def test_parameters_without_gradient_are_reported(run_dir) -> None:
    model = nn.ModuleDict({"used": nn.Linear(4, 1), "unused": nn.Linear(4, 1)})
    optimizer = torch.optim.SGD(model.parameters(), 0.1)
    with tuidiag.Recorder(run_dir) as rec:
        rec.watch(model, optimizer)
        for _ in range(3):
            loss = model["used"](torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            rec.step(loss)
            optimizer.step()
            optimizer.zero_grad()
    run = tuidiag.open_run(run_dir)
    events = [e for e in run.events if e.kind == "no_grad"]
    assert len(events) == 1 and events[0].data["params"] == ["unused.weight", "unused.bias"]
    assert run.series("grad/none_count").values.tolist() == [2.0, 2.0, 2.0]


def test_errors_inside_the_recorder_never_reach_training(run_dir, capfd) -> None:
    class Broken(torch.nn.Module):
        def named_parameters(self, *args, **kwargs):  # type: ignore[override]
            raise RuntimeError("broken module")

    with tuidiag.Recorder(run_dir) as rec:
        rec.watch(object())  # not a model: rejected
        rec.watch(Broken())  # a model the recorder cannot read: its own error
        for step in range(3):
            rec.step("not a number")
            rec.log({"ok": 1.0, "bad": object()})
    err = capfd.readouterr().err
    assert err.count("recorder error in watch") == 1 and err.count("'model' not recorded") == 1
    assert err.count("'train/loss' not recorded") == 1 and err.count("'bad' not recorded") == 1  # reported once, counted thrice
    run = tuidiag.open_run(run_dir)
    assert run.manifest["stats"]["errors"] == 1 and run.manifest["stats"]["rejected_values"] == 7
    assert {e.data["where"] for e in run.events if e.kind == "recorder_error"} == {"watch"}
    assert {e.data["key"] for e in run.events if e.kind == "rejected_value"} == {"model", "train/loss", "bad"}
    assert run.series("ok").values.tolist() == [1.0, 1.0, 1.0]


def test_full_queue_drops_and_counts_without_blocking(run_dir) -> None:
    release = threading.Event()

    class SlowValue:
        def resolve(self) -> np.ndarray:
            release.wait(10)
            return np.array([1.0])

    writer = ShardWriter(run_dir, rank=0, flush_interval=3600, max_queue=2)
    layout = Layout(["x"])
    accepted = [writer.submit(MetricBatch(i, 0.0, layout, SlowValue() if i == 0 else np.array([1.0]))) for i in range(50)]
    assert accepted.count(False) >= 45 and writer.dropped_rows == accepted.count(False)
    release.set()
    writer.close()
    run = tuidiag.open_run(run_dir)
    assert run.series("recorder/dropped_rows").last == writer.dropped_rows
    assert any(e.kind == "dropped_rows" for e in run.events)


def test_close_is_idempotent_and_an_exception_marks_the_run_failed(run_dir) -> None:
    with pytest.raises(RuntimeError):
        with tuidiag.Recorder(run_dir) as rec:
            rec.log({"a": 1})
            raise RuntimeError("boom")
    rec.close()
    rec.close()
    assert tuidiag.open_run(run_dir).status == "failed"


def test_logging_names_are_stored_verbatim(run_dir) -> None:
    odd = "[bold red]x[/] \x1b[31m spaces/ünïcode 名前"
    with tuidiag.Recorder(run_dir) as rec:
        rec.log({odd: 2.0, "val/acc": torch.tensor(0.25)}, step=7)
    run = tuidiag.open_run(run_dir)
    assert run.series(odd).steps.tolist() == [7]
    assert run.series("val/acc").values.tolist() == [0.25]


def test_recorder_without_torch_logs_plain_scalars(run_dir, python) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # import torch now raises ImportError
        import tuidiag
        with tuidiag.Recorder({str(run_dir)!r}, config={{"lr": 0.1}}) as rec:
            for step in range(5):
                rec.step(1.0 / (step + 1))
                rec.log({{"val/loss": 0.5}})
        assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
        """
    )
    subprocess.run([python, "-c", script], check=True)
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished"
    assert run.series("train/loss").values.tolist() == [1.0, 0.5, 1 / 3, 0.25, 0.2]


def test_a_nonfinite_float_loss_is_captured_too(run_dir) -> None:
    with tuidiag.Recorder(run_dir) as rec:
        for step in range(4):
            rec.batch(torch.ones(2))
            rec.step(float("nan") if step == 2 else 1.0)
    captures = [e for e in tuidiag.open_run(run_dir).events if e.kind == "nan_capture"]
    assert [e.step for e in captures] == [2]
    assert torch.load(run_dir / captures[0].data["path"], weights_only=True)["batch"][0].tolist() == [1.0, 1.0]


def test_a_resumed_run_continues_its_step_count(run_dir) -> None:
    for _ in range(2):
        with tuidiag.Recorder(run_dir, resume="allow") as rec:
            for _ in range(3):
                rec.step(1.0)
    run = tuidiag.open_run(run_dir)
    assert run.series("train/loss").steps.tolist() == [0, 1, 2, 3, 4, 5]
    assert run.manifest["resumed"] == 1


def test_close_compacts_each_table_into_one_shard(run_dir) -> None:
    with tuidiag.Recorder(run_dir, flush_interval=3600) as rec:
        for step in range(10):
            rec.step(1.0)
            if step % 3 == 0:
                rec.event("note", f"step {step}")
            rec.flush()
    assert len(list((run_dir / "metrics").glob("*.parquet"))) == 1
    assert len(list((run_dir / "events").glob("*.parquet"))) == 1
    assert [e.message for e in tuidiag.open_run(run_dir).events] == ["step 0", "step 3", "step 6", "step 9"]


def test_activation_hooks_skip_validation_passes_when_batch_is_used(run_dir) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    optimizer = torch.optim.SGD(model.parameters(), 0.1)
    with tuidiag.Recorder(run_dir, activations_every=2) as rec:
        rec.watch(model, optimizer)
        for _ in range(4):
            x = torch.randn(8, 4)
            rec.batch(x)
            loss = model(x).sum()
            loss.backward()
            rec.step(loss)
            optimizer.step()
            optimizer.zero_grad()
            with torch.no_grad():
                model(torch.randn(8, 4))  # a validation pass between steps
    run = tuidiag.open_run(run_dir)
    assert run.series("act/dead_frac/1").steps.tolist() == [0, 2]
    assert not any(name.endswith("#2") for name in run.metric_names)


GRADS = {"nan": float("nan"), "inf": float("inf"), "-inf": -float("inf"), "huge": None, "mixed": None}
"""What the weight's gradient holds at the bad step: ``huge``: finite elements at half the dtype's largest value,
whose norm overflows (in the dtype, or as float32 on the way to the host); ``mixed``: a NaN weight, an inf bias."""


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("kind", list(GRADS))
def test_the_nonfinite_event_says_only_what_the_norms_show(tmp_path, kind, dtype) -> None:
    """NaN norms mean NaN elements; an inf norm is an inf element or an overflow of finite ones: the event never
    calls finite gradients non-finite, and names every parameter whose gradient has a non-finite element."""
    model = torch.nn.Linear(8, 1).to(dtype)
    opt = torch.optim.SGD(model.parameters(), 0.0)
    with tuidiag.Recorder(tmp_path / "r", capture_nonfinite=False) as rec:
        rec.watch(model, opt)
        for step in range(2):
            for p in model.parameters():
                p.grad = torch.full_like(p, 0.5)
            if step == 1:
                huge = torch.finfo(dtype).max / 2
                model.weight.grad.fill_(huge if kind == "huge" else float("nan") if kind == "mixed" else GRADS[kind])
                if kind == "mixed":
                    model.bias.grad.fill_(float("inf"))
                grads = {n: p.grad.clone() for n, p in model.named_parameters()}
            rec.step(1.0)
    (event,) = [e for e in tuidiag.open_run(tmp_path / "r").events if e.kind == "nonfinite"]
    has_nan = {n for n, g in grads.items() if torch.isnan(g).any()}
    not_finite = {n for n, g in grads.items() if not torch.isfinite(g).all()}
    assert event.step == 1 and not_finite <= set(event.data["params"])
    assert "non-finite gradients" not in event.message
    named_nan = event.message.split("NaN gradients in ")[1].split(";")[0].split(", ") if "NaN gradients in" in event.message else []
    assert set(named_nan) == has_nan  # a NaN element is named as one, and only then
    if kind == "huge":  # finite elements: nothing may call them NaN or inf
        assert "NaN" not in event.message and "its elements may be finite" in event.message
    assert "gradient norm inf in" in event.message or kind in ("nan",)


def test_the_lr_too_high_demo_event_is_what_the_recorder_writes_now() -> None:
    """The shipped demo's event was written before the recorder said only what the norms show: it holds the text the
    recorder makes from its own recorded loss and gradient norms at that step."""
    from tuidiag.recorder.layouts import nonfinite_message

    run = tuidiag.open_run(Path(__file__).resolve().parent.parent / "demo_runs" / "lr-too-high")
    (event,) = [e for e in run.events if e.kind == "nonfinite"]
    norms = []
    for name in run.metric_names:
        if name.startswith("grad_norm/") and name != "grad_norm/total":
            series = run.series(name)
            norms.append((name[len("grad_norm/"):], float(series.values[series.steps == event.step][0])))
    order = event.data["params"]  # in the recorder's order of the model's parameters
    norms.sort(key=lambda norm: order.index(norm[0]) if norm[0] in order else len(order))
    assert event.message == nonfinite_message(event.step, float(event.data["loss"]), norms)

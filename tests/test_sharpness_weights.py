"""Sharpness says which weights it measured, and ``--checkpoint PATH`` measures a checkpoint's.

The regression: ``tuidiag sharpness`` measured the factory's initial weights and printed
"base loss 1.41, FLAT" without saying so. Now the result's ``weights`` names the factory's
model, a checkpoint (its base loss is the loss of exactly those weights, recomputed here),
or the live training's weights at the step the job ran. Every checkpoint layout the
option accepts is tried, and every way a checkpoint can be unusable is refused before
the factory's code runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import tuidiag
from helpers import recorded_step
from tuidiag.cli.main import main
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import list_results, read_result
from tuidiag.text.jobs import render_sharpness

FACTORY = (
    "import pathlib, torch\nfrom torch import nn\n"
    "MARKER = pathlib.Path({marker!r})\n"
    "def build():\n"
    "    MARKER.write_text('built')\n"
    "    torch.manual_seed(0)\n"
    "    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))\n"
    "    gen = torch.Generator().manual_seed(1)\n"
    "    data = [(torch.randn(16, 4, generator=gen), torch.randint(0, 3, (16,), generator=gen)) for _ in range(3)]\n"
    "    return {{'model': model, 'optimizer': torch.optim.SGD(model.parameters(), lr=0.1),\n"
    "             'loss_fn': nn.CrossEntropyLoss(), 'batches': data}}\n"
)
SETTINGS = ["--yes", "--json", "--device", "cpu", "--samples", "2", "--batches", "2"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A run whose factory (a module of this test only) leaves a marker when it is called."""
    name = "sw_" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    marker = tmp_path / "factory-ran"
    (tmp_path / f"{name}.py").write_text(FACTORY.format(marker=str(marker)))
    monkeypatch.chdir(tmp_path)
    with tuidiag.Recorder(tmp_path / "run", factory=f"{name}:build") as rec:
        rec.step(1.0)
    monkeypatch.syspath_prepend(str(tmp_path))
    built = __import__(name).build()
    marker.unlink()
    yield {"run": tmp_path / "run", "spec": f"{name}:build", "marker": marker, "parts": built}
    sys.modules.pop(name, None)


def _trained(parts: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Weights a few SGD steps away from the factory's: what a checkpoint of the training holds."""
    model = parts["model"]
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for x, y in parts["batches"] * 20:
        opt.zero_grad()
        parts["loss_fn"](model(x), y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@torch.no_grad()
def _loss_of(state: dict[str, torch.Tensor], parts: dict[str, Any]) -> float:
    model = parts["model"]
    model.load_state_dict(state)
    model.eval()
    return sum(float(parts["loss_fn"](model(x), y)) for x, y in parts["batches"][:2]) / 2


def test_without_a_checkpoint_it_says_it_measured_the_factory_model(project: dict[str, Any],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sharpness", str(project["run"]), *SETTINGS]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weights"]["kind"] == "factory" and project["spec"] in result["weights"]["text"]
    text = render_sharpness(result)
    assert f"weights: the factory's model as {project['spec']} built it" in text and "--checkpoint PATH" in text
    assert result["base_loss"] == pytest.approx(_loss_of(project["parts"]["model"].state_dict(), project["parts"]))


LAYOUTS = {
    "state_dict": lambda sd: sd,
    "model-key": lambda sd: {"model": sd, "optimizer": {"state": {}, "param_groups": []}, "epoch": 3},
    "model_state_dict-key": lambda sd: {"model_state_dict": sd, "step": 120},
    "state_dict-key": lambda sd: {"state_dict": sd},
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_checkpoint_is_what_it_measures(project: dict[str, Any], tmp_path: Path, layout: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    initial = _loss_of({k: v.clone() for k, v in project["parts"]["model"].state_dict().items()}, project["parts"])
    state = _trained(project["parts"])
    assert _loss_of(state, project["parts"]) < initial - 0.1  # the two weights tell apart
    path = tmp_path / "ckpt.pt"
    torch.save(LAYOUTS[layout](state), path)
    assert main(["sharpness", str(project["run"]), *SETTINGS, "--checkpoint", "ckpt.pt"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weights"] == {"kind": "checkpoint", "text": f"checkpoint {path}"}
    assert result["base_loss"] == pytest.approx(_loss_of(state, project["parts"]), rel=1e-6)
    assert f"weights: checkpoint {path}" in render_sharpness(result)
    assert read_result(list_results(project["run"], "sharpness")[0])["result"]["weights"]["kind"] == "checkpoint"


class Planted:
    """Unpickling it would run code: ``weights_only`` must refuse it."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, ("open('planted', 'w').write('ran')",))


BAD = {
    "not-a-torch-file": (lambda path, sd: path.write_bytes(b"not a checkpoint"), "cannot load checkpoint"),
    "no-state-dict-inside": (lambda path, sd: torch.save({"epoch": 3, "lr": 0.1}, path), "expected a model state_dict"),
    "a-list": (lambda path, sd: torch.save([1, 2], path), "holds a list"),
    "another-model": (lambda path, sd: torch.save(nn.Linear(2, 2).state_dict(), path), None),
    "code-inside": (lambda path, sd: torch.save({"model": Planted()}, path), "cannot load checkpoint"),
    "missing-file": (lambda path, sd: None, "cannot load checkpoint"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_an_unusable_checkpoint_is_refused(project: dict[str, Any], tmp_path: Path, case: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    make, message = BAD[case]
    path = tmp_path / "bad.pt"
    make(path, project["parts"]["model"].state_dict())
    assert main(["sharpness", str(project["run"]), *SETTINGS, "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert (message or "does not fit the factory's model") in err, err
    assert not (tmp_path / "planted").exists()
    assert project["marker"].exists() == (message is None)  # a file that cannot load stops before the factory runs
    assert not list_results(project["run"], "sharpness")


def test_a_live_sharpness_names_the_step_it_measured(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    run = tmp_path / "run"
    with tuidiag.Recorder(run, flush_interval=30.0) as rec:
        rec.watch(model, optimizer, loss_fn=loss_fn)
        for step in range(8):
            if step == 5:
                request_id = ctl.write_request(run, "sharpness", {"samples": 2, "batches": 2})
                rec.flush()
            x, y = torch.randn(8, 4, generator=gen), torch.randint(0, 2, (8,), generator=gen)
            recorded_step(rec, model, optimizer, loss_fn, x, y)
    status = ctl.read_status(run, request_id)
    assert status["state"] == "done", status
    saved = read_result(run / status["result"])
    assert saved["step"] == 5
    assert saved["result"]["weights"] == {"kind": "live", "text": "the live training's weights at step 5 (before its optimizer step)"}
    assert "weights: the live training's weights at step 5" in render_sharpness(saved["result"])


def test_a_result_saved_before_weights_were_said_still_renders() -> None:
    old = {"verdict": "flat", "ratio": 0.01, "base_loss": 1.4, "mean_perturbed_loss": 1.41, "max_perturbed_loss": 1.42,
           "batches_used": 4, "config": {"threshold": 0.1, "samples": 10, "epsilon": 0.05}}
    assert "weights" not in render_sharpness(old) and "FLAT" in render_sharpness(old)

"""The demo runs name a factory that ships with tuidiag, so every job runs on them straight after install.

Each checked-in demo run names its scenario's ``tuidiag.demo.factory`` function; the
factory rebuilds the model the run recorded (same parameters, the capture loads into
it), and every job command (lr-find, nan-hunt, overfit-batch, sharpness) runs on every
demo run from an unrelated working directory, with tiny settings. The regression:
every demo run had ``"factory": null``, so ``n`` on lr-too-high said "names no factory".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.app_helpers import DEMO_RUNS, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.cli.main import main
from tuidiag.demo import factory as demo_factory
from tuidiag.demo.scenarios import SCENARIOS, by_name
from tuidiag.jobs.factory import load_factory
from tuidiag.jobs.nan_hunt import find_capture, load_capture
from tuidiag.store import open_run
from tuidiag.store.job_results import list_results, read_result

DEMOS = sorted(p.parent.name for p in DEMO_RUNS.glob("*/run.json"))
JOBS = {
    "lr-find": ("lr_find", ["--steps", "8"]),
    "nan-hunt": ("nan_hunt", []),
    "overfit-batch": ("overfit_batch", ["--steps", "3"]),
    "sharpness": ("sharpness", ["--samples", "1", "--batches", "1"]),
}


def _manifest(demo: str) -> dict:
    return json.loads((DEMO_RUNS / demo / "run.json").read_text())


def test_every_scenario_has_a_demo_run() -> None:
    assert DEMOS == sorted(s.name for s in SCENARIOS)


@pytest.mark.parametrize("demo", DEMOS)
def test_a_demo_run_names_the_packaged_factory_of_its_scenario(demo: str) -> None:
    manifest = _manifest(demo)
    scenario = by_name(manifest["config"]["scenario"])
    assert manifest["factory"] == scenario.factory and manifest["factory"].startswith("tuidiag.demo.factory:")
    state = torch.get_rng_state()
    parts = load_factory(manifest["factory"])
    assert torch.equal(torch.get_rng_state(), state)  # the factory seeds in a fork
    recorded = [(p["name"], p["shape"]) for p in manifest["model"]["params"]]
    assert [(n, list(p.shape)) for n, p in parts.model.named_parameters()] == recorded
    assert type(parts.optimizer).__name__ in (manifest["optimizer"]["class"], "AdamW")
    assert parts.optimizer.param_groups[0]["lr"] == pytest.approx(manifest["optimizer"]["param_groups"][0]["initial_lr"])
    x, y = parts.batches[0]
    assert x.shape == (scenario.batch_size, 20) and len(parts.batches) == scenario.train_size // scenario.batch_size
    capture = find_capture(DEMO_RUNS / demo)
    if capture is not None:  # the NaN hunt loads the captured weights into the factory's model
        parts.model.load_state_dict(load_capture(capture)["model_state"])


def test_the_factory_rebuilds_the_weights_the_training_started_from() -> None:
    """Two calls give the same weights, and they are the demo training's first weights (its seed)."""
    first, second = demo_factory.lr_too_high(), demo_factory.lr_too_high()
    for a, b in zip(first["model"].parameters(), second["model"].parameters()):
        assert torch.equal(a, b)
    assert first["batches"][0][0] is not second["batches"][0][0] and torch.equal(first["batches"][0][0], second["batches"][0][0])


@pytest.fixture
def demo_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo runs copied to a temporary directory; the working directory is an unrelated one."""
    shutil.copytree(DEMO_RUNS, tmp_path / "demo_runs")
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))  # where the read-only demos' results go
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path / "demo_runs"


@pytest.mark.parametrize("command", list(JOBS))
@pytest.mark.parametrize("demo", DEMOS)
def test_every_job_runs_on_every_demo_run(demo_copy: Path, demo: str, command: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    torch.set_num_threads(1)
    job, settings = JOBS[command]
    run = demo_copy / demo
    status = main([command, str(run), "--yes", "--json", "--device", "cpu", *settings])
    out, err = capsys.readouterr()
    assert "names no factory" not in err and status in (0, 1), err
    result = json.loads(out)
    if job == "nan_hunt" and find_capture(run) is None:
        assert status == 1 and result["verdict"] == "no_capture"
        return
    saved = list_results(run, job)
    assert len(saved) == 1 and not (run / "jobs").exists()  # the demo run stays as shipped
    payload = read_result(saved[0])
    assert payload["factory"] == by_name(demo).factory and payload["result"] == result
    if job == "nan_hunt":  # the recorder's "non-finite gradients" there are float32 norms that overflow
        event = next(e for e in open_run(run).events if e.kind == "nonfinite")
        assert result["step"] == event.step == 253 and result["verdict"] == "not_reproduced"
        assert result["overflowing_grad_norms"] == event.data["params"]


def test_tuidiag_demo_writes_the_factory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", str(tmp_path / "runs"), "--steps", "1", "--only", "overfitting"]) == 0
    manifest = json.loads((tmp_path / "runs" / "overfitting" / "run.json").read_text())
    assert manifest["factory"] == "tuidiag.demo.factory:overfitting"
    assert manifest["read_only"] is True  # an example: jobs on it keep their results in the cache


async def test_n_on_the_lr_too_high_demo_asks_to_run_the_packaged_factory(demo_copy: Path) -> None:
    """The issue's path: the monitor on demo_runs/, ``n`` on lr-too-high: a confirmation, not "names no factory"."""
    app = TuidiagApp(demo_copy / "lr-too-high")
    async with app.run_test(size=(120, 40)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        await pilot.press("n")
        assert isinstance(app.screen, JobConfirmScreen) and "tuidiag.demo.factory:lr_too_high" in app.screen.factory
        await pilot.press("escape")


"""Every job leaves model, optimizer and RNG bit-identical, also when it fails; the factory is confirmed first."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jobs_factory
import numpy as np
import pytest
import torch

from tuidiag.cli.main import main
from tuidiag.jobs import JobHandle, JobCancelled, isolated
from tuidiag.store import job_results as results
from tuidiag.jobs.factory import FactoryError, Parts, as_parts, extra_sys_path, load_factory, search_plan
from tuidiag.jobs.lr_find import LRFindConfig, lr_find
from tuidiag.jobs.nan_hunt import find_capture, load_capture, nan_hunt
from tuidiag.jobs.overfit import OverfitConfig, overfit_batch
from tuidiag.jobs.sharpness import SharpnessConfig, sharpness

CPU = torch.device("cpu")
TESTS = Path(__file__).parent


def _train(parts: Parts, steps: int, start: int = 0) -> None:
    """Plain training steps (the last one leaves its gradients in place)."""
    parts.model.train()
    for x, y in parts.batches[start:start + steps]:
        parts.optimizer.zero_grad()
        parts.loss(x, y).backward()
        parts.optimizer.step()


def _trained() -> Parts:
    """The healthy MLP (BatchNorm, Dropout, Adam) after 3 steps, with gradients and RNG in a used state."""
    parts = as_parts(jobs_factory.healthy())
    _train(parts, 3)
    parts.model.eval()  # a job must also restore this flag
    np.random.seed(7)
    random.seed(7)
    return parts


def _state(parts: Parts) -> dict[str, Any]:
    """A deep copy of everything a job must leave untouched."""
    model, opt = parts.model, parts.optimizer
    return {
        "tensors": {k: v.clone() for k, v in model.state_dict().items()},
        "grads": {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()},
        "params": [id(p) for p in model.parameters()],
        "opt_state": {i: {k: v.clone() for k, v in s.items()} for i, s in opt.state_dict()["state"].items()},
        "opt_groups": [{k: v for k, v in g.items()} for g in opt.state_dict()["param_groups"]],
        "training": [m.training for m in model.modules()],
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
    }


def _assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert before["tensors"].keys() == after["tensors"].keys()
    assert all(torch.equal(before["tensors"][k], after["tensors"][k]) for k in before["tensors"])
    for name, grad in before["grads"].items():
        assert (grad is None and after["grads"][name] is None) or torch.equal(grad, after["grads"][name]), name
    assert before["params"] == after["params"]
    assert before["opt_state"].keys() == after["opt_state"].keys()
    for i, entry in before["opt_state"].items():
        assert entry.keys() == after["opt_state"][i].keys()
        assert all(torch.equal(v, after["opt_state"][i][k]) for k, v in entry.items())
    assert before["opt_groups"] == after["opt_groups"]
    assert before["training"] == after["training"]
    assert torch.equal(before["torch_rng"], after["torch_rng"])
    b, a = before["numpy_rng"], after["numpy_rng"]
    assert b[0] == a[0] and np.array_equal(b[1], a[1]) and b[2:] == a[2:]
    assert before["python_rng"] == after["python_rng"]


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real capture of the healthy architecture (the NaN-batch scenario)."""
    run = tmp_path_factory.mktemp("cap") / "run"
    jobs_factory.record(run, "jobs_factory:nan_batch")
    return load_capture(find_capture(run))


JOBS: dict[str, Callable[[Parts, dict[str, Any]], Any]] = {
    "lr_find": lambda parts, cap: lr_find(parts, CPU, LRFindConfig(steps=30)),
    "overfit_batch": lambda parts, cap: overfit_batch(parts, CPU, OverfitConfig(steps=20)),
    "sharpness": lambda parts, cap: sharpness(parts, CPU, SharpnessConfig(samples=3)),
    "nan_hunt": lambda parts, cap: nan_hunt(parts, cap, CPU),
    "overfit_run_optimizer": lambda parts, cap: overfit_batch(parts, CPU, OverfitConfig(steps=20, lr=0.5, optimizer="run")),
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_job_restores_everything_bit_exactly(job: str, capture: dict[str, Any]) -> None:
    parts = _trained()
    before = _state(parts)
    JOBS[job](parts, capture)
    _assert_same(before, _state(parts))


def test_nan_hunt_on_a_replayable_capture_restores_everything(tmp_path: Path) -> None:
    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:nan_backward_inf")
    parts = as_parts(jobs_factory.nan_backward_inf())
    _train(parts, 1)
    before = _state(parts)
    assert nan_hunt(parts, load_capture(find_capture(run)), CPU)["verdict"] == "backward"
    _assert_same(before, _state(parts))


def test_job_raising_midway_still_restores() -> None:
    parts = _trained()
    before = _state(parts)
    calls = {"n": 0}
    loss_fn = parts.loss_fn

    def failing_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] == 6:
            raise RuntimeError("boom in step 6")
        return loss_fn(out, y)

    parts.loss_fn = failing_loss
    with pytest.raises(RuntimeError, match="boom in step 6"):
        lr_find(parts, CPU, LRFindConfig(steps=30))
    _assert_same(before, _state(parts))


def test_cancelled_job_restores() -> None:
    parts = _trained()
    before = _state(parts)
    with pytest.raises(JobCancelled):
        overfit_batch(parts, CPU, OverfitConfig(steps=50), JobHandle(cancelled=lambda: True))
    _assert_same(before, _state(parts))


def test_training_after_a_job_continues_bit_identically() -> None:
    """Dropout draws from the RNG and Adam from its state: both must be as if the job never ran."""
    with_job, without = as_parts(jobs_factory.healthy()), as_parts(jobs_factory.healthy())
    torch.manual_seed(123)
    _train(with_job, 3)
    lr_find(with_job, CPU, LRFindConfig(steps=20))
    sharpness(with_job, CPU, SharpnessConfig(samples=2))
    _train(with_job, 3, start=3)
    torch.manual_seed(123)
    _train(without, 3)
    _train(without, 3, start=3)
    for a, b in zip(with_job.model.state_dict().values(), without.model.state_dict().values()):
        assert torch.equal(a, b)


def test_isolated_drops_optimizer_state_the_body_added() -> None:
    parts = as_parts(jobs_factory.healthy())  # fresh Adam: no state yet
    with isolated(parts.model, parts.optimizer):
        _train(parts, 2)
        assert len(parts.optimizer.state) > 0
    assert len(parts.optimizer.state) == 0
    assert all(p.grad is None for p in parts.model.parameters())


# ---- confirmation, factory loading, result files -----------------------------------------

def _recorded(tmp_path: Path, factory: str = "healthy") -> Path:
    run = tmp_path / "run"
    jobs_factory.record(run, f"jobs_factory:{factory}", steps=1)
    return run


def test_refuses_without_yes_when_stdin_is_not_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run = _recorded(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # not a tty: even a "y" is not read
    calls = jobs_factory.BUILD_CALLS["count"]
    assert main(["lr-find", str(run)]) == 2
    err = capsys.readouterr().err
    assert "factory: jobs_factory:healthy" in err and "not confirmed" in err and "--yes" in err
    assert jobs_factory.BUILD_CALLS["count"] == calls and not (run / "jobs").exists()


def test_refusal_in_a_real_process(tmp_path: Path) -> None:
    run = _recorded(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "tuidiag", "overfit-batch", str(run)], cwd=TESTS,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2 and "refusing to import 'jobs_factory:healthy'" in proc.stderr
    assert not (run / "jobs").exists()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "status"), [("y\n", 0), ("n\n", 2), ("", 2)])
def test_interactive_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, answer: str, status: int) -> None:
    run = _recorded(tmp_path)
    monkeypatch.setattr(sys, "stdin", _Tty(answer))
    assert main(["sharpness", str(run), "--samples", "2"]) == status
    assert "Import and run it? [y/N]" in capsys.readouterr().err


def test_factory_errors_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _recorded(tmp_path)
    assert main(["lr-find", str(run), "--yes", "--factory", "jobs_factory:not_a_factory"]) == 2
    assert "returned no optimizer" in capsys.readouterr().err
    assert main(["lr-find", str(run), "--yes", "--factory", "no_such_module_xyz:build"]) == 2
    assert "cannot import 'no_such_module_xyz'" in capsys.readouterr().err
    assert main(["lr-find", str(run), "--yes", "--factory", "os.system('x')"]) == 2
    assert not (run / "jobs").exists()


def test_factory_found_next_to_the_training_script(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "mytrain_jobs_probe.py").write_text(
        "from torch import nn\nimport torch\n"
        "def build():\n    m = nn.Linear(2, 1)\n"
        "    return {'model': m, 'optimizer': torch.optim.SGD(m.parameters(), lr=0.1), 'loss_fn': nn.MSELoss(), 'batches': []}\n"
    )
    paths = search_plan({"command": [str(project / "mytrain_jobs_probe.py")]}, cwd=tmp_path).paths
    assert paths == [project, tmp_path]  # the run's script directory first
    before = list(sys.path)
    parts = load_factory("mytrain_jobs_probe:build", paths)
    assert isinstance(parts.model, torch.nn.Linear) and sys.path == before
    with extra_sys_path([project]):
        assert str(project) in sys.path
    assert sys.path == before


def test_job_error_leaves_no_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _recorded(tmp_path)
    assert main(["overfit-batch", str(run), "--yes", "--factory", "jobs_factory:not_a_factory"]) == 2
    assert not (run / "jobs").exists()


def test_result_write_is_atomic_and_cleans_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = results.save_result(tmp_path, "lr_find", {"suggested_lr": 1e-3, "losses": [1.0, float("nan")]}, factory="a:b")
    saved = json.loads(path.read_text())
    assert saved["result"]["losses"] == [1.0, "nan"] and saved["factory"] == "a:b" and saved["job"] == "lr_find"
    assert results.latest_result(tmp_path, "lr_find")["result"]["suggested_lr"] == 1e-3

    def broken_replace(*args: Any, **kwargs: Any) -> None:  # fails once the temporary file is written
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        results.save_result(tmp_path, "sharpness", {"ratio": 0.1})
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == [path.name]


@pytest.mark.parametrize("shape", ["dict", "object", "tuple", "list", "tuple+forward", "tuple of 3", "tuple of 6"])
def test_a_factory_may_return_its_parts_as_a_dict_an_object_or_a_tuple_in_order(shape: str) -> None:
    """The README's 'a function returning model, optimizer, loss_fn, batches' read as a tuple by a reviewer: it works, in
    that order; a tuple of another length is refused naming both accepted forms."""
    built = jobs_factory.healthy()
    ordered = [built["model"], built["optimizer"], built["loss_fn"], built["batches"]]
    forward = lambda model, x: model(x)  # noqa: E731
    given = {"dict": built, "object": type("Built", (), dict(built))(), "tuple": tuple(ordered), "list": ordered,
             "tuple+forward": (*ordered, forward), "tuple of 3": tuple(ordered[:3]), "tuple of 6": (*ordered, forward, None)}[shape]
    if shape.startswith("tuple of"):
        with pytest.raises(FactoryError, match=r"in that order, or a dict"):
            as_parts(given)
        return
    parts = as_parts(given)
    assert (parts.model, parts.optimizer, parts.loss_fn, parts.batches) == tuple(ordered)
    assert parts.forward is (forward if shape == "tuple+forward" else None)

"""A factory is found from any working directory, and its module never sees tuidiag's own arguments.

The regressions: ``run.json`` stored the relative ``command`` ``train.py``, so a job
started from another directory could not import the factory; and the factory module
was imported under tuidiag's ``sys.argv``, so a module-level ``parse_args()`` ended the
job with argparse's exit. Runs here are recorded by the real ``Recorder`` with the
process's ``sys.argv`` and working directory set as a training's would be.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tuidiag
from tuidiag.cli.main import main
from tuidiag.jobs import FactoryError
from tuidiag.jobs.factory import load_factory, search_plan
from tuidiag.store.job_results import list_results
from tuidiag.store.manifest import recorded_command

FACTORY_BODY = (
    "import torch\nfrom torch import nn\n"
    "def build():\n"
    "    torch.manual_seed(0)\n"
    "    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
    "    gen = torch.Generator().manual_seed(1)\n"
    "    data = [(torch.randn(8, 4, generator=gen), torch.randint(0, 2, (8,), generator=gen)) for _ in range(2)]\n"
    "    return {'model': model, 'optimizer': torch.optim.SGD(model.parameters(), lr=LR),\n"
    "            'loss_fn': nn.CrossEntropyLoss(), 'batches': data}\n"
)
JOB = ["overfit-batch", "--yes", "--json", "--steps", "3", "--device", "cpu"]


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> Iterator[str]:
    """A module name of this test only, removed from ``sys.modules`` afterwards."""
    name = "fp_" + "".join(c if c.isalnum() else "_" for c in request.node.name)
    yield name
    sys.modules.pop(name, None)


def _record(run: Path, factory: str, argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Record a run as a training started as ``argv`` in ``cwd`` would; return its run.json."""
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", argv)
    with tuidiag.Recorder(run, factory=factory) as rec:
        rec.step(1.0)
    monkeypatch.undo()
    return json.loads((run / "run.json").read_text())


@pytest.mark.parametrize("where", ["script-dir", "training-cwd"])
def test_a_job_started_from_another_directory_finds_the_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                unique: str, where: str) -> None:
    """``python train.py`` run in its project (module next to the script), or ``python -c`` in the
    project (module in the working directory): the job runs from an unrelated directory."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / f"{unique}.py").write_text("LR = 0.1\n" + FACTORY_BODY)
    if where == "script-dir":
        (project / "train.py").write_text("")
        argv = ["train.py", "--epochs", "3"]
    else:
        argv = ["-c"]
    manifest = _record(tmp_path / "run", f"{unique}:build", argv, project, monkeypatch)
    assert manifest["cwd"] == str(project)
    if where == "script-dir":
        assert manifest["command"] == [str(project / "train.py"), "--epochs", "3"]
    monkeypatch.chdir(elsewhere)
    assert main([JOB[0], str(tmp_path / "run"), *JOB[1:]]) in (0, 1)
    assert len(list_results(tmp_path / "run", "overfit_batch")) == 1


def test_the_old_relative_command_is_what_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unique: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A run.json written before the fix (relative ``command``, no ``cwd``) cannot be served from elsewhere."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / f"{unique}.py").write_text("LR = 0.1\n" + FACTORY_BODY)
    (project / "train.py").write_text("")
    manifest = _record(tmp_path / "run", f"{unique}:build", ["train.py"], project, monkeypatch)
    manifest["command"], manifest["cwd"] = ["train.py"], None
    (tmp_path / "run" / "run.json").write_text(json.dumps(manifest))
    monkeypatch.chdir(elsewhere)
    assert main([JOB[0], str(tmp_path / "run"), *JOB[1:]]) == 2
    assert f"cannot import '{unique}'" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "absolute"), [
    (["train.py"], True), (["./train.py", "--lr", "0.1"], True), (["sub/../train.py"], True),
    (["missing.py"], False), (["-c"], False), ([""], False), (["-m"], False), ([], False),
])
def test_the_recorded_command_names_its_script_absolutely(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          argv: list[str], absolute: bool) -> None:
    (tmp_path / "train.py").write_text("")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    command = recorded_command(argv)
    assert command[1:] == argv[1:]
    if absolute:
        assert os.path.isabs(command[0]) and Path(command[0]).resolve() == (tmp_path / "train.py").resolve()
    else:
        assert command == argv


@pytest.mark.parametrize("value", [None, 3, "relative/dir", ["x"], "/no/such/dir", "/bad\0path"])
def test_a_bad_recorded_cwd_is_left_out(tmp_path: Path, value: object) -> None:
    assert search_plan({"command": [], "cwd": value}, cwd=tmp_path).paths == [tmp_path]


PARSING = {
    "optional-arguments": ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--lr', type=float, default=0.1)\n"
                           "args = p.parse_args()\nLR = args.lr\n", None),
    "parse-in-build": ("import argparse\nLR = 0.1\n", None),
    "reads-argv": ("import sys\nassert sys.argv[1:] == [], sys.argv\nLR = 0.1\n", None),
    "required-argument": ("import argparse\np = argparse.ArgumentParser()\np.add_argument('--data', required=True)\n"
                          "args = p.parse_args()\nLR = 0.1\n", "called sys.exit(2)"),
}


@pytest.mark.parametrize("case", list(PARSING))
def test_the_factory_module_sees_a_clean_argv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unique: str,
                                              capsys: pytest.CaptureFixture[str], case: str) -> None:
    head, failure = PARSING[case]
    body = FACTORY_BODY
    if case == "parse-in-build":
        body = body.replace("def build():\n", "def build():\n    argparse.ArgumentParser().parse_args()\n")
    (tmp_path / f"{unique}.py").write_text(head + body)
    manifest = _record(tmp_path / "run", f"{unique}:build", [str(tmp_path / "train.py")], tmp_path, monkeypatch)
    assert manifest["factory"] == f"{unique}:build"
    monkeypatch.chdir(tmp_path)
    argv = ["tuidiag", JOB[0], str(tmp_path / "run"), *JOB[1:]]
    monkeypatch.setattr(sys, "argv", list(argv))  # what the factory must not see
    status = main(argv[1:])
    assert sys.argv == argv  # put back
    err = capsys.readouterr().err
    if failure is None:
        assert status in (0, 1), err
        assert "usage:" not in err
    else:
        assert status == 2 and failure in err and "no arguments" in err, err
        with pytest.raises(FactoryError, match="sys.exit"):
            load_factory(f"{unique}:build", [tmp_path])

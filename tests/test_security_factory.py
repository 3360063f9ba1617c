"""Factory search order: the run's script directory first, and never a directory another user can write.

A matrix over the state of the script directory and of the working directory (mine,
group- or world-writable, sticky, another user's, under a group-writable parent, a
symlink) and over where the module exists: the factory always comes from the first
trusted directory holding it, and is refused rather than imported from one another
user can write. The regression: a ``train.py`` in a world-writable working directory.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

import pytest

import tuidiag
from tuidiag.cli.main import main
from tuidiag.jobs import FactoryError
from tuidiag.jobs.factory import resolve, search_plan

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="directories owned by another user need root")

NOBODY = 65534
STATES = ("mine", "mine-0755", "group-writable", "world-writable", "sticky-world", "other-user",
          "parent-group-writable", "symlink-in-world-dir")
TRUSTED = {"mine", "mine-0755"}
"""States of a directory from which the factory may be imported."""


def _directory(base: Path, state: str) -> Path:
    """A directory in ``state`` under ``base``; returns the path to use (a symlink for the last state)."""
    base.mkdir()
    base.chmod(0o700)
    if state == "parent-group-writable":
        base.chmod(0o770)
    if state == "symlink-in-world-dir":
        target = base / "real"
        target.mkdir(mode=0o700)
        shared = base / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        link = shared / "link"
        link.symlink_to(target)
        return link
    directory = base / "d"
    directory.mkdir()
    mode = {"mine": 0o700, "mine-0755": 0o755, "group-writable": 0o775, "world-writable": 0o777,
            "sticky-world": 0o1777, "other-user": 0o755, "parent-group-writable": 0o700}[state]
    directory.chmod(mode)
    if state == "other-user":
        os.chown(directory, NOBODY, NOBODY)
    return directory


def _module(directory: Path, name: str, label: str) -> None:
    (directory / f"{name}.py").write_text(f"WHERE = {label!r}\ndef build():\n    return WHERE\n")


CASES = [(s, c, where) for s, c in itertools.product(STATES, ("mine", "world-writable", "other-user"))
         for where in ("script", "cwd", "both")]


@pytest.mark.parametrize(("script_state", "cwd_state", "where"), CASES)
def test_the_factory_comes_from_the_first_trusted_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            script_state: str, cwd_state: str, where: str) -> None:
    script_dir = _directory(tmp_path / "s", script_state)
    cwd = _directory(tmp_path / "c", cwd_state)
    (script_dir / "train_main.py").write_text("")
    name = f"factory_{script_state}_{cwd_state}_{where}".replace("-", "_")
    if where in ("script", "both"):
        _module(script_dir, name, "script")
    if where in ("cwd", "both"):
        _module(cwd, name, "cwd")
    monkeypatch.chdir(cwd)
    plan = search_plan({"command": [str(script_dir / "train_main.py")]})
    assert all(p.resolve() in (script_dir.resolve(), cwd.resolve()) for p in plan.paths)
    if script_state in TRUSTED:
        assert plan.paths[0] == script_dir.resolve()  # the run's own script directory comes first
    listed = {p.resolve() for p in plan.paths}
    assert (script_dir.resolve() in listed) == (script_state in TRUSTED)
    assert (cwd.resolve() in listed) == (cwd_state in TRUSTED)
    expected = next((label for label, state in (("script", script_state), ("cwd", cwd_state))
                     if state in TRUSTED and where in (label, "both")), None)
    try:
        try:
            got = resolve(f"{name}:build", plan.paths)()
        except FactoryError as exc:
            got = None
            assert "cannot import" in str(exc) or "refusing to import" in str(exc), exc
        assert got == expected
    finally:
        sys.modules.pop(name, None)


def test_a_module_file_another_user_can_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = _directory(tmp_path / "s", "mine")
    for i, (mode, owner) in enumerate([(0o666, 0), (0o664, 0), (0o644, NOBODY)]):
        name = f"factory_file_{i}"
        _module(directory, name, "script")
        (directory / f"{name}.py").chmod(mode)
        os.chown(directory / f"{name}.py", owner, owner)
        with pytest.raises(FactoryError, match="refusing to import"):
            resolve(f"{name}:build", [directory])
        assert name not in sys.modules


def test_a_train_py_in_a_world_writable_cwd_is_not_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The regression: the job used the world-writable working directory's ``train.py``."""
    mine = _directory(tmp_path / "project", "mine")
    shared = _directory(tmp_path / "shared", "world-writable")
    marker = tmp_path / "imported_from_cwd"
    (mine / "sec_train.py").write_text(
        "import torch\nfrom torch import nn\n"
        "def build():\n    torch.manual_seed(0)\n    model = nn.Linear(4, 2)\n"
        "    data = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(4)]\n"
        "    return {'model': model, 'optimizer': torch.optim.SGD(model.parameters(), lr=0.1),\n"
        "            'loss_fn': nn.CrossEntropyLoss(), 'batches': data}\n")
    (shared / "sec_train.py").write_text(f"open({str(marker)!r}, 'w').write('x')\ndef build():\n    raise SystemExit(9)\n")
    run = tmp_path / "run"
    with tuidiag.Recorder(run, factory="sec_train:build") as rec:
        rec.step(1.0)
    manifest = json.loads((run / "run.json").read_text())
    manifest["command"] = [str(mine / "sec_train.py")]
    (run / "run.json").write_text(json.dumps(manifest))
    monkeypatch.chdir(shared)
    try:
        assert main(["lr-find", str(run), "--yes", "--json", "--steps", "5", "--device", "cpu"]) in (0, 1)
    finally:
        sys.modules.pop("sec_train", None)
    err = capsys.readouterr().err
    assert not marker.exists()
    where = err.split("imported from:", 1)[1].splitlines()[0]
    assert where.lstrip().startswith(str(mine)) and str(shared) not in where, err
    assert f"not searched: {shared}" in err and "writable by group or others" in err

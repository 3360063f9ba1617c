"""Shadowing through the working directory: every process tuidiag starts runs its own code.

The working directory of each test holds a planted module for **every** name a child
could import: the whole standard library (``sys.stdlib_module_names``), every top-level
module of every installed distribution, and ``tuidiag`` itself. Each planted module
leaves a marker if it runs. Each entry point that starts a process (the status line's
background refresh, a job the monitor runs; the ``--web`` app is in
``test_security_web.py``) must finish its work with no marker left. A static check
finds every process start in the package and requires it to go through
:mod:`tuidiag.self_command`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import sys
import time
from pathlib import Path

import pytest

import tuidiag
from tests.conftest import ROOT
from tuidiag import self_command
from tuidiag.app import job_runner
from tuidiag.cli import status_cache
from tuidiag.cli.main import main
from tuidiag.store.job_results import list_results

PACKAGE = ROOT / "tuidiag"
PROCESS_STARTERS = {
    "subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"},
    "os": {"system", "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
           "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
           "posix_spawn", "posix_spawnp", "fork", "forkpty"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "pty": {"spawn", "fork"},
    "web_serve": {"serve"},
}
"""Module attributes that start a process; ``web_serve.serve(command)`` (textual-serve) starts one per browser."""


def shadowable_names() -> list[str]:
    """Every top-level module name a tuidiag child could import."""
    names = set(sys.stdlib_module_names) | set(importlib.metadata.packages_distributions()) | {"tuidiag"}
    return sorted(n for n in names if n.isidentifier() and n != "__future__")


def plant(directory: Path, marks: Path) -> list[str]:
    """A ``<name>.py`` in ``directory`` for every shadowable name; each leaves ``marks/<name>`` when run."""
    names = shadowable_names()
    for name in names:
        (directory / f"{name}.py").write_text(
            f"open({str(marks / name)!r}, 'w').close()\nraise ImportError('shadowed {name} ran')\n")
    return names


@pytest.fixture
def hostile_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(a working directory full of planted modules, the directory their markers go to); chdir'ed into."""
    cwd, marks = tmp_path / "cwd", tmp_path / "marks"
    cwd.mkdir()
    marks.mkdir()
    assert len(plant(cwd, marks)) > 300
    monkeypatch.chdir(cwd)
    return cwd, marks


def _wait(predicate, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_status_refresh_runs_tuidiag_not_the_cwd(hostile_cwd: tuple[Path, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The regression: ``tuidiag status`` from a directory holding ``tuidiag.py`` executed it."""
    _, marks = hostile_cwd
    run = tmp_path / "run"
    with tuidiag.Recorder(run) as rec:
        for step in range(30):
            rec.step(1.0 / (step + 1))
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(status_cache, "INLINE_BYTES", 0)  # a large run: diagnosed in the background
    assert main(["status", str(run)]) == 0
    capsys.readouterr()
    assert status_cache._lock(run).exists(), "no background refresh was started"
    _wait(lambda: not status_cache._lock(run).exists(), "the background refresh")
    assert sorted(p.name for p in marks.iterdir()) == []
    entry = status_cache.load(run)
    assert entry is not None and entry["signature"] == status_cache.signature(run)[0]


def test_a_job_the_monitor_starts_runs_tuidiag_not_the_cwd(hostile_cwd: tuple[Path, Path], tmp_path: Path) -> None:
    cwd, marks = hostile_cwd
    project = tmp_path / "project"
    project.mkdir()
    (project / "shadow_probe_train.py").write_text(
        "import torch\nfrom torch import nn\n"
        "def build():\n    torch.manual_seed(0)\n    model = nn.Linear(4, 2)\n"
        "    data = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(4)]\n"
        "    return {'model': model, 'optimizer': torch.optim.SGD(model.parameters(), lr=0.1),\n"
        "            'loss_fn': nn.CrossEntropyLoss(), 'batches': data}\n")
    run = tmp_path / "run"
    with tuidiag.Recorder(run, factory="shadow_probe_train:build") as rec:
        rec.step(1.0)
    manifest = tuidiag.open_run(run).manifest
    manifest["command"] = [str(project / "shadow_probe_train.py")]
    import json

    (run / "run.json").write_text(json.dumps(manifest))
    command = job_runner.job_command("lr_find", str(run))
    assert job_runner.shown(command).startswith("tuidiag lr-find ")
    process = job_runner.start(command, cwd)
    out, err = process.communicate(timeout=300)
    assert process.returncode in (0, 1), err
    assert sorted(p.name for p in marks.iterdir()) == []
    (saved,) = list_results(run, "lr_find")  # the monitor reads the saved result, not the process's output
    suggested = json.loads(saved.read_text())["result"]["suggested_lr"]
    assert suggested is None or suggested > 0


@pytest.mark.parametrize("entry", ["cwd", "relative", "empty"])
def test_the_child_import_path_never_holds_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 entry: str) -> None:
    """However the working directory got onto this process's path (``python -m``: the absolute cwd;
    ``python -c``: ``''``; a relative entry), the child's path leaves it out and keeps the package."""
    monkeypatch.chdir(tmp_path)
    planted = {"cwd": str(tmp_path), "relative": ".", "empty": ""}[entry]
    monkeypatch.setattr(sys, "path", [planted, *sys.path])
    path = self_command.import_path()
    assert all(os.path.isabs(p) and os.path.realpath(p) != str(tmp_path.resolve()) for p in path)
    assert self_command.PACKAGE_ROOT in path
    argv = self_command.command("status", "x")
    assert argv[:3] == [sys.executable, "-I", "-c"] and argv[-2:] == ["status", "x"]


def _process_calls(tree: ast.AST) -> list[ast.Call]:
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                func.attr in PROCESS_STARTERS.get(func.value.id, set()):
            calls.append(node)
        elif isinstance(func, ast.Name) and func.id in ("Server", "Popen"):
            calls.append(node)
    return calls


def _from_self_command(node: ast.AST, assigned: dict[str, ast.AST]) -> bool:
    """True when ``node`` is a call of ``self_command.command``/``shell_command`` (directly or through a name)."""
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        isinstance(node.func.value, ast.Name) and node.func.value.id == "self_command" and \
        node.func.attr in ("command", "shell_command")


def test_every_process_tuidiag_starts_goes_through_self_command() -> None:
    found, bad = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        relative = path.relative_to(ROOT).as_posix()
        if relative != "tuidiag/self_command.py":
            assert "sys.executable" not in source, f"{relative} builds its own interpreter command line"
        assert "multiprocessing" not in source, f"{relative}: multiprocessing children start with the parent's sys.path"
        assigned = {t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                    for t in n.targets if isinstance(t, ast.Name)}
        for call in _process_calls(tree):
            found.append(f"{relative}:{call.lineno}")
            if not call.args or not _from_self_command(call.args[0], assigned):
                bad.append(f"{relative}:{call.lineno}")
    assert len(found) >= 3, found  # the status refresh, the monitor's jobs, the web app
    assert not bad, f"processes started without tuidiag.self_command: {bad}"

"""Without torch, every command that needs it prints one friendly hint (CPU-only build first), never a traceback.

The CLI runs in a real subprocess where a meta path finder makes ``import torch`` raise
``ImportError``, as on a machine where torch is not installed; nothing of tuidiag is mocked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tuidiag
from tuidiag import self_command
from tuidiag.cli.torch_hint import CPU_INDEX, hint

NO_TORCH = (
    "import sys\n"
    "class NoTorch:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'torch' or name.startswith('torch.'):\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "        return None\n"
    "sys.meta_path.insert(0, NoTorch())\n"
)
"""Runs first in the child: ``import torch`` fails as it does where torch is not installed."""

COMMANDS = ["lr-find", "nan-hunt", "overfit-batch", "sharpness", "demo"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run (recorded without watch: the hint must come before anything needs the model)."""
    path = tmp_path_factory.mktemp("hint") / "run"
    with tuidiag.Recorder(path, factory="train:build") as rec:
        rec.step(1.0)
    return path


def _without_torch(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = NO_TORCH + self_command.BOOTSTRAP.format(path=self_command.import_path(cwd))
    return subprocess.run([sys.executable, "-I", "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_that_needs_torch_prints_the_hint(command: str, run_dir: Path, tmp_path: Path) -> None:
    args = [command, str(tmp_path / "demo")] if command == "demo" else [command, str(run_dir), "--yes"]
    done = _without_torch(args, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr, done.stderr
    assert done.stderr.strip() == hint(command)
    assert f"pip install torch --index-url {CPU_INDEX}" in done.stderr and "pip install 'tuidiag[torch]'" in done.stderr
    assert not (run_dir / "jobs").exists() and not (tmp_path / "demo").exists()


def test_the_hint_is_one_text_for_every_command() -> None:
    texts = {hint(c).replace(f"tuidiag {c} ", "tuidiag COMMAND ", 1) for c in COMMANDS}
    assert len(texts) == 1
    assert CPU_INDEX.startswith("https://download.pytorch.org/")


def test_with_torch_blocked_reading_commands_still_work(run_dir: Path, tmp_path: Path) -> None:
    """The block is real and narrow: ``ls`` (no torch needed) runs in the same kind of child."""
    done = _without_torch(["ls", str(run_dir.parent)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "run" in done.stdout


def test_a_live_job_needs_no_torch_where_it_is_sent_from(tmp_path: Path) -> None:
    """A job sent to a live training runs there: the CLI sending it, without torch, neither refuses
    nor imports it (about 2 s saved on every live job), and prints the training's result."""
    from helpers import training_thread

    run = tmp_path / "live"
    with training_thread(run, pause=0.05):
        done = _without_torch(["lr-find", str(run), "--live", "--yes", "--json"], tmp_path)
    assert done.returncode in (0, 1), done.stderr  # 1: the finder found no reliable LR (a verdict, not an error)
    assert "needs torch" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    result = json.loads(done.stdout)
    assert result["steps_run"] > 0 and len(result["losses"]) == len(result["lrs"]) > 0
    assert "runs inside the live training" in done.stderr and f"saved {run / 'jobs'}" in done.stderr

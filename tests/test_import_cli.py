"""``tuidiag import`` as a user runs it: errors, never overwriting without --force, then ls and the monitor."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from textual.widgets import DataTable

import tuidiag
from tests.app_helpers import fixed_clock, run_keys, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.cli.main import main


def _history_file(path: Path, epochs: int = 40) -> Path:
    path.write_text(json.dumps({"loss": [1.0 / (e + 1) for e in range(epochs)], "val_loss": [0.6] * epochs}))
    return path


def test_existing_run_is_kept_unless_forced(tmp_path: Path, capsys) -> None:
    src, out = _history_file(tmp_path / "h.json"), tmp_path / "runs"
    assert main(["import", "keras-history", str(src), str(out)]) == 0
    first_id = tuidiag.open_run(out / "h").manifest["run_id"]
    capsys.readouterr()
    assert main(["import", "keras-history", str(src), str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert tuidiag.open_run(out / "h").manifest["run_id"] == first_id
    _history_file(src, epochs=10)
    assert main(["import", "keras-history", str(src), str(out), "--force"]) == 0
    replaced = tuidiag.open_run(out / "h")
    assert replaced.manifest["run_id"] != first_id and replaced.last_step == 9
    assert sorted(p.name for p in out.iterdir()) == ["h"]  # no temporary directory left behind


def _source(kind: str, tmp_path: Path) -> Path:
    """A small source of each kind, from its real writer where there is one."""
    if kind == "keras-history":
        return _history_file(tmp_path / "h.json", epochs=5)
    if kind == "csv":
        (tmp_path / "h.csv").write_text("step,train_loss\n0,1.0\n1,0.5\n")
        return tmp_path / "h.csv"
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "h" / "trial")) as writer:
        writer.add_scalar("loss", 1.0, 0)
    return tmp_path / "h"


@pytest.mark.parametrize("kind", ["keras-history", "csv", "tensorboard"])
@pytest.mark.parametrize("name", [None, "exp/v1"])
@pytest.mark.parametrize("taken", [0, 2])
def test_an_existing_run_suggests_a_free_name_before_force(tmp_path: Path, capsys, kind: str, name: str | None,
                                                           taken: int) -> None:
    """The run in the way may be another experiment: the message names a free --name that then works, and
    --force only as the way to replace it; a directory that is not a run is never offered --force."""
    src, out = _source(kind, tmp_path), tmp_path / "runs"
    given = ["--name", name] if name else []
    assert main(["import", kind, str(src), str(out), *given]) == 0
    base = Path(name or "h")
    for n in range(2, 2 + taken):  # names already used by other experiments
        (out / base.with_name(f"{base.name}-{n}")).mkdir(parents=True)
        (out / base.with_name(f"{base.name}-{n}") / "notes.txt").write_text("theirs")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["import", kind, str(src), str(out), *given]) == 2
    err = capsys.readouterr().err
    suggested = base.with_name(f"{base.name}-{2 + taken}").as_posix()
    assert f"--name {suggested}" in err and "already holds a run (imported from" in err
    assert err.index("--name") < err.index("--force") and "to replace it, pass --force" in err
    assert len(err.strip().splitlines()) == 1
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert main(["import", kind, str(src), str(out), "--name", suggested]) == 0  # the suggestion works
    assert {p: p.read_bytes() for p in before} == before  # and replaced nothing
    blocked = next((out / suggested).rglob("run.json")).parent  # now a directory of the user's own, not a run
    shutil.rmtree(blocked)
    blocked.mkdir()
    (blocked / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert main(["import", kind, str(src), str(out), "--name", suggested, "--force"]) == 2
    err = capsys.readouterr().err
    assert "not a tuidiag run" in err and "--name" in err and "--force" not in err
    assert (blocked / "notes.txt").read_text() == "mine"


def test_a_directory_that_is_not_a_run_is_never_replaced(tmp_path: Path, capsys) -> None:
    src, out = _history_file(tmp_path / "h.json"), tmp_path / "runs"
    (out / "h").mkdir(parents=True)
    (out / "h" / "notes.txt").write_text("mine")
    assert main(["import", "keras-history", str(src), str(out), "--force"]) == 2
    assert "not a tuidiag run" in capsys.readouterr().err
    assert (out / "h" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("kind", "content", "message"),
    [
        ("keras-history", "[1, 2, 3]", "not a Keras history"),
        ("keras-history", "{not json", "cannot read"),
        ("keras-history", '{"loss": ["a", "b"]}', "no numeric metrics"),
        ("csv", "", "cannot read"),
        ("csv", "step,loss\n", "no rows"),
        ("csv", "step,loss\n0,x\n", "no numeric metrics"),
        ("csv", "step,loss\n,1.0\n", "empty or non-numeric"),
        ("csv", "\x00\xff\xfe garbage \x00\n\x01\x02", "no numeric metrics"),
    ],
)
def test_unreadable_files_exit_2_with_one_line(tmp_path: Path, capsys, kind: str, content: str, message: str) -> None:
    src = tmp_path / "bad.txt"
    src.write_text(content)
    assert main(["import", kind, str(src), str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_missing_file_and_directory_instead_of_file(tmp_path: Path, capsys) -> None:
    assert main(["import", "csv", str(tmp_path / "nope.csv"), str(tmp_path / "runs")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["import", "keras-history", str(tmp_path), str(tmp_path / "runs")]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_import_then_ls_in_a_real_process(tmp_path: Path, python: str) -> None:
    src = tmp_path / "log.csv"
    rows = "".join(f"{s},{1 / (s + 1)},{'' if s % 5 else 0.5}\n" for s in range(50))
    src.write_text("step,train_loss,val_loss\n" + rows)
    result = subprocess.run([python, "-m", "tuidiag", "import", "csv", str(src), str(tmp_path / "runs")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "train_loss -> train/loss" in result.stdout and "next: tuidiag diagnose" in result.stdout
    listing = subprocess.run([python, "-m", "tuidiag", "ls", str(tmp_path / "runs")],
                             capture_output=True, text=True, timeout=120)
    line = next(line for line in listing.stdout.splitlines() if line.startswith("log"))
    assert "finished" in line and line.split()[2] == "49" and "0.02" in line  # the last step (steps 0-49)
    assert len(tuidiag.open_run(tmp_path / "runs" / "log").series("val/loss")) == 10


def test_importers_run_without_torch(tmp_path: Path, python: str) -> None:
    src = _history_file(tmp_path / "h.json")
    # a None entry makes every "import torch" raise ImportError
    code = "import sys; sys.modules['torch'] = None; from tuidiag.cli.main import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run([python, "-c", code, "import", "keras-history", str(src), str(tmp_path / "runs")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert tuidiag.open_run(tmp_path / "runs" / "h").series("train/loss").last == 1.0 / 40


async def test_the_monitor_shows_an_imported_run(tmp_path: Path) -> None:
    src = tmp_path / "history.json"
    history = {"loss": [2.0 * 0.97**e for e in range(80)], "val_loss": [1.0 + 0.01 * e for e in range(80)]}
    src.write_text(json.dumps(history))
    assert main(["import", "keras-history", str(src), str(tmp_path / "runs"), "--name", "keras-run"]) == 0
    app = TuidiagApp(tmp_path / "runs", clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: run_keys(app) == ["keras-run"])
        assert await wait_for(pilot, lambda: app.summaries and app.summaries[0].health == "overfitting")
        app.screen.query_one("#runs", DataTable).move_cursor(row=0)
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen)
        assert await wait_for(pilot, lambda: app.screen.detail is not None)


@pytest.mark.parametrize("age", [5.0, 60.0, 600.0, 86_400.0])
def test_an_import_of_a_log_written_moments_ago_says_the_copy_may_be_cut_short(tmp_path: Path, capsys, age: float) -> None:
    """A TensorBoard log whose newest value is at most two minutes old may belong to a training still running: the
    import says the copy stops at its last step and reads finished; an older log imports without that note. Either
    way the copy's heartbeat is the log's last value, not the moment of the import ('updated 0s ago')."""
    import time

    from torch.utils.tensorboard import SummaryWriter

    from tuidiag.store.manifest import read_manifest

    newest = time.time() - age
    writer = SummaryWriter(str(tmp_path / "tb" / "run"))
    for step in range(30):
        writer.add_scalar("train/loss", 1.0 / (1 + step), step, walltime=newest - (29 - step))
    writer.close()
    capsys.readouterr()
    assert main(["import", "tensorboard", str(tmp_path / "tb"), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    warned = "if its training still runs, this copy stops at step 29 and says finished" in out
    assert warned == (age <= 120.0), out
    (manifest_path,) = (tmp_path / "out").rglob("run.json")
    manifest = read_manifest(manifest_path.parent)
    assert manifest["heartbeat"] == pytest.approx(newest, abs=1.0) and manifest["status"] == "finished"

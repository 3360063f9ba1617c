"""``tuidiag ls``, ``diagnose``, ``status`` and ``compare`` on other trackers' runs, read in place as ``watch`` reads them.

A root holds a real ``SummaryWriter`` log (diverging, then NaN, with ``add_hparams``), a
Lightning ``CSVLogger`` directory and a Keras ``CSVLogger`` file (in the layouts those
loggers write), and a tuidiag run. Each command must agree with what ``tuidiag import``
would give, name each run's kind, and write nothing into any foreign run's directory;
commands that write beside a run (``act``, jobs) still refuse a foreign one.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

import tuidiag
from tests.synthetic_runs import log_diverging_scalars
from tuidiag.cli.main import main
from tuidiag.diagnosis.codes import badge

torch_tensorboard = pytest.importorskip("torch.utils.tensorboard")


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "logs"
    with torch_tensorboard.SummaryWriter(str(root / "tb" / "diverge")) as writer:
        log_diverging_scalars(writer)
        writer.add_hparams({"lr": 0.5}, {"final": 1.0})
    lightning = root / "lightning_logs" / "version_0"
    lightning.mkdir(parents=True)
    with open(lightning / "metrics.csv", "w", newline="") as handle:  # sorted keys, step, empty where not logged
        out = csv.DictWriter(handle, fieldnames=["epoch", "step", "train_loss", "val_loss"])
        out.writeheader()
        for step in range(40):
            out.writerow({"epoch": step // 10, "step": step, "train_loss": 1.0 / (step + 1),
                          "val_loss": 0.5 if step % 10 == 9 else ""})
    (lightning / "hparams.yaml").write_text("lr: 0.01\n")
    with open(root / "keras.log", "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["epoch", "loss", "val_loss"])
        for epoch in range(12):
            out.writerow([epoch, 1.0 / (epoch + 1), 0.9 / (epoch + 1)])
    with tuidiag.Recorder(root / "own") as rec:
        for step in range(5):
            rec.step(1.0 / (step + 1))
    return root


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def _out(capsys, *argv: str, code: int = 0) -> str:
    capsys.readouterr()
    assert main(list(argv)) == code, capsys.readouterr()
    captured = capsys.readouterr()
    return captured.out if code == 0 else captured.err


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _root(tmp_path)


def test_ls_lists_every_kind_with_its_step_and_loss(root: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # no cell shortened
    before = _files(root)
    rows = {line.split()[-1]: line.split() for line in _out(capsys, "ls", str(root)).splitlines()[1:]}  # by path
    assert {name: row[1] for name, row in rows.items()} == {
        "tb/diverge": "tensorboard", "lightning_logs/version_0": "csv", "keras.log": "csv", "own": "tuidiag"}
    assert rows["tb/diverge"][3:5] == ["299", "nan"] and rows["lightning_logs/version_0"][3:5] == ["39", "0.025"]
    assert rows["keras.log"][3:5] == ["11", "0.08333"] and rows["own"][2:5] == ["finished", "4", "0.2"]
    assert _files(root) == before  # nothing written into any run


@pytest.mark.parametrize("target", ["tb/diverge", "tb/diverge/events", "lightning_logs/version_0", "keras.log"])
def test_diagnose_and_status_of_a_foreign_run_match_its_import(root: Path, tmp_path: Path, capsys, target: str) -> None:
    """The same findings as the run ``tuidiag import`` writes; a run's own file names the run."""
    path = root / target if not target.endswith("events") else next((root / "tb" / "diverge").glob("events.out.*"))
    run_dir = root / target.removesuffix("/events")
    before = _files(root)
    live = json.loads(_out(capsys, "diagnose", str(path), "--json"))
    kind = "tensorboard" if target.startswith("tb") else "csv"
    out = tmp_path / "imported"
    source = run_dir / "metrics.csv" if run_dir.name == "version_0" else run_dir
    _out(capsys, "import", kind, str(source), str(out), "--name", "x")
    imported_dir = next(p.parent for p in out.rglob("run.json"))
    imported = json.loads(_out(capsys, "diagnose", str(imported_dir), "--json"))
    assert [f["code"] for f in live["findings"]] == [f["code"] for f in imported["findings"]]
    assert live["step"] == imported["step"]
    if target.startswith("tb"):
        assert live["findings"][0]["code"] in ("lr_too_high", "nonfinite_loss")
    line = _out(capsys, "status", "--ascii", str(path)).strip()
    top = re.escape(badge(live["findings"][0]["code"]))  # the status line names a finding by its badge
    assert re.match(rf"^\S+ > step {imported['step']:,} loss \S+ > {top}( [<>]?\d+%)? > (\w+ )?\S+ ago$", line), line
    assert _out(capsys, "status", "--ascii", "--no-diagnosis", str(path)).count(" > ") == 2
    assert _files(root) == before


def test_compare_reads_foreign_runs_and_writing_commands_refuse_them(root: Path, capsys) -> None:
    result = json.loads(_out(capsys, "compare", str(root / "keras.log"), str(root / "lightning_logs" / "version_0"), "--json"))
    assert result["a"]["steps"] == 12 and result["b"]["steps"] == 40
    for argv in (["act", str(root / "keras.log"), "--checkpoint"], ["report", str(root / "tb" / "diverge")]):
        assert "is not a tuidiag run" in _out(capsys, *argv, code=2)  # they write beside the run: never into a log
    assert "does not exist" in _out(capsys, "diagnose", str(root / "nothing-here"), code=2)
    (root / "empty").mkdir()
    assert "is not a run (no run.json" in _out(capsys, "diagnose", str(root / "empty"), code=2)


@pytest.mark.parametrize(("name", "content", "hint"), [
    ("log.csv", "step,loss,val_loss\n0,1.0,1.1\n1,0.9,1.0\n", "tuidiag import csv"),
    ("notes.txt", "hello\n", "tuidiag ls"),
])
def test_a_file_that_is_not_a_log_says_which_logs_are_read_and_how_to_import_a_csv(tmp_path: Path, capsys, name: str,
                                                                                   content: str, hint: str) -> None:
    """A file given to a reading command that no source reads in place: the message names the logs that are read in
    place, not a directory's contents, and a CSV gets the import command that reads it."""
    path = tmp_path / name
    path.write_text(content)
    message = _out(capsys, "diagnose", str(path), code=2)
    assert "is not a log tuidiag reads in place" in message and "inside" not in message
    assert f"try: {hint}" in message

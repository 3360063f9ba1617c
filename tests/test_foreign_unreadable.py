"""A foreign log whose format needs a package that is not installed reads ``unreadable``, never healthy.

The missing package is real, not mocked: a subprocess sets ``sys.modules[name] = None`` before
importing tuidiag, so every ``import tensorboard`` (or ``wandb``) there raises ``ImportError``
exactly as on a machine without it. In that process the CLI's ``diagnose --json`` and
``status`` (with and without the diagnosis) and the overview's row are taken, and their
output, stdout and stderr, checked here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent("""
    import contextlib, io, json, sys
    sys.modules[sys.argv[1]] = None  # the package is not installed: every import of it raises ImportError
    from tuidiag.cli.main import main
    from tuidiag.cli.run_argument import load_run
    from tuidiag.diagnosis import diagnose
    from tuidiag.viewmodel.snapshot import summarize

    out = {}
    for name, args in (("diagnose", ["diagnose", "--json"]), ("status", ["status"]),
                       ("bare", ["status", "--no-diagnosis"])):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            out[name + "_rc"] = main([*args, sys.argv[2]])
        out[name] = buffer.getvalue()
    run = load_run(sys.argv[2], foreign=True)
    row = summarize(run, diagnose(run))
    out["row"] = [row.status, row.problem, row.health, row.health_severity]
    print("JSON" + json.dumps(out))
""")


def _tensorboard_log(base: Path) -> Path:
    """A real event file, written by tensorboard's own writer (in this process, where it is installed)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    directory = base / "tblogs" / "exp1"
    writer = EventFileWriter(str(directory))
    for step in range(20):
        writer.add_event(Event(wall_time=1_700_000_000.0 + step, step=step,
                               summary=Summary(value=[Summary.Value(tag="Loss/train", simple_value=1.0 / (step + 1))])))
    writer.close()
    return directory


def _wandb_log(base: Path) -> Path:
    """A W&B offline run's layout (the reader stops at the missing package before reading a byte of it)."""
    directory = base / "wandb" / "offline-run-1-abc"
    (directory / "files").mkdir(parents=True)
    (directory / "run-abc.wandb").write_bytes(b":W&B\x00\x00\x00\x00")
    return directory


@pytest.mark.parametrize(("package", "make", "extra"), [("tensorboard", _tensorboard_log, "tensorboard"),
                                                        ("wandb", _wandb_log, "wandb")])
def test_a_log_that_needs_a_missing_package_reads_unreadable_everywhere(tmp_path: Path, package: str, make, extra: str) -> None:
    log = make(tmp_path)
    done = subprocess.run([sys.executable, "-c", PROBE, package, str(log)], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.split("JSON", 1)[1])
    remedy = f"install tuidiag[{extra}]"

    report = json.loads(out["diagnose"])
    assert out["diagnose_rc"] == 0 and [f["code"] for f in report["findings"]] == ["unreadable"]
    top = report["findings"][0]
    assert top["title"] == f"Unreadable: {remedy}" and top["severity"] == "warning"
    assert any(f"pip install 'tuidiag[{extra}]'" in line for line in top["evidence"])
    assert report["notes"] == [] and report["skipped"] == []  # the hint once, in the finding, not again as skipped
    assert "healthy" not in out["diagnose"] and "No problem" not in out["diagnose"]

    for line in (out["status"], out["bare"]):
        assert f"unreadable: {remedy}" in line and "healthy" not in line
        assert line.count(remedy) == 1
    assert out["row"] == ["unreadable", remedy, "unreadable", "warning"]
    assert f"needs the {package} package" not in done.stderr  # said once, on stdout, not again as a log warning


def test_the_readme_names_the_extras() -> None:
    section = (ROOT / "README.md").read_text().split("## Already using TensorBoard or W&B?", 1)[1].split("\n## ", 1)[0]
    assert "pip install 'tuidiag[tensorboard]'" in section and "pip install 'tuidiag[wandb]'" in section

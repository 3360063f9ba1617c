"""Importing TensorBoard event files: torch SummaryWriter and TF2-style tensor scalars, checked against tbparse."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tbparse import SummaryReader
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from torch.utils.tensorboard import SummaryWriter

import tuidiag
from tests.synthetic_runs import log_diverging_scalars
from tuidiag.cli.main import main

N_POINTS = 12_000
SPIKE_STEP = 7_321


def _torch_logs(logdir: Path) -> None:
    """A torch run with >10,000 loss points and one spike, add_scalars, and a nested second run."""
    rng = np.random.default_rng(0)
    loss = 2.0 * np.exp(-np.arange(N_POINTS) / 3000) + 0.05 * rng.random(N_POINTS)
    loss[SPIKE_STEP] = 1000.0
    with SummaryWriter(str(logdir / "exp1")) as writer:
        for step, value in enumerate(loss):
            writer.add_scalar("Loss/train", float(value), step)
            if step % 1000 == 0:
                writer.add_scalar("lr", 0.1 * 0.5 ** (step // 4000), step)
                writer.add_scalars("Acc", {"train": step / N_POINTS, "val": step / N_POINTS / 2}, step)
    with SummaryWriter(str(logdir / "group" / "exp2")) as writer:
        for step in range(50):
            writer.add_scalar("train_loss", 1.0 / (step + 1), step)
            writer.add_scalar("custom/metric", float(step), step)


def _tf2_file(logdir: Path, points: list[tuple[int, str, float]], tags_seen: set[str]) -> None:
    """Events as TF2's tf.summary.scalar writes them: float tensors, plugin metadata on a tag's first event only."""
    writer = EventFileWriter(str(logdir))
    for step, tag, value in points:
        summary = scalar_pb(tag, value)
        if tag in tags_seen:
            summary.value[0].ClearField("metadata")
        tags_seen.add(tag)
        writer.add_event(Event(wall_time=1_700_000_000.0 + step, step=step, summary=summary))
    writer.close()


def _tf2_keras_logs(logdir: Path) -> None:
    """Keras' TensorBoard callback layout (train/ and validation/), the train split in two files, with a spike."""
    run = logdir / "keras_fit"
    seen: set[str] = set()
    n = 10_500
    values = [1.0 + math.sin(step / 50) * 0.1 for step in range(n)]
    values[8_000] = 500.0
    first = [(s, "epoch_loss", values[s]) for s in range(6_000)] + [(0, "epoch_learning_rate", 0.01)]
    _tf2_file(run / "train", first, seen)
    _tf2_file(run / "train", [(s, "epoch_loss", values[s]) for s in range(6_000, n)], seen)
    _tf2_file(run / "validation", [(s, "epoch_loss", 2.0 - s / 100) for s in range(0, n, 500)], set())


def _tbparse(logdir: Path, kind: str) -> pd.DataFrame:
    reader = SummaryReader(str(logdir), pivot=False, extra_columns={"wall_time", "dir_name"})
    frame = reader.scalars if kind == "scalars" else reader.tensors
    frame["value"] = frame["value"].astype(np.float64)
    return frame


def _imported(run_dir: Path, metric: str) -> pd.DataFrame:
    frame = tuidiag.open_run(run_dir).to_pandas()
    return frame[frame["metric"] == metric][["step", "value", "wall_time"]]


def _same_points(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    """Every step, value and wall time equal, as multisets (NaN equal to NaN)."""
    key = ["step", "value", "wall_time"]
    a = ours[key].sort_values(key, ignore_index=True)
    b = theirs[key].sort_values(key, ignore_index=True)
    assert len(a) == len(b)
    np.testing.assert_array_equal(a["step"].to_numpy(np.int64), b["step"].to_numpy(np.int64))
    np.testing.assert_array_equal(a["value"].to_numpy(), b["value"].to_numpy())
    np.testing.assert_allclose(a["wall_time"].to_numpy(), b["wall_time"].to_numpy(), rtol=0, atol=1e-6)


def test_torch_summary_writer_import_matches_tbparse(tmp_path: Path, capsys) -> None:
    logdir, out = tmp_path / "tb", tmp_path / "runs"
    _torch_logs(logdir)
    assert main(["import", "tensorboard", str(logdir), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Loss/train -> train/loss" in printed and "Acc/val -> val/acc" in printed and "custom/metric" in printed
    theirs = _tbparse(logdir, "scalars")
    expected = {
        ("exp1", "Loss/train"): ("tb/exp1", "train/loss"), ("exp1", "lr"): ("tb/exp1", "lr/group0"),
        ("exp1/Acc_train", "Acc"): ("tb/exp1", "train/acc"), ("exp1/Acc_val", "Acc"): ("tb/exp1", "val/acc"),
        ("group/exp2", "train_loss"): ("tb/group/exp2", "train/loss"),
        ("group/exp2", "custom/metric"): ("tb/group/exp2", "custom/metric"),
    }
    assert set(theirs.groupby(["dir_name", "tag"]).groups) == set(expected)
    for (dir_name, tag), (run, metric) in expected.items():
        _same_points(_imported(out / run, metric), theirs[(theirs["dir_name"] == dir_name) & (theirs["tag"] == tag)])
    loss = tuidiag.open_run(out / "tb/exp1").series("train/loss")
    assert len(loss) == N_POINTS and loss.values.max() == 1000.0 and loss.steps[loss.values.argmax()] == SPIKE_STEP


def test_tf2_tensor_scalars_and_keras_layout_match_tbparse(tmp_path: Path, capsys) -> None:
    logdir, out = tmp_path / "logs", tmp_path / "runs"
    _tf2_keras_logs(logdir)
    assert main(["import", "tensorboard", str(logdir), str(out), "--name", "k"]) == 0
    assert "validation/epoch_loss -> val/loss" in capsys.readouterr().out
    theirs = _tbparse(logdir, "tensors")
    run_dir = out / "k" / "keras_fit"
    pairs = {("keras_fit/train", "epoch_loss"): "train/loss", ("keras_fit/train", "epoch_learning_rate"): "lr/group0",
             ("keras_fit/validation", "epoch_loss"): "val/loss"}
    assert set(theirs.groupby(["dir_name", "tag"]).groups) == set(pairs)
    for (dir_name, tag), metric in pairs.items():
        _same_points(_imported(run_dir, metric), theirs[(theirs["dir_name"] == dir_name) & (theirs["tag"] == tag)])
    loss = tuidiag.open_run(run_dir).series("train/loss")
    assert len(loss) == 10_500 and loss.steps[loss.values.argmax()] == 8_000
    assert json.loads((run_dir / "run.json").read_text())["source"]["format"] == "tensorboard"


def test_diverging_tensorboard_run_is_diagnosed(tmp_path: Path, capsys) -> None:
    logdir, out = tmp_path / "tb", tmp_path / "runs"
    with SummaryWriter(str(logdir / "diverge")) as writer:
        log_diverging_scalars(writer)
    assert main(["import", "tensorboard", str(logdir), str(out)]) == 0
    capsys.readouterr()
    assert main(["diagnose", str(out / "tb" / "diverge"), "--json"]) == 0
    codes = [f["code"] for f in json.loads(capsys.readouterr().out)["findings"]]
    assert codes[0] in ("lr_too_high", "nonfinite_loss") and "nonfinite_loss" in codes
    run = tuidiag.open_run(out / "tb" / "diverge")
    assert run.status == "finished" and [e.kind for e in run.events] == ["imported", "nonfinite"]
    assert main(["ls", str(out)]) == 0
    assert "finished" in capsys.readouterr().out


def test_runs_never_nest_and_runs_without_scalars_are_skipped(tmp_path: Path, capsys) -> None:
    logdir, out = tmp_path / "tb", tmp_path / "runs"
    with SummaryWriter(str(logdir)) as writer:
        writer.add_scalar("loss", 1.0, 0)
    with SummaryWriter(str(logdir / "sub")) as writer:
        writer.add_scalar("loss", 2.0, 0)
    with SummaryWriter(str(logdir / "hist_only")) as writer:
        writer.add_histogram("weights", np.arange(10.0), 0)
    assert main(["import", "tensorboard", str(logdir), str(out), "--name", "x"]) == 0
    assert "no scalar values" in capsys.readouterr().out
    assert [p.name for p in tuidiag.find_runs(out)] == ["_root", "sub"]
    assert tuidiag.open_run(out / "x" / "_root").series("train/loss").last == 1.0
    assert tuidiag.open_run(out / "x" / "sub").series("train/loss").last == 2.0
    assert not (out / "x" / "hist_only").exists()


def test_a_corrupt_record_keeps_what_came_before_and_is_reported(tmp_path: Path, capsys) -> None:
    logdir = tmp_path / "tb"
    with SummaryWriter(str(logdir / "r")) as writer:
        for step in range(1000):
            writer.add_scalar("loss", 1.0 / (step + 1), step)
    path = next((logdir / "r").glob("events.out.tfevents.*"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert main(["import", "tensorboard", str(logdir), str(tmp_path / "runs")]) == 0
    assert "corrupt or truncated" in capsys.readouterr().out
    loss = tuidiag.open_run(tmp_path / "runs" / "tb" / "r").series("train/loss")
    assert 0 < len(loss) < 1000 and len(loss) == len(_tbparse(logdir, "scalars"))
    np.testing.assert_array_equal(loss.steps, np.arange(len(loss)))


def test_a_missing_tensorboard_package_is_named(tmp_path: Path) -> None:
    _tf2_file(tmp_path / "logs", [(0, "loss", 1.0)], set())
    code = ("import sys; sys.modules['tensorboard'] = None; "
            "from tuidiag.cli.main import main; sys.exit(main(sys.argv[1:]))")
    args = ["import", "tensorboard", str(tmp_path / "logs"), str(tmp_path / "out")]
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "pip install" in result.stderr and "tensorboard" in result.stderr
    assert not (tmp_path / "out").exists()


def test_tensorboard_import_runs_without_torch(tmp_path: Path) -> None:
    _tf2_file(tmp_path / "logs", [(step, "train/loss", 1.0 / (step + 1)) for step in range(30)], set())
    code = "import sys; sys.modules['torch'] = None; from tuidiag.cli.main import main; sys.exit(main(sys.argv[1:]))"
    args = ["import", "tensorboard", str(tmp_path / "logs"), str(tmp_path / "out")]
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(tuidiag.open_run(tmp_path / "out" / "logs").series("train/loss")) == 30


@pytest.mark.parametrize("make", ["missing", "empty_dir", "file"])
def test_unreadable_logdir_exits_2(tmp_path: Path, capsys, make: str) -> None:
    src = tmp_path / "src"
    if make == "empty_dir":
        src.mkdir()
    elif make == "file":
        src.write_text("not events")
    assert main(["import", "tensorboard", str(src), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tuidiag import: ") and len(err.strip().splitlines()) == 1

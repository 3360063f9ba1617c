"""The incremental readers of foreign logs: however a file grows (cut at any byte), reading it
piece by piece gives what one read of the whole file gives; and which run each file belongs to.

The files are written by the tools' own writers (tensorboard's ``EventFileWriter``, the one
under torch's ``SummaryWriter``; wandb in offline mode, in a subprocess) or, for CSV, in
Lightning's layout with the csv module as Lightning writes it; hypothesis picks the cuts.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT
from tuidiag.format import LOSS
from tuidiag.sources import discover, kind_of, owner_of
from tuidiag.sources.csv_log_source import CsvLogSource
from tuidiag.sources.foreign_run import ForeignRun
from tuidiag.sources.tensorboard_source import TensorBoardSource
from tuidiag.sources.wandb_source import WandbSource

EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _tensorboard_log(directory: Path) -> Path:
    """An event file from tensorboard's own writer: simple values (torch's form), TF2 scalar tensors
    (plugin named in the first event only), a non-finite loss, and a histogram that is not a scalar."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(directory))
    scalars = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    histograms = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="histograms"))
    for step in range(60):
        loss = float("nan") if step == 41 else 1.0 / (step + 1)
        values = [Summary.Value(tag="train_loss", simple_value=loss),
                  Summary.Value(tag="epoch_accuracy", tensor=tensor_util.make_tensor_proto(step / 60.0),
                                metadata=scalars if step == 0 else None),
                  Summary.Value(tag="weights", tensor=tensor_util.make_tensor_proto(np.ones(3)),
                                metadata=histograms if step == 0 else None)]
        writer.add_event(Event(wall_time=1_700_000_000.0 + step, step=step, summary=Summary(value=values)))
    writer.close()
    return directory


def _wandb_log(directory: Path) -> Path:
    """An offline W&B run, written by wandb itself: a config over 32 KiB (a record across blocks), 400 rows."""
    script = textwrap.dedent("""
        import sys, wandb
        run = wandb.init(project="t", dir=sys.argv[1], config={"big": "x" * 100_000, "lr": 0.1},
                         settings=wandb.Settings(x_stats_sampling_interval=1.0))
        for i in range(400):
            run.log({"loss": float("nan") if i == 300 else 1.0 / (i + 1), "acc": {"train": i / 400}})
        run.config.update({"late": 3})
        run.finish()
    """)
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_CACHE_DIR=str(directory / ".cache"),
               WANDB_CONFIG_DIR=str(directory / ".config"), WANDB_DATA_DIR=str(directory / ".data"))
    subprocess.run([sys.executable, "-c", script, str(directory)], check=True, env=env, cwd=ROOT, timeout=120,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return next((directory / "wandb").glob("offline-run-*"))


def _lightning_csv(rows: int, columns: list[str]) -> bytes:
    """metrics.csv as Lightning's CSVLogger writes it: sorted keys, ``step``, empty cells where not logged."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=sorted(columns + ["step"]))
    writer.writeheader()
    for step in range(rows):
        row = {"step": step, "train_loss": 1.0 / (step + 1)}
        if "val_loss" in columns and step % 5 == 4:
            row["val_loss"] = 2.0 / (step + 1)
        writer.writerow(row)
    return out.getvalue().encode()


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("foreign")
    return {"tensorboard": _tensorboard_log(base / "tb"), "wandb": _wandb_log(base / "wb")}


def _files(run: Path, kind: str) -> list[Path]:
    if kind == "tensorboard":
        return sorted(run.glob("events.out.tfevents.*"))
    return sorted(run.glob("run-*.wandb"))


def _series(run: ForeignRun, with_walls: bool = True) -> dict[str, tuple]:
    out = {}
    for name in run.metric_names:
        s = run.series(name)
        out[name] = (s.steps.tolist(), np.nan_to_num(s.values, nan=-1.0).tolist(), s.wall_times.tolist() if with_walls else None)
    return out


SOURCES = {"tensorboard": TensorBoardSource(), "wandb": WandbSource()}


@pytest.mark.parametrize("kind", ["tensorboard", "wandb"])
@EXAMPLES
@given(fractions=st.lists(st.floats(0, 1), max_size=8))
def test_a_log_read_as_it_grows_equals_one_read_of_the_whole(logs, tmp_path_factory, kind: str, fractions: list[float]) -> None:
    source_run = logs[kind]
    (whole_file,) = _files(source_run, kind)
    data = whole_file.read_bytes()
    growing = tmp_path_factory.mktemp("growing") / source_run.name
    growing.mkdir()
    target = growing / whole_file.name
    target.write_bytes(b"")
    live = SOURCES[kind].open(growing)
    written = 0
    for cut in sorted(int(f * len(data)) for f in fractions) + [len(data)]:
        with open(target, "ab") as handle:  # the writer appends; the reader may see any prefix
            handle.write(data[written:cut])
        written = max(written, cut)
        live.refresh()
    whole = SOURCES[kind].open(source_run)
    assert _series(live) == _series(whole)
    assert live.manifest["config"] == whole.manifest["config"] and live.events == whole.events
    assert not live.warnings


def test_what_the_readers_take_from_each_log(logs) -> None:
    """Mapped names, config, the first non-finite loss as an event, system metrics, the end of a W&B run."""
    tb = SOURCES["tensorboard"].open(logs["tensorboard"])
    assert set(tb.metric_names) == {LOSS, "train/acc"}  # the histogram is no scalar; epoch_accuracy is an alias
    assert [(e.kind, e.step) for e in tb.events] == [("nonfinite", 41)]
    wb = SOURCES["wandb"].open(logs["wandb"])
    assert {LOSS, "train/acc"} <= set(wb.metric_names) and any(n.startswith("sys/") for n in wb.metric_names)
    assert wb.series(LOSS).steps.tolist() == list(range(400))
    assert {k: wb.manifest["config"][k] for k in ("lr", "late")} == {"lr": 0.1, "late": 3}
    assert len(wb.manifest["config"]["big"]) == 100_000
    assert wb.status == "finished" and [(e.kind, e.step) for e in wb.events] == [("nonfinite", 300)]


@EXAMPLES
@given(first=st.lists(st.floats(0, 1), max_size=5), second=st.lists(st.floats(0, 1), max_size=5),
       rows=st.integers(1, 40), more=st.integers(0, 40))
def test_a_lightning_csv_rewritten_under_a_new_header_is_read_again_not_doubled(tmp_path_factory, first, second, rows, more) -> None:
    """Lightning appends rows, and rewrites the whole file (``w`` mode) when a metric first appears."""
    before = _lightning_csv(rows, ["train_loss"])
    after = _lightning_csv(rows + more, ["train_loss", "val_loss"])
    run_dir = tmp_path_factory.mktemp("lightning") / "version_0"
    run_dir.mkdir()
    path = run_dir / "metrics.csv"
    path.write_bytes(b"")
    live = CsvLogSource().open(run_dir)
    for data, cuts in ((before, first), (after, second)):
        path.write_bytes(b"")  # the rewrite truncates first; the reader may come in at any point of it
        live.refresh()
        written = 0
        for cut in sorted(int(f * len(data)) for f in cuts) + [len(data)]:
            with open(path, "ab") as handle:
                handle.write(data[written:cut])
            written = max(written, cut)
            live.refresh()
    whole = CsvLogSource().open(run_dir)
    assert _series(live, with_walls=False) == _series(whole, with_walls=False)
    assert live.series(LOSS).steps.tolist() == list(range(rows + more))
    assert len(live.series("val/loss")) == (rows + more) // 5


def test_a_record_that_fails_its_checksum_is_reported_once_it_stays(logs, tmp_path) -> None:
    (event_file,) = _files(logs["tensorboard"], "tensorboard")
    data = bytearray(event_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    run = tmp_path / "corrupt"
    run.mkdir()
    (run / event_file.name).write_bytes(bytes(data))
    live = TensorBoardSource().open(run)
    assert not live.warnings  # at first it may be a write still going on
    live.refresh()
    assert any("CRC" in w for w in live.warnings) and 0 < len(live.series(LOSS)) < 60


@pytest.mark.parametrize("layout, kind, key", [
    ({"runs/exp1/events.out.tfevents.1.h.1.0": b"", "runs/exp1/Loss_train/events.out.tfevents.1.h.1.1": b""},
     "tensorboard", "runs/exp1"),
    ({"logs/fit/train/events.out.tfevents.1.h": b"", "logs/fit/validation/events.out.tfevents.2.h": b""}, "tensorboard", "logs/fit"),
    ({"wandb/offline-run-1-abc/run-abc.wandb": b"", "wandb/offline-run-1-abc/files/config.yaml": b"a: 1\n"},
     "wandb", "wandb/offline-run-1-abc"),
    ({"lightning_logs/version_3/metrics.csv": b"epoch,step,train_loss\n", "lightning_logs/version_3/hparams.yaml": b""},
     "csv", "lightning_logs/version_3"),
    ({"keras/training.log": b"epoch,loss,val_loss\n0,1.0,2.0\n", "keras/notes.csv": b"name,value\n"}, "csv", "keras/training.log"),
    ({"own/run.json": b"{}", "own/events.out.tfevents.1.h": b""}, "tuidiag", "own"),
])
def test_each_kind_is_found_once_and_its_files_lead_to_it(tmp_path, layout: dict[str, bytes], kind: str, key: str) -> None:
    for name, content in layout.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "events.out.tfevents.9.h").write_bytes(b"")
    assert discover(tmp_path) == {tmp_path / key: kind}
    if not key.endswith(".log"):
        assert kind_of(tmp_path / key) == kind
    if kind == "tuidiag":  # the recorder's files are complete only once renamed into place: writes in place do not count
        assert owner_of(tmp_path / "own" / "run.json", modified=True) is None
        assert owner_of(tmp_path / "own" / "run.json") == tmp_path / "own"
        return
    for name in layout:
        if "tfevents" in name or name.endswith((".wandb", "metrics.csv", "training.log")):
            assert owner_of(tmp_path / name, modified=True) == tmp_path / key
    assert owner_of(tmp_path / "keras" / "notes.csv", modified=True) is None


@pytest.mark.parametrize("log_file, content", [
    ("metrics.csv", "epoch,step,train_loss\n0,0,1.0\n"),
    ("events.out.tfevents.1.h", None),
])
def test_lightnings_hparams_yaml_is_the_config_and_follows_its_changes(tmp_path, logs, log_file: str, content: str | None) -> None:
    """Lightning's loggers (CSV and TensorBoard) write hparams.yaml beside the metrics, and again when hparams change."""
    run_dir = tmp_path / "lightning_logs" / "version_0"
    run_dir.mkdir(parents=True)
    if content is None:
        (run_dir / log_file).write_bytes(_files(logs["tensorboard"], "tensorboard")[0].read_bytes())
    else:
        (run_dir / log_file).write_text(content)
    (run_dir / "hparams.yaml").write_text("lr: 0.01\nmodel:\n  width: 8\n")
    kind = discover(tmp_path)[run_dir]
    run = {"csv": CsvLogSource(), "tensorboard": TensorBoardSource()}[kind].open(run_dir)
    assert run.name == "lightning_logs/version_0" and run.manifest["config"] == {"lr": 0.01, "model": {"width": 8}}
    (run_dir / "hparams.yaml").write_text("lr: 0.02\n")
    os.utime(run_dir / "hparams.yaml", ns=(1, 1))
    run.refresh()
    assert run.manifest["config"] == {"lr": 0.02}

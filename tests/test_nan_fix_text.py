"""The non-finite loss's fix offers the NaN hunt only where it can run and has not run yet.

- A run that names a factory (or a live recorder) and has no NaN-hunt result: the fix offers the hunt.
- Once a hunt named the operation: the fix names it (and the user's line it found), and offers the hunt no more.
- A hunt result that is not evidence (no capture, no non-finite step) leaves the offer as it was.
- Another tracker's log (a Lightning CSV, a TensorBoard event file) or a finished run with no factory: never offered.

The regression: the fix ended "run the NaN hunt to name the operation" after the hunt had named it, and on a
TensorBoard log, where no hunt can run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic_runs import write_run  # noqa: E402

from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.sources import locate, open_source  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.store.job_results import job_records, save_result  # noqa: E402
from tuidiag.store.manifest import read_manifest, write_manifest  # noqa: E402

OFFER = "run the NaN hunt"
NAN_AT = 80
LOSSES = [1.0 + 0.01 * ((s * 7) % 5) for s in range(NAN_AT)] + [float("nan")] * 5
"""A calm loss that turns NaN at once at step 80: a numerical fault, nothing grew before (the fix that offers the hunt)."""

HUNTS: dict[str, dict[str, Any] | None] = {
    "no hunt": None,
    "named the op": {"verdict": "forward", "summary": "forward pass: module head (Linear) produced NaN (op torch.log)",
                     "module": "head", "op": "torch.log", "created": True, "step": NAN_AT,
                     "op_stack": ["train.py:12 in forward: h = self.body(x)", "train.py:31 in loss_fn: return torch.log(p).mean()"]},
    "backward culprit": {"verdict": "backward", "summary": "backward pass: body (Linear), op SqrtBackward0, returned non-finite "
                         "gradients from finite incoming gradients", "module": "body", "op": "SqrtBackward0", "step": NAN_AT},
    "no capture": {"verdict": "no_capture", "summary": "no NaN capture in this run"},
}


def _own(tmp_path: Path, **manifest: Any) -> Path:
    """A run of the recorder's format with ``manifest`` fields written over the finished run's."""
    series = {"train/loss": (np.arange(len(LOSSES)), np.array(LOSSES))}
    run_dir = write_run(tmp_path / "own", series, step_seconds=1.0)
    write_manifest(run_dir, {**read_manifest(run_dir), **manifest})
    return run_dir


def _nonfinite(diagnosis):
    return next(f for f in diagnosis.findings if f.code == "nonfinite_loss")


@pytest.mark.parametrize("hunt", list(HUNTS))
@pytest.mark.parametrize("runnable", ["factory", "live recorder", "no factory"])
def test_the_hunt_is_offered_only_where_it_can_run_and_has_not_named_the_op(tmp_path: Path, hunt: str, runnable: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUIDIAG_CACHE_DIR", str(tmp_path / "cache"))
    manifest = {"factory": {"factory": "train:build"}, "live recorder": {"status": "running", "control": {"dir": ".control"}},
                "no factory": {}}[runnable]
    run_dir = _own(tmp_path, **manifest)
    if HUNTS[hunt] is not None:
        save_result(run_dir, "nan_hunt", HUNTS[hunt], step=NAN_AT + 4)
    run = open_run(run_dir)
    fix = _nonfinite(diagnose(run, jobs=job_records(run))).fix
    counts = hunt in ("named the op", "backward culprit")
    assert (OFFER in fix) == (runnable != "no factory" and not counts)
    if counts:
        assert f"guard the operation {HUNTS[hunt]['op']} in {HUNTS[hunt]['module']}" in fix
    if hunt == "named the op":
        assert "at train.py:31 (clamp its input" in fix  # the user's line the hunt found


def _lightning(root: Path) -> Path:
    log = root / "lightning_logs" / "version_0"
    log.mkdir(parents=True)
    (log / "metrics.csv").write_text("epoch,step,train_loss\n" + "".join(f"0,{s},{v}\n" for s, v in enumerate(LOSSES)))
    return log


def _tensorboard(root: Path) -> Path:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    log = root / "tb" / "exp1"
    writer = EventFileWriter(str(log))
    for step, value in enumerate(LOSSES):
        writer.add_event(Event(wall_time=1.7e9 + step, step=step, summary=Summary(value=[Summary.Value(tag="Loss/train", simple_value=value)])))
    writer.close()
    return log


@pytest.mark.parametrize("make", [_lightning, _tensorboard], ids=["lightning csv", "tensorboard"])
def test_another_trackers_log_is_never_offered_the_hunt(tmp_path: Path, make) -> None:
    found = locate(make(tmp_path))
    assert found is not None
    run = open_source(*found)
    fix = _nonfinite(diagnose(run)).fix
    assert OFFER not in fix and "guard the operation that made it" in fix

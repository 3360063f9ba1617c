"""Replayed control requests: a request runs at most once, whatever happens to its files.

For every request kind (the three live actions and the four live jobs) a real training
takes one request, and then every way to bring it back is tried on its files: the
status file renamed to the request's name or to a new one, the cancel file renamed, the
request's content written again under its own or a new name, a hard link made before
pickup, a result file passed off as a request, and a second training process resuming
the run with a replayed file waiting. Exactly one execution shows: one ``action`` event
(and one checkpoint), or one job result. The regression: another user (uid 65534)
renaming status files five times in a control directory they could write.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import tuidiag
from tuidiag.store import control_channel as ctl
from tuidiag.store import open_run
from tuidiag.store.job_results import list_results

KINDS: dict[str, dict[str, Any]] = {
    "scale_lr": {"factor": 0.5},
    "clip_grad": {"max_norm": 1.0},
    "checkpoint": {},
    "lr_find": {"steps": 6},
    "sharpness": {"samples": 2, "batches": 1},
    "overfit_batch": {"steps": 4},
    "nan_hunt": {"steps": 2},
}
REPLAYS = ("status-to-own-name", "status-to-new-name", "cancel-to-own-name", "content-own-name",
           "content-new-name", "hard-link-before-pickup", "result-as-request", "fresh-created-same-id")
NOBODY = 65534


class Training:
    """A tiny real training with the recorder watching it; ``steps(n)`` runs n steps, flushing first."""

    def __init__(self, run_dir: Path) -> None:
        torch.manual_seed(0)
        torch.set_num_threads(1)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)
        self.loss_fn = nn.CrossEntropyLoss()
        self.rec = tuidiag.Recorder(run_dir, flush_interval=30.0, resume="allow")
        self.rec.watch(self.model, self.optimizer, loss_fn=self.loss_fn)

    def steps(self, n: int) -> None:
        self.rec.flush()  # the writer thread lists RUN/control at each flush
        for _ in range(n):
            x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
            self.rec.batch(x, y)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            self.rec.step(loss)
            self.optimizer.step()
            self.optimizer.zero_grad()
        self.rec.flush()  # what the steps did is on disk for the counts

    def close(self) -> None:
        self.rec.close()


def executions(run_dir: Path, kind: str) -> int:
    """How many times ``kind`` visibly ran: its ``action`` events, or its job results."""
    if kind in ctl.LIVE_ACTIONS:
        events = [e for e in open_run(run_dir).events if e.kind == "action" and e.data.get("action") == kind]
        if kind == "checkpoint":
            assert len(list((run_dir / "checkpoints").glob("*.pt"))) == len(events)
        return len(events)
    return len(list_results(run_dir, kind))


def replay(control: Path, method: str, request_id: str, original: dict[str, Any], run_dir: Path) -> None:
    """Bring request ``request_id`` back by ``method`` (as the training's own user)."""
    new = f"{original['job']}-replay-{method}"
    request = control / f"{request_id}{ctl.REQUEST_SUFFIX}"
    status = control / f"{request_id}{ctl.STATUS_SUFFIX}"
    if method == "status-to-own-name":
        shutil.copy(status, request)
    elif method == "status-to-new-name":
        shutil.copy(status, control / f"{new}{ctl.REQUEST_SUFFIX}")
    elif method == "cancel-to-own-name":
        (control / f"{request_id}{ctl.REQUEST_SUFFIX}").write_text(json.dumps({"id": request_id, "created": time.time()}))
    elif method == "content-own-name":
        request.write_text(json.dumps(original))
    elif method == "content-new-name":
        (control / f"{new}{ctl.REQUEST_SUFFIX}").write_text(json.dumps(original))
    elif method == "result-as-request":
        results = list_results(run_dir) or [control / f"{request_id}{ctl.STATUS_SUFFIX}"]
        shutil.copy(results[0], control / f"{new}{ctl.REQUEST_SUFFIX}")
    elif method == "fresh-created-same-id":
        request.write_text(json.dumps({**original, "created": time.time() + 1}))
    for path in control.glob(f"*{ctl.REQUEST_SUFFIX}"):
        path.chmod(0o600)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_request_runs_at_most_once_whatever_happens_to_its_files(tmp_path: Path, kind: str) -> None:
    run_dir = tmp_path / "run"
    control = ctl.control_dir(run_dir)
    training = Training(run_dir)
    try:
        training.steps(3)
        request_id = ctl.write_request(run_dir, kind, KINDS[kind])
        original = json.loads((control / f"{request_id}{ctl.REQUEST_SUFFIX}").read_text())
        os.link(control / f"{request_id}{ctl.REQUEST_SUFFIX}", control / f"{kind}-linked{ctl.REQUEST_SUFFIX}")
        training.steps(6)
        assert executions(run_dir, kind) == 1, ctl.read_status(run_dir, request_id)
        first_status = ctl.read_status(run_dir, request_id)
        for method in REPLAYS:
            if method != "hard-link-before-pickup":
                replay(control, method, request_id, original, run_dir)
            training.steps(4)
            assert executions(run_dir, kind) == 1, method
        assert ctl.read_status(run_dir, request_id)["state"] == first_status["state"]  # never overwritten
    finally:
        training.close()
    # a second training process resumes the run: the log, not its memory, says the id ran
    replay(control, "content-own-name", request_id, original, run_dir)
    training = Training(run_dir)
    try:
        training.steps(3)
    finally:
        training.close()
    assert executions(run_dir, kind) == 1
    assert not list(control.glob(f"*{ctl.REQUEST_SUFFIX}"))  # every replayed file was answered and removed
    refused = [e for e in open_run(run_dir).events if e.kind == "control_refused"]
    assert len(refused) >= len(REPLAYS)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory another user can reach (pytest's own temporary directories are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="tuidiag-shared-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")
def test_another_user_renaming_status_files_replays_nothing(shared_tmp: Path) -> None:
    """The regression: uid 65534 renamed a victim's status file five times; six checkpoints were written."""
    tmp_path = shared_tmp
    run_dir = tmp_path / "run"
    training = Training(run_dir)
    control = ctl.control_dir(run_dir)
    try:
        training.steps(2)
        request_id = ctl.write_request(run_dir, "checkpoint", {})
        training.steps(2)
        assert executions(run_dir, "checkpoint") == 1
        os.chmod(run_dir, 0o777)
        os.chmod(control, 0o777)  # a shared run: anyone may rename the victim's files
        for attempt in range(5):
            status = control / f"{request_id}{ctl.STATUS_SUFFIX}"
            names = [f"{request_id}{ctl.REQUEST_SUFFIX}", f"checkpoint-other-{attempt}{ctl.REQUEST_SUFFIX}"]
            shutil.copy2(status, tmp_path / "status.bak")  # (to put the victim's status back for the next try)
            pid = os.fork()
            if pid == 0:  # the other user renames the victim's status file to a request's name
                try:
                    os.setgid(NOBODY)
                    os.setuid(NOBODY)
                    os.rename(status, control / names[attempt % 2])
                    os._exit(0)
                except BaseException:
                    os._exit(1)
            assert os.waitpid(pid, 0)[1] == 0
            assert (control / names[attempt % 2]).stat().st_uid == 0  # still the victim's own file
            training.steps(2)
            shutil.copy2(tmp_path / "status.bak", status)
        assert executions(run_dir, "checkpoint") == 1
        actions = [e for e in open_run(run_dir).events if e.kind == "action"]
        assert len(actions) == 1 and len(list((run_dir / "checkpoints").glob("*.pt"))) == 1
    finally:
        training.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user needs root")
@pytest.mark.parametrize("state", ["group-writable", "world-writable", "other-owner", "symlink"])
def test_no_request_is_taken_from_a_control_directory_others_can_write(tmp_path: Path, state: str) -> None:
    run_dir = tmp_path / "run"
    training = Training(run_dir)
    control = ctl.control_dir(run_dir)
    try:
        training.steps(1)
        request_id = ctl.write_request(run_dir, "checkpoint", {})
        if state == "symlink":
            real = tmp_path / "elsewhere"
            control.rename(real)
            control.symlink_to(real)
        else:
            control.chmod({"group-writable": 0o770, "world-writable": 0o777, "other-owner": 0o700}[state])
            if state == "other-owner":
                os.chown(control, NOBODY, NOBODY)
        training.steps(2)
        assert executions(run_dir, "checkpoint") == 0
        status = ctl.read_status(run_dir, request_id)
        assert state == "symlink" or (status["state"] == "refused" and str(control) in status["message"])
    finally:
        training.close()

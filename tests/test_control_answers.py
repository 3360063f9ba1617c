"""The control channel is answered, always (``tuidiag.store.control_channel``, ``tuidiag.recorder.request_runner``).

A hypothesis test writes requests of every shape into a live recorder's control
directory (binary garbage, any JSON, unknown jobs, arguments of the wrong types,
JSON nested too deeply, files over the size limit, bad deadlines, group-writable
files) beside a valid one: each gets a status at the next poll and a final one
within the steps its job takes, or at close; the valid one is never held up. A
training that ends (close, exit, an exception) or is SIGKILLed with requests
pending answers them ``expired``, or its requester does, within seconds. The CLI
and the monitor stop waiting at the deadline they state, and a request given up
is never applied later.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import tuidiag
from tuidiag.viewmodel.actions import Proposal
from tuidiag.store import control_channel as ctl
from tuidiag.store.limits import MAX_CONTROL_REQUEST_BYTES

ROOT = Path(__file__).resolve().parent.parent
FINAL = set(ctl.FINAL_STATES)

JSON_LEAF = (st.none() | st.booleans() | st.integers(-10, 10) | st.integers(2**63, 2**70) | st.floats()
             | st.text(max_size=12))
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                          max_leaves=8)
ARG_NAMES = ["steps", "start", "end", "factor", "max_norm", "lr", "batches", "bogus"]
JOBS = list(ctl.requestable())
REQUEST = st.fixed_dictionaries(
    {"job": st.sampled_from(JOBS) | JSON_VALUE},
    optional={
        "args": st.dictionaries(st.sampled_from(ARG_NAMES), JSON_VALUE, min_size=1, max_size=3) | JSON_VALUE,
        "expires": JSON_VALUE | st.sampled_from(["past", "future"]),
        "id": JSON_VALUE, "created": JSON_VALUE,
    },
)


def _request_text(request: dict) -> str:
    if request.get("expires") in ("past", "future"):
        request = dict(request, expires=time.time() + (-60 if request["expires"] == "past" else 3600))
    return json.dumps(request)


CONTENT = st.one_of(
    REQUEST.map(_request_text),
    JSON_VALUE.map(json.dumps),
    st.binary(max_size=200),
    st.integers(1_000, 30_000).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(MAX_CONTROL_REQUEST_BYTES + 1, 4 * MAX_CONTROL_REQUEST_BYTES).map(
        lambda size: json.dumps({"job": "checkpoint", "args": {}, "pad": "x" * size})),
)
IDS = st.text(st.sampled_from("abcXYZ019-_.é"), min_size=1, max_size=40).filter(lambda s: not s.startswith("."))


def _valid(request_id: str, job: str, args: dict) -> str:
    """A well-formed request: its own id (its file's name) and creation time, as ``write_request`` writes them."""
    return json.dumps({"id": request_id, "job": job, "args": args, "created": time.time()})


def _write(run_dir: Path, request_id: str, content: str | bytes, mode: int = 0o600) -> None:
    directory = ctl.control_dir(run_dir)
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{request_id}{ctl.REQUEST_SUFFIX}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    os.chmod(path, mode)


class Training:
    """A tiny real training in this process, stepped by hand."""

    def __init__(self, run_dir: Path, flush_interval: float = 3600) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.rec = tuidiag.Recorder(run_dir, flush_interval=flush_interval, capture_nonfinite=False)
        self.rec.watch(self.model, self.optimizer, loss_fn=nn.functional.mse_loss)
        generator = torch.Generator().manual_seed(1)
        self.x, self.y = torch.randn(16, 4, generator=generator), torch.randn(16, 1, generator=generator)

    def steps(self, n: int) -> None:
        for _ in range(n):
            self.rec.batch(self.x, self.y)
            loss = nn.functional.mse_loss(self.model(self.x), self.y)
            loss.backward()
            self.rec.step(loss)
            self.optimizer.step()
            self.optimizer.zero_grad()


def _state(run_dir: Path, request_id: str) -> str | None:
    status = ctl.read_status(run_dir, request_id)
    return None if status is None else status.get("state")


@settings(max_examples=int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", 40)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(request_id=IDS, content=CONTENT, mode=st.sampled_from([0o600, 0o644, 0o620, 0o606]))
def test_every_request_gets_a_final_status(tmp_path_factory: pytest.TempPathFactory, request_id: str,
                                           content: str | bytes, mode: int) -> None:
    torch.set_num_threads(1)
    run_dir = tmp_path_factory.mktemp("control") / "run"
    training = Training(run_dir)
    probe = "~probe"  # a valid request beside it, listed after it: never held up by it
    try:
        _write(run_dir, request_id, content, mode)
        _write(run_dir, probe, _valid(probe, "checkpoint", {}))
        training.rec.flush()  # the writer lists the control directory at each flush
        assert _state(run_dir, request_id) is not None  # answered at once: accepted or refused
        training.steps(1)
        assert _state(run_dir, request_id) in FINAL | {"checking", "armed"}
        assert _state(run_dir, probe) == "done"
        training.steps(4)  # a live action's check takes 3 steps
        assert _state(run_dir, request_id) in FINAL | {"armed"}
        assert training.rec.step_index == 4  # the training went on
    finally:
        training.rec.close()
    assert _state(run_dir, request_id) in FINAL
    left = [p.name for p in ctl.control_dir(run_dir).iterdir() if p.name.endswith((ctl.REQUEST_SUFFIX, ctl.TAKEN_SUFFIX))]
    assert left == []  # nothing left to run, now or in a later session


@pytest.mark.parametrize("content, reason", [
    (_valid("bad", "nan_hunt", {"steps": "abc"}), "invalid literal"),
    ("[" * 20_000 + "]" * 20_000, "nests more than 64 levels"),
    (json.dumps({"job": "checkpoint", "pad": "x" * 10**6}), "over the limit of 65,536 bytes"),
], ids=["wrong type", "nested too deeply", "oversized"])
def test_the_issues_examples_are_answered(tmp_path: Path, content: str, reason: str) -> None:
    training = Training(tmp_path / "run")
    try:
        _write(training.rec.run_dir, "bad", content)
        _write(training.rec.run_dir, "good", _valid("good", "scale_lr", {"factor": 0.5}))
        training.rec.flush()
        training.steps(4)
        status = ctl.read_status(training.rec.run_dir, "bad")
        assert status["state"] in ("failed", "refused") and reason in status["message"]
        assert _state(training.rec.run_dir, "good") == "done"  # queued behind it, applied all the same
        assert training.optimizer.param_groups[0]["lr"] == pytest.approx(0.05)
    finally:
        training.rec.close()


CHILD = textwrap.dedent(
    """
    import sys, time
    sys.modules["torch"] = None  # torch-free: starts fast; jobs are never started here
    import tuidiag
    rec = tuidiag.Recorder(sys.argv[1], flush_interval=0.05)
    print("ready", flush=True)
    how = sys.stdin.readline().strip()
    if how == "close":
        rec.close()
    elif how == "raise":
        raise RuntimeError("the training crashed")
    elif how == "hang":
        time.sleep(600)
    # "exit": the interpreter's exit closes the recorder (atexit)
    """
)


def _child(run_dir: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(run_dir)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert child.stdout.readline().strip() == "ready"
    return child


@pytest.mark.parametrize("end", ["close", "exit", "raise", "SIGKILL"])
def test_requests_pending_when_the_training_ends_are_answered(tmp_path: Path, end: str) -> None:
    run_dir = tmp_path / "run"
    child = _child(run_dir)
    try:
        first = ctl.write_request(run_dir, "checkpoint", expires_in=600)
        deadline = time.monotonic() + 30
        while _state(run_dir, first) != "accepted" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _state(run_dir, first) == "accepted"  # taken up, but no step will ever come
        answers: dict[str, dict] = {}
        waiters = []
        for request_id in (first, ctl.write_request(run_dir, "scale_lr", {"factor": 0.5}, expires_in=600)):
            waiter = threading.Thread(target=lambda r=request_id: answers.__setitem__(r, ctl.await_answer(run_dir, r, 600)))
            waiter.start()
            waiters.append(waiter)
        time.sleep(0.3)
        ended = time.monotonic()
        if end == "SIGKILL":
            child.send_signal(signal.SIGKILL)
        else:
            child.stdin.write(end + "\n")
            child.stdin.flush()
        child.wait(timeout=60)
        for waiter in waiters:
            waiter.join(timeout=30)
        took = time.monotonic() - ended
    finally:
        if child.poll() is None:
            child.kill()
    assert len(answers) == 2 and took < 10  # the requesters stopped waiting within seconds, not 600 s
    ended_as = {"close": "finished", "exit": "finished", "raise": "failed", "SIGKILL": "crashed"}[end]
    for request_id, answer in answers.items():
        assert answer["state"] == "expired", answer
        on_disk = ctl.read_status(run_dir, request_id)
        assert on_disk["state"] == "expired" and on_disk["message"] == answer["message"]
        if end == "SIGKILL":  # the requester saw the run crash and answered itself
            assert answer["message"] == "the training ended before answering: the run is crashed"
        else:
            assert answer["message"].startswith(f"the training ended ({ended_as}) at step ")
    assert ctl.request_files(run_dir) == []


def test_the_cli_and_the_monitor_stop_waiting_at_their_deadline_and_never_apply_later(tmp_path: Path) -> None:
    """A live training busy elsewhere (an evaluation, a hung data loader: here, not stepped) takes the requests
    up at its flushes but never answers them: the CLI and the monitor each stop at the deadline they were
    given (1 s here; the default is minutes) and say so, and what they gave up is not applied when it steps again.
    The training runs in this process (its writer thread flushes every 50 ms); the CLI runs as a process."""
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    training = Training(run_dir, flush_interval=0.05)
    try:
        training.steps(1)
        training.rec.flush()
        started = time.monotonic()
        act = subprocess.run([sys.executable, "-m", "tuidiag", "act", str(run_dir), "--scale-lr", "0.5", "--wait", "1"],
                             env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
        assert act.returncode == 2
        assert "no answer from the training within 1 s: it may be busy or gone" in act.stderr
        assert took < 15
        job = subprocess.run([sys.executable, "-m", "tuidiag", "lr-find", str(run_dir), "--live", "--wait", "1", "--yes"],
                             env=env, capture_output=True, text=True, timeout=60)
        assert job.returncode == 2
        assert "the live job did not finish: expired: no answer from the training within 1 s: it may be busy or gone" in job.stderr
        from tuidiag.app import action_requests

        applied, text = action_requests.apply(run_dir, Proposal("LR x2", "scale_lr", {"factor": 2.0}), wait=1.0)
        assert not applied and text == "no answer from the training within 1 s: it may be busy or gone"
        statuses = [json.loads(p.read_text()) for p in ctl.control_dir(run_dir).glob(f"*{ctl.STATUS_SUFFIX}")]
        assert sorted(s["job"] for s in statuses) == ["lr_find", "scale_lr", "scale_lr"]
        assert all(s["state"] == "expired" for s in statuses)
        training.steps(5)  # the training steps again: what was given up is not run
        training.rec.flush()
        assert training.optimizer.param_groups[0]["lr"] == pytest.approx(0.1)
        assert all(json.loads(p.read_text())["state"] == "expired"
                   for p in ctl.control_dir(run_dir).glob(f"*{ctl.STATUS_SUFFIX}"))
    finally:
        training.rec.close()
    assert not (run_dir / "jobs").exists() or not list((run_dir / "jobs").glob("lr_find*"))  # the LR finder never ran

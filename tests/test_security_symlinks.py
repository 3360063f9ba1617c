"""Symlinks in shared directories: no writer of tuidiag follows a link it did not make.

For **every writer** (the manifest, a shard, a compaction, a whole recorder session, a
control request, status, cancel file and executed-id log, a job result, a checkpoint, a
NaN capture, a report with its plots, the status cache and its lock, an import) and for
every place a link can be planted: at each temporary name the writer draws (the name
generator is made to plant a link there first), at every final name the writer produces,
and at the directory below the run that tuidiag creates (``metrics/``, ``control/``,
``jobs/`` ...). The links point at files and a directory only the victim writes; none
may change. A static check finds every file write in the package and requires it to go
through :mod:`tuidiag.store.safe_write`. The regression: links planted by uid 65534 at
the old temporary names of the manifest, a control status and a report.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn

import tuidiag
from tests.conftest import ROOT
from tuidiag.cli import status_cache
from tuidiag.cli.main import main
from tuidiag.format import METRICS_SCHEMA
from tuidiag.recorder.actions import save_checkpoint
from tuidiag.recorder.capture import save_capture
from tuidiag.report.build import write_report
from tuidiag.store import control_channel as ctl
from tuidiag.store import safe_write
from tuidiag.store.job_results import save_result
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.store.shards import compact, list_shards, plan_compaction, write_table_atomic

NOBODY = 65534
SECRET = b"only the victim may write this\n"


@dataclass
class Ctx:
    """Where one writer writes: a recorded run, a report directory, a cache directory, an import source."""

    run: Path
    out: Path
    cache: Path
    csv: Path


def _small_shard(directory: Path, seq: int) -> None:
    table = pa.table({"step": [seq], "wall_time": [0.0], "metric": ["m"], "value": [float(seq)], "rank": [0],
                      "seq": [seq]}).cast(METRICS_SCHEMA)
    pq.write_table(table, directory / f"r0-{seq:09d}-{seq:09d}.parquet")


def _model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _compact(ctx: Ctx) -> None:
    directory = ctx.run / "metrics"
    group = plan_compaction([s for s in list_shards(directory) if s[0].first >= 900], 0, 2)
    compact(directory, group, METRICS_SCHEMA, root=ctx.run)


def _session(ctx: Ctx) -> None:
    with tuidiag.Recorder(ctx.run / "session", flush_interval=30.0) as rec:
        for step in range(5):
            rec.log({"x": float(step)}, step=step)
            rec.event("note", f"step {step}")
            rec.step(1.0 / (step + 1), step=step)


def _cache(ctx: Ctx) -> None:
    os.environ["TUIDIAG_CACHE_DIR"] = str(ctx.cache)
    try:
        status_cache.refresh(ctx.run)
    finally:
        del os.environ["TUIDIAG_CACHE_DIR"]


def _lock(ctx: Ctx) -> None:
    os.environ["TUIDIAG_CACHE_DIR"] = str(ctx.cache)
    try:
        lock = status_cache._lock(ctx.run)
        lock.parent.mkdir(parents=True, exist_ok=True)
        safe_write.create_new(lock)
    finally:
        del os.environ["TUIDIAG_CACHE_DIR"]


def _capture(ctx: Ctx) -> None:
    model, optimizer = _model()
    path, note = save_capture(ctx.run, 4, 0, model, optimizer, (torch.ones(2, 3), torch.zeros(2)), True, 1 << 30)
    assert path is not None, note


def _table(ctx: Ctx) -> None:
    table = pa.table({"step": [1], "wall_time": [0.0], "metric": ["m"], "value": [1.0], "rank": [0], "seq": [950]})
    (ctx.run / "metrics").mkdir(exist_ok=True)
    write_table_atomic(ctx.run / "metrics" / "r0-000000950-000000950.parquet", table.cast(METRICS_SCHEMA), root=ctx.run)


def _import(ctx: Ctx) -> None:
    assert main(["import", "csv", str(ctx.csv), str(ctx.out), "--name", "imported", "--force"]) == 0


WRITERS: dict[str, tuple[Callable[[Ctx], object], str | None]] = {
    "manifest": (lambda c: write_manifest(c.run, new_manifest("m", {}, 1, 1.0)), None),
    "shard": (_table, "metrics"),
    "compaction": (_compact, "metrics"),
    "recorder-session": (_session, None),
    "control-request": (lambda c: ctl.write_request(c.run, "checkpoint", {}), "control"),
    "control-status": (lambda c: ctl.write_status(c.run, "lr_find-x", "lr_find", "running"), "control"),
    "control-cancel": (lambda c: ctl.request_cancel(c.run, "lr_find-x"), "control"),
    "executed-log": (lambda c: ctl.record_execution(c.run, "lr_find-x", "lr_find"), "control"),
    "job-result": (lambda c: save_result(c.run, "lr_find", {"suggested_lr": 0.1}), "jobs"),
    "checkpoint": (lambda c: save_checkpoint(c.run, 3, *_model()), "checkpoints"),
    "capture": (_capture, "captures"),
    "report": (lambda c: write_report(c.run, c.out), None),
    "status-cache": (_cache, None),
    "status-lock": (_lock, None),
    "import": (_import, None),
}
"""Every writer, and the directory below the run it writes in that tuidiag itself creates (None: none)."""
KEEPS_FINAL_LINKS = {
    "job-result": "its name holds the time: the second pass writes another name",
    "control-request": "its name holds a random id",
    "recorder-session": "a link at a shard name counts as a flush on disk: the session continues after it",
    "compaction": "a link at the merged name makes the merge look done already: nothing to write",
}
"""Writers whose second pass leaves a planted final link in place: they write elsewhere, or nothing."""


def _ctx(base: Path) -> Ctx:
    base.mkdir()
    run = base / "run"
    with tuidiag.Recorder(run, flush_interval=30.0) as rec:
        for step in range(20):
            rec.log({"train/loss": 1.0 / (step + 1), "lr": 0.1}, step=step)
            rec.step(1.0 / (step + 1), step=step)
    for sub in ("control", "jobs", "checkpoints", "captures"):
        (run / sub).mkdir(mode=0o700, exist_ok=True)
    for seq in range(900, 903):  # small shards for a compaction to merge
        _small_shard(run / "metrics", seq)
    csv = base / "log.csv"
    csv.write_text("step,train_loss\n" + "".join(f"{i},{1.0 / (i + 1)}\n" for i in range(10)))
    return Ctx(run, base / "out", base / "cache", csv)


def _files(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every regular file under ``root`` (links not followed)."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            found[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory of files only the victim may write."""
    directory = tmp_path / "victim"
    directory.mkdir(mode=0o700)
    for i in range(3):
        (directory / f"secret{i}").write_bytes(SECRET)
        (directory / f"secret{i}").chmod(0o600)
    return directory


def _run_writer(write: Callable[[Ctx], object], ctx: Ctx) -> BaseException | None:
    try:
        write(ctx)
    except (OSError, RuntimeError, ctl.ControlError) as exc:  # refusing is allowed; following a link is not
        return exc
    return None


@pytest.mark.parametrize("name", list(WRITERS))
def test_links_at_temp_and_final_names_are_never_followed(tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch,
                                                          name: str) -> None:
    write, _ = WRITERS[name]
    base = tmp_path / "w"
    learn = _ctx(base)  # a first pass learns the names the writer produces ...
    before = _files(base)
    write(learn)
    after = _files(base)
    produced = sorted(k for k, v in after.items() if before.get(k) != v)
    assert produced, f"{name} wrote nothing"
    shutil.rmtree(base)
    ctx = _ctx(base)  # ... then the same paths again, with links planted
    targets = sorted(victim.iterdir())
    for i, relative in enumerate(produced):  # a link at every final name the writer produces
        final = base / relative
        final.parent.mkdir(parents=True, exist_ok=True)
        final.unlink(missing_ok=True)
        final.symlink_to(targets[i % len(targets)])
    planted: list[Path] = []
    real_names = safe_write._temp_names

    def planting(directory: Path, file_name: str) -> Iterator[str]:
        for n, candidate in enumerate(real_names(directory, file_name)):
            if n < 3:  # the first names drawn are taken by links to the victim's files
                link = directory / candidate
                link.symlink_to(targets[n])
                planted.append(link)
            yield candidate

    monkeypatch.setattr(safe_write, "_temp_names", planting)
    error = _run_writer(write, ctx)
    assert all(p.read_bytes() == SECRET for p in targets), f"{name} wrote through a planted link"
    assert sorted(victim.iterdir()) == targets
    if name in ("executed-log", "status-lock"):  # an append or an exclusive create refuses the link
        assert isinstance(error, OSError)
        return
    assert error is None, f"{name} failed: {error!r}"
    assert planted, f"{name} drew no temporary name through safe_write"
    links = [p for p in base.rglob("*") if p.is_symlink() and p.name.endswith(safe_write.TEMP_SUFFIX)]
    assert len(links) >= len(planted)  # skipped, never opened or removed (an import moves them with its directory)
    for relative in produced:
        final = base / relative
        if name not in KEEPS_FINAL_LINKS:
            assert final.is_file() and not final.is_symlink(), f"{name}: {relative} still a link"


@pytest.mark.parametrize("name", [n for n, (_, sub) in WRITERS.items() if sub is not None])
def test_a_linked_directory_below_the_run_is_refused(tmp_path: Path, victim: Path, name: str) -> None:
    write, sub = WRITERS[name]
    ctx = _ctx(tmp_path / "attack")
    directory = ctx.run / sub
    if name == "compaction":  # the link points at the victim's own shards: merging would delete them
        for shard in directory.glob("r0-00000090*.parquet"):
            shutil.copy(shard, victim)
    shutil.rmtree(directory)
    directory.symlink_to(victim, target_is_directory=True)
    before = _files(victim)
    error = _run_writer(write, ctx)
    assert isinstance(error, (OSError, ctl.ControlError)), f"{name} wrote into a linked {sub}/"
    assert _files(victim) == before and sorted(p.name for p in victim.iterdir()) == sorted(before)


def test_a_recorder_with_a_linked_metrics_directory_keeps_training_and_writes_nothing_there(tmp_path: Path,
                                                                                           victim: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics").symlink_to(victim, target_is_directory=True)
    before = _files(victim)
    with tuidiag.Recorder(run, flush_interval=30.0) as rec:
        for step in range(5):
            rec.step(1.0, step=step)
    assert _files(victim) == before
    assert tuidiag.open_run(run).status == "finished"


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
def test_links_another_user_plants_at_the_old_temp_names_change_nothing(shared_tmp: Path) -> None:
    """The regression: in a group-writable run directory, uid 65534 planted links at
    ``.run.json.<pid>.partial``, ``.<id>.status.json.<pid>.partial`` and ``.report.md.partial``."""
    victim = shared_tmp / "victim"
    victim.mkdir(mode=0o700)
    secrets = {n: victim / n for n in ("bashrc", "authorized_keys", "notes.md")}
    for path in secrets.values():
        path.write_bytes(SECRET)
        path.chmod(0o600)
    run = shared_tmp / "run"
    with tuidiag.Recorder(run, flush_interval=30.0) as rec:
        rec.step(1.0, step=0)
    report = shared_tmp / "report"
    report.mkdir()
    for directory in (run, run / "control", report):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o777)  # group-writable in the issue; 0777 lets uid 65534 in here
    planted = {run / f".run.json.{os.getpid()}.partial": secrets["bashrc"],
               run / "control" / f".lr_find-x.status.json.{os.getpid()}.partial": secrets["authorized_keys"],
               report / ".report.md.partial": secrets["notes.md"]}
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            for link, target in planted.items():
                os.symlink(target, link)
            os._exit(0)
        except BaseException:
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0
    write_manifest(run, new_manifest("r", {}, 1, 1.0))
    ctl.write_status(run, "lr_find-x", "lr_find", "running")
    write_report(run, report)
    assert all(p.read_bytes() == SECRET for p in secrets.values())
    assert all(link.is_symlink() for link in planted)
    assert (report / "report.md").is_file() and ctl.read_status(run, "lr_find-x")["state"] == "running"


WRITE_CALLS = {"write_text", "write_bytes", "write_table", "save", "savefig", "replace", "rename", "symlink", "link",
               "mkfifo", "copy", "copy2", "copyfile", "copytree", "move"}
ALLOWED = {
    ("tuidiag/recorder/run_lock.py", "os.open"): "the run's lock file, opened with O_NOFOLLOW (a planted link: no lock, "
                                                 "the heartbeat checks decide); only its holder label is written",
}


@functools.cache
def _package_trees() -> tuple[tuple[str, ast.Module], ...]:
    """(path, syntax tree) of every module of the package but safe_write.py, parsed once for the static checks."""
    paths = sorted((ROOT / "tuidiag").rglob("*.py"))
    return tuple((p.relative_to(ROOT).as_posix(), ast.parse(p.read_text(encoding="utf-8"))) for p in paths
                 if p.relative_to(ROOT).as_posix() != "tuidiag/store/safe_write.py")


def _is_write(node: ast.Call) -> str | None:
    """The name of the write ``node`` does, or None."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "open":
        mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"), None)
        text = mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "r"
        return "open" if set(text) & set("wax+") else None
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value.id if isinstance(func.value, ast.Name) else ""
    if func.attr == "open" and owner == "os":
        flags = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
        return "os.open" if "O_CREAT" in flags or "O_WRONLY" in flags or "O_RDWR" in flags else None
    if func.attr == "replace" and owner not in ("os",):
        return None  # str.replace and friends; Path.replace is caught by its receiver below
    if func.attr in WRITE_CALLS and (owner in ("os", "shutil", "pq", "torch") or func.attr in
                                     ("write_text", "write_bytes", "savefig", "rename", "symlink_to")):
        return func.attr
    return None


def test_every_write_in_the_package_goes_through_safe_write() -> None:
    """Writes outside safe_write.py may only fill the open handle safe_write gives them."""
    bad, inside = [], 0
    for relative, tree in _package_trees():
        in_fill = set()
        for node in ast.walk(tree):  # calls lexically inside write_atomic(...) write to its handle
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "write_atomic":
                in_fill |= {id(n) for n in ast.walk(node) if n is not node}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (what := _is_write(node)):
                if id(node) in in_fill:
                    inside += 1
                elif (relative, what) not in ALLOWED:
                    bad.append(f"{relative}:{node.lineno} {what}")
    assert inside >= 4, inside  # pq.write_table, torch.save (x2), savefig fill safe_write's handle
    assert not bad, f"file writes that bypass tuidiag.store.safe_write: {bad}"


def _is_rename(node: ast.Call) -> bool:
    """Whether ``node`` renames or replaces a file: ``os.rename/replace/renames``, ``shutil.move``,
    ``Path.rename(x)`` or ``Path.replace(x)`` (one argument; ``str.replace`` takes two)."""
    func = node.func
    if not isinstance(func, ast.Attribute):
        return False
    owner = func.value.id if isinstance(func.value, ast.Name) else ""
    if owner == "os":
        return func.attr in ("rename", "replace", "renames")
    if owner == "shutil":
        return func.attr == "move"
    if func.attr == "rename":
        return True
    return func.attr == "replace" and len(node.args) == 1 and not node.keywords and owner != "dataclasses"


@pytest.mark.parametrize("source, renames", [
    ("os.replace(a, b)", True), ("os.rename(a, b, src_dir_fd=1)", True), ("shutil.move(a, b)", True),
    ("path.rename(other)", True), ("Path(x).replace(other)", True), ("name.replace('.', '-')", False),
    ("dataclasses.replace(f, x=1)", False), ("when.replace(year=1)", False), ("os.unlink(a)", False),
])
def test_the_rename_finder_tells_renames_from_string_replaces(source: str, renames: bool) -> None:
    assert _is_rename(ast.parse(source).body[0].value) is renames


def test_only_safe_write_renames_files() -> None:
    """Every atomic write, directory swap and rename is :mod:`tuidiag.store.safe_write`'s: one place
    draws temporary names and renames them into place, so no writer invents its own scheme."""
    found = []
    for relative, tree in _package_trees():
        found += [f"{relative}:{n.lineno} {ast.unparse(n.func)}" for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_rename(n)]
    assert not found, f"renames outside tuidiag.store.safe_write: {found}"


def test_temporary_files_of_a_failed_write_are_removed(tmp_path: Path) -> None:
    def fail(handle: object) -> None:
        raise OSError("disk full (injected)")

    with pytest.raises(OSError):
        safe_write.write_atomic(tmp_path / "x.json", fail)
    assert list(tmp_path.iterdir()) == []
    safe_write.write_text_atomic(tmp_path / "y.json", "{}", mode=0o600)
    assert (tmp_path / "y.json").stat().st_mode & 0o777 == 0o600 and np.array_equal(
        sorted(p.name for p in tmp_path.iterdir()), ["y.json"])


@pytest.mark.parametrize("old", [True, False])
@pytest.mark.parametrize("fails", [True, False])
def test_a_directory_write_leaves_the_old_directory_or_the_new_one_and_no_temporary(tmp_path: Path, old: bool,
                                                                                    fails: bool) -> None:
    target = tmp_path / "run"
    if old:
        target.mkdir()
        (target / "a").write_text("old")

    def fill(building: Path) -> None:
        assert building.parent == tmp_path and building.name.startswith(".run.") and building.name.endswith(".partial")
        (building / "a").write_text("new")
        if fails:
            raise OSError("disk full (injected)")

    if fails:
        with pytest.raises(OSError):
            safe_write.write_directory_atomic(target, fill)
    else:
        safe_write.write_directory_atomic(target, fill)
    expected = "old" if fails and old else "new" if not fails else None
    assert (target / "a").read_text() == expected if expected else not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == (["run"] if expected else [])


@pytest.mark.parametrize("target_exists", [True, False])
def test_claiming_a_manifest_never_follows_a_link_planted_at_its_name(tmp_path: Path, target_exists: bool) -> None:
    """A new run claims run.json by hard link: a symlink already there (dangling or not) is an entry, never written through."""
    from tuidiag.store.manifest import claim_manifest

    victim = tmp_path / "victim.txt"
    if target_exists:
        victim.write_text("precious")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").symlink_to(victim)
    assert claim_manifest(run, {"name": "x"}) is False
    assert (victim.read_text() == "precious") if target_exists else not victim.exists()
    assert [p.name for p in run.iterdir()] == ["run.json"]  # no temporary file left behind

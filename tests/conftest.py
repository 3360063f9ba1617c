"""Shared fixtures: small real models and a helper that trains them through the recorder."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# One intra-op thread per process, set before any test imports torch and inherited by every
# training the tests start as a subprocess: the models are tiny, and on a shared 2-core machine
# a second OpenMP thread per process only spins against the other xdist worker (the README's
# quickstart took 7 s of CPU and 20 s under load with two threads, 3 s and 8 s with one).
# A value the user set is kept.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# No Textual animations (set before any test imports Textual): a test that presses a tab key waits
# for the tab's underline to reach its place, 0.3 s of animation per press with them on
# (test_tab_bar_widths.py: 16 s with, 9 s without). What is drawn at the end is the same.
# The environment variable reaches the monitors tests start as subprocesses; pytest-textual-snapshot
# imported Textual before this file, so the constant that apps made in-process read is set too.
os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
if os.environ["TEXTUAL_ANIMATIONS"].lower() in ("none", "basic", "full"):
    import textual.constants

    textual.constants.TEXTUAL_ANIMATIONS = os.environ["TEXTUAL_ANIMATIONS"].lower()  # type: ignore[misc]

# Garbage collection tuned for test workers: the youngest generation collected after 2,000 net new
# objects, not 700, and the oldest after 100 collections of the middle one, not 10. A worker keeps what
# its module fixtures, caches and imports built (millions of objects: 0.12 s per full pass), and at
# Python's defaults it walked that heap about 30 times a minute. Measured in one process over eleven of
# the longest files: 50.3 s of CPU, 4.8 s of it collecting, at the defaults; 45.5 s and 1.6 s here
# (5,000 young objects: no better). Garbage waits a little longer to be freed; nothing else changes.
gc.set_threshold(2000, 10, 100)

FULL_TESTS = os.environ.get("TUIDIAG_FULL_TESTS") == "1"
"""``TUIDIAG_FULL_TESTS=1``: also run the repeats and extra grid points that the default run leaves out.

The default run keeps at least one test of every class (each integration, DDP strategy, fault
kind); what it leaves out proves the same claim again and costs a fresh interpreter or a
training. Each test that is shorter by default says what the full run adds."""


def examples(count: int) -> int:
    """Hypothesis's ``max_examples`` for a property test: ``count`` in the full run, a quarter of it
    (at least 10) by default. Each run draws new examples (not derandomised), so the default runs
    together still explore the space; the full run gives one run the whole budget. (A third until the
    suite had to fit 150 s: the 106 property tests took 33 s of its 245 s of test CPU.)"""
    return count if FULL_TESTS else max(10, count // 4)


full_only = pytest.mark.skipif(not FULL_TESTS, reason="a repeat of a claim tested by default: TUIDIAG_FULL_TESTS=1 runs it")
"""Mark a test (or a ``pytest.param``) that only the full run runs."""


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A fresh path for one run directory."""
    return tmp_path / "run"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (for subprocess tests)."""
    return sys.executable


LONGEST_FILES = (
    "test_integrations_transformers.py",  # first of the SHARED_IMPORTS unit (about 45 s), so it starts first
    "test_app_resize.py", "test_watch_foreign.py", "test_app_jobs.py", "test_snapshots.py", "test_app.py",
    "test_snapshots_screens.py", "test_monitor_idle.py", "test_root_cause_trainings.py", "test_keys.py",
    "test_known_misses.py", "test_control_answers.py", "test_ranks_e2e.py", "test_live_action_target.py",
    "test_tab_bar_widths.py", "test_explains.py", "test_faults_cli_text.py", "test_silent_bugs.py",
    "test_screenshots.py", "test_isolated_runs.py", "test_snapshots_overview.py", "test_whole_summary.py",
    "test_import_tensorboard.py", "test_faults_security.py", "test_tmux_e2e.py",
)
"""The test files that take longest (5-20 s each on a 2-core machine with 4 workers; measured with
``--durations=0``), run first. xdist hands each worker whole files (``--dist loadfile``) in collection
order (``--no-loadscope-reorder``: its own order puts files with most tests first, which are not the slow
ones): a long file left for last ran alone for its whole length (test_tab_bar_widths.py: the last 17 s of
a 180 s run). A file not listed keeps its place after these; a renamed one only runs later."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of :data:`LONGEST_FILES` first, in that order; every other test keeps its order."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort: order within a file kept


SHARED_IMPORTS = frozenset({
    "test_integrations_transformers.py", "test_integrations_lightning.py", "test_transformers_loss_scale.py",
    "test_integration_jobs.py", "test_import_files.py", "test_lightning_logger.py", "test_live_action_checks.py",
})
"""Test files that import Lightning or transformers' ``Trainer`` in the worker (2.5 s and 2.2 s of CPU, once
per process), run by one worker as one unit (:data:`SHARED_IMPORTS_UNIT`). Spread over three workers
they cost 5-6 s of CPU more; the unit (about 45 s) starts where its first file would."""

SHARED_IMPORTS_UNIT = "lightning-transformers"
"""The name xdist schedules the files of :data:`SHARED_IMPORTS` under."""


@pytest.hookimpl(optionalhook=True)  # xdist's hook: a run with ``-p no:xdist`` does not know it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile``, with the files of :data:`SHARED_IMPORTS` as one unit; any other mode is xdist's own."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedImportScheduling(LoadFileScheduling):
        """Whole files per worker, the files that share a heavy import together."""

        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SHARED_IMPORTS_UNIT if Path(scope).name in SHARED_IMPORTS else scope

    return SharedImportScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Workers for ``-n auto``: two more than the CPUs. Part of the suite's time is spent waiting (on
    training subprocesses, the monitor's timers and workers), which the extra workers fill. Each worker
    also costs CPU of its own (it collects every file and imports torch), which the shared rewriting and
    the heavy-import unit keep small. Measured on a 2-core machine, whole suite, after those: 3 workers
    156 s, 4 workers 144-150 s, 5 workers 148 s (before them, 4 workers took 185 s and 3 took 179 s).
    ``PYTEST_XDIST_AUTO_NUM_WORKERS``, where set, is left to xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return (os.cpu_count() or 1) + 2


def pytest_configure(config: pytest.Config) -> None:
    """One full garbage collection at the end of the session, not pytest's five; and, in an xdist worker,
    the rewritten test files shared (:func:`share_rewritten_tests`).

    pytest collects at exit to report exceptions raised in ``__del__`` of unreachable objects. Each pass
    walks the whole heap of a worker that imported torch, Textual and Lightning (0.3-0.4 s each, 8 s of
    the suite's CPU over the workers and the controller). A trade-off: an object that only a later pass
    would free (its ``__del__`` makes more garbage) goes unreported at the session's end; every test's
    own garbage is still collected as the tests run. The stash key is the knob pytest keeps for its own
    tests; a pytest without it keeps its five passes."""
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:  # another pytest: its own default
        pass
    else:
        config.stash[gc_collect_iterations_key] = 1
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        number = worker["workerid"].removeprefix("gw")
        share_rewritten_tests(config, int(number) if number.isdigit() else 0, int(worker.get("workercount", 1)))


def share_rewritten_tests(config: pytest.Config, index: int, count: int, folder: Path = Path(__file__).parent) -> None:
    """Rewrite each test file's asserts once for all xdist workers, not once in each.

    pytest rewrites a test file's ``assert`` statements when it imports it (3.5 s of each worker's
    collection here) and keeps the result in ``tests/__pycache__`` only where bytecode may be written;
    this environment sets ``PYTHONDONTWRITEBYTECODE=1``, so every worker rewrote all 177 files. Here
    worker ``index`` of ``count`` goes through the files of ``folder`` starting at its own share, rewrites each file
    no worker has cached yet and caches it, atomically and in pytest's own format; the collection that
    follows then loads every file from the cache. The files are the same, so a race only repeats work.
    A cached file is taken while its source's size and modification time (to the second) are unchanged,
    pytest's own rule, and it stays for the next run as pytest's would. Uses pytest's private rewrite
    functions: a pytest without them, or an error while sharing, leaves the rewriting to collection."""
    try:
        from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc, _rewrite_test, _write_pyc, assertstate_key, get_cache_dir
    except ImportError:
        return
    state = config.stash.get(assertstate_key, None)
    if state is None:  # --assert=plain: nothing is rewritten
        return
    files = sorted(folder.glob("test_*.py"))
    start = index * len(files) // max(count, 1)
    for path in files[start:] + files[:start]:
        cache = get_cache_dir(path)
        pyc = cache / (path.name[:-3] + PYC_TAIL)
        try:
            if _read_pyc(path, pyc, state.trace) is not None:
                continue
            cache.mkdir(parents=True, exist_ok=True)
            source_stat, code = _rewrite_test(path, config)
            if not _write_pyc(state, code, source_stat, pyc):  # a read-only tree: collection rewrites each file
                return
        except SyntaxError:  # a broken file: collection reports it
            continue
        except Exception:  # an error in pytest's private code: collection rewrites as it always did
            return


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move every object alive after collection (the imported modules of torch, Textual, transformers and
    each test module) out of the garbage collector's sight. A full collection then walks only what
    tests made since: transformers' Trainer calls ``gc.collect()`` at each start and end, and pytest once
    at exit, on heaps of a few hundred thousand objects (18 s of the suite's CPU in one process)."""
    gc.collect()
    gc.freeze()

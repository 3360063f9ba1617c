"""A slight validation rise in a healthy run is a note that says so, never a contradiction of "No problem detected".

Generated runs (``tests/synthetic_runs.py``): training loss falling throughout, validation
loss bottoming at step 100 and then rising by a range of amounts. Below the alarm level the
run stays healthy and the overfitting note is titled "Slight overfitting" and worded as a note (keep the best
checkpoint, not "stop early"); at and above it the alarm says to stop early. The named
example: the healthy demo.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from synthetic_runs import healthy_series, model_summary, write_run  # noqa: E402
from tuidiag.diagnosis import Diagnosis, diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

N = 600


def _diagnose(tmp_path: Path, rise: float, seed: int) -> Diagnosis:
    s = healthy_series(N, seed)
    t = np.arange(N)
    s["train/loss"] = (t, 1.2 * np.exp(-t / 60) + 0.1 * np.exp(-t / 400) + 0.05)
    every = t[::25]
    best = 0.3
    val = np.where(every <= 100, best + 1.0 * np.exp(-every / 30) - np.exp(-100 / 30),
                   best * (1 + rise * np.clip((every - 100) / (N - 125), 0, 1)))
    s["val/loss"] = (every, val)
    return diagnose(open_run(write_run(tmp_path / f"r{rise}-{seed}", s, model=model_summary())))


@pytest.mark.parametrize(("rise", "seed"), [(r, s) for r in (0.12, 0.16, 0.2) for s in (0, 1)])
def test_slight_rise_is_a_note(tmp_path: Path, rise: float, seed: int) -> None:
    diagnosis = _diagnose(tmp_path, rise, seed)
    assert diagnosis.top.code == "healthy"
    [note] = [f for f in diagnosis.notes if f.code == "overfitting"]
    assert note.title.startswith("Slight overfitting")
    assert "stop early" not in str(note.fix) and "keep the checkpoint of step 100" in str(note.fix)


@pytest.mark.parametrize(("rise", "seed"), [(r, s) for r in (0.35, 0.6) for s in (0, 1)])
def test_clear_rise_is_an_alarm_to_stop_early(tmp_path: Path, rise: float, seed: int) -> None:
    diagnosis = _diagnose(tmp_path, rise, seed)
    [alarm] = [f for f in diagnosis.findings if f.code == "overfitting"]
    assert alarm.severity == "warning" and alarm.title == "Overfitting"
    assert "stop early around step 100" in str(alarm.fix)


def test_healthy_demo_notes_its_slight_overfitting() -> None:
    diagnosis = diagnose(open_run(ROOT / "demo_runs" / "healthy"))
    assert diagnosis.top.code == "healthy"
    [note] = [f for f in diagnosis.notes if f.code == "overfitting"]
    assert note.title.startswith("Slight overfitting") and "stop early" not in str(note.fix)

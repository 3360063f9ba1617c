"""Every fix of one diagnosis that names a new LR names the same one.

Generated runs (``tests/cause_runs.py``): pairs of faults whose fixes move the LR (LR too high,
exploding gradients, dead ReLUs, heavy clipping, loss spikes, zero_grad missing, a NaN after a
divergence), with and without a saved LR-finder result that agrees. Each
diagnosis's fixes, alarms and notes, as printed, must propose one LR; with the finder's
result, that LR is the finder's suggestion. The named example: demo lr-too-high.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import cause_runs  # noqa: E402
from tuidiag.diagnosis import Diagnosis, diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.diagnosis.view import RunView  # noqa: E402
from tuidiag.store.job_results import job_records, save_result  # noqa: E402

DEMO = ROOT / "demo_runs"
FAULTS = ("lr_too_high", "exploding_gradients", "dead_relu", "over_clipping", "loss_spikes", "grad_not_zeroed", "diverged_to_nan")
PAIRS = list(itertools.combinations(FAULTS, 2))
CHECKED = {"resamples": 32, "low": 1.0, "high": 1.5, "missing": 0, "spread": 1.5, "limit": 3.0}


def _lr_targets(diagnosis: Diagnosis) -> set[str]:
    """The new LRs the printed fixes propose, in each LR clause ("reduce LR from 0.3 to about 0.03", "set LR to about 0.01")."""
    found = set()
    for finding in diagnosis.findings + diagnosis.notes:
        for clause in str(finding.fix).split("; "):
            if "LR" in clause:
                found.update(re.findall(r"\bto (?:about )?([0-9][0-9.]*(?:e[-+]?[0-9]+)?)", clause))
                found.update(f"{x}x" for x in re.findall(r"\bby about (\d+)x", clause))
    return found


def _write(tmp_path: Path, first: str, second: str) -> Path:
    return cause_runs.write(tmp_path, f"{first}-{second}", [(first, 60), (second, 150)])


@pytest.mark.parametrize(("first", "second"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_one_lr_target_per_diagnosis(tmp_path: Path, first: str, second: str) -> None:
    run_dir = _write(tmp_path, first, second)
    diagnosis = diagnose(open_run(run_dir))
    assert len(_lr_targets(diagnosis)) <= 1, [(f.code, str(f.fix)) for f in diagnosis.findings + diagnosis.notes]


@pytest.mark.parametrize(("first", "second"), PAIRS[:8], ids=[f"{a}+{b}" for a, b in PAIRS[:8]])
def test_the_lr_finder_sets_the_one_target(tmp_path: Path, first: str, second: str) -> None:
    run_dir = _write(tmp_path, first, second)
    run = open_run(run_dir)
    lr = RunView(run).lr_now
    assert lr is not None
    save_result(run_dir, "lr_find", {"suggested_lr": lr / 20, "reliable": True, "warning": None, "stability": CHECKED,
                                     "optimizer_lr": lr})
    run = open_run(run_dir)
    diagnosis = diagnose(run, jobs=job_records(run))
    targets = _lr_targets(diagnosis)
    assert len(targets) <= 1, [(f.code, str(f.fix)) for f in diagnosis.findings + diagnosis.notes]
    if "lr_too_high" in [f.code for f in diagnosis.findings]:  # the finder agrees with it: its fix carries the suggestion
        assert any("(LR finder)" in str(f.fix) for f in diagnosis.findings)
        [target] = targets
        assert float(target) == pytest.approx(lr / 20, rel=0.01)


def test_demo_lr_too_high_names_one_lr() -> None:
    diagnosis = diagnose(open_run(DEMO / "lr-too-high"))
    assert _lr_targets(diagnosis) == {"0.03"}
    assert sum("LR from 0.3 to about 0.03" in str(f.fix) for f in diagnosis.findings) >= 3

"""lr_too_high's divergence line says, in one clear sentence, what the run shows: where the loss turned non-finite,
what ran away before it (as the NaN finding measured), and that the gradient norm started in range.

Generated runs (``tests/cause_runs.py``): an LR too high that diverges to NaN from several onsets.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for path in (ROOT, Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import cause_runs  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402


@pytest.mark.parametrize("at", [100, 200, 300])
def test_divergence_line_reads_as_one_true_sentence(tmp_path: Path, at: int) -> None:
    run_dir = cause_runs.write(tmp_path, "run", [("lr_too_high", 40), ("diverged_to_nan", at)])
    diagnosis = diagnose(open_run(run_dir))
    check_diagnosis(run_dir, diagnosis)
    everything = diagnosis.findings + diagnosis.notes
    [lines] = [[str(e) for e in f.evidence if str(e).startswith("training diverged: the loss is non-finite")]
               for f in everything if f.code == "lr_too_high"]
    [line] = lines
    assert ", from a gradient norm of" not in line  # the old garbled clause
    nan_lines = " ".join(str(e) for f in everything if f.code == "nonfinite_loss" for e in f.evidence)
    for what, verdict in (("the loss", "the loss ran above its earlier peak"), ("the gradient norm", "the gradient norm ran above")):
        if verdict in nan_lines:
            assert f"after {what}" in line or f"and {what} ran away" in line, (line, nan_lines)
    assert "at the start the gradient norm was" in line and line.endswith("the steps overshoot")

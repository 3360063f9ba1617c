"""Ranked findings read coherently: observed symptoms carry no doubt, equal percentages read as a tie.

Over generated lists of findings (hypothesis: confidences with ties, causes that explain
later findings), in CLI text, the monitor's panel and the Markdown report:

- a finding that an earlier one explains is headed "Observed symptom of <cause>", with no
  percentage (its discounted confidence is not doubt about what the data shows);
- among the ranked causes, one whose shown percentage equals the one above reads "Equally
  likely", so "Most likely (96%)" is never followed by "Alternative (96%)";
- the labels otherwise run Most likely, Alternative, Also consider.

Then over composed planted runs (``tests/cause_runs.py``: an LR too high that diverges to NaN,
at several steps and loss shapes): the NaN loss is never offered as an uncertain alternative.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cause_runs  # noqa: E402
from tests.conftest import examples
from tuidiag.app.widgets.diagnosis_panel import render_diagnosis  # noqa: E402
from tuidiag.cli.diagnose_cmd import render  # noqa: E402
from tuidiag.diagnosis import Diagnosis, Finding, diagnose  # noqa: E402
from tuidiag.diagnosis.codes import CODES  # noqa: E402
from tuidiag.report.markdown import findings_section  # noqa: E402
from tuidiag.store import open_run  # noqa: E402
from tuidiag.text.findings import EQUAL, OBSERVED, RANK_LABELS, labels  # noqa: E402
from tuidiag.text.numbers import confidence  # noqa: E402

NAMES = sorted(c for c in CODES if c != "healthy")[:12]


@st.composite
def ranked(draw: st.DrawFn) -> list[Finding]:
    """Findings sorted by confidence (ties likely), some explaining later ones, as the combiner leaves them."""
    codes = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    shares = sorted(draw(st.lists(st.sampled_from([0.96, 0.8, 0.5, 0.13, 0.004]), min_size=len(codes), max_size=len(codes))),
                    reverse=True)
    out = [Finding(c, CODES[c].meaning, s, "warning", ["a line"], CODES[c].fix) for c, s in zip(codes, shares)]
    for i, f in enumerate(out):
        f.related = [later.code for later in out[i + 1:] if draw(st.booleans())]
    return out


@settings(max_examples=examples(200), deadline=None)
@given(ranked())
def test_labels_read_coherently(findings: list[Finding]) -> None:
    names = labels(findings)
    causes = []
    for i, (finding, label) in enumerate(zip(findings, names)):
        explained_by = [c for c in findings[:i] if finding.code in c.related]
        if explained_by:
            assert label == OBSERVED + explained_by[0].title
            continue
        share = confidence(finding.confidence)
        if causes and causes[-1][1] == share:
            assert label == EQUAL
        else:
            assert label == RANK_LABELS[min(len(causes), 2)]
        causes.append((label, share))
    assert len({share for _, share in causes}) == len([c for c in causes if c[0] != EQUAL])
    diagnosis = Diagnosis("run", 100, findings)
    for text in (render(diagnosis, "finished").plain, render_diagnosis(diagnosis, None).plain, "\n".join(findings_section(diagnosis))):
        for finding, label in zip(findings, names):
            if label.startswith(OBSERVED):
                assert not re.search(re.escape(label) + r" \(\d+%\)", text)
                assert label in text
            else:
                assert f"{label} ({confidence(finding.confidence)})" in text or f"{label}: " in text


@pytest.mark.parametrize("loss", ["falling", "flat"])
@pytest.mark.parametrize("lr_at,nan_at", [(40, 250), (120, 330), (40, 399)])
def test_nan_after_overshoot_is_observed_not_an_alternative(tmp_path: Path, loss: str, lr_at: int, nan_at: int) -> None:
    run_dir = cause_runs.write(tmp_path, "run", [("lr_too_high", lr_at), ("diverged_to_nan", nan_at)], loss)
    diagnosis = diagnose(open_run(run_dir))
    text = render(diagnosis, "failed").plain
    nan = CODES["nonfinite_loss"]
    assert any(f.code == "nonfinite_loss" for f in diagnosis.findings), text
    assert not re.search(r"(Alternative|Also consider|Equally likely) \([^)]*\): Loss became NaN", text), text
    assert re.search(r"(Most likely \([^)]*\)|Observed symptom of [^:]+): Loss became NaN", text), (text, nan)

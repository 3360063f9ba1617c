"""End to end: scenarios from the labelled suite trained for real on the CPU, recorded, then diagnosed.

Each one is a real torch training through ``tuidiag.Recorder`` (a few seconds each);
the diagnosis must name the planted cause first, and a healthy run must raise nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

torch = pytest.importorskip("torch")

from benchmarks.suite.scenarios import by_name  # noqa: E402
from benchmarks.suite.train import record  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

SCENARIOS = ["lr-high-nan-mlp", "lr-low-mlp", "dead-layer-mlp-unused", "frozen-val-mlp", "healthy-mlp-adam"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_suite_scenario_is_diagnosed(name: str, tmp_path: Path) -> None:
    spec = by_name(name)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # what the suite records with; small models run faster on one thread
    try:
        result = diagnose(open_run(record(spec, tmp_path / name)))
    finally:
        torch.set_num_threads(threads)
    assert result.top.code in spec.acceptable, [(f.code, round(f.confidence, 2)) for f in result.findings]
    if spec.family == "healthy":
        assert [f.code for f in result.findings] == ["healthy"]
    else:
        assert result.top.severity in ("warning", "critical") and result.top.evidence

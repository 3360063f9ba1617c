"""Pilot test of the run view's rank modes (``k``) on a multi-rank run, and the rank lines behind them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.app_helpers import fixed_clock, wait_for
from tests.rank_runs import write_ranks
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.app.widgets.chart import MetricChart
from tuidiag.diagnosis.view import RunView
from tuidiag.viewmodel.ranks import rank_lines
from tuidiag.store import open_run

N = 120


def _ranks(n_ranks: int) -> dict[int, dict[str, tuple[np.ndarray, np.ndarray]]]:
    t = np.arange(N)
    return {
        r: {"train/loss": (t, np.exp(-t / 50) + 0.1 * r), "grad_norm/total": (t, np.full(N, 1.0 + r))}
        for r in range(n_ranks)
    }


def test_rank_lines_spread_is_min_median_max(tmp_path: Path) -> None:
    lines = rank_lines(RunView(open_run(write_ranks(tmp_path / "run", _ranks(3)))), points=400)
    assert lines is not None and lines.ranks == (0, 1, 2)
    assert [label for label, _, _ in lines.per_rank["loss"]] == ["rank 0", "rank 1", "rank 2"]
    low, mid, high = (y for _, _, y in lines.spread["grad"])
    assert (low == 1.0).all() and (mid == 2.0).all() and (high == 3.0).all()
    assert rank_lines(RunView(open_run(write_ranks(tmp_path / "one", _ranks(1)))), points=400) is None


def _title(app: TuidiagApp, tab: str) -> str:
    chart = app.screen.query_one(f"#chart-{tab}", MetricChart).chart
    return chart.title if chart is not None else ""


async def test_k_cycles_rank_modes(tmp_path: Path) -> None:
    write_ranks(tmp_path / "runs" / "ddp", _ranks(2))
    app = TuidiagApp(tmp_path / "runs", clock=fixed_clock)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 1)
        await pilot.press("enter")
        assert isinstance(app.screen, RunScreen)
        assert await wait_for(pilot, lambda: app.screen.detail is not None)
        assert _title(app, "loss") == "loss - rank 0 (k: ranks)"
        await pilot.press("k")
        assert _title(app, "loss") == "loss - all ranks"
        await pilot.press("2")  # a chart first shown after the key is drawn in the same mode
        assert len(app.screen.query_one("#chart-grad", MetricChart).chart.lines) == 2
        await pilot.press("k")
        assert "spread across 2 ranks" in _title(app, "grad")
        await pilot.press("k", "k")
        assert _title(app, "loss") == "loss - rank 1"
        assert [label for label, _, _ in app.screen.query_one("#chart-loss", MetricChart).chart.lines] == ["rank 1"]
        await pilot.press("k")
        assert _title(app, "loss") == "loss - rank 0 (k: ranks)"

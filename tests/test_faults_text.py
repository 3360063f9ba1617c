"""Hostile text (Rich markup, ANSI/OSC escapes, control and bidi characters, very long and
wide strings) in run names, metric names, config values and messages is shown literally:
in ``report.md``, in ``tuidiag diagnose`` and in the monitor's run view (Pilot and SVG snapshot).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tuidiag
from tests.app_helpers import FIXED_NOW, fixed_clock, wait_for
from tuidiag.cli.main import main

MARKUP = "[bold red]pwn[/]"
HOSTILE = (MARKUP + " $\\frac{1}{$ \x1b]8;;http://evil\x07link\x1b]8;;\x07 \x1b[2J\x1b[31m\x07\x00\x9b5m"
           " <script>x</script> | ` * _ # \u202egnp.exe \u2028 \u6f22\u5b57\U0001f642 " + "W" * 3000)
FORBIDDEN = ("\x1b", "\x07", "\x00", "\x9b", "\u202e", "\u2028")


def _hostile_run(run_dir: Path, steps: int = 80) -> Path:
    """A finished run whose name, config, metric names and event text are all hostile."""
    with tuidiag.Recorder(run_dir, name=HOSTILE, config={HOSTILE[:200]: HOSTILE, "lr": 0.1}) as rec:
        for step in range(steps):
            values = {"train/loss": 3.0 / (step + 1), f"grad_norm/{HOSTILE[:120]}": 1.0 / (step + 1)}
            values |= {"grad_norm/total": 1.0, "val/loss": 2.0 / (step + 1), f"act/dead_frac/{HOSTILE[:80]}": 0.9}
            rec.log(values, step=step)
        rec.event(HOSTILE[:300], HOSTILE, severity="warning", data={HOSTILE[:20]: HOSTILE[:50]}, step=40)
    return run_dir


def test_report_shows_hostile_text_escaped_and_bounded(tmp_path: Path, capsys) -> None:
    run_dir = _hostile_run(tmp_path / "run")
    assert main(["report", str(run_dir), "-o", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert not [c for c in FORBIDDEN if c in text]
    assert "\\[bold red\\]pwn\\[/\\]" in text and "\\<script\\>" in text and "\\$\\\\frac" in text
    assert "<script>" not in text and "](http://evil" not in text
    assert max(len(line) for line in text.splitlines()) < 2500  # a 3000-character name is cut
    assert "\u6f22\u5b57" in text  # wide characters kept
    assert all(png.stat().st_size > 0 for png in (tmp_path / "out").glob("*.png"))


def test_diagnose_prints_hostile_text_literally(tmp_path: Path, capsys) -> None:
    run_dir = _hostile_run(tmp_path / "run")
    assert main(["diagnose", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert not [c for c in FORBIDDEN if c in out]
    assert MARKUP in out


async def test_run_view_shows_hostile_text_literally(tmp_path: Path) -> None:
    from tuidiag.app.app import TuidiagApp
    from tuidiag.app.screens.run_screen import RunScreen

    run_dir = _hostile_run(tmp_path / "runs" / "evil")
    app = TuidiagApp(run_dir, clock=fixed_clock)
    async with app.run_test(size=(160, 48)) as pilot:
        assert await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.detail is not None)
        for key in ("1", "4", "5"):
            await pilot.press(key)
            await pilot.pause(0.2)
            svg = app.export_screenshot()
            assert not [c for c in FORBIDDEN if c in svg]
        assert app.is_running


def _fix_times(run_dir: Path) -> None:
    """Wall times and manifest times as fixed numbers, so the snapshot does not depend on the clock."""
    for shard in sorted(run_dir.glob("*/r*.parquet")):
        table = pq.read_table(shard)
        walls = pa.array((table.column("step").to_numpy() * 0.5 + FIXED_NOW - 100).astype(float))
        pq.write_table(table.set_column(1, "wall_time", walls), shard)
    manifest = json.loads((run_dir / "run.json").read_text())
    manifest.update(created=FIXED_NOW - 100, heartbeat=FIXED_NOW - 50, ended=FIXED_NOW - 50)
    summary = manifest.get("summary")
    if isinstance(summary, dict):  # the recorder's summary of the newest rows: the same fixed times and pace
        summary["steps_per_s"] = 2.0
        for entry in (summary.get("last") or {}).values():
            entry[2] = entry[0] * 0.5 + FIXED_NOW - 100
    (run_dir / "run.json").write_text(json.dumps(manifest))


@pytest.fixture
def hostile_cwd(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    _hostile_run(Path("runs") / "evil", steps=40)
    _fix_times(Path("runs") / "evil")
    return Path("runs") / "evil"


def test_hostile_run_view_80x24(snap_compare, hostile_cwd: Path) -> None:
    from tuidiag.app.app import TuidiagApp

    app = TuidiagApp(hostile_cwd, clock=fixed_clock)
    app.animation_level = "none"

    async def run_before(pilot) -> None:
        await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None)
        # a run drawn from its envelopes first says its diagnosis runs in the background: wait for it
        await wait_for(pilot, lambda: app.screen.detail.diagnosis.step is not None, timeout=60)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)

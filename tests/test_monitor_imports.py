"""The monitor's memory floor: opening the monitor on a run loads no pandas (about 45 MB of the 150 MB target).

pandas is used only where a table is read (CSV and Keras imports, a CSV log being followed), and imported
there; the app, its screens and every source kind's module load without it. Checked in a fresh interpreter
that draws a recorded run's view headless.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tuidiag

ROOT = Path(__file__).resolve().parents[1]

DRAW = """
import asyncio, sys
from pathlib import Path
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen

async def go() -> None:
    app = TuidiagApp(Path(sys.argv[1]))
    async with app.run_test(size=(120, 40)) as pilot:
        while not (isinstance(app.screen, RunScreen) and app.screen.detail is not None):
            await pilot.pause(0.05)
        print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'torch', 'scipy'}))

asyncio.run(go())
"""


def test_the_run_view_draws_without_pandas(tmp_path: Path) -> None:
    with tuidiag.Recorder(tmp_path / "run", flush_interval=3600) as rec:
        for step in range(300):
            rec.step(1.0 / (step + 1))
    env = {"PYTHONPATH": str(ROOT), "TUIDIAG_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", DRAW, str(tmp_path / "run")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"

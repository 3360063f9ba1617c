"""What the distribution chart adds to a run view's data: ``detail_data`` (rows) and ``envelope_detail_data``.

A synthetic run (``tests/dist_runs.py``: a healthy run's series plus one logged distribution and three
parameters' weight and gradient distributions every 5 steps, 7 quantile rows each) of ``--steps`` steps
is read whole and as envelopes; each read builds the run view's data 5 times, with the distribution
chart of one gradient and without one, and prints the best time of each.

Usage::

    python benchmarks/dist_chart_cost.py [--steps 20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tuidiag  # noqa: E402
from tests.dist_runs import dist_series  # noqa: E402
from tests.synthetic_runs import write_run  # noqa: E402
from tuidiag.store.envelope_run import open_envelopes  # noqa: E402
from tuidiag.viewmodel import detail, distributions, envelope_view  # noqa: E402


def best_ms(build: Callable[[], object], times: int = 5) -> float:
    """The fastest of ``times`` calls, in milliseconds."""
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        build()
        spent.append(time.perf_counter() - start)
    return 1000 * min(spent)


def main() -> None:
    """Write the run, then time both reads with and without the distribution chart."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    steps = parser.parse_args().steps
    with tempfile.TemporaryDirectory() as root:
        path = write_run(Path(root) / "r", dist_series(n=steps, every=5, spike_at=steps // 10 * 5), step_seconds=0.01)
        run, envelopes = tuidiag.open_run(path), open_envelopes(path)
        print(f"{run.rows_read:,} rows, {len(detail.detail_data(run, None, 400).dists)} distributions")
        shown = "dist/grad/layer2.weight"
        timings = {"rows": lambda: detail.detail_data(run, None, 400, dist=shown),
                   "envelopes": lambda: envelope_view.envelope_detail_data(envelopes, 400, dist=shown)}
        with_chart = {name: best_ms(build) for name, build in timings.items()}
        drawn = distributions.distribution_chart
        none = lambda names, name, line_of, nonfinite=False: drawn(names, None, line_of)  # noqa: E731
        detail.distribution_chart = envelope_view.distribution_chart = none
        for name, build in timings.items():
            print(f"{name}: run view data {with_chart[name]:.1f} ms with the distribution chart, {best_ms(build):.1f} ms without")


if __name__ == "__main__":
    main()

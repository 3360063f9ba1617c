"""The clip threshold is one fact of the run view, and every reader of it agrees (hypothesis).

Runs are written in the real format (one metrics shard and ``run.json``): per step a
``model/training`` row and, where clipping was in force, a ``grad/max_norm`` row; the
manifest may declare ``max_grad_norm``. The threshold at a step is the ``max_norm``
recorded at the newest step up to it, ``None`` when that step clipped nothing (clipping
was turned off), and the manifest's value where no ``max_norm`` was recorded at all.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from tuidiag.diagnosis.evidence import Fact, Measure
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_MAX_NORM, METRICS_DIR, METRICS_SCHEMA, MODEL_TRAINING, ShardName
from tuidiag.store import open_run
from tuidiag.store.manifest import new_manifest, write_manifest
from tuidiag.store.shards import write_table_atomic
from tuidiag.viewmodel.detail import detail_data

NORMS = st.one_of(st.none(), st.floats(0.01, 10.0), st.sampled_from([0.0, -1.0, math.nan, math.inf]))
"""One step's ``grad/max_norm`` row: none (no clipping at that step), a limit, or a value the recorder never writes."""
DECLARED = st.one_of(st.none(), st.floats(0.01, 10.0), st.sampled_from([0, -1.0, True, "1.0"]))


def _write(run_dir: Path, norms: list[float | None], declared: object) -> None:
    run_dir.mkdir(parents=True)
    rows = [(step, MODEL_TRAINING, 1.0) for step in range(len(norms))]
    rows += [(step, GRAD_MAX_NORM, norm) for step, norm in enumerate(norms) if norm is not None]
    rows.sort(key=lambda r: r[0])
    table = pa.table({"step": [r[0] for r in rows], "wall_time": [float(r[0]) for r in rows], "metric": [r[1] for r in rows],
                      "value": [r[2] for r in rows], "rank": [0] * len(rows), "seq": [0] * len(rows)})
    (run_dir / METRICS_DIR).mkdir()
    write_table_atomic(run_dir / METRICS_DIR / ShardName(0, 0, 0).filename, table.cast(METRICS_SCHEMA))
    manifest = new_manifest("clip", {}, 1, 1.0)
    manifest["max_grad_norm"] = declared
    write_manifest(run_dir, manifest)


def _expected(norms: list[float | None], declared: object, at: int) -> float | None:
    """What the training clipped at, at step ``at``, read straight off the rows written."""
    seen = [(s, n) for s, n in enumerate(norms[: at + 1]) if n is not None and math.isfinite(n) and n > 0]
    if seen:
        step, norm = seen[-1]
        return norm if step == min(at, len(norms) - 1) else None
    ok = isinstance(declared, (int, float)) and not isinstance(declared, bool) and math.isfinite(declared) and declared > 0
    return float(declared) if ok else None


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(norms=st.lists(NORMS, min_size=1, max_size=12), declared=DECLARED, at=st.integers(0, 14))
@example(norms=[1.0, 1.0, 0.5, None, None], declared=None, at=4)  # a live clip turned off: no threshold drawn, clipping offered again
@example(norms=[2.0, 2.0, 0.5, 0.5], declared=2.0, at=3)  # a live clip tighter than the training's own: the live one
@example(norms=[None, None], declared=1.0, at=1)  # an older run: the manifest's value
def test_every_reader_of_the_clip_threshold_sees_the_limit_in_force_at_the_newest_step(
        tmp_path_factory, norms: list[float | None], declared: object, at: int) -> None:
    run_dir = tmp_path_factory.mktemp("clip") / "run"
    _write(run_dir, norms, declared)
    run = open_run(run_dir)
    expected = _expected(norms, declared, at)
    limit = RunView(run, at).clip_threshold
    assert (limit.value if limit is not None else None) == expected
    if limit is not None:  # where the value came from, as the evidence line cites it
        assert isinstance(limit, Measure) and limit.metric == GRAD_MAX_NORM or isinstance(limit, Fact) and limit.key == "max_grad_norm"
    data = detail_data(run, at, 40)
    assert data.clip_threshold == expected
    assert data.charts["grad"].threshold == expected  # the chart's red line is the same fact, not a second definition
    if at >= len(norms) - 1:  # the whole run: what the report plots
        assert RunView(run).clip_threshold == limit

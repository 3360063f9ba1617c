"""The writer builds Arrow tables without pandas (its import cost seconds before the first
shard, rows a crash then lost) and survives text pyarrow would refuse (lone surrogates)."""

from __future__ import annotations

import subprocess
import textwrap

import numpy as np
import pyarrow as pa

import tuidiag
from tests.conftest import ROOT
from tuidiag.store import arrow_build


def test_builders_match_pyarrow() -> None:
    values = np.array([1.5, -float("inf"), 0.0])
    assert arrow_build.numeric(values, pa.float64()).equals(pa.array(values, pa.float64()))
    assert np.isnan(arrow_build.numeric(np.array([float("nan")]), pa.float64()).to_numpy()).all()
    assert arrow_build.numeric(np.arange(3), pa.int32()).equals(pa.array([0, 1, 2], pa.int32()))
    words = ["", "a", "\u6f22\u5b57\U0001f642", "[b]x[/b]"]
    assert arrow_build.strings(words).equals(pa.array(words, pa.string()))
    assert arrow_build.encoded(["x", "y", "x"]).equals(pa.array(["x", "y", "x"]).dictionary_encode())
    assert arrow_build.strings(["a\ud800b"]).to_pylist() == ["a?b"]


def test_a_recording_process_never_imports_pandas(tmp_path, python) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None
        import tuidiag
        rec = tuidiag.Recorder({str(tmp_path / "run")!r}, flush_interval=0.01)
        for step in range(400):
            rec.log({{"x": float(step)}}, step=step)
            if step % 10 == 0:
                rec.flush()  # 40 shards: compaction runs too
        rec.event("note", "hello")
        rec.close()
        print("pandas" in sys.modules)
        """
    )
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "False", done.stderr
    assert len(tuidiag.open_run(tmp_path / "run").series("x")) == 400


def test_a_name_with_a_lone_surrogate_does_not_block_the_writer(run_dir) -> None:
    """Such a name cannot be stored as it is: it is rejected, never stored as ``bad?name`` (where it
    would merge with a real ``bad?name``); the other values of the call, and the writer, go on."""
    with tuidiag.Recorder(run_dir, flush_interval=0.05) as rec:
        for step in range(20):
            rec.log({"bad\ud800name": 1.0, "bad?name": 2.0, "x": float(step)}, step=step)
        rec.event("kind\udfff", "message")
        rec.event("note", "message \ud800")
    run = tuidiag.open_run(run_dir)
    assert len(run.series("x")) == 20 and run.series("bad?name").values.tolist() == [2.0] * 20
    assert not any(e.kind.startswith("kind") for e in run.events) and run.warnings == []
    assert [e.message for e in run.events if e.kind == "note"] == ["message ?"]  # free text: the surrogate replaced
    assert run.manifest["stats"]["rejected_values"] == 21 and run.manifest["stats"]["errors"] == 0

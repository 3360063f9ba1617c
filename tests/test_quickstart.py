"""The README's quickstart runs as written and records what it promises."""

from __future__ import annotations

import re

from tests.conftest import ROOT

import tuidiag


def _python_blocks() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", readme, flags=re.S)


def test_readme_quickstart_runs_as_written(tmp_path, monkeypatch) -> None:
    """Both blocks run as written, in a namespace of their own from a fresh directory, in this process
    (a process of its own would import torch again; the ``python -m tuidiag`` entry point is tested in
    ``tests/test_cli.py``)."""
    monkeypatch.chdir(tmp_path)
    quickstart = next(block for block in _python_blocks() if "tuidiag.Recorder(" in block)
    exec(compile(quickstart, "README.md (quickstart)", "exec"), {"__name__": "__main__"})
    run = tuidiag.open_run(tmp_path / "runs" / "resnet-lr3e-4")
    assert run.status == "finished"
    assert run.manifest["config"] == {"lr": 3e-4, "batch_size": 128}
    assert len(run.series("train/loss")) == 301
    assert run.series("val/loss").steps.tolist() == [0, 100, 200, 300]
    assert run.series("grad/max_norm").last == 1.0
    reading = next(block for block in _python_blocks() if "open_run" in block)
    exec(compile("import tuidiag\n" + reading, "README.md (reading)", "exec"), {"__name__": "__main__"})

"""The newest result of each job of a run, as literal text for the monitor's Jobs tab."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Group
from rich.text import Text

from tuidiag import job_kinds
from tuidiag.text.jobs import render
from tuidiag.store.job_results import StepOf, latest_result
from tuidiag.text.safe import clean


def job_texts(run_dir: Path, at: int | None = None, step_of: StepOf | None = None) -> tuple[tuple[str, str], ...]:
    """(job, rendered result) for each job that has a result (:func:`~tuidiag.store.job_results.list_results`) counting at step ``at``
    (a replay cursor at step 400 shows no result of a job that ran at step 593)."""
    texts = []
    for job in job_kinds.names():
        try:
            record = latest_result(run_dir, job, at, step_of)
        except (OSError, ValueError):
            continue
        if record is None:
            continue
        try:
            texts.append((job, render(job, record.get("result", {}), False)))
        except (KeyError, TypeError, ValueError) as exc:
            texts.append((job, f"{job}: unreadable result ({exc}): {json.dumps(record)[:200]}"))
    return tuple(texts)


def is_chart_line(line: str) -> bool:
    """Whether ``line`` belongs to a plotext chart (box drawing or braille): drawn as is, never wrapped."""
    return any("\u2500" <= ch <= "\u259f" or "\u2800" <= ch <= "\u28ff" for ch in line)


def jobs_text(texts: tuple[tuple[str, str], ...]) -> Group:
    """All job results, each line cleaned of escapes: sentences wrap to the pane, plotext charts keep their layout."""
    if not texts:
        keys = ", ".join(f"{kind.key} {kind.label}" for kind in job_kinds.kinds())
        return Group(Text("No job results yet.\n"
                          f"Keys: {keys}.\n"
                          "On a live run the training runs the job itself:\n"
                          "  rec.watch(model, optimizer, loss_fn=criterion)\n"
                          "Otherwise jobs rebuild the model from the run's factory:\n"
                          "  Recorder(..., factory='train:build')"))
    parts: list[Text] = []
    for job, text in texts:
        parts.append(Text(job.replace("_", " "), style="bold underline"))
        for line in text.splitlines():
            cleaned = clean(line, 2000)
            parts.append(Text(cleaned, no_wrap=True, overflow="crop") if is_chart_line(cleaned) else Text(cleaned))
        parts.append(Text(""))
    return Group(*parts)

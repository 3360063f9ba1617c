"""``write_report(run, out_dir)``: diagnose a run, draw its plots and write ``report.md``."""

from __future__ import annotations

from pathlib import Path

from tuidiag.diagnosis import diagnose
from tuidiag.diagnosis.view import RunView
from tuidiag.report import markdown
from tuidiag.report.checklist import run_checklist
from tuidiag.report.plots import PlotResult, draw_all
from tuidiag.report.runinfo import run_info
from tuidiag.store import Run, open_run
from tuidiag.store.job_results import job_records
from tuidiag.store.safe_write import write_text_atomic

REPORT_NAME = "report.md"


def write_report(run: Run | str | Path, out_dir: str | Path) -> Path:
    """Write ``out_dir/report.md`` and its PNG plots for ``run``; return the report's path.

    ``out_dir`` is created if needed; plots from an earlier report that can no longer
    be drawn are removed so the directory matches the report.
    """
    run = run if isinstance(run, Run) else open_run(run)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    view = RunView(run)
    plots = draw_all(view, out)
    text = render(view, plots)
    return write_text_atomic(out / REPORT_NAME, text)


def render(view: RunView, plots: list[PlotResult]) -> str:
    """The Markdown text of the report for an already drawn set of plots."""
    diagnosis = diagnose(view.run, jobs=job_records(view.run))
    checks = run_checklist(view)
    lines = markdown.header(view.run.name, view.run.status, view.n_steps, view.last_step, diagnosis, checks)
    lines += markdown.findings_section(diagnosis)
    lines += markdown.notes_section(diagnosis)
    lines += markdown.checklist_section(checks)
    lines += markdown.plots_section(plots)
    lines += markdown.info_section(run_info(view), diagnosis)
    lines += markdown.footer(str(view.run.path))
    return "\n".join(lines)

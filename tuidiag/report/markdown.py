"""The report as Markdown: summary, findings, notes, checklist, plots and run info.

Pure text: takes what the diagnosis, the checklist, the plots and the manifest
produced and lays it out so that someone who never opened the monitor can read
it. Every string that came from the run is escaped with :func:`md`.
"""

from __future__ import annotations

import time

from tuidiag import __version__
from tuidiag.diagnosis import Diagnosis, Finding
from tuidiag.text.findings import OBSERVED, labels
from tuidiag.text.numbers import confidence
from tuidiag.report.checklist import FAIL, NOT_ANSWERABLE, PASS, Check
from tuidiag.report.mdtext import code, image, md, table
from tuidiag.report.plots import PlotResult
from tuidiag.report.runinfo import Row

MARKS = {PASS: "✅ pass", FAIL: "❌ fail"}


def header(name: str, status: str, n_steps: int, last_step: int | None, diagnosis: Diagnosis, checks: list[Check]) -> list[str]:
    """Title, one line of facts and the one-line summary naming the top finding."""
    stamp = time.strftime("%Y-%m-%d %H:%M")
    steps = f"{n_steps} with a loss, last step {last_step}" if last_step is not None else "none recorded yet"
    facts = f"**Status:** {md(status)} · **Steps:** {steps} · generated {stamp} by tuidiag {__version__}"
    return [f"# Training report: {md(name)}", "", facts, "", summary(diagnosis, checks), ""]


def summary(diagnosis: Diagnosis, checks: list[Check]) -> str:
    """``**Summary:** ...``: the top finding, how sure, its first fix, and the checklist tally."""
    top = diagnosis.top
    failed = sum(c.status == FAIL for c in checks)
    tally = f" Checklist: {failed} of {len(checks)} checks fail." if failed else f" Checklist: no check fails ({len(checks)} checked)."
    if diagnosis.notes:
        tally += f" Notes to review: {', '.join(md(n.title) for n in diagnosis.notes)}."
    if top.code == "healthy":
        return f"**Summary:** {md(top.title)} ({code(top.code)}, {confidence(top.confidence)} confidence).{tally}"
    since = f", since step {top.first_step}" if top.first_step is not None else ""
    first_fix = md(top.fix.split(";")[0], 300)
    return (f"**Summary:** most likely **{md(top.title)}** ({code(top.code)}, {confidence(top.confidence)} confidence, "
            f"{md(top.severity)}{since}). First thing to try: {first_fix}.{tally}")


def findings_section(diagnosis: Diagnosis) -> list[str]:
    """Every finding, ranked, with its confidence, severity, evidence, fix and first step."""
    lines = ["## Findings", "",
             f"Ranked hypotheses from `tuidiag diagnose` as of step {diagnosis.step if diagnosis.step is not None else '(none yet)'}, "
             "most likely first; "
             "the alternatives are worth ruling out too.", ""]
    for i, (finding, label) in enumerate(zip(diagnosis.findings, labels(diagnosis.findings))):
        lines += finding_block(finding, i, label)
    return lines


def finding_block(finding: Finding, rank: int, label: str) -> list[str]:
    """One finding: heading (``label`` from :func:`~tuidiag.text.findings.labels`), a facts table, evidence bullets and the fix."""
    first = f"step {finding.first_step}" if finding.first_step is not None else "n/a"
    lines = [f"### {rank + 1}. {label}: {md(finding.title)} ({code(finding.code)})", ""]
    lines += table(["confidence", "severity", "first step"], [["observed" if label.startswith(OBSERVED) else confidence(finding.confidence), md(finding.severity), first]])
    lines += ["", "Evidence:", ""]
    lines += [f"- {md(line, 1000)}" for line in finding.evidence] or ["- none recorded"]
    lines.append("")
    if finding.code != "healthy":
        lines += [f"**Fix:** {md(finding.fix, 1000)}", ""]
    if finding.related:
        lines += ["Explains: " + ", ".join(code(c) for c in finding.related), ""]
    return lines


def notes_section(diagnosis: Diagnosis) -> list[str]:
    """The diagnosis's informational notes (setup review), or a line saying there are none."""
    lines = ["## Notes", "", "Review of the setup: not alarms, but worth a look.", ""]
    if not diagnosis.notes:
        return lines + ["No notes.", ""]
    for note in diagnosis.notes:
        evidence = "; ".join(md(e, 1000) for e in note.evidence)
        lines.append(f"- **{md(note.title)}** ({code(note.code)}, {confidence(note.confidence)}): {evidence}. Suggestion: {md(note.fix, 1000)}")
    return lines + [""]


def checklist_section(checks: list[Check]) -> list[str]:
    """The pre-training checklist table and the items no recorded data can answer."""
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, FAIL)}
    unknown = len(checks) - counts[PASS] - counts[FAIL]
    lines = ["## Pre-training checklist", "",
             "The items of the 10-point pre-training checklist, plus related health checks, that the recorded data "
             f"can answer: {counts[PASS]} pass, {counts[FAIL]} fail, {unknown} unknown (not recorded).", ""]
    rows = [[md(c.check), MARKS.get(c.status, "❔ unknown"), md(c.detail, 600)] for c in checks]
    lines += table(["check", "result", "the number behind it"], rows)
    lines += ["", "Not answerable from recorded data (check them in code): " + "; ".join(NOT_ANSWERABLE) + ".", ""]
    return lines


def plots_section(results: list[PlotResult]) -> list[str]:
    """Each drawn plot embedded with how to read it; skipped plots listed with the reason."""
    lines = ["## Plots", ""]
    for result in (r for r in results if r.drawn):
        spec = result.spec
        lines += [f"### {spec.heading}", "", image(spec.heading, spec.filename), "",
                  f"{spec.how_to_read} This run: {md(result.note or '', 600)}.", ""]
    skipped = [r for r in results if not r.drawn]
    if skipped:
        lines += ["### Plots not drawn", ""]
        lines += [f"- {r.spec.heading} ({r.spec.filename}): {md(r.skipped, 600)}" for r in skipped]
        lines.append("")
    return lines


def info_section(rows: list[Row], diagnosis: Diagnosis) -> list[str]:
    """The run info table (identity, model, optimizer, config) and what the reader skipped."""
    lines = ["## Run info", ""]
    lines += table(["field", "value"], [[md(field), md(value, 1000)] for field, value in rows])
    lines.append("")
    if diagnosis.skipped:
        lines += ["Skipped while reading or diagnosing:", ""]
        lines += [f"- {md(item, 600)}" for item in diagnosis.skipped]
        lines.append("")
    return lines


def footer(run_path: str) -> list[str]:
    """How to get the same answers interactively."""
    return ["---", "", f"Made by `tuidiag report` from {md(run_path)}. The same diagnosis in a terminal: `tuidiag diagnose RUN`; "
            "before/after a fix: `tuidiag compare RUN_A RUN_B`.", ""]

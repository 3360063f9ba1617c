"""Findings and diagnoses: what the engine says, in the shape of the shared JSON contract."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from tuidiag.diagnosis.codes import moves_of
from tuidiag.diagnosis.moves import Move


@dataclass
class Finding:
    """One hypothesis: a stable ``code``, how sure we are, the evidence and the fix."""

    code: str
    title: str
    confidence: float
    severity: str
    evidence: list[str]
    fix: str
    first_step: int | None = None
    """The first step at which the finding's signature held (``None``: not tied to a step)."""
    related: list[str] = field(default_factory=list)
    """Codes of symptoms this finding explains (they appear below it, labelled as observed symptoms of it)."""
    tags: set[str] = field(default_factory=set, repr=False)
    """Internal facts the combiner reads (e.g. ``from_start``); not part of the JSON contract."""
    moves: dict[Move, str] = field(default_factory=dict, repr=False)
    """The settings the fix moves, each with the clause of ``fix`` that moves it (from :mod:`~tuidiag.diagnosis.codes`)."""
    onset_from: int | None = field(default=None, repr=False)
    """The earliest step at which the signature may have begun: the step after the last check that did not show it
    (sampled series are checked every few steps, and the quiet first steps not at all); ``None``: ``first_step``.
    Internal, for ordering causes before symptoms; not part of the JSON contract."""
    raw_confidence: float | None = field(default=None, repr=False)
    """The rules' score before calibration (``None``: not calibrated); ``confidence`` is the calibrated one
    (see :mod:`~tuidiag.diagnosis.calibration`). Internal; not part of the JSON contract."""

    def __post_init__(self) -> None:
        """Read the fix's moves; a code missing from the catalog raises ``ValueError``."""
        declared = moves_of(self.code, self.fix)
        self.moves = self.moves or declared

    def changed(self, **changes: Any) -> Finding:
        """A new finding: this one with ``changes`` applied; this one is left as it was.

        The copy shares no list, set or dict with this finding, and its ``moves`` are the
        ones given (or these), never re-read from a changed ``fix``."""
        moves = dict(changes.pop("moves", self.moves))
        copy = replace(self, evidence=list(changes.pop("evidence", self.evidence)), related=list(changes.pop("related", self.related)),
                       tags=set(changes.pop("tags", self.tags)), **changes)
        copy.moves = moves
        return copy

    def to_json(self) -> dict[str, Any]:
        """The finding as the JSON contract has it."""
        return {"code": self.code, "title": self.title, "confidence": round(float(self.confidence), 3), "severity": self.severity,
                "evidence": [str(line) for line in self.evidence], "fix": str(self.fix), "first_step": self.first_step,
                "related": list(self.related)}


@dataclass
class Diagnosis:
    """The ranked findings for one run as of one step."""

    run: str
    step: int | None
    findings: list[Finding]
    notes: list[Finding] = field(default_factory=list)
    """Informational review items (never alarms), listed after the findings."""
    skipped: list[str] = field(default_factory=list)
    """What could not be read, from the run's warnings."""

    @property
    def top(self) -> Finding:
        """The most likely finding (``healthy`` when nothing is wrong)."""
        return self.findings[0]

    def to_json(self) -> dict[str, Any]:
        """The object ``tuidiag diagnose --json`` prints."""
        return {
            "run": self.run,
            "step": self.step,
            "findings": [f.to_json() for f in self.findings],
            "notes": [f.to_json() for f in self.notes],
            "skipped": list(self.skipped),
        }

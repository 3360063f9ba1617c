"""Findings and diagnoses: what the engine says, in the shape of the shared JSON contract."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("info", "warning", "critical")


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
    related: list[str] = field(default_factory=list)
    """Codes of symptoms this finding explains (they appear below it as alternatives)."""
    tags: set[str] = field(default_factory=set, repr=False)
    """Internal facts the combiner reads (e.g. ``from_start``); not part of the JSON contract."""

    def to_json(self) -> dict[str, Any]:
        """The finding as the JSON contract has it."""
        data = asdict(self)
        data.pop("tags", None)
        data["confidence"] = round(float(self.confidence), 3)
        return data


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

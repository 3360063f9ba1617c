"""The diagnosis engine: rules over a run's series, combined into ranked, explained findings.

Pure code over the store: no torch, no UI. ``diagnose(run)`` is the entry point.
"""

from tuidiag.diagnosis.engine import diagnose
from tuidiag.diagnosis.finding import Diagnosis, Finding

__all__ = ["Diagnosis", "Finding", "diagnose"]

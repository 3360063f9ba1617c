"""The diagnosis engine: rules over a run's series, combined into ranked, explained findings.

Pure code over the store: no torch, no UI, no file reads. ``diagnose(run, at, jobs)`` is the
entry point; its callers load the run and read its job results
(:func:`tuidiag.store.job_results.job_records`) and pass both in.
"""

from tuidiag.diagnosis.engine import diagnose
from tuidiag.diagnosis.finding import Diagnosis, Finding

__all__ = ["Diagnosis", "Finding", "diagnose"]

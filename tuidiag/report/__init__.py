"""Reports on runs: a Markdown report with plots, and before/after comparisons of two runs.

- :func:`write_report` (``tuidiag report``): diagnosis, pre-training checklist,
  run info and PNG plots in one directory. Plotting uses matplotlib headlessly
  and is imported only when a report is drawn.
- :func:`compare_runs` (``tuidiag compare``): two runs side by side, with the
  change in each headline metric and the findings resolved or introduced.

Pure code over the store and the diagnosis engine: no torch, no terminal UI.
"""

from tuidiag.report.build import write_report
from tuidiag.report.compare import Comparison, compare_runs

__all__ = ["Comparison", "compare_runs", "write_report"]

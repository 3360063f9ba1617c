"""Jobs defined in one place: one :class:`JobKind` per job, torch-free and UI-free.

The CLI, the monitor, the store, the text renderers and the jobs themselves read
every fact about a job from here (:mod:`tuidiag.job_kinds.registry`); its
settings and their defaults are in :mod:`tuidiag.job_kinds.configs`.
"""

from tuidiag.job_kinds.kind import PROGRESS_LINE, SAVED_LINE, JobError, JobKind, Option, Verdict, load
from tuidiag.job_kinds.registry import find, find_command, get, kinds, live_names, names, register, unregister

__all__ = ["PROGRESS_LINE", "SAVED_LINE", "JobError", "JobKind", "Option", "Verdict", "find", "find_command", "get", "kinds",
           "live_names", "load", "names", "register", "unregister"]

"""The training side: ``Recorder`` and the writer thread behind it (no UI imports)."""

from tuidiag.recorder.arguments import ArgumentError
from tuidiag.recorder.placement import ResumeError
from tuidiag.recorder.recorder import Recorder

__all__ = ["ArgumentError", "Recorder", "ResumeError"]

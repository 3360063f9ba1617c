"""Run sources: every kind of run the monitor shows, read live through one interface.

tuidiag's own runs, TensorBoard log directories, W&B offline runs and CSV logs
(Lightning, Keras) are each a :class:`~tuidiag.sources.run_source.RunSource`, listed
once in :mod:`tuidiag.sources.registry`. Foreign runs are read in place, incrementally,
and never written to. No torch, no UI.
"""

from tuidiag.sources.registry import SOURCES, discover, kind_of, locate, open_source, owner_of
from tuidiag.sources.run_source import KIND_TUIDIAG, source_kind

__all__ = ["KIND_TUIDIAG", "SOURCES", "discover", "kind_of", "locate", "open_source", "owner_of", "source_kind"]

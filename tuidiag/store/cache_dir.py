"""Where tuidiag keeps what it derives from runs and can compute again: ``$TUIDIAG_CACHE_DIR``, else
``$XDG_CACHE_HOME/tuidiag``, else ``~/.cache/tuidiag``. Nothing in it is needed to read a run."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_root() -> Path:
    """The cache directory (not created here)."""
    explicit = os.environ.get("TUIDIAG_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tuidiag"


def run_key(run_dir: Path) -> str:
    """A file name for a run directory: a digest of its resolved path (any bytes, UTF-8 or not)."""
    return hashlib.sha1(os.fsencode(run_dir.resolve())).hexdigest()[:20]

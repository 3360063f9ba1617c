"""Shared fixtures: small real models and a helper that trains them through the recorder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A fresh path for one run directory."""
    return tmp_path / "run"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (for subprocess tests)."""
    return sys.executable

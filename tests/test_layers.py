"""Layering: the training side and the store never import the UI; import tuidiag stays light."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_hold() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint, "import-linter is part of the dev extra"
    result = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.split("Contracts:")[-1].split("kept")[0]


def test_import_tuidiag_loads_neither_torch_nor_textual(python) -> None:
    code = "import sys, tuidiag; tuidiag.open_run; print(sorted(m for m in ('torch', 'textual') if m in sys.modules))"
    result = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"

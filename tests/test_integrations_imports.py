"""The integrations are lazy: ``import tuidiag`` loads no framework, and a missing one says what to install."""

from __future__ import annotations

import subprocess
import textwrap

import pytest


def _run(python: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_importing_tuidiag_imports_no_framework(python) -> None:
    result = _run(python, """
        import sys, tuidiag, tuidiag.integrations
        print(sorted(m for m in ("lightning", "pytorch_lightning", "transformers", "accelerate") if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "blocked", "hint"), [
    ("tuidiag.integrations.lightning", "lightning", "pip install lightning"),
    ("tuidiag.integrations.transformers", "transformers", "pip install transformers accelerate"),
])
def test_a_missing_framework_gives_an_import_error_that_says_what_to_install(python, module, blocked, hint) -> None:
    result = _run(python, f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if it were not installed
        try:
            import {module}
        except ImportError as exc:
            print(exc)
    """)
    assert result.returncode == 0, result.stderr
    assert hint in result.stdout

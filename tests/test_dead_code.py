"""No dead code in the package: vulture finds nothing unused in ``tuidiag/`` beyond its whitelist.

What only the package's users, Python, numpy or a framework reach by name is listed,
with its reason, in ``tests/vulture_whitelist.py``; Textual's naming conventions are
ignored by pattern in ``pyproject.toml`` (``[tool.vulture]``). ``python -m vulture``
in the repository root runs the same check.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("vulture", reason="vulture is part of the dev extra")
WHITELIST = ROOT / "tests" / "vulture_whitelist.py"


def _listed() -> set[str]:
    """The names the whitelist excuses: its bare expression statements (``name`` or ``_.attribute``)."""
    body = ast.parse(WHITELIST.read_text(encoding="utf-8")).body
    return {ast.unparse(s.value) for s in body if isinstance(s, ast.Expr) and isinstance(s.value, (ast.Name, ast.Attribute))}


def test_vulture_finds_no_unused_code_and_the_whitelist_excuses_nothing_else() -> None:
    result = subprocess.run([sys.executable, "-m", "vulture", "tuidiag", "--make-whitelist"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert not result.stderr, result.stderr
    reported = {line.split("#")[0].strip(): line for line in result.stdout.splitlines() if line.strip()}
    dead = [line for name, line in reported.items() if name not in _listed()]
    assert not dead, "unused code: remove it, or whitelist it with a reason in tests/vulture_whitelist.py:\n" + "\n".join(dead)
    stale = sorted(_listed() - set(reported))
    assert not stale, f"whitelisted, but vulture sees them used (or gone): drop them from the whitelist: {stale}"

"""The diagnosis codes are defined once: rules, the combiner, the live actions and the docs
name only registered codes, the shared contract's codes are all registered, and the
user-facing table in docs/diagnosis-codes.md is the registry's own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tuidiag.diagnosis import combine
from tuidiag.diagnosis.codes import CODES, markdown_table
from tuidiag.viewmodel import actions

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "diagnosis-codes.md"


def _emitted_codes() -> dict[str, list[str]]:
    """Each string literal passed as the first argument of ``Finding(...)`` in the package, with where."""
    found: dict[str, list[str]] = {}
    for path in (ROOT / "tuidiag").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.setdefault(first.value, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_every_code_a_finding_is_built_with_is_registered() -> None:
    emitted = _emitted_codes()
    assert emitted, "the AST scan found no Finding(...) calls"
    unknown = {code: where for code, where in emitted.items() if code not in CODES}
    assert not unknown


def test_detected_flag_matches_the_rules() -> None:
    emitted = set(_emitted_codes())
    for code in CODES.values():
        assert code.detected == (code.name in emitted), code.name


def test_the_combiner_and_the_live_actions_name_only_registered_codes() -> None:
    named = set(combine.EXPLAINS) | {c for symptoms in combine.EXPLAINS.values() for c in symptoms}
    named |= {c for pair in combine.CONDITIONS for c in pair}
    named |= {c for group in (actions.LR_DOWN, actions.LR_UP, actions.CLIP) for c in group}
    assert named - set(CODES) == set()


@pytest.mark.skipif(not SHARED.exists(), reason="the shared contract lies beside the repo only in the team's checkout")
def test_every_code_of_the_shared_contract_is_registered_as_shared() -> None:
    shared = set(re.findall(r"^\| `([a-z_]+)` \|", SHARED.read_text(encoding="utf-8"), re.M))
    assert len(shared) >= 20
    assert shared <= set(CODES)
    assert {c.name for c in CODES.values() if c.origin == "shared"} == shared


def test_docs_table_is_generated_from_the_registry() -> None:
    assert (ROOT / "docs" / "diagnosis-codes.md").read_text(encoding="utf-8") == markdown_table()

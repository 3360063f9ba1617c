"""Every module, public class and public function in ``tuidiag/`` says what it is, its functions are typed, and no module is long.

A cheap walk over the source with :mod:`ast` (nothing is imported): a module without a
docstring, or a public function (not ``_``-prefixed, at module level or in a public
class) without a docstring, an annotation on every argument or a return annotation,
fails with its place. Textual's callbacks (``on_*``, ``action_*``, ``compose``,
``can_replace``), which Textual calls by name and documents itself, need no docstring
but still need their annotations. A module over :data:`MAX_MODULE_LINES` lines fails too.
"""

from __future__ import annotations

import ast

from tests.conftest import ROOT

PACKAGE = ROOT / "tuidiag"
TEXTUAL_CALLBACKS = ("on_", "action_")
TEXTUAL_NAMES = {"compose", "can_replace"}


def _untyped(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The arguments of ``node`` without an annotation (``self``/``cls`` aside), and ``return`` when it has none."""
    args = node.args
    every = args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a is not None]
    missing = [a.arg for a in every if a.annotation is None and a.arg not in ("self", "cls")]
    return missing + ([] if node.returns is not None else ["return"])


def problems(source: str, where: str) -> list[str]:
    """What the module ``source`` (at ``where``) lacks: its docstring, public docstrings, type hints (one line each)."""
    tree = ast.parse(source)
    found = [] if ast.get_docstring(tree) else [f"{where}: no module docstring"]

    def walk(body: list[ast.stmt], owner: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                if not ast.get_docstring(node):
                    found.append(f"{where}:{node.lineno}: class {node.name} has no docstring")
                walk(node.body, f"{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                textual = owner and (node.name.startswith(TEXTUAL_CALLBACKS) or node.name in TEXTUAL_NAMES)
                if not textual and not ast.get_docstring(node):
                    found.append(f"{where}:{node.lineno}: {owner}{node.name} has no docstring")
                untyped = _untyped(node)
                if untyped:
                    found.append(f"{where}:{node.lineno}: {owner}{node.name} lacks type hints for {', '.join(untyped)}")

    walk(tree.body, "")
    return found


PROBE = '''
def shown(x):
    return x


def _hidden(x):
    return x


class Widget:
    """A widget."""

    def on_mount(self):
        pass
'''


def test_the_walk_names_a_missing_docstring_and_missing_hints() -> None:
    assert problems(PROBE, "probe.py") == [
        "probe.py: no module docstring", "probe.py:2: shown has no docstring", "probe.py:2: shown lacks type hints for x, return",
        "probe.py:13: Widget.on_mount lacks type hints for return"]


def test_every_module_and_public_function_has_a_docstring_and_type_hints() -> None:
    found = [line for path in sorted(PACKAGE.rglob("*.py"))
             for line in problems(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
    assert not found, "\n".join(found)


MAX_MODULE_LINES = 400
"""A module longer than this holds more than its name says: split it (the team brief's "small modules")."""


def test_no_module_is_longer_than_the_limit() -> None:
    long = {path.relative_to(ROOT).as_posix(): lines for path in sorted(PACKAGE.rglob("*.py"))
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"

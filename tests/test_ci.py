"""CI runs the README's test command, character for character."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the tests", 1)[1]
    command = re.search(r"```bash\n(.*?)\n```", section, flags=re.S).group(1).strip()
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def _pip_installs(text: str) -> list[str]:
    """Every ``pip install ...`` command in ``text`` (in code blocks or inline code), up to its ``&&`` or backtick."""
    return [m.group(0).strip() for m in re.finditer(r"pip install [^`\n&]*", text)]


def _torch_pin(command: str) -> str | None:
    """The torch requirement ``command`` names (``torch==2.13.0``, ``torch``), or None."""
    found = re.search(r"(?<![\w.\[-])torch(?:[=<>!~]=?[\w.*]+)?(?![\w\]-])", command)
    return found.group(0) if found else None


def test_every_readme_torch_install_is_pinned_as_ci_pins_it() -> None:
    """An unpinned ``torch`` on a machine without a GPU pulls several GB of CUDA packages: every README command
    that installs torch, directly or through the ``[torch]`` or ``[dev]`` extra, names the same pin as ``.ci/run``."""
    ci_pins = {_torch_pin(c) for c in _pip_installs((ROOT / ".ci" / "run").read_text())} - {None}
    assert len(ci_pins) == 1 and "==" in next(iter(ci_pins)), ci_pins
    pin = next(iter(ci_pins))
    installs = _pip_installs((ROOT / "README.md").read_text())
    with_torch = [c for c in installs if _torch_pin(c) or re.search(r"\[(?:[\w,]*,)?(?:torch|dev)(?:,[\w,]*)?\]", c)]
    assert len(with_torch) >= 2, installs  # the demo command with jobs, and the test command
    for command in with_torch:
        assert _torch_pin(command) == pin, command


def test_the_torch_pin_finder() -> None:
    """The pin finder on the shapes a README writes (so the check above cannot pass by reading nothing)."""
    assert _torch_pin("pip install torch==2.13.0 -e '.[dev]'") == "torch==2.13.0"
    assert _torch_pin("pip install torch --index-url https://x/whl/cpu") == "torch"
    assert _torch_pin("pip install -e '.[torch]'") is None
    assert _torch_pin("pip install torch-lr-finder") is None
    assert _torch_pin("pip install 'torch>=2.1'") == "torch>=2.1"

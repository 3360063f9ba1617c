"""CI runs the README's test command, character for character."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the tests", 1)[1]
    command = re.search(r"```bash\n(.*?)\n```", section, flags=re.S).group(1).strip()
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()

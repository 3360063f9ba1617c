"""The package's top level offers what users type: completion lists the API, not import machinery."""

from __future__ import annotations

import rlcompleter

import tuidiag


def _completions(prefix: str) -> set[str]:
    completer = rlcompleter.Completer({"tuidiag": tuidiag})
    found, i = set(), 0
    while (text := completer.complete(prefix, i)) is not None:
        found.add(text.rstrip("("))
        i += 1
    return found


def test_dir_lists_the_public_api_only() -> None:
    names = dir(tuidiag)
    assert {"Recorder", "open_run", "find_runs", "Run"} <= set(names)
    assert not {"Any", "TYPE_CHECKING", "import_module", "annotations"} & set(names)
    assert set(names) == set(tuidiag.__all__)


def test_tab_completion_offers_recorder_and_open_run() -> None:
    found = _completions("tuidiag.")
    assert {"tuidiag.Recorder", "tuidiag.open_run"} <= found
    assert "tuidiag.Any" not in found and "tuidiag.import_module" not in found


def test_every_listed_name_resolves() -> None:
    for name in tuidiag.__all__:
        assert getattr(tuidiag, name) is not None

"""A job's key may not be one the run view binds for itself: registration names the clash.

The run view's keys come from one registry (``tuidiag.monitor_keys``); these tests check that the
registry holds every key the app and the run view really bind, and that registering a job with any
of them, spelt as Textual names it or as the character typed, fails with a message that says which.
"""

from __future__ import annotations

import dataclasses
import pytest
from textual.keys import _character_to_key, key_to_character

from tuidiag import job_kinds
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.monitor_keys import key_name, run_view_bindings

BOUND = sorted(run_view_bindings())


def _job_keys() -> set[str]:
    return {key_name(kind.key) for kind in job_kinds.kinds()}


def _bound_by_textual() -> set[str]:
    """Every key the running app and its run view bind (Textual's own, the app's, the run view's), less the job keys."""
    keys = set(TuidiagApp._merge_bindings().key_to_bindings) | set(RunScreen._merge_bindings().key_to_bindings)
    return {key_name(key) for key in keys} - _job_keys()


def _spellings(name: str) -> list[str]:
    """``name`` as Textual names it and, for a printable character, as the character typed (``question_mark``, ``?``)."""
    char = key_to_character(name)
    return [name] + ([char] if char and char != name else [])


def test_the_registry_holds_every_key_the_run_view_binds() -> None:
    assert _bound_by_textual() == set(BOUND)


@pytest.mark.parametrize("char", [chr(c) for c in range(0x21, 0x7f)] + [" ", "é", "\N{HORIZONTAL ELLIPSIS}"])
def test_key_names_agree_with_textual(char: str) -> None:
    """A key given as the character typed is named as Textual names the key it binds."""
    assert key_name(char) == _character_to_key(char)


@pytest.mark.parametrize("bound", BOUND)
def test_a_job_may_not_take_a_run_view_key(bound: str) -> None:
    import toy_job

    before = job_kinds.kinds()
    for spelt in _spellings(bound):
        with pytest.raises(ValueError) as raised:
            try:
                job_kinds.register(dataclasses.replace(toy_job.KIND, key=spelt))
            finally:  # a key let through must not stay registered for the next test
                if job_kinds.kinds() != before:
                    job_kinds.unregister(toy_job.KIND.name)
        message = str(raised.value)
        assert repr(spelt) in message and "bound in the run view" in message and "choose another key" in message
        assert run_view_bindings()[bound] in message
        assert job_kinds.kinds() == before


@pytest.mark.parametrize("kind", job_kinds.kinds(), ids=lambda k: k.name)
def test_no_registered_job_shadows_a_run_view_key(kind: job_kinds.JobKind) -> None:
    assert key_name(kind.key) not in run_view_bindings()


def test_the_zoom_key_clash_that_was_found_by_hand() -> None:
    """The toy job's key was ``z`` until zoom took it; registering it so now fails and says what ``z`` does."""
    import toy_job

    with pytest.raises(ValueError, match=r"its key 'z' is taken by the run view's 'Zoom'"):
        job_kinds.register(dataclasses.replace(toy_job.KIND, key="z"))
    assert job_kinds.find(toy_job.KIND.name) is None


def test_a_free_key_still_registers() -> None:
    import toy_job

    try:
        assert job_kinds.register(toy_job.KIND) is toy_job.KIND
    finally:
        job_kinds.unregister(toy_job.KIND.name)

"""Every side reads the one table of live actions (``tuidiag.action_kinds``) and agrees with it.

The control channel accepts exactly the registered actions, ``tuidiag act`` sends each
one from its own option, the recorder refuses on several ranks exactly those that
would drift a replica, the monitor's proposals name only registered actions and its
``a`` key's help lists every one; each diagnosis code's ``live`` moves are moves the
monitor's proposals make, and a finding of that code makes them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tuidiag import action_kinds, job_kinds
from tuidiag.action_kinds import ACTIONS, ActionKind
from tuidiag.cli import act_cmd
from tuidiag.diagnosis.codes import CODES, live_codes
from tuidiag.diagnosis.finding import Diagnosis, Finding
from tuidiag.diagnosis.moves import CLIP_TIGHTER, LR_DOWN, LR_UP
from tuidiag.store import control_channel as ctl
from tuidiag.viewmodel.actions import propose

OFFERED_MOVES = {LR_DOWN, LR_UP, CLIP_TIGHTER}
"""The moves the monitor's proposals make: the LR scaled down or up, clipping turned on."""
LIVE = sorted(name for name, code in CODES.items() if code.live)


def test_the_control_channel_accepts_exactly_the_registered_actions_and_no_job_shares_a_name() -> None:
    assert ctl.LIVE_ACTIONS == action_kinds.names()
    assert set(action_kinds.names()) <= set(ctl.requestable())
    assert not set(action_kinds.names()) & set(job_kinds.names())
    assert len(set(action_kinds.names())) == len(ACTIONS)


@pytest.mark.parametrize("kind", ACTIONS, ids=lambda k: k.name)
def test_tuidiag_act_sends_each_action_from_its_own_option(kind: ActionKind) -> None:
    parser = argparse.ArgumentParser()
    act_cmd.add_arguments(parser)
    args = parser.parse_args(["RUN", kind.flag] + ([] if kind.arg is None else ["0.5"]))
    assert act_cmd.request_of(args) == (kind.name, {} if kind.arg is None else {kind.arg: 0.5})
    assert kind.flag in parser.format_help()


@pytest.mark.parametrize("kind", ACTIONS, ids=lambda k: k.name)
def test_the_recorder_refuses_on_several_ranks_exactly_the_actions_that_drift_a_replica(kind: ActionKind, tmp_path: Path) -> None:
    from tuidiag.recorder.actions import ActionError, LiveChanges

    request = {"job": kind.name, "args": {} if kind.arg is None else {kind.arg: 0.5}}
    with pytest.raises(ActionError) as refused:  # no watched model: every action is refused, for its own reason
        LiveChanges(world_size=2).apply(request, 3, None, tmp_path)
    assert ("ranks" in str(refused.value)) == kind.drifts_replicas


def test_the_run_view_help_lists_every_action() -> None:
    from tuidiag.app.screens.help import section_lines
    from tuidiag.app.screens.run_screen import RunScreen

    line = " ".join(text for text in section_lines(RunScreen.BINDINGS, width=1000) if "Apply fix" in text)
    assert line and all(kind.short in line for kind in ACTIONS), line


def test_each_codes_live_moves_are_moves_the_proposals_make() -> None:
    assert LIVE, "no code offers a live change"
    for name in LIVE:
        assert set(CODES[name].live) <= OFFERED_MOVES, name
    assert not set(live_codes(LR_DOWN)) & set(live_codes(LR_UP))


@pytest.mark.parametrize("name", LIVE + ["healthy"])
@pytest.mark.parametrize("clipping", [False, True])
def test_a_finding_makes_the_proposals_its_code_lists_and_only_registered_actions(name: str, clipping: bool) -> None:
    diagnosis = Diagnosis("r", 10, [Finding(name, name, 0.9, "warning", [], "fix")])
    proposals = propose(diagnosis, lr=1e-3, suggested=None, clipping=clipping)
    assert {p.action for p in proposals} <= set(action_kinds.names())
    for proposal in proposals:
        kind = action_kinds.get(proposal.action)
        assert set(proposal.args) == ({kind.arg} if kind.arg else set())
    live = set(CODES[name].live)
    factor = next(p.args["factor"] for p in proposals if p.action == action_kinds.SCALE_LR.name)
    assert (factor < 1) == (LR_DOWN in live or not live) and (factor > 1) == (LR_UP in live)
    clip = [p for p in proposals if p.action == action_kinds.CLIP_GRAD.name]
    assert bool(clip) == (CLIP_TIGHTER in live and not clipping)
    assert proposals[-1].action == action_kinds.CHECKPOINT.name

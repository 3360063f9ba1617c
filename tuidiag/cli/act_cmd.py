"""``tuidiag act RUN``: apply a change to a live training (scale the LR, clip gradients, checkpoint now).

The change goes to the training as a control request (``RUN/control``, accepted
only from the training's own user), is applied at its next step and counts once the
steps after it show it (an LR a scheduler puts back, clipping that ``optimizer.step()``
never sees, are reported failed with the reason); it is recorded as an ``action``
event either way, so the monitor marks it on the charts.
"""

from __future__ import annotations

import argparse
import sys

from tuidiag.action_kinds import ACTIONS
from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.store import control_channel as ctl
from tuidiag.text.safe import clean


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``act`` arguments."""
    parser.add_argument("run", help="a live run directory")
    what = parser.add_mutually_exclusive_group(required=True)
    for kind in ACTIONS:  # one option per live action (tuidiag.action_kinds)
        if kind.arg is None:
            what.add_argument(kind.flag, action="store_true", help=kind.help)
        else:
            what.add_argument(kind.flag, type=float, metavar=kind.metavar, help=kind.help)
    parser.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for the answer, the checking of the next steps included (default 30); "
                             "a change not applied by then is withdrawn")


def request_of(args: argparse.Namespace) -> tuple[str, dict[str, float]]:
    """The control request the parsed ``act`` options ask for: the action's name and its arguments."""
    for kind in ACTIONS:
        value = getattr(args, kind.dest)
        if kind.arg is None and value:
            return kind.name, {}
        if kind.arg is not None and value is not None:
            return kind.name, {kind.arg: value}
    raise ValueError("no live action given")  # argparse requires one


def run(args: argparse.Namespace) -> int:
    """Send the change and print the training's answer; exit 0 when applied and shown by the next steps, 2 otherwise."""
    try:
        target = load_run(args.run)
    except RunNotReadable as exc:
        return fail("act", str(exc))
    problem = ctl.live_problem(target.manifest)
    if problem is not None:
        return fail("act", f"changes apply only to a live training: {problem}")
    done, message = ctl.send_and_wait(target.path, *request_of(args), args.wait)
    if not done:
        return fail("act", message)
    print(clean(message, 1000), file=sys.stdout)
    return 0

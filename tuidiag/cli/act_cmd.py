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

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.store import control_channel as ctl
from tuidiag.text.safe import clean


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``act`` arguments."""
    parser.add_argument("run", help="a live run directory")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--scale-lr", type=float, metavar="FACTOR", help="multiply every LR (and those of the scheduler passed to rec.watch)")
    what.add_argument("--clip", type=float, metavar="MAX_NORM", help="clip gradients by global norm from the next step (0: off)")
    what.add_argument("--checkpoint", action="store_true", help="save model and optimizer state now")
    parser.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for the answer, the checking of the next steps included (default 30); "
                             "a change not applied by then is withdrawn")


def _request(args: argparse.Namespace) -> tuple[str, dict[str, float]]:
    if args.scale_lr is not None:
        return "scale_lr", {"factor": args.scale_lr}
    if args.clip is not None:
        return "clip_grad", {"max_norm": args.clip}
    return "checkpoint", {}


def run(args: argparse.Namespace) -> int:
    """Send the change and print the training's answer; exit 0 when applied and shown by the next steps, 2 otherwise."""
    try:
        target = load_run(args.run)
    except RunNotReadable as exc:
        return fail("act", str(exc))
    problem = ctl.live_problem(target.manifest)
    if problem is not None:
        return fail("act", f"changes apply only to a live training: {problem}")
    done, message = ctl.send_and_wait(target.path, *_request(args), args.wait)
    if not done:
        return fail("act", message)
    print(clean(message, 1000), file=sys.stdout)
    return 0

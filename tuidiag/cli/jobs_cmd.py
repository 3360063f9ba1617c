"""``tuidiag lr-find | nan-hunt | overfit-batch | sharpness RUN`` (one subcommand per job kind of
:mod:`tuidiag.job_kinds`): jobs on a live run, or on a finished or crashed run's factory.

Each command rebuilds model, optimizer, loss and data by calling the factory the
run names (``run.json``'s ``factory``, or ``--factory``; contract in
:mod:`tuidiag.jobs`), runs the job on ``--device`` (default: CUDA when available),
saves the result to ``RUN/jobs/<job>-<timestamp>.json`` and prints it (``--json``:
the result object). The factory is code named by a run directory: the command
prints exactly what it will import and runs it only with ``--yes`` or after a
"y" at the prompt; without a terminal and without ``--yes`` it refuses.

Exit status: 0 done, 1 done with a negative answer (overfit FAIL, no capture,
NaN not reproduced, no LR suggestion, sharpness of a model that cannot train:
every parameter frozen, a detached output or loss, see
:mod:`tuidiag.jobs.trainability`), 2 not run (bad arguments, refused, factory or
job error).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidiag import job_kinds
from tuidiag.cli import job_requests
from tuidiag.job_kinds import PROGRESS_LINE, SAVED_LINE, JobError, JobKind, Option
from tuidiag.store import control_channel as ctl
from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.format import LR_PREFIX, MODEL_TRAINING
from tuidiag.store import Run
from tuidiag.text.safe import clean

EPILOG = "exit status: 0 done, 1 negative answer, 2 not run (bad arguments, refused, factory or job error)"


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("run", help="a run directory whose run.json names a factory (Recorder(..., factory='train:build'))")
    parser.add_argument("--device", help="cpu, cuda, cuda:1, ... (default: cuda when available, else cpu)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--yes", "-y", action="store_true", help="run the factory without asking")
    parser.add_argument("--factory", metavar="MODULE:FUNCTION", help="use this factory instead of the one in run.json")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--live", action="store_true",
                       help="run inside the live training (default when the run is live and accepts requests)")
    where.add_argument("--offline", action="store_true", help="use the factory even when the run is live")
    parser.add_argument("--wait", type=float, default=ctl.REQUEST_WAIT, metavar="SECONDS",
                        help="stop waiting when a live training says nothing about the job for this long "
                             f"(default {ctl.REQUEST_WAIT:.0f}; a job not started then is withdrawn)")


def add_arguments(parser: argparse.ArgumentParser, kind: JobKind) -> None:
    """Register ``kind``'s arguments: the common ones, then its options with its config's defaults."""
    _add_common(parser)
    defaults = kind.default_config()
    for option in kind.options:
        parser.add_argument(option.flag, **_option_arguments(option, getattr(defaults, option.name, None)))
    if kind.takes_checkpoint:
        parser.add_argument("--checkpoint", metavar="PATH",
                            help="measure these weights: a torch state_dict, or a dict with one under 'model', loaded "
                                 "(weights_only) into the factory's model (implies --offline; default: the factory's weights)")
    parser.add_argument("--progress-lines", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(job=kind.name)


def _option_arguments(option: Option, config_default: Any) -> dict[str, Any]:
    """``add_argument`` keywords of ``option``: its type from the config's default, and the default in its help."""
    default = None if option.unset else config_default
    shown = option.default_text or (f"{default:g}" if isinstance(default, float) else default)
    found: dict[str, Any] = {"dest": option.name, "default": default, "help": f"{option.help} (default {shown})"}
    if option.choices is not None:
        found["choices"] = option.choices
    elif option.type is not None or config_default is not None:
        found["type"] = option.type or type(config_default)
    if option.metavar is not None:
        found["metavar"] = option.metavar
    return found


@dataclass
class Plan:
    """What one command will do, known before any user code runs."""

    run: Run
    config: Any
    device: Any
    capture: tuple[Any, dict[str, Any]] | None = None
    """The NaN hunt's capture: (path, loaded data), or None when the run has none."""
    checkpoint: tuple[str, Any] | None = None
    """``--checkpoint``: (path, loaded state), loaded before any factory code runs."""
    factory: str = ""
    paths: list[Any] = field(default_factory=list)
    refused: list[tuple[Any, str]] = field(default_factory=list)


class _Stop(Exception):
    """Ends a command before or during its job, with a message for stderr (exit status 2)."""


def _prepare(kind: JobKind, run: Run, args: argparse.Namespace) -> Any:
    """Job input that needs no user code: the NaN hunt's capture (None when there is none)."""
    if not kind.needs_capture:
        return None
    from tuidiag.jobs.nan_hunt import find_capture, load_capture

    path = getattr(args, "capture", None) or find_capture(run.path)
    return (path, load_capture(path)) if path else None


def _checkpoint(args: argparse.Namespace) -> tuple[str, Any] | None:
    """``--checkpoint``'s weights, loaded (``weights_only``) before any user code runs."""
    path = getattr(args, "checkpoint", None)
    if not path:
        return None
    from tuidiag.jobs.weights import load_checkpoint

    return path, load_checkpoint(path)


def _open(kind: JobKind, args: argparse.Namespace) -> tuple[Run, Any]:
    """Open the run and check the job's options (no torch needed)."""
    try:
        return load_run(args.run), kind.config_from_options(vars(args))
    except (RunNotReadable, JobError) as exc:
        raise _Stop(str(exc)) from exc


def _check(kind: JobKind, args: argparse.Namespace, run: Run, config: Any) -> Plan:
    """Check every other argument and load what needs no user code (imports torch)."""
    from tuidiag.jobs import choose_device

    try:
        return Plan(run, config, choose_device(args.device), _prepare(kind, run, args), checkpoint=_checkpoint(args))
    except (RunNotReadable, JobError) as exc:
        raise _Stop(str(exc)) from exc


def confirmed(assume_yes: bool) -> bool:
    """True with ``--yes``, or after a "y" typed at the prompt; False without a terminal."""
    if assume_yes:
        return True
    if not (sys.stdin and sys.stdin.isatty()):
        return False
    print("Import and run it? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _choose_factory(plan: Plan, args: argparse.Namespace) -> None:
    """Set the factory (``--factory`` or the run's) and where it is imported from."""
    from tuidiag.jobs import FactoryError
    from tuidiag.jobs.factory import parse_spec, search_plan

    factory = args.factory or plan.run.manifest.get("factory")
    if not factory:
        raise _Stop(f"{plan.run.path} names no factory; record with Recorder(..., factory='train:build') "
                    "or pass --factory MODULE:FUNCTION")
    try:
        parse_spec(factory)
    except FactoryError as exc:
        raise _Stop(str(exc)) from exc
    search = search_plan(plan.run.manifest)
    plan.factory, plan.paths, plan.refused = factory, search.paths, search.refused


def _describe(kind: JobKind, plan: Plan) -> str:
    run = plan.run
    source = "--factory" if plan.factory != run.manifest.get("factory") else f"{run.path}/run.json"
    where = "".join(f"{clean(p, 200)}, " for p in plan.paths)
    refused = "".join(f"\n  not searched: {clean(p, 200)} ({clean(why, 200)})" for p, why in plan.refused)
    return (f"tuidiag {kind.command} will import and call code named by the run:\n"
            f"  factory: {clean(plan.factory, 200)}   (from {clean(source, 300)})\n"
            f"  imported from: {where}then the Python path (first match; never a directory another user can write)"
            f"{refused}\n"
            f"  job: {kind.describe(plan.config)} on {plan.device}")


def _progress(command: str, lines: bool) -> Any:
    from tuidiag.jobs import JobHandle

    if lines:
        return JobHandle(progress=lambda done, total: print(f"{PROGRESS_LINE} {done} {total}", file=sys.stderr, flush=True))
    if not sys.stderr.isatty():
        return JobHandle()

    def show(done: int, total: int) -> None:
        print(f"\r{command}: {done}/{total}", end="", file=sys.stderr, flush=True)

    return JobHandle(progress=show)


def _context(kind: JobKind, plan: Plan) -> Any:
    """What the job knows of the run: its LR at its last step (the factory's optimizer has the initial LR,
    not the schedule's), the capture and the model's mode at the captured step."""
    from tuidiag.jobs.run_kind import JobContext

    lr = plan.run.series(f"{LR_PREFIX}0")
    context = JobContext(live=False, run_dir=plan.run.path, run_lr=lr.last, step=int(lr.steps[-1]) if len(lr) else None)
    if plan.capture is not None:
        context.capture, context.capture_data = Path(plan.capture[0]), plan.capture[1]
        training = plan.run.series(MODEL_TRAINING)
        flags = training.values[training.steps <= plan.capture[1]["step"]] if len(training) else []
        context.training = bool(flags[-1]) if len(flags) else True
    return context


def _run_job(kind: JobKind, plan: Plan, args: argparse.Namespace) -> dict[str, Any]:
    """Import the factory, move the model to the device and run the job; errors become :class:`_Stop`."""
    from tuidiag.jobs import FactoryError, load_factory
    from tuidiag.jobs.run_kind import run

    try:
        parts = load_factory(plan.factory, plan.paths)
        if plan.checkpoint is not None:  # --checkpoint: these weights, not the factory's
            from tuidiag.jobs.weights import apply_checkpoint, checkpoint_weights

            apply_checkpoint(parts.model, plan.checkpoint[1], plan.checkpoint[0])
            parts.weights = checkpoint_weights(plan.checkpoint[0])
        parts.model.to(plan.device)
        return run(kind, parts, plan.device, plan.config, _progress(kind.command, args.progress_lines), _context(kind, plan))
    except (FactoryError, JobError) as exc:
        raise _Stop(str(exc)) from exc
    except Exception as exc:  # the user's code failed: report it, exit 2
        where = "".join(traceback.format_tb(exc.__traceback__)[-2:]).strip()
        raise _Stop(f"the job failed: {type(exc).__name__}: {exc} (at {where})") from exc
    finally:
        if sys.stderr.isatty() and not args.progress_lines:
            print(file=sys.stderr)


def _print(kind: JobKind, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        from tuidiag.store.manifest import jsonable

        print(json.dumps(jsonable(result), indent=2, allow_nan=False))
        return
    from tuidiag.text.jobs import render

    print(render(kind.name, result, sys.stdout.isatty()))


def run(args: argparse.Namespace) -> int:
    """``tuidiag <job> RUN``: the handler of every job's subcommand (``args.job`` names the kind)."""
    return execute(kind=job_kinds.get(args.job), args=args)


def execute(kind: JobKind, args: argparse.Namespace) -> int:
    """Check, show the plan, ask, run, save and print one job.

    A job sent to a live training runs in that process: only a job run here needs torch (and
    imports it, about 2 s), so only that path refuses without it."""
    from tuidiag.cli.torch_hint import refuse_without_torch
    from tuidiag.store.job_results import save_result

    try:
        run, config = _open(kind, args)
        if job_requests.wants_live(run, args) and kind.live:
            return _execute_live(kind, run, config, args)
        if refuse_without_torch(kind.command):
            return 2
        plan = _check(kind, args, run, config)
        if kind.needs_capture and plan.capture is None:
            from tuidiag.jobs.nan_hunt import no_capture

            _print(kind, no_capture(plan.run.path), args.json)
            return 1
        _choose_factory(plan, args)
        print(_describe(kind, plan), file=sys.stderr)
        if not confirmed(args.yes):
            raise _Stop(f"not confirmed: refusing to import {plan.factory!r}; pass --yes to run it")
        result = _run_job(kind, plan, args)
    except _Stop as exc:
        return fail(kind.command, str(exc))
    path = save_result(plan.run.path, kind.name, result, run=plan.run.name, factory=plan.factory, device=str(plan.device),
                       step=plan.run.last_step)  # counts from the step the run had reached
    _print(kind, result, args.json)
    print(f"{SAVED_LINE}{path}", file=sys.stderr)
    return 1 if kind.negative(result) else 0


def _execute_live(kind: JobKind, run: Run, config: Any, args: argparse.Namespace) -> int:
    """Hand the job to the live training and print what it found (torch is the training's, not needed here)."""
    reason = ctl.live_problem(run.manifest)
    if reason is not None:
        raise _Stop(f"--live: {reason}")
    print(job_requests.describe(run, kind.describe(config)), file=sys.stderr)
    result, message = job_requests.run_live(run, kind.name, job_requests.job_args(config), args.wait)
    if result is None:
        raise _Stop(f"the live job did not finish: {message}")
    _print(kind, result, args.json)
    print(message, file=sys.stderr)
    return 1 if kind.negative(result) else 0

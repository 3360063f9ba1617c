"""``tuidiag lr-find | nan-hunt | overfit-batch | sharpness RUN``: jobs on a finished or crashed run.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuidiag.cli import job_requests
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


def add_lr_find_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``lr-find`` arguments."""
    _add_common(parser)
    parser.add_argument("--steps", type=int, default=100, help="sweep length in training steps (default 100)")
    parser.add_argument("--start", type=float, default=1e-7, help="first learning rate (default 1e-7)")
    parser.add_argument("--end", type=float, default=10.0, help="last learning rate (default 10)")


def add_nan_hunt_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``nan-hunt`` arguments."""
    _add_common(parser)
    parser.add_argument("--capture", metavar="PATH", help="a capture file (default: the earliest in RUN/captures)")
    parser.add_argument("--arm-steps", type=int, default=200, metavar="K",
                        help="live run without a capture: wait up to K steps for a non-finite one (default 200)")


def add_overfit_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``overfit-batch`` arguments."""
    _add_common(parser)
    parser.add_argument("--steps", type=int, default=500, help="most training steps on the batch (default 500)")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default 1e-3 for adam, the run's for run)")
    parser.add_argument("--target", type=float, default=0.01, help="loss that counts as memorised (default 0.01)")
    parser.add_argument("--optimizer", choices=("adam", "run"), default="adam",
                        help="a fresh Adam (default) or the run's optimizer")


def add_sharpness_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``sharpness`` arguments."""
    _add_common(parser)
    parser.add_argument("--epsilon", type=float, default=0.05,
                        help="perturbation norm relative to each weight's norm (default 0.05)")
    parser.add_argument("--samples", type=int, default=10, help="random perturbations (default 10)")
    parser.add_argument("--batches", type=int, default=4, help="batches the loss is measured on (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations (default 0)")
    parser.add_argument("--checkpoint", metavar="PATH",
                        help="measure these weights: a torch state_dict, or a dict with one under 'model', loaded "
                             "(weights_only) into the factory's model (implies --offline; default: the factory's weights)")


@dataclass
class Plan:
    """What one command will do, known before any user code runs."""

    run: Run
    config: Any
    device: Any
    prepared: Any = None
    factory: str = ""
    paths: list[Any] = field(default_factory=list)
    refused: list[tuple[Any, str]] = field(default_factory=list)


@dataclass
class JobSpec:
    """How one command configures, describes, runs and judges its job."""

    command: str
    name: str
    config: Callable[[argparse.Namespace], Any]
    describe: Callable[[Any], str]
    run: Callable[[Any, Plan, Any], dict[str, Any]]
    negative: Callable[[dict[str, Any]], bool]


class _Stop(Exception):
    """Ends a command before or during its job, with a message for stderr (exit status 2)."""


def _lr_config(args: argparse.Namespace) -> Any:
    from tuidiag.jobs.lr_find import LRFindConfig

    return LRFindConfig(steps=args.steps, start=args.start, end=args.end)


def _overfit_config(args: argparse.Namespace) -> Any:
    from tuidiag.jobs.overfit import OverfitConfig

    lr = args.lr if args.lr is not None else (1e-3 if args.optimizer == "adam" else None)
    return OverfitConfig(steps=args.steps, lr=lr, target=args.target, optimizer=args.optimizer)


def _sharpness_config(args: argparse.Namespace) -> Any:
    from tuidiag.jobs.sharpness import SharpnessConfig

    return SharpnessConfig(epsilon=args.epsilon, samples=args.samples, batches=args.batches, seed=args.seed)


def _nan_config(args: argparse.Namespace) -> Any:
    return None


def _run_lr_find(parts: Any, plan: Plan, control: Any) -> dict[str, Any]:
    from tuidiag.jobs.lr_find import compare_lr, lr_find

    result = lr_find(parts, plan.device, plan.config, control)
    run_lr = plan.run.series(f"{LR_PREFIX}0").last
    result["run_lr"] = run_lr
    result["run_comparison"] = compare_lr(run_lr, result["suggested_lr"], "the run's last recorded LR")
    return result


def _run_nan_hunt(parts: Any, plan: Plan, control: Any) -> dict[str, Any]:
    from tuidiag.jobs.nan_hunt import nan_hunt

    path, capture = plan.prepared
    training = plan.run.series(MODEL_TRAINING)
    flags = training.values[training.steps <= capture["step"]] if len(training) else []
    result = nan_hunt(parts, capture, plan.device, training=bool(flags[-1]) if len(flags) else True)
    result["capture"] = str(path)
    return result


def _run_overfit(parts: Any, plan: Plan, control: Any) -> dict[str, Any]:
    from tuidiag.jobs.overfit import overfit_batch

    return overfit_batch(parts, plan.device, plan.config, control)


def _run_sharpness(parts: Any, plan: Plan, control: Any) -> dict[str, Any]:
    from tuidiag.jobs.sharpness import sharpness
    from tuidiag.jobs.weights import apply_checkpoint, checkpoint_weights

    if plan.prepared is not None:  # --checkpoint, loaded before the factory ran
        path, state = plan.prepared
        apply_checkpoint(parts.model, state, path)
        parts.weights = checkpoint_weights(path)
    return sharpness(parts, plan.device, plan.config, control)


def _describe_lr(c: Any) -> str:
    return f"LR range test: {c.steps} training steps, LR {c.start:g} -> {c.end:g}"


def _describe_overfit(c: Any) -> str:
    return f"overfit one batch: up to {c.steps} steps with {c.optimizer}, target loss {c.target:g}"


def _describe_sharpness(c: Any) -> str:
    return f"sharpness: {c.samples} perturbations of {c.epsilon:g} x ||w|| on {c.batches} batches"


def _describe_nan(c: Any) -> str:
    return "NaN hunt: replay of the captured failing step with hooks"


SPECS = {
    "lr-find": JobSpec("lr-find", "lr_find", _lr_config, _describe_lr, _run_lr_find, lambda r: r["suggested_lr"] is None),
    "nan-hunt": JobSpec("nan-hunt", "nan_hunt", _nan_config, _describe_nan, _run_nan_hunt,
                        lambda r: r["verdict"] in ("no_capture", "no_batch", "not_reproduced", "no_nonfinite")),
    "overfit-batch": JobSpec("overfit-batch", "overfit_batch", _overfit_config, _describe_overfit, _run_overfit,
                             lambda r: not r["passed"]),
    "sharpness": JobSpec("sharpness", "sharpness", _sharpness_config, _describe_sharpness, _run_sharpness,
                         lambda r: r["verdict"] == "untrainable"),
}


def confirmed(assume_yes: bool) -> bool:
    """True with ``--yes``, or after a "y" typed at the prompt; False without a terminal."""
    if assume_yes:
        return True
    if not (sys.stdin and sys.stdin.isatty()):
        return False
    print("Import and run it? [y/N] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


def _prepare(spec: JobSpec, run: Run, args: argparse.Namespace) -> Any:
    """Job input that needs no user code: the NaN hunt's capture, sharpness's ``--checkpoint`` (None when there is none)."""
    if spec.name == "sharpness" and getattr(args, "checkpoint", None):
        from tuidiag.jobs.weights import load_checkpoint

        return args.checkpoint, load_checkpoint(args.checkpoint)
    if spec.name != "nan_hunt":
        return None
    from tuidiag.jobs.nan_hunt import find_capture, load_capture

    path = args.capture or find_capture(run.path)
    return (path, load_capture(path)) if path else None


def _check(spec: JobSpec, args: argparse.Namespace) -> Plan:
    """Open the run, check every argument and load what needs no user code."""
    from tuidiag.jobs import JobError, choose_device

    try:
        run = load_run(args.run)
        config = spec.config(args)
        if config is not None:
            config.check()
        return Plan(run, config, choose_device(args.device), _prepare(spec, run, args))
    except (RunNotReadable, JobError) as exc:
        raise _Stop(str(exc)) from exc


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


def _describe(spec: JobSpec, plan: Plan) -> str:
    run = plan.run
    source = "--factory" if plan.factory != run.manifest.get("factory") else f"{run.path}/run.json"
    where = "".join(f"{clean(p, 200)}, " for p in plan.paths)
    refused = "".join(f"\n  not searched: {clean(p, 200)} ({clean(why, 200)})" for p, why in plan.refused)
    return (f"tuidiag {spec.command} will import and call code named by the run:\n"
            f"  factory: {clean(plan.factory, 200)}   (from {clean(source, 300)})\n"
            f"  imported from: {where}then the Python path (first match; never a directory another user can write)"
            f"{refused}\n"
            f"  job: {spec.describe(plan.config)} on {plan.device}")


def _progress(command: str) -> Any:
    from tuidiag.jobs import JobHandle

    if not sys.stderr.isatty():
        return JobHandle()

    def show(done: int, total: int) -> None:
        print(f"\r{command}: {done}/{total}", end="", file=sys.stderr, flush=True)

    return JobHandle(progress=show)


def _run_job(spec: JobSpec, plan: Plan) -> dict[str, Any]:
    """Import the factory, move the model to the device and run the job; errors become :class:`_Stop`."""
    from tuidiag.jobs import FactoryError, JobError, load_factory

    try:
        parts = load_factory(plan.factory, plan.paths)
        parts.model.to(plan.device)
        return spec.run(parts, plan, _progress(spec.command))
    except (FactoryError, JobError) as exc:
        raise _Stop(str(exc)) from exc
    except Exception as exc:  # the user's code failed: report it, exit 2
        where = "".join(traceback.format_tb(exc.__traceback__)[-2:]).strip()
        raise _Stop(f"the job failed: {type(exc).__name__}: {exc} (at {where})") from exc
    finally:
        if sys.stderr.isatty():
            print(file=sys.stderr)


def _print(spec: JobSpec, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        from tuidiag.store.manifest import jsonable

        print(json.dumps(jsonable(result), indent=2, allow_nan=False))
        return
    from tuidiag.text.jobs import RENDERERS

    print(RENDERERS[spec.name](result, sys.stdout.isatty()))


def execute(spec: JobSpec, args: argparse.Namespace) -> int:
    """Check, show the plan, ask, run, save and print one job."""
    from tuidiag.cli.torch_hint import refuse_without_torch
    from tuidiag.store.job_results import save_result

    if refuse_without_torch(spec.command):
        return 2
    try:
        plan = _check(spec, args)
        if job_requests.wants_live(plan.run, args):
            return _execute_live(spec, plan, args)
        if spec.name == "nan_hunt" and plan.prepared is None:
            from tuidiag.jobs.nan_hunt import no_capture

            _print(spec, no_capture(plan.run.path), args.json)
            return 1
        _choose_factory(plan, args)
        print(_describe(spec, plan), file=sys.stderr)
        if not confirmed(args.yes):
            raise _Stop(f"not confirmed: refusing to import {plan.factory!r}; pass --yes to run it")
        result = _run_job(spec, plan)
    except _Stop as exc:
        return fail(spec.command, str(exc))
    path = save_result(plan.run.path, spec.name, result, run=plan.run.name, factory=plan.factory, device=str(plan.device),
                       step=plan.run.last_step)  # counts from the step the run had reached
    _print(spec, result, args.json)
    print(f"saved {path}", file=sys.stderr)
    return 1 if spec.negative(result) else 0


def _execute_live(spec: JobSpec, plan: Plan, args: argparse.Namespace) -> int:
    """Hand the job to the live training and print what it found."""
    reason = ctl.live_problem(plan.run.manifest)
    if reason is not None:
        raise _Stop(f"--live: {reason}")
    print(job_requests.describe(plan.run, spec.describe(plan.config)), file=sys.stderr)
    result, message = job_requests.run_live(plan.run, spec.name, job_requests.job_args(plan.config, args), args.wait)
    if result is None:
        raise _Stop(f"the live job did not finish: {message}")
    _print(spec, result, args.json)
    print(message, file=sys.stderr)
    return 1 if spec.negative(result) else 0


def lr_find(args: argparse.Namespace) -> int:
    """``tuidiag lr-find``: Smith's LR range test."""
    return execute(SPECS["lr-find"], args)


def nan_hunt(args: argparse.Namespace) -> int:
    """``tuidiag nan-hunt``: replay the captured non-finite step and name its source."""
    return execute(SPECS["nan-hunt"], args)


def overfit_batch(args: argparse.Namespace) -> int:
    """``tuidiag overfit-batch``: can the model memorise one batch?"""
    return execute(SPECS["overfit-batch"], args)


def sharpness(args: argparse.Namespace) -> int:
    """``tuidiag sharpness``: flat or sharp minimum, by random weight perturbations."""
    return execute(SPECS["sharpness"], args)

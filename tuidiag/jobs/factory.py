"""Importing and calling the factory a run names (``"module:function"``), checking what it returns.

The contract is documented in :mod:`tuidiag.jobs`. Importing the factory runs code
named by a run directory: callers must have the user's confirmation first.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuidiag.jobs.weights import factory_weights
from tuidiag.store.trust import current_uid, dir_problem, file_problem

SPEC_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
"""``package.module:function`` or ``module:Class.method``."""


class FactoryError(Exception):
    """The factory cannot be imported or called, or returned something unusable."""


@dataclass
class Parts:
    """What a job works on: the training's model, optimizer, loss and data."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable[[Any, Any], torch.Tensor]
    batches: Iterable[Any] | None = None
    forward: Callable[[nn.Module, Any], Any] | None = None
    weights: dict[str, str] | None = None
    """Which weights ``model`` holds, for the result (:mod:`tuidiag.jobs.weights`); None: as passed in."""

    def output(self, x: Any) -> Any:
        """The model's output for input ``x``."""
        return self.forward(self.model, x) if self.forward is not None else self.model(x)

    def loss(self, x: Any, y: Any) -> torch.Tensor:
        """The loss of one batch (graph kept, for ``backward()``)."""
        return self.loss_fn(self.output(x), y)


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``"module:function"``; raise :class:`FactoryError` on anything else."""
    if not isinstance(spec, str) or not SPEC_RE.match(spec.strip()):
        raise FactoryError(f"factory {spec!r} is not of the form 'module:function' (e.g. 'train:build')")
    module, function = spec.strip().split(":")
    return module, function


@dataclass
class SearchPlan:
    """Where a factory's module is looked for, in order, and the directories left out (with why)."""

    paths: list[Path]
    refused: list[tuple[Path, str]]


def search_plan(manifest: Mapping[str, Any], cwd: Path | None = None) -> SearchPlan:
    """The directories searched: the run's script directory, the training's working directory, the current one.

    The script directory is that of ``command[0]`` in the manifest (the training
    script the run recorded, absolute since the recorder stores it so, when that file
    still exists); the training's working directory is the manifest's ``cwd`` (when it
    still exists). Both let a job started from any directory find the factory. Each is
    searched only when no other user can write it (:func:`tuidiag.store.trust.dir_problem`):
    a run.json on a shared disk, or a world-writable working directory, must not choose
    our imports.
    """
    cwd = Path(os.path.abspath(cwd or Path.cwd()))
    candidates: list[Path] = []
    command = manifest.get("command") or []
    if isinstance(command, list) and command and isinstance(command[0], str) and command[0].endswith(".py"):
        script = Path(command[0])
        script = script if script.is_absolute() else cwd / script
        if script.is_file():
            candidates.append(Path(os.path.abspath(script.parent)))
    recorded = manifest.get("cwd")
    if isinstance(recorded, str) and os.path.isabs(recorded) and "\0" not in recorded and Path(recorded).is_dir():
        candidates.append(Path(os.path.abspath(recorded)))
    candidates.append(cwd)
    plan = SearchPlan([], [])
    for directory in candidates:
        problem = dir_problem(directory)  # the path as written and the one it resolves to
        directory = directory.resolve() if problem is None else directory
        if directory in plan.paths or any(directory == d for d, _ in plan.refused):
            continue
        if problem is None:
            plan.paths.append(directory)
        else:
            plan.refused.append((directory, problem))
    return plan


def module_problem(module_name: str) -> str | None:
    """Why importing ``module_name`` through the current ``sys.path`` would run code another
    user could have written; None when it would not, or when it is imported already.

    Locates each level of a dotted name without running anything and checks the
    directory it is in, the file itself and its ``__pycache__``."""
    if module_name in sys.modules:
        return None
    search = [entry or os.getcwd() for entry in sys.path if isinstance(entry, str)]
    uid = current_uid()
    for level, part in enumerate(module_name.split(".")):
        name = ".".join(module_name.split(".")[: level + 1])
        if name in sys.modules:
            search = list(getattr(sys.modules[name], "__path__", []) or [])
            continue
        spec = importlib.machinery.PathFinder.find_spec(part, search)
        if spec is None:
            return None  # not found: the import reports that itself
        places = list(spec.submodule_search_locations or [])
        origin = Path(spec.origin) if spec.origin and spec.has_location else None
        directories = places if origin is None else [origin.parent]
        for directory in directories:
            problem = dir_problem(Path(directory), uid)
            if problem is not None:
                return f"{name} would come from {directory}: {problem}"
        if origin is not None:
            problem = file_problem(origin, uid)
            cache = origin.parent / "__pycache__"
            if problem is None and cache.exists():
                problem = dir_problem(cache, uid)
            if problem is not None:
                return f"{name} would come from {origin}: {problem}"
        search = places
    return None


@contextmanager
def extra_sys_path(paths: Sequence[Path], after: Sequence[Path] = ()) -> Iterator[None]:
    """Put ``paths`` in front of ``sys.path`` and ``after`` behind it for the duration; remove exactly those added."""
    added = [str(p) for p in paths if str(p) not in sys.path]
    appended = [str(p) for p in after if str(p) not in sys.path and str(p) not in added]
    sys.path[:0] = added
    sys.path.extend(appended)
    try:
        yield
    finally:
        for entry in added + appended:
            if entry in sys.path:
                sys.path.remove(entry)


def import_order(module_name: str, paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """``(before the Python path, after it)``: the first of ``paths`` that holds the factory's
    module goes first, as a script's directory does for ``python train.py``; the others go
    after the Python path, where their files cannot shadow the standard library or an
    installed package (a ``json.py`` in the working directory)."""
    top = module_name.split(".")[0]
    home = next((p for p in paths if importlib.machinery.PathFinder.find_spec(top, [str(p)]) is not None), None)
    return ([home] if home is not None else []), [p for p in paths if p != home]


@contextmanager
def factory_path(module_name: str, paths: Sequence[Path]) -> Iterator[None]:
    """``sys.path`` as the factory sees it while it is imported and called (:func:`import_order`)."""
    before, after = import_order(module_name, paths)
    with extra_sys_path(before, after):
        yield


@contextmanager
def clean_argv(module_name: str) -> Iterator[list[str]]:
    """``sys.argv`` is ``[module_name]`` for the duration, then put back.

    The factory's module runs as if started with no arguments: a module-level
    ``argparse`` ``parse_args()`` takes its defaults instead of failing on tuidiag's
    own arguments (``lr-find RUN --yes``)."""
    saved = sys.argv
    sys.argv = [module_name]
    try:
        yield sys.argv
    finally:
        sys.argv = saved


def _exited(spec: str, what: str, exc: SystemExit) -> FactoryError:
    return FactoryError(f"factory {spec!r}: {what} called sys.exit({exc.code!r}); tuidiag imports and calls it with "
                        f"sys.argv = [{parse_spec(spec)[0]!r}] (no arguments): does it parse arguments it requires?")


def resolve(spec: str, paths: Sequence[Path] = ()) -> Callable[[], Any]:
    """Import the factory's module (under :func:`clean_argv`) and return the function (does not call it)."""
    module_name, attr_path = parse_spec(spec)
    with factory_path(module_name, paths):
        problem = module_problem(module_name)
        if problem is not None:
            raise FactoryError(f"refusing to import factory {spec!r}: {problem}; tuidiag imports code only from "
                               "directories and files that no other user can write")
        try:
            with clean_argv(module_name):
                target: Any = importlib.import_module(module_name)
        except ImportError as exc:
            where = os.pathsep.join(str(p) for p in paths)
            message = f"cannot import {module_name!r} for factory {spec!r} ({exc}); looked in {where} and the Python path"
            raise FactoryError(message) from exc
        except SystemExit as exc:
            raise _exited(spec, f"importing {module_name}", exc) from exc
    for name in attr_path.split("."):
        if not hasattr(target, name):
            raise FactoryError(f"factory {spec!r}: {module_name} has no attribute {attr_path!r}")
        target = getattr(target, name)
    if not callable(target):
        raise FactoryError(f"factory {spec!r} is not callable")
    return target


def load_factory(spec: str, paths: Sequence[Path] = ()) -> Parts:
    """Import and call the factory ``spec``; return its checked :class:`Parts`."""
    function = resolve(spec, paths)
    module_name = parse_spec(spec)[0]
    with factory_path(module_name, paths), clean_argv(module_name):
        try:
            built = function()
        except Exception as exc:
            raise FactoryError(f"factory {spec!r} raised {type(exc).__name__}: {exc}") from exc
        except SystemExit as exc:
            raise _exited(spec, "calling it", exc) from exc
    parts = as_parts(built, spec)
    parts.weights = factory_weights(spec)
    return parts


ORDER = ("model", "optimizer", "loss_fn", "batches", "forward")
"""The parts in the order a factory that returns a tuple gives them (``forward`` optional)."""


def as_parts(built: Any, spec: str = "factory") -> Parts:
    """Check what a factory returned (a mapping, an object, or a tuple in :data:`ORDER`) and wrap it as :class:`Parts`."""
    if isinstance(built, Parts):
        return built
    if isinstance(built, (tuple, list)):
        if not 4 <= len(built) <= len(ORDER):
            raise FactoryError(f"{spec} returned a {type(built).__name__} of {len(built)} items: return (model, optimizer, "
                               "loss_fn, batches[, forward]) in that order, or a dict with those keys")
        built = dict(zip(ORDER, built))

    def get(key: str) -> Any:
        return built.get(key) if isinstance(built, Mapping) else getattr(built, key, None)

    missing = [key for key in ("model", "optimizer", "loss_fn") if get(key) is None]
    if missing:
        raise FactoryError(f"{spec} returned no {', '.join(missing)} (needs model, optimizer, loss_fn and batches: a dict or "
                           "an object with those names, or a tuple in that order)")
    parts = Parts(get("model"), get("optimizer"), get("loss_fn"), get("batches"), get("forward"))
    check_parts(parts, spec)
    return parts


def check_parts(parts: Parts, spec: str = "factory") -> None:
    """Raise :class:`FactoryError` when a part has the wrong type."""
    if not isinstance(parts.model, nn.Module):
        raise FactoryError(f"{spec}: model is a {type(parts.model).__name__}, not a torch.nn.Module")
    if not isinstance(parts.optimizer, torch.optim.Optimizer):
        raise FactoryError(f"{spec}: optimizer is a {type(parts.optimizer).__name__}, not a torch.optim.Optimizer")
    if not callable(parts.loss_fn):
        raise FactoryError(f"{spec}: loss_fn is not callable")
    if parts.forward is not None and not callable(parts.forward):
        raise FactoryError(f"{spec}: forward is not callable")
    if parts.batches is not None and not hasattr(parts.batches, "__iter__"):
        raise FactoryError(f"{spec}: batches is a {type(parts.batches).__name__}, not an iterable of (x, y)")
    owned = {id(p) for p in parts.model.parameters()}
    foreign = sum(1 for g in parts.optimizer.param_groups for p in g["params"] if id(p) not in owned)
    if foreign:
        raise FactoryError(f"{spec}: the optimizer holds {foreign} tensors that are not parameters of the model")

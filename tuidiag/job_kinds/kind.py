"""What a job is, torch-free: :class:`JobKind` (its names, key, options, expected steps, verdicts) and :class:`JobError`.

Every side that handles jobs reads these: the CLI builds its subcommand from the
kind, the monitor its key and confirmation, the store which requests and results
it accepts, the training which function runs it. Code that needs torch (the
runner) or plotext (the renderer) is named as ``"module:function"`` and imported
only by the side that calls it.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


PROGRESS_LINE = "progress"
"""With ``--progress-lines`` a job command writes ``progress DONE TOTAL`` lines on stderr as the job goes (the monitor reads them)."""
SAVED_LINE = "saved "
"""A job command's stderr line naming the result file it saved: ``saved RUN/jobs/<job>-<stamp>.json``."""


class JobError(Exception):
    """A job cannot run with the arguments or parts it was given (a message a user can act on)."""


@dataclass(frozen=True)
class Option:
    """A command-line option of a job: ``--flag`` sets the config field ``name`` (its default and type come from the config).

    An option whose ``name`` is not a config field (the NaN hunt's ``--capture``) is left on the parsed
    arguments for the command to read.
    """

    flag: str
    name: str
    help: str
    type: Callable[[str], Any] | None = None
    """How the option's text becomes a value (default: the type of the config field's default)."""
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    default_text: str | None = None
    """How ``--help`` states the default when the config's default does not say it (None: the config's default)."""
    unset: bool = False
    """Not given, the option is None and the kind's ``configure`` decides (else the config's default)."""


@dataclass(frozen=True)
class Verdict:
    """One answer a job can give: the words for it, and whether it is a negative answer (CLI exit status 1)."""

    text: str
    negative: bool = False


@dataclass(frozen=True)
class JobKind:
    """Everything tuidiag knows about one job, in one place."""

    name: str
    """The job's name in requests, statuses, results and events (``lr_find``)."""
    command: str
    """Its CLI subcommand (``lr-find``)."""
    key: str
    """The monitor's key for it on the run view."""
    label: str
    """Its short name in the footer and help (``LR finder``)."""
    title: str
    """How a sentence names it (``the LR finder``)."""
    help: str
    """The CLI's one-line help."""
    config: type
    """A dataclass of its settings with defaults and ``check()`` (raises :class:`JobError`)."""
    steps: Callable[[Any], int]
    """Units of work (training steps, forward passes) it takes with a config: the expected length."""
    describe: Callable[[Any], str]
    """What it will do with a config, in one line."""
    runner: str
    """``"module:function"``: ``function(parts, device, config, handle, context) -> result`` (imports torch)."""
    renderer: str
    """``"module:function"``: ``function(result, color) -> text`` for the terminal and the Jobs tab."""
    verdict_of: Callable[[dict[str, Any]], str]
    """The code of the answer in a result: a key of ``verdicts``."""
    verdicts: Mapping[str, Verdict]
    options: tuple[Option, ...] = ()
    live: bool = True
    """Whether a live training can run it on request (else only from the factory)."""
    needs_capture: bool = False
    """It replays a captured non-finite step: offline it needs a capture; live it arms until one comes."""
    shown: bool = True
    """Whether the monitor's footer shows its key (help always lists it)."""
    configure: Callable[[dict[str, Any]], Any] | None = None
    """How the CLI's option values become a config (default: ``config(**values)``)."""
    unit: str = "training steps"
    """What ``steps`` counts, for the confirmation."""
    takes_checkpoint: bool = False
    """It accepts ``--checkpoint PATH``: weights loaded into the factory's model before it runs (offline only)."""

    def default_config(self) -> Any:
        """The config with every default."""
        return self.config()

    def expected_steps(self, config: Any = None) -> int:
        """Units of work the job takes with ``config`` (default: the config's defaults)."""
        return int(self.steps(config if config is not None else self.default_config()))

    def config_from(self, args: Mapping[str, Any]) -> Any:
        """The checked config from request arguments (config field names); :class:`JobError` on unknown names."""
        names = {f.name for f in dataclasses.fields(self.config)}
        unknown = sorted(set(args) - names)
        if unknown:
            raise JobError(f"unknown argument(s) {', '.join(unknown)}; expected some of {', '.join(sorted(names))}")
        config = self.config(**args)
        config.check()
        return config

    def config_from_options(self, values: Mapping[str, Any]) -> Any:
        """The checked config from the CLI's option values (config fields only)."""
        names = {f.name for f in dataclasses.fields(self.config)}
        kept = {k: v for k, v in values.items() if k in names}
        config = self.configure(kept) if self.configure is not None else self.config(**kept)
        config.check()
        return config

    def verdict(self, result: dict[str, Any]) -> Verdict:
        """The answer ``result`` gives (an unknown code reads as itself, not negative)."""
        code = self.verdict_of(result)
        return self.verdicts.get(code, Verdict(str(code)))

    def negative(self, result: dict[str, Any]) -> bool:
        """True when ``result`` is a negative answer (the CLI exits 1)."""
        return self.verdict(result).negative


def load(spec: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` names."""
    module, _, attribute = spec.partition(":")
    target: Any = importlib.import_module(module)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target

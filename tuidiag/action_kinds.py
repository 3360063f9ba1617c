"""The live actions, defined once: the changes a user applies to a running training to try a diagnosis's fix.

Each :class:`ActionKind` is the name a control request carries, the ``tuidiag act``
flag and argument that send it, and the words the monitor and the CLI use for it.
Every side reads this table: the control channel's list of requests a training
accepts (:data:`tuidiag.store.control_channel.LIVE_ACTIONS`), the recorder that
applies them (:mod:`tuidiag.recorder.actions`), ``tuidiag act``
(:mod:`tuidiag.cli.act_cmd`), the monitor's proposals (:mod:`tuidiag.viewmodel.actions`)
and its ``a`` key's help. Like :mod:`tuidiag.job_kinds`, it needs nothing else of
tuidiag, nor torch or the UI.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ActionKind:
    """One live action: its request name, how ``tuidiag act`` sends it, and its words."""

    name: str
    """The ``job`` of its control request, and of its ``action`` event's ``data``."""
    words: str
    """What it does, as the CLI lists it (``clip gradients``)."""
    short: str
    """The same in a word or two, as the monitor's ``a`` key lists it (``clip``)."""
    flag: str
    """Its ``tuidiag act`` option (``--clip``); the option's value is the argument :attr:`arg`."""
    help: str
    """The option's help text."""
    arg: str | None = None
    """The request argument the option's value becomes (``max_norm``); None: the option takes no value."""
    metavar: str | None = None
    """How the CLI's help names the option's value."""
    drifts_replicas: bool = False
    """It changes the optimisation, so on a training of several ranks (which it reaches on rank 0 only) it is
    refused: that rank's replica would drift from the others."""

    @property
    def dest(self) -> str:
        """The attribute of the parsed ``tuidiag act`` arguments that holds the option."""
        return self.flag.lstrip("-").replace("-", "_")


SCALE_LR = ActionKind("scale_lr", "scale the LR", "scale the LR", "--scale-lr",
                      "multiply every LR (and those of the scheduler passed to rec.watch)", "factor", "FACTOR", drifts_replicas=True)
MAX_LR_FACTOR = 100.0
"""The most a ``scale_lr`` may move the LR either way (the recorder refuses a factor beyond 1/100..100)."""
CLIP_GRAD = ActionKind("clip_grad", "clip gradients", "clip", "--clip",
                       "clip gradients by global norm from the next step (0: off)", "max_norm", "MAX_NORM", drifts_replicas=True)
CHECKPOINT = ActionKind("checkpoint", "checkpoint now", "checkpoint", "--checkpoint", "save model and optimizer state now")

ACTIONS: tuple[ActionKind, ...] = (SCALE_LR, CLIP_GRAD, CHECKPOINT)
"""Every live action, in the order the CLI and the monitor list them."""
_BY_NAME = {kind.name: kind for kind in ACTIONS}


def names() -> tuple[str, ...]:
    """The request name of every live action."""
    return tuple(kind.name for kind in ACTIONS)


def get(name: str) -> ActionKind:
    """The live action called ``name``; ``KeyError`` when there is none."""
    return _BY_NAME[name]


def listed(short: bool = False) -> str:
    """Every live action in words, comma-separated: ``scale the LR, clip gradients, checkpoint now``
    (``short``: the monitor's ``scale the LR, clip, checkpoint``)."""
    return ", ".join(kind.short if short else kind.words for kind in ACTIONS)

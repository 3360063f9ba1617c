"""The loss that live jobs compute from a framework's training: the framework's own, of a whole batch.

A job inside the training (the LR finder ``l``, overfit one batch ``o``, sharpness ``s``)
computes ``loss_fn(forward(model, x), y)`` on the batches kept by ``rec.batch(x, y)``.
The callbacks give ``rec.batch`` the input and target tensors of a batch (they feed the
input-health rows); :class:`WholeBatches` keeps, beside them, the whole batch each ``x``
came from, so that ``forward`` can compute the loss the way the training does:

- Lightning: ``training_step(batch, 0)``, with ``self.log`` silenced while a job runs
  (a job's losses must not reach the epoch's logged metrics);
- Transformers: the model called with the batch's keyword arguments, ``labels`` included,
  whose output carries ``loss``.

``loss_fn(output, y)`` then only takes the loss out of that output. Nothing here imports a
framework.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tuidiag.recorder.recent_batches import ALWAYS, FOR_JOBS

NOT_KEPT = ("this batch was not kept whole for jobs (a batch from before the job's window, or one the "
            "framework callback never saw)")
"""Why ``forward`` cannot compute the framework's loss of a batch."""


class WholeBatches:
    """The whole batch behind each ``x`` given to ``rec.batch``, for as long as the recorder keeps that ``x``.

    ``x`` itself is held weakly: once the recorder (and the training) let it go, its entry goes at the next
    :meth:`keep`, so this holds no tensor the recorder has dropped beyond the rest of one batch (its
    labels, masks). An ``x`` that cannot be referenced weakly is held, the newest :data:`most` of them."""

    def __init__(self, most: int = FOR_JOBS + ALWAYS) -> None:
        self.most = most
        self._kept: OrderedDict[int, tuple[Callable[[], Any], Any]] = OrderedDict()

    def keep(self, x: Any, batch: Any) -> None:
        """Remember that ``x`` came from ``batch``."""
        for key in [key for key, (ref, _) in self._kept.items() if ref() is None]:
            del self._kept[key]
        try:
            ref: Callable[[], Any] = weakref.ref(x)
        except TypeError:  # a list or dict given as x: held, and so its id stays its own
            ref = functools.partial(_same, x)
        self._kept[id(x)] = (ref, _without(batch, x))
        self._kept.move_to_end(id(x))
        while len(self._kept) > self.most:
            self._kept.popitem(last=False)

    def of(self, x: Any) -> Any:
        """The whole batch ``x`` came from; ``ValueError`` when it was not kept."""
        found = self._kept.get(id(x))
        if found is None or found[0]() is not x:
            raise ValueError(NOT_KEPT)
        return _with(found[1], x)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (``ddp_spawn``) without the batches."""
        return {"most": self.most, "_kept": OrderedDict()}


class _Hole:
    """Where ``x`` was in a batch kept without it."""


_HOLE = _Hole()


def _same(value: Any) -> Any:
    return value


def _swapped(batch: Any, old: Any, new: Any) -> Any:
    """``batch`` with every item that is ``old`` (by identity) replaced by ``new``: a dict or sequence keeps its
    other items and its type (a named tuple too); ``batch`` itself when it is ``old``."""
    if batch is old:
        return new
    if isinstance(batch, Mapping):
        return {key: new if value is old else value for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        items = [new if value is old else value for value in batch]
        return items if isinstance(batch, list) else type(batch)(*items) if hasattr(batch, "_fields") else tuple(items)
    return batch


def _without(batch: Any, x: Any) -> Any:
    """``batch`` with ``x`` taken out (a dict or sequence keeps its other items; ``x`` itself: a hole)."""
    return _swapped(batch, x, _HOLE)


def _with(kept: Any, x: Any) -> Any:
    """The batch :func:`_without` took ``x`` out of, whole again."""
    return _swapped(kept, _HOLE, x)


def input_of(x: Any, batch: Any) -> Any:
    """What the callback gives ``rec.batch`` as ``x``: the batch's input tensor, else the whole batch."""
    return batch if x is None else x


def job_loss(output: Any, y: Any = None) -> Any:
    """``loss_fn`` of a framework run: the loss its ``forward`` computed (``y`` is in the batch already): the
    output's ``loss`` entry or attribute, or the output itself when it is a tensor (a ``training_step``'s)."""
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    if loss is None and hasattr(output, "backward"):
        loss = output
    if loss is None:
        raise ValueError("the training's step returned no loss for this batch (Transformers: the batch has no labels; "
                         "Lightning: training_step returned None)")
    return loss


@contextlib.contextmanager
def silenced_logging(module: Any) -> Iterator[None]:
    """``module.log`` and ``module.log_dict`` do nothing inside (a Lightning module's logging during a job)."""
    saved = {name: module.__dict__[name] for name in ("log", "log_dict") if name in module.__dict__}
    try:
        module.log = _ignore
        module.log_dict = _ignore
        yield
    finally:
        for name in ("log", "log_dict"):
            module.__dict__.pop(name, None)
        module.__dict__.update(saved)


def _ignore(*_args: Any, **_kwargs: Any) -> None:
    return None


def lightning_forward(whole: WholeBatches) -> Any:
    """``forward(model, x)`` of a Lightning run: ``training_step`` of the whole batch ``x`` came from."""

    def training_step_output(module: Any, x: Any) -> Any:
        with silenced_logging(module):
            return module.training_step(whole.of(x), 0)

    return training_step_output


MANUAL_OPTIMIZATION = ("live jobs are not available for a Lightning module with manual optimization: its "
                       "training_step steps the optimizers itself, so a job cannot compute a loss with it")
"""Why a job fails at once on such a run (the monitor's job bar shows it)."""


def unavailable_forward(_module: Any, _x: Any) -> Any:
    """``forward`` of a Lightning run with manual optimization: every job fails at once, saying why."""
    raise ValueError(MANUAL_OPTIMIZATION)


def transformers_forward(whole: WholeBatches) -> Any:
    """``forward(model, x)`` of a Transformers run: the model called with the whole batch's keyword arguments
    (``num_items_in_batch`` left out: a job's loss is the mean over its own batch)."""

    def model_output(model: Any, x: Any) -> Any:
        batch = whole.of(x)
        if isinstance(batch, Mapping):
            return model(**{k: v for k, v in batch.items() if k != "num_items_in_batch"})
        return model(batch)

    return model_output

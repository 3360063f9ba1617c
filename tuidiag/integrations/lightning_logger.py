"""PyTorch Lightning logger: what ``self.log(...)`` logs lands in the tuidiag run.

Lightning sends what a ``LightningModule`` logs with ``self.log(...)`` in
``training_step``, ``validation_step`` and the epoch hooks to its loggers, not to
callbacks. :class:`TuidiagLogger` receives it:

- bound to a :class:`~tuidiag.integrations.lightning.TuidiagCallback`
  (``Trainer(callbacks=[cb], logger=cb.logger)``), it writes into the callback's
  run, at the step the callback recorded last (the optimizer step the values
  belong to), so ``train_acc`` logged in ``training_step`` sits beside the
  callback's ``train/loss`` and gradients. The callback then stops copying
  ``callback_metrics`` itself, so nothing is recorded twice. Values logged before
  the callback's recorder opens (``log_hyperparams`` at the start of ``fit``) are
  held and written when it opens.
- on its own (``TuidiagLogger("runs/x")``), it owns a :class:`tuidiag.Recorder` and
  writes the logged values at Lightning's step (no gradients: add the callback for those).

``log_hyperparams`` grows the run's config (``rec.config.update``). The logger only
calls the recorder's public methods, which never raise into the training.
"""

from __future__ import annotations

import os
from argparse import Namespace
from typing import Any, Mapping

from tuidiag.format import STATUS_FAILED, STATUS_FINISHED
from tuidiag.integrations.callback_base import json_safe_dict

try:
    from lightning.pytorch.loggers import Logger
    from lightning.pytorch.utilities import rank_zero_only
except ImportError as exc:  # pragma: no cover - exercised only without lightning
    raise ImportError("tuidiag.integrations.lightning needs PyTorch Lightning 2.x: pip install lightning") from exc

HELD_MAX = 10_000
"""Calls held while the bound callback's recorder is not open yet; further ones are dropped (counted in ``held_dropped``)."""


class TuidiagLogger(Logger):
    """A Lightning ``Logger`` writing into a tuidiag run (see the module docstring).

    Args:
        run_dir: the run directory of a logger on its own (not with ``callback``).
        callback: the :class:`TuidiagCallback` whose run to write into.
        **recorder_kwargs: passed to :class:`tuidiag.Recorder` when the logger owns it.
    """

    def __init__(self, run_dir: str | os.PathLike[str] | None = None, *, callback: Any = None, **recorder_kwargs: Any) -> None:
        super().__init__()
        if (run_dir is None) == (callback is None):
            raise ValueError("TuidiagLogger needs a run_dir or a callback (TuidiagCallback.logger), not both")
        self._run_dir = run_dir
        self._callback = callback
        self._recorder_kwargs = recorder_kwargs
        self._own: Any = None
        self._held: list[tuple[str, Any, int | None]] = []
        self.held_dropped = 0

    @property
    def name(self) -> str:
        """The logger's name, as Lightning shows it."""
        return "tuidiag"

    @property
    def version(self) -> str:
        """The run's directory name."""
        return os.path.basename(os.fspath(self._target_dir()))

    @property
    def save_dir(self) -> str:
        """The directory that holds the run."""
        return os.path.dirname(os.path.abspath(os.fspath(self._target_dir())))

    @property
    def experiment(self) -> Any:
        """The :class:`tuidiag.Recorder` written to (``None`` while the bound callback has not opened one)."""
        return self._recorder()

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record ``metrics`` (``self.log`` values Lightning reduced): at the callback's step, or at ``step``."""
        self._send("metrics", dict(metrics), step)

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """Add ``params`` (a dict or ``Namespace``, as ``save_hyperparameters`` gives) to the run's config."""
        if isinstance(params, Namespace):
            params = vars(params)
        self._send("config", json_safe_dict(params if isinstance(params, Mapping) else {"hparams": params}), None)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """Close the recorder this logger owns (``failed`` unless Lightning says ``success``)."""
        if self._own is not None:
            recorder, self._own = self._own, None
            recorder.close(STATUS_FINISHED if status in ("success", "finished") else STATUS_FAILED)

    # ---- internals ----------------------------------------------------------
    def _target_dir(self) -> Any:
        return self._run_dir if self._callback is None else self._callback.run_dir

    def _recorder(self) -> Any:
        if self._callback is not None:
            return self._callback.recorder
        if self._own is None:
            from tuidiag.recorder import Recorder

            self._own = Recorder(self._run_dir, **self._recorder_kwargs)
        return self._own

    def _send(self, kind: str, values: dict[str, Any], step: int | None) -> None:
        recorder = self._recorder()
        if recorder is None:
            if len(self._held) < HELD_MAX:
                self._held.append((kind, values, step))
            else:
                self.held_dropped += 1
            return
        held, self._held = self._held, []
        for item in held + [(kind, values, step)]:
            self._write(recorder, *item)

    def _write(self, recorder: Any, kind: str, values: dict[str, Any], step: int | None) -> None:
        if kind == "config":
            recorder.config.update(values)
        elif self._callback is not None:
            recorder.log(values)  # the callback's step: the optimizer step these values belong to
        else:
            recorder.log(values, step=step)

"""``rec.config``: the run's config, which can grow during a run, and ``rec.log_hparams``'s record.

``rec.config.update(...)`` (as ``wandb.config.update``) merges new keys into the
config stored in ``run.json`` at the next flush and records a ``config`` event that
says what changed; ``rec.log_hparams(params, metrics)`` (as TensorBoard's
``add_hparams``) keeps ``params`` and the final ``metrics`` under ``run.json``'s
``hparams`` so that ``tuidiag compare`` and ``tuidiag query`` show them beside the
config. Values go through the same JSON conversion as the constructor's config:
what cannot be stored is replaced, counted and reported, never raised.

The manifest's dicts are replaced, never changed in place, so the writer thread
that serialises ``run.json`` always sees a whole dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tuidiag.recorder.run_manifest import merge_config
from tuidiag.recorder.user_json import config_json

Changes = dict[str, dict[str, Any]]


class RunConfig(Mapping[str, Any]):
    """The config as stored (read like a dict); :meth:`update` adds to it."""

    def __init__(self, data: Callable[[], dict[str, Any] | None], reject: Callable[[str, str, str], None],
                 changed: Callable[[Changes], None]) -> None:
        self._data = data
        self._reject = reject
        self._changed = changed

    def _current(self) -> dict[str, Any]:
        data = self._data()
        config = data.get("config") if data is not None else None
        return config if isinstance(config, dict) else {}

    def __getitem__(self, key: str) -> Any:
        return self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(dict(self._current()))

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return f"RunConfig({self._current()!r})"

    def update(self, values: Any = None, /, **more: Any) -> Changes:
        """Merge ``values`` (a mapping or ``argparse.Namespace``) and ``more`` into the config; return the changes.

        Nested dicts merge key by key. The change is written to ``run.json`` at the next
        flush and recorded as a ``config`` event; an unchanged value is no change.
        """
        try:
            return self._update(values, more)
        except Exception as exc:  # never raised into the training
            self._reject("config.update", "<config>", f"could not be merged ({type(exc).__name__}: {exc})")
            return {}

    def _update(self, values: Any, more: dict[str, Any]) -> Changes:
        data = self._data()
        if data is None:
            self._reject("config.update", "<config>", "the run did not start (see recorder errors): not stored")
            return {}
        new, notes = config_json(values)
        extra, extra_notes = config_json(more)
        for key, reason in notes + extra_notes:
            self._reject("config.update", key, reason)
        merged, changes = merge_config(self._current(), {**new, **extra})
        if changes:
            data["config"] = merged  # one assignment: the writer thread sees the old dict or the new one
            self._changed(changes)
        return changes


def hparams_record(params: Any, metrics: Any, torch: Any, reject: Callable[[str, str, str], None]) -> tuple[dict[str, Any], dict[str, float]]:
    """``params`` as JSON and ``metrics`` as floats, for ``run.json``'s ``hparams``.

    A metric that is not one real number is refused with a reason (as ``step`` refuses a
    loss). A metric given as a CUDA tensor is read to the host here: ``log_hparams`` is
    called once, at the end, where one synchronisation costs nothing.
    """
    from tuidiag.recorder.values import Rejected, one_number

    stored, notes = config_json(params)
    for key, reason in notes:
        reject("log_hparams", key, reason)
    numbers: dict[str, float] = {}
    if metrics is not None:
        if not isinstance(metrics, Mapping):
            reject("log_hparams", "<metrics>", f"is a {type(metrics).__name__}, not a mapping: not stored")
            metrics = {}
        for key, value in metrics.items():
            number = one_number(value, torch)
            if isinstance(number, Rejected):
                reject("log_hparams", str(key), number.reason)
                continue
            numbers[str(key)] = float(number.item() if hasattr(number, "item") else number)
    return stored, numbers

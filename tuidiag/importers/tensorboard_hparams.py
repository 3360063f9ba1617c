"""TensorBoard's hparams plugin in event files, decoded with tensorboard's own protos into what ``rec.log_hparams`` keeps.

torch's ``SummaryWriter.add_hparams(params, metrics)`` writes into a new subdirectory
of the writer's log directory (named ``str(time.time())`` unless ``run_name`` is
given): three summaries of the ``hparams`` plugin (the experiment, naming the
metrics; the session start info, holding the hparam values; the session end info)
and one scalar per metric. Lightning's ``TensorBoardLogger`` writes the same summaries
into the run's own directory (its metric is ``hp_metric``).

A directory whose events hold a session start info is a *session*. Its hparam values
(``tensorboard.plugins.hparams.plugin_data_pb2``) become the run's config and, with
the last value of each metric the experiment names, ``run.json``'s ``hparams``
(``{"params": ..., "metrics": ...}``, the shape :meth:`tuidiag.Recorder.log_hparams`
writes). A later session start info replaces an earlier one, as a second
``log_hparams`` call does. The metric scalars of a session joined into its parent run
are named ``hparam/<tag>`` (the recorder's names for them), so a metric called
``loss`` is never read as the training loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuidiag.format import HPARAM_PREFIX
from tuidiag.store.limits import LimitError, check_tree

HPARAMS_PLUGIN = "hparams"
"""``tensorboard.plugins.hparams.metadata.PLUGIN_NAME``."""
SESSION_START_TAG = "_hparams_/session_start_info"
EXPERIMENT_TAG = "_hparams_/experiment"
"""The tags torch and Lightning give the plugin's summaries (``metadata.SESSION_START_INFO_TAG``, ``EXPERIMENT_TAG``)."""
EXACT_INTEGER = 2.0**53
"""Below this, a whole-number hparam is shown as an integer: the plugin stores every number as a double (``32.0``)."""


def hparam_series_name(tag: str) -> str:
    """The name of a session's metric scalar in its parent run: ``hparam/<tag>``, not doubled when the tag has it."""
    return tag if tag.startswith(HPARAM_PREFIX) else HPARAM_PREFIX + tag


def shortest(value: float) -> float:
    """``value`` as the shortest decimal that reads back as the same float32, when it is one (``simple_value``
    stores float32: ``0.9`` comes back as ``0.8999999761581421``); any other value unchanged."""
    import numpy as np

    single = np.float32(value)
    return float(str(single)) if math.isfinite(value) and float(single) == value else float(value)


def _plain(value: Any) -> Any:
    """A ``google.protobuf.Value`` as JSON (whole numbers as integers)."""
    from google.protobuf import json_format

    plain = json_format.MessageToDict(value)
    if isinstance(plain, float) and math.isfinite(plain) and plain.is_integer() and abs(plain) < EXACT_INTEGER:
        return int(plain)
    return plain


@dataclass
class HParamsRecord:
    """What the hparams summaries of one event directory say (the newest session start info wins)."""

    params: dict[str, Any] | None = None
    """The hparam values of the newest session start info; ``None`` when the directory holds none."""
    wall_time: float = -math.inf
    """When that session started (the event's wall time)."""
    metric_names: tuple[str, ...] = ()
    """The metrics the newest experiment summary names (the scalar tags holding their values)."""
    notes: list[str] = field(default_factory=list)

    @property
    def is_session(self) -> bool:
        """True once a session start info was read."""
        return self.params is not None

    def add(self, tag: str, content: bytes, wall_time: float) -> None:
        """Decode one summary of the hparams plugin (other tags are ignored); a bad one becomes a note."""
        if tag not in (SESSION_START_TAG, EXPERIMENT_TAG):
            return
        try:
            from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

            data = HParamsPluginData.FromString(content)
            if tag == EXPERIMENT_TAG:
                self.metric_names = tuple(info.name.tag for info in data.experiment.metric_infos if info.name.tag)
                return
            params = {str(key): _plain(value) for key, value in sorted(data.session_start_info.hparams.items())}
            check_tree(params, SESSION_START_TAG)
        except LimitError as exc:
            self.notes.append(f"hparams not read: {exc}")
            return
        except Exception as exc:  # a summary tensorboard's own classes cannot decode: the scalars still count
            self.notes.append(f"an hparams summary that does not decode was skipped ({type(exc).__name__})")
            return
        if wall_time >= self.wall_time:
            self.params, self.wall_time = params, wall_time

    def hparams(self, last_values: Mapping[str, float]) -> dict[str, Any]:
        """``run.json``'s ``hparams``: the params, and the last value of each named metric that was logged."""
        metrics = {name: shortest(last_values[name]) for name in self.metric_names if name in last_values}
        return {"params": dict(self.params or {}), "metrics": metrics}


def newest_hparams(parts: list[tuple[HParamsRecord, Mapping[str, float]]]) -> dict[str, Any] | None:
    """``hparams`` of the session that started last among ``parts`` (each directory's record with the last value
    of each of its scalar tags); ``None`` when no part is a session."""
    sessions = [(record, values) for record, values in parts if record.is_session]
    if not sessions:
        return None
    record, values = max(sessions, key=lambda pair: pair[0].wall_time)
    return record.hparams(values)

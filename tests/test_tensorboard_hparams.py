"""TensorBoard hparams (torch's ``add_hparams``, Lightning's ``log_hyperparams``): the run's config and ``hparams``.

Real writers: torch's ``SummaryWriter`` (and the summaries Lightning's ``TensorBoardLogger`` writes). Hypothesis
draws the hparams, the metrics (one named ``loss``, one already ``hparam/...``), how many
``add_hparams`` calls one writer makes, with or without a ``run_name`` and a step, and
whether the run logged scalars of its own. ``tuidiag import`` and the live reader
(``tuidiag watch``) must find the same runs with the same config, ``hparams`` and series.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuidiag.cli.main import main
from tuidiag.format import LOSS
from tuidiag.sources import discover, open_source, owner_of
from tuidiag.store import open_run

torch_tensorboard = pytest.importorskip("torch.utils.tensorboard")
EXAMPLES = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TRAIN_STEPS = 3

PARAM_VALUES = st.one_of(st.integers(-1000, 1000), st.floats(-10, 10, allow_nan=False).map(lambda x: round(x, 3)),
                         st.sampled_from(["adam", "sgd"]), st.booleans())
PARAMS = st.dictionaries(st.sampled_from(["lr", "batch_size", "optimizer", "dropout", "use_bn"]), PARAM_VALUES, min_size=1)
METRICS = st.dictionaries(st.sampled_from(["loss", "hparam/accuracy", "final_val"]),
                          st.floats(-100, 100, allow_nan=False, width=32), min_size=1)


def _stored(value: object) -> object:
    """What the hparams plugin keeps of a param: a bool as its number (torch writes it so), a whole number as an int."""
    if isinstance(value, (bool, int)) or (isinstance(value, float) and value.is_integer()):
        return int(value)
    return value


def _series_name(metric: str) -> str:
    return metric if metric.startswith("hparam/") else f"hparam/{metric}"


def _write(logdir: Path, sessions: list[tuple[dict, dict]], own_scalars: bool, run_name: bool, step: int | None) -> None:
    writer = torch_tensorboard.SummaryWriter(str(logdir))
    if own_scalars:
        for i in range(TRAIN_STEPS):
            writer.add_scalar("loss", 1.0 / (i + 1), i)
    for index, (params, metrics) in enumerate(sessions):
        writer.add_hparams(params, metrics, run_name=f"trial{index}" if run_name else None, global_step=step)
    writer.close()


def _runs_of_import(logdir: Path, out: Path) -> dict[str, dict]:
    """Imported run (path below the log's parent) -> its manifest, metric names and series."""
    assert main(["import", "tensorboard", str(logdir), str(out)]) == 0
    runs = {}
    for manifest_path in sorted(out.rglob("run.json")):
        run = open_run(manifest_path.parent)
        relative = manifest_path.parent.relative_to(out / logdir.name)
        runs[str(relative).replace("_root", ".").rstrip("/")] = {
            "manifest": json.loads(manifest_path.read_text()), "names": run.metric_names,
            "series": {name: run.series(name) for name in run.metric_names}}
    return runs


def _runs_live(logdir: Path) -> dict[str, dict]:
    runs = {}
    for key, kind in discover(logdir).items():
        run = open_source(key, kind)
        runs[str(key.relative_to(logdir))] = {"manifest": run.manifest, "names": run.metric_names,
                                              "series": {name: run.series(name) for name in run.metric_names}}
    return runs


def _check_session(run: dict, params: dict, metrics: dict, step: int | None) -> None:
    expected_params = {key: _stored(value) for key, value in params.items()}
    assert run["manifest"]["config"] == expected_params
    hparams = run["manifest"]["hparams"]
    assert hparams["params"] == expected_params and set(hparams["metrics"]) == set(metrics)
    for name, value in metrics.items():
        assert np.float32(hparams["metrics"][name]) == np.float32(value)  # the float32 TensorBoard stored
        series = run["series"][_series_name(name)]
        assert list(series.steps) == [step or 0] and np.float32(series.values[-1]) == np.float32(value)


@EXAMPLES
@given(sessions=st.lists(st.tuples(PARAMS, METRICS), min_size=1, max_size=3), own_scalars=st.booleans(),
       run_name=st.booleans(), step=st.sampled_from([None, 0, 7]))
def test_add_hparams_becomes_the_config_and_hparams_in_import_and_watch(tmp_path_factory, sessions, own_scalars: bool,
                                                                        run_name: bool, step: int | None) -> None:
    """One ``add_hparams`` call joins its parent run; several (a sweep from one writer) are runs of their own.
    A metric named ``loss`` is ``hparam/loss``, never a point of the training loss."""
    base = tmp_path_factory.mktemp("hp")
    logdir = base / "tb"
    _write(logdir, sessions, own_scalars, run_name, step)
    imported, live = _runs_of_import(logdir, base / "out"), _runs_live(logdir)
    assert set(imported) == {key for key, run in live.items() if run["names"]}  # import skips a run without scalars
    for key in imported:
        for field in ("config", "hparams"):
            assert imported[key]["manifest"].get(field) == live[key]["manifest"].get(field), (key, field)
        assert imported[key]["names"] == live[key]["names"]
        for name, series in live[key]["series"].items():
            np.testing.assert_array_equal(imported[key]["series"][name].values, series.values)
    parent = live["."]
    if own_scalars:
        assert len(parent["series"][LOSS]) == TRAIN_STEPS
    if len(sessions) == 1:
        assert set(live) == {"."}
        _check_session(parent, *sessions[0], step)
        return
    assert len(live) == len(sessions) + 1 and "hparams" not in parent["manifest"] and parent["manifest"]["config"] == {}
    assert not any(name.startswith("hparam/") for name in parent["names"])
    session_keys = sorted(key for key in live if key != ".")
    if run_name:
        assert session_keys == [f"trial{i}" for i in range(len(sessions))]
    for key in session_keys:  # each session's own metrics, under their own names
        index = int(key[len("trial"):]) if run_name else session_keys.index(key)
        params, metrics = sessions[index]
        assert live[key]["manifest"]["config"] == {k: _stored(v) for k, v in params.items()}
        assert set(live[key]["manifest"]["hparams"]["metrics"]) == set(metrics)


def test_watched_run_gains_its_hparams_and_a_second_session_splits_them_off(tmp_path: Path) -> None:
    """Live: the config appears once ``add_hparams`` was called; a second call makes both sessions runs of their
    own, and the parent is read again from the start without them."""
    logdir = tmp_path / "tb"
    writer = torch_tensorboard.SummaryWriter(str(logdir))
    for i in range(TRAIN_STEPS):
        writer.add_scalar("loss", 1.0 / (i + 1), i)
    writer.flush()
    run = open_source(logdir, discover(tmp_path)[logdir])
    assert run.manifest["config"] == {} and "hparams" not in run.manifest and len(run.series(LOSS)) == TRAIN_STEPS
    writer.add_hparams({"lr": 0.1}, {"loss": 0.25}, run_name="first")
    run.refresh()
    assert run.manifest["config"] == {"lr": 0.1}
    assert run.manifest["hparams"] == {"params": {"lr": 0.1}, "metrics": {"loss": 0.25}}
    assert len(run.series(LOSS)) == TRAIN_STEPS and list(run.series("hparam/loss").values) == [0.25]
    writer.add_hparams({"lr": 0.2}, {"loss": 0.5}, run_name="second")
    writer.close()
    session_file = next((logdir / "second").glob("events.out.tfevents.*"))
    assert owner_of(session_file, modified=True) == logdir / "second"
    assert set(discover(tmp_path)) == {logdir, logdir / "first", logdir / "second"}
    run.refresh()
    assert run.manifest["config"] == {} and "hparams" not in run.manifest and run.metric_names == [LOSS]
    assert len(run.series(LOSS)) == TRAIN_STEPS


def test_lightning_log_hyperparams_in_the_run_directory(tmp_path: Path) -> None:
    """Lightning's ``TensorBoardLogger.log_hyperparams`` writes the session into the run's own directory, with
    ``hp_metric`` logged again later. Its calls are made here as it makes them (torch's ``hparams`` summaries
    through the writer's file writer), without importing Lightning (seconds)."""
    from torch.utils.tensorboard.summary import hparams

    run_dir = tmp_path / "logs" / "exp" / "version_0"
    writer = torch_tensorboard.SummaryWriter(str(run_dir))
    params, metrics = {"lr": 0.1, "model/width": 8}, {"hp_metric": -1}
    writer.add_scalar("hp_metric", -1, 0)
    for summary in hparams(params, metrics):
        writer._get_file_writer().add_summary(summary, None)
    for step in range(TRAIN_STEPS):
        writer.add_scalar("train_loss", 1.0 / (step + 1), step)
        writer.add_scalar("hp_metric", step / 10, step)
    writer.close()
    run = open_source(run_dir, discover(tmp_path)[run_dir])
    assert run.manifest["config"] == params
    assert run.manifest["hparams"] == {"params": params, "metrics": {"hp_metric": 0.2}}
    assert len(run.series(LOSS)) == TRAIN_STEPS
    assert main(["import", "tensorboard", str(tmp_path / "logs"), str(tmp_path / "out")]) == 0
    imported = json.loads((tmp_path / "out" / "logs" / "exp" / "version_0" / "run.json").read_text())
    assert imported["config"] == run.manifest["config"] and imported["hparams"] == run.manifest["hparams"]

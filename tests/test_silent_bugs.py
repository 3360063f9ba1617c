"""The silent bugs, trained for real: each planted bug is named, each near miss is not.

Small CPU trainings through the public ``Recorder`` API (one thread, 200 steps, a
20-32-4 MLP on seeded blobs), one per variant, recorded once per module. A bug must
show as the top finding or at least as a warning, with evidence lines that pass the
independent checker (``tests/evidence_checker.py``) and a fix naming the line to change.
A near miss (zero_grad through ``set_to_none``, ``model.zero_grad``, gradient
accumulation on purpose; cross-entropy on logits; matching shapes; class-imbalanced
but shuffled data; labels that match) must raise none of the five codes.
"""

from __future__ import annotations

import math
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evidence_checker import check_diagnosis  # noqa: E402

import tuidiag  # noqa: E402
from tuidiag.demo.data import blobs  # noqa: E402
from tuidiag.diagnosis import Diagnosis, diagnose  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

SILENT = ("grad_not_zeroed", "double_softmax", "loss_shape_mismatch", "labels_misaligned", "unshuffled_data")
STEPS, BATCH, CLASSES = 200, 32, 4
pytestmark = pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")  # torch warns of the planted shape bugs


@dataclass(frozen=True)
class Loop:
    """One training: how it zeroes gradients, what the model ends with, the loss, and the data's order."""

    zero: str = "optimizer"
    """``optimizer``, ``set_to_none``, ``keep_zeros`` (set_to_none=False), ``model``, ``never`` or ``every4`` (accumulation)."""
    head: str = "logits"
    """``logits``, ``softmax``, ``log_softmax``, ``sigmoid`` or ``regression`` (one output)."""
    loss: str = "ce"
    """``ce``, ``nll``, ``bce_logits``, ``mse``, ``mse_fn`` (a plain function called as ``rec.loss_fn``) or ``l1_fn``."""
    target_shape: str = "match"
    """For regression: ``match`` (targets (N, 1) like the output) or ``flat`` (targets (N,): the bug)."""
    data: str = "shuffled"
    """``shuffled``, ``sorted`` (by class, never shuffled), ``imbalanced`` (90% class 0, shuffled) or ``misaligned``."""
    optim: str = "adam"
    watch_loss: bool = True
    """Give the loss to ``rec.watch`` (else the training calls it itself and the recorder never sees it)."""
    kwargs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def _data(loop: Loop) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = blobs(1024, 20, CLASSES, noise=0.7, seed=3)
    gen = torch.Generator().manual_seed(5)
    if loop.data == "imbalanced":
        y = torch.where(torch.rand(len(y), generator=gen) < 0.9, torch.zeros_like(y), y)
    if loop.data == "sorted":
        order = torch.argsort(y, stable=True)
        x, y = x[order], y[order]
    if loop.data == "misaligned":
        y = y[torch.randperm(len(y), generator=gen)]  # the labels shuffled on their own: no longer the inputs' labels
    return x, y


def _batches(loop: Loop, x: torch.Tensor, y: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    while True:
        order = torch.arange(len(x)) if loop.data == "sorted" else torch.randperm(len(x), generator=gen)
        for start in range(0, len(x) - BATCH + 1, BATCH):
            idx = order[start : start + BATCH]
            yield x[idx], y[idx]


def _model(loop: Loop) -> nn.Module:
    torch.manual_seed(0)
    out = 1 if loop.head == "regression" else (1 if loop.loss == "bce_logits" else CLASSES)
    head = {"softmax": [nn.Softmax(dim=1)], "log_softmax": [nn.LogSoftmax(dim=1)], "sigmoid": [nn.Sigmoid()]}.get(loop.head, [])
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, out), *head)


def _loss_fn(loop: Loop) -> Callable[..., Any]:
    return {"ce": nn.CrossEntropyLoss(), "nll": nn.NLLLoss(), "bce_logits": nn.BCEWithLogitsLoss(), "mse": nn.MSELoss(),
            "mse_fn": nn.functional.mse_loss, "l1_fn": nn.functional.l1_loss}[loop.loss]


def _target(loop: Loop, y: torch.Tensor) -> torch.Tensor:
    if loop.head == "regression":
        value = y.float() / (CLASSES - 1)
        return value if loop.target_shape == "flat" else value.unsqueeze(1)
    if loop.loss == "bce_logits":
        return (y == 0).float().unsqueeze(1)
    return y


def train(run_dir: Path, loop: Loop) -> Path:
    """Record ``loop`` for 200 steps through the public Recorder API; returns the run directory."""
    x, y = _data(loop)
    model = _model(loop)
    optimizer = torch.optim.SGD(model.parameters(), 0.05) if loop.optim == "sgd" else torch.optim.Adam(model.parameters(), 3e-3)
    batches = _batches(loop, x, y)
    with tuidiag.Recorder(run_dir, config={"lr": optimizer.param_groups[0]["lr"]}, **loop.kwargs) as rec:
        criterion = _loss_fn(loop)
        rec.watch(model, optimizer, loss_fn=criterion if loop.watch_loss else None)
        for step in range(STEPS):
            xb, yb = next(batches)
            rec.batch(xb, yb)
            if loop.zero == "optimizer":
                optimizer.zero_grad()
            elif loop.zero == "set_to_none":
                optimizer.zero_grad(set_to_none=True)
            elif loop.zero == "keep_zeros":
                optimizer.zero_grad(set_to_none=False)
            elif loop.zero == "model":
                model.zero_grad()
            loss = (rec.loss_fn if loop.watch_loss else criterion)(model(xb), _target(loop, yb))
            (loss / 4 if loop.zero == "every4" else loss).backward()
            rec.step(loss)
            if loop.zero != "every4" or step % 4 == 3:
                optimizer.step()
                if loop.zero == "every4":
                    optimizer.zero_grad()
    return run_dir


BUGS: dict[str, tuple[str, Loop]] = {
    "no-zero-grad-adam": ("grad_not_zeroed", Loop(zero="never")),
    "no-zero-grad-sgd": ("grad_not_zeroed", Loop(zero="never", optim="sgd")),
    "softmax-into-cross-entropy": ("double_softmax", Loop(head="softmax")),
    "softmax-into-nll": ("double_softmax", Loop(head="softmax", loss="nll")),
    "sigmoid-into-bce-with-logits": ("double_softmax", Loop(head="sigmoid", loss="bce_logits")),
    "mse-module-n1-vs-n": ("loss_shape_mismatch", Loop(head="regression", loss="mse", target_shape="flat")),
    "l1-function-n1-vs-n": ("loss_shape_mismatch", Loop(head="regression", loss="l1_fn", target_shape="flat")),
    "labels-shuffled-alone": ("labels_misaligned", Loop(data="misaligned")),
    "labels-shuffled-alone-sgd": ("labels_misaligned", Loop(data="misaligned", optim="sgd")),
    "labels-shuffled-alone-loss-unwatched": ("labels_misaligned", Loop(data="misaligned", watch_loss=False)),
    "sorted-by-class": ("unshuffled_data", Loop(data="sorted")),
    "sorted-by-class-sgd": ("unshuffled_data", Loop(data="sorted", optim="sgd")),
}
"""name -> (the code it must raise, the training with the bug planted)."""

NEAR_MISSES: dict[str, Loop] = {
    "zero-grad-set-to-none": Loop(zero="set_to_none"),
    "zero-grad-keeping-zeros": Loop(zero="keep_zeros", optim="sgd"),
    "model-zero-grad": Loop(zero="model"),
    "accumulation-every-4-steps": Loop(zero="every4"),
    "cross-entropy-on-logits": Loop(),
    "log-softmax-into-nll": Loop(head="log_softmax", loss="nll"),
    "bce-with-logits-on-logits": Loop(loss="bce_logits"),
    "mse-matching-shapes": Loop(head="regression", loss="mse"),
    "mse-function-matching-shapes": Loop(head="regression", loss="mse_fn"),
    "imbalanced-but-shuffled": Loop(data="imbalanced"),
}
"""name -> a correct training that looks like one of the bugs."""


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Diagnosis]]:
    """Every training recorded once and diagnosed at its end."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("silent")
    out = {}
    try:
        for name, loop in {**{n: loop for n, (_, loop) in BUGS.items()}, **NEAR_MISSES}.items():
            run = train(root / name, loop)
            out[name] = (run, diagnose(open_run(run)))
    finally:
        torch.set_num_threads(threads)
    return out


def _summary(diagnosis: Diagnosis) -> list[tuple[str, float, str]]:
    return [(f.code, round(f.confidence, 2), f.severity) for f in diagnosis.findings + diagnosis.notes]


@pytest.mark.parametrize("name", list(BUGS))
def test_the_planted_bug_is_named(name: str, diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    code, _ = BUGS[name]
    run, diagnosis = diagnosed[name]
    check_diagnosis(run, diagnosis)
    finding = next((f for f in diagnosis.findings if f.code == code), None)
    assert finding is not None, _summary(diagnosis)
    assert finding is diagnosis.top or finding.severity in ("warning", "critical"), _summary(diagnosis)
    assert finding.severity in ("warning", "critical") and finding.evidence
    others = [f.code for f in diagnosis.findings if f.code in SILENT and f.code != code]
    assert not others, _summary(diagnosis)
    if code == "unshuffled_data":
        assert "class_imbalance" not in {f.code for f in diagnosis.findings}, "an order by class is not an imbalance"


@pytest.mark.parametrize("name", list(BUGS))
def test_the_bug_is_the_top_finding(name: str, diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    code, _ = BUGS[name]
    assert diagnosed[name][1].top.code == code, _summary(diagnosed[name][1])


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_a_near_miss_raises_no_silent_bug(name: str, diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    run, diagnosis = diagnosed[name]
    check_diagnosis(run, diagnosis)
    assert not [f.code for f in diagnosis.findings + diagnosis.notes if f.code in SILENT], _summary(diagnosis)


def test_the_fixes_name_the_line_to_change(diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    wanted = {"grad_not_zeroed": "optimizer.zero_grad(", "double_softmax": "softmax", "loss_shape_mismatch": "squeeze(-1)",
              "labels_misaligned": "__getitem__", "unshuffled_data": "shuffle=True"}
    for name, (code, loop) in BUGS.items():
        finding = next(f for f in diagnosed[name][1].findings if f.code == code)
        assert (loop.head if loop.head == "sigmoid" else wanted[code]) in finding.fix, (name, finding.fix)
    shapes = next(f for f in diagnosed["mse-module-n1-vs-n"][1].findings if f.code == "loss_shape_mismatch")
    assert "input (32, 1) and target (32,) broadcast to (32, 32)" in " ".join(shapes.evidence)


def test_the_probes_record_what_they_saw(diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    """The direct signals, read back from the runs: exact zeros where the training is right."""

    def series(name: str, metric: str) -> Any:
        return tuidiag.open_run(diagnosed[name][0]).series(metric).values

    assert (series("no-zero-grad-adam", "grad/stale_norm") > 0).all()
    for name in ("zero-grad-set-to-none", "zero-grad-keeping-zeros", "model-zero-grad", "accumulation-every-4-steps"):
        stale = series(name, "grad/stale_norm")
        assert len(stale) >= 4 and (stale == 0).all(), name
    assert (series("softmax-into-cross-entropy", "loss_fn/prob_rows") == 1).all()
    assert (series("cross-entropy-on-logits", "loss_fn/prob_rows") == 0).all()
    assert (series("l1-function-n1-vs-n", "loss_fn/broadcast") == 1).all()
    assert (series("mse-function-matching-shapes", "loss_fn/broadcast") == 0).all()
    assert len(series("cross-entropy-on-logits", "loss_fn/broadcast")) == STEPS // 10
    sorted_leaders = series("sorted-by-class", "target/majority_class")
    assert len(sorted_leaders) == STEPS and set(sorted_leaders.tolist()) == set(range(CLASSES))
    assert math.isclose(float(series("labels-shuffled-alone", "loss_fn/classes")[0]), CLASSES)


@pytest.mark.parametrize("steps, passed", [(400, True), (2, False)])
def test_an_overfit_one_batch_result_settles_the_labels(steps: int, passed: bool, tmp_path: Path,
                                                        diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    """The ``o`` test, run for real on a batch of the misaligned data: a model that memorises it leaves the labels
    as the cause (more confident, one more line); one that cannot fit even one batch is not a labels problem."""
    from tuidiag.jobs.factory import Parts
    from tuidiag.jobs.overfit import OverfitConfig, overfit_batch
    from tuidiag.store.job_results import job_records, save_result

    run = Path(shutil.copytree(diagnosed["labels-shuffled-alone"][0], tmp_path / "run"))
    loop = BUGS["labels-shuffled-alone"][1]
    model = _model(loop)
    batch = next(_batches(loop, *_data(loop)))
    parts = Parts(model, torch.optim.Adam(model.parameters(), 1e-3), _loss_fn(loop), [batch])
    result = overfit_batch(parts, torch.device("cpu"), OverfitConfig(steps=steps, lr=1e-2))
    assert result["passed"] is passed
    save_result(run, "overfit_batch", result)
    loaded = open_run(run)
    diagnosis = diagnose(loaded, jobs=job_records(loaded))
    check_diagnosis(run, diagnosis)
    found = next((f for f in diagnosis.findings if f.code == "labels_misaligned"), None)
    before = next(f for f in diagnosed["labels-shuffled-alone"][1].findings if f.code == "labels_misaligned")
    if passed:
        assert found is not None and found.confidence >= before.confidence  # the calibration may put both in one block
        assert found.raw_confidence is not None and before.raw_confidence is not None
        assert found.raw_confidence > before.raw_confidence
        assert any("overfit-one-batch test passed" in line for line in found.evidence)
    else:
        assert found is None, _summary(diagnosis)


@pytest.mark.parametrize("losses, saved_before_rule", [([0.0], False), ([0.0492, 0.02, 0.00744], True)])
def test_an_uninformative_overfit_pass_is_no_evidence(losses: list[float], saved_before_rule: bool, tmp_path: Path,
                                                      diagnosed: dict[str, tuple[Path, Diagnosis]]) -> None:
    """A pass from a loss that started at the target, or (a result saved before the target followed the start)
    within 100 times of it, says nothing about fitting: the finding stays as it was without any result."""
    from tuidiag.jobs.overfit import OverfitConfig, report
    from tuidiag.store.job_results import job_records, save_result

    run = Path(shutil.copytree(diagnosed["labels-shuffled-alone"][0], tmp_path / "run"))
    result = report(losses, "target reached", 1e-3, OverfitConfig(), torch.device("cpu"))
    if saved_before_rule:
        for key in ("informative", "target", "min_drop", "uninformative_reason"):
            del result[key]
    assert result["passed"] is True
    save_result(run, "overfit_batch", result)
    loaded = open_run(run)
    found = next(f for f in diagnose(loaded, jobs=job_records(loaded)).findings if f.code == "labels_misaligned")
    before = next(f for f in diagnosed["labels-shuffled-alone"][1].findings if f.code == "labels_misaligned")
    assert found.raw_confidence == before.raw_confidence and found.evidence == before.evidence

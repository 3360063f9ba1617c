"""The recorder's silent-bug probes on their own: each check against an independent oracle, the wrapper's transparency.

- which shape pairs are a silent broadcast, for any pair of small shapes (numpy's broadcasting as the oracle);
- the share of probability rows, for logits, softmax outputs and mixtures (a numpy oracle);
- the batch's majority class and its share, for any labels (``collections.Counter``);
- a plain loss function wrapped by ``rec.loss_fn`` returns, raises and names exactly what the function does,
  and an error inside the probe is reported, never raised;
- the stale-gradient probe reads zero for every correct way of zeroing (two backwards per step included)
  and ignores parameters the optimizer does not own;
- on CUDA, none of it synchronises the host with the device.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tests.conftest import examples
import tuidiag  # noqa: E402
from tuidiag.recorder.inputs import majority  # noqa: E402
from tuidiag.recorder.loss_probe import ELEMENTWISE, LossProbe, probability_rows, shapes_broadcast  # noqa: E402

shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=examples(300), deadline=None)
@given(a=shapes, b=shapes, kind=st.sampled_from(["MSELoss", "l1_loss", "CrossEntropyLoss", "<lambda>"]))
def test_a_silent_broadcast_is_a_difference_that_broadcasts_and_widens(a: tuple[int, ...], b: tuple[int, ...], kind: str) -> None:
    try:
        wide = np.broadcast_shapes(a, b)
    except ValueError:
        wide = None
    size = (lambda s: int(np.prod(s)) if s else 1)
    expected = wide is not None and a != b and (size(wide) > max(size(a), size(b)) or kind in ELEMENTWISE)
    found = shapes_broadcast(kind, torch.Size(a), torch.Size(b))
    assert (found is not None) == expected
    if found is not None:
        assert tuple(found) == tuple(wide)


def test_the_named_examples_of_shapes() -> None:
    assert shapes_broadcast("MSELoss", torch.Size([64, 1]), torch.Size([64])) == torch.Size([64, 64])
    assert shapes_broadcast("CrossEntropyLoss", torch.Size([64, 4]), torch.Size([64])) is None  # class indices: not a bug
    assert shapes_broadcast("CrossEntropyLoss", torch.Size([4, 4]), torch.Size([4])) is None  # batch == classes: still none
    assert shapes_broadcast("MSELoss", torch.Size([64, 3]), torch.Size([64, 1])) == torch.Size([64, 3])


def _oracle_rows(x: np.ndarray) -> float:
    rows = np.moveaxis(x, 1, -1).reshape(-1, x.shape[1])
    ok = np.all((rows >= 0) & (rows <= 1), axis=1) & (np.abs(rows.sum(axis=1) - 1) <= 1e-2)
    return float(ok.mean())


@settings(max_examples=examples(150), deadline=None)
@given(n=st.integers(1, 64), c=st.integers(2, 12), probs=st.integers(0, 64), scale=st.floats(0.01, 20),
       seed=st.integers(0, 2**16))
def test_probability_rows_counts_the_rows_that_are_distributions(n: int, c: int, probs: int, scale: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(n, c, generator=gen)
    x = logits.clone()
    k = min(probs, n)
    x[:k] = torch.softmax(logits[:k], dim=1)
    assert math.isclose(float(probability_rows(x)), _oracle_rows(x.numpy()), abs_tol=1e-6)


def test_probability_rows_of_per_position_scores() -> None:
    """(N, C, d) inputs (segmentation, sequences): the class dimension is 1."""
    logits = torch.randn(2, 5, 7)
    assert float(probability_rows(torch.softmax(logits, dim=1))) == 1.0
    assert float(probability_rows(logits)) == _oracle_rows(logits.numpy())
    assert float(probability_rows(torch.softmax(logits, dim=2))) < 1.0  # normalised along the wrong dimension


@settings(max_examples=examples(200), deadline=None)
@given(labels=st.lists(st.integers(0, 6), min_size=1, max_size=80))
def test_majority_share_and_class_match_a_count(labels: list[int]) -> None:
    counts = Counter(labels)
    top = max(counts.values())
    share, label = majority(torch.tensor(labels))
    assert math.isclose(float(share), top / len(labels), rel_tol=1e-6)
    assert int(label) == min(k for k, v in counts.items() if v == top)


def _cross_entropy(input: torch.Tensor, target: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
    if input.is_sparse:
        input = input.to_dense()
    if scale < 0:
        raise ValueError("negative scale")
    return scale * nn.functional.cross_entropy(input, target)


_cross_entropy.__name__ = "cross_entropy"


def test_the_wrapper_is_transparent_and_its_errors_stay_inside() -> None:
    reports: list[tuple[str, BaseException]] = []
    probe = LossProbe(_cross_entropy, lambda: False, lambda where, exc: reports.append((where, exc)))
    wrapped = probe.loss_fn
    assert wrapped.__wrapped__ is _cross_entropy and wrapped.__name__ == "cross_entropy"
    x, y = torch.randn(8, 3), torch.randint(0, 3, (8,))
    probe.arm(0)
    assert torch.equal(wrapped(x, target=y, scale=2.0), _cross_entropy(x, y, scale=2.0))
    with pytest.raises(ValueError, match="negative scale"):
        wrapped(x, y, scale=-1.0)
    seen = probe.parts()
    assert seen.host_names == ["loss_fn/broadcast", "loss_fn/classes"] and seen.dev_names == ["loss_fn/prob_rows"]
    assert [e[0] for e in seen.events] == ["loss_fn"], "the first call after arming only; the loss named once"
    probe.arm(10)
    assert torch.equal(wrapped(x.to_sparse(), y), _cross_entropy(x, y))  # the probe fails on a sparse input; the loss does not
    assert [where for where, _ in reports] == ["loss_probe"] and not probe.parts().dev_names
    probe.arm(11)  # not a sampled step
    wrapped(x, y)
    assert not probe.parts().host_names


def test_a_module_loss_is_hooked_only_while_armed(tmp_path: Path) -> None:
    criterion = nn.CrossEntropyLoss()
    model = nn.Linear(4, 3)
    with tuidiag.Recorder(tmp_path / "run") as rec:
        rec.watch(model, torch.optim.SGD(model.parameters(), 0.1), loss_fn=criterion)
        assert rec.loss_fn is criterion
        for _ in range(12):
            x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
            rec.batch(x, y)
            loss = criterion(model(x), y)
            loss.backward()
            rec.step(loss)
        assert not criterion._forward_pre_hooks, "no hook between sampled steps"
    assert not criterion._forward_pre_hooks
    run = tuidiag.open_run(tmp_path / "run")
    assert run.series("loss_fn/classes").steps.tolist() == [0, 10]
    assert [e.kind for e in run.events if e.kind.startswith("loss_")] == ["loss_fn"]


def test_rec_loss_fn_without_a_loss_is_none(tmp_path: Path) -> None:
    model = nn.Linear(2, 1)
    with tuidiag.Recorder(tmp_path / "run") as rec:
        rec.watch(model)
        assert rec.loss_fn is None


@pytest.mark.parametrize("style", ["optimizer", "set_to_none", "model", "two_backwards", "not_zeroed"])
def test_the_stale_probe_reads_only_what_the_optimizer_steps_on(style: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model, spare = nn.Linear(4, 2), nn.Linear(4, 2)  # spare requires grad but is not optimised: never judged
    optimizer = torch.optim.SGD(model.parameters(), 0.01)
    with tuidiag.Recorder(tmp_path / style, inputs_every=0, activations_every=0) as rec:
        rec.watch(nn.ModuleList([model, spare]), optimizer)
        for _ in range(41):
            if style == "optimizer":
                optimizer.zero_grad()
            elif style == "set_to_none":
                optimizer.zero_grad(set_to_none=True)
            elif style == "model":
                model.zero_grad()
            elif style == "two_backwards":
                optimizer.zero_grad()
                model(torch.randn(3, 4)).pow(2).mean().backward()
            x = torch.randn(3, 4)
            (model(x).pow(2).mean() + spare(x).pow(2).mean()).backward()
            rec.step()
            optimizer.step()
    stale = tuidiag.open_run(tmp_path / style).series("grad/stale_norm")
    assert stale.steps.tolist() == [10, 20, 30, 40]
    if style == "not_zeroed":
        assert (stale.values > 0).all()
    else:
        assert (stale.values == 0).all(), "spare's gradients pile up, but the optimizer never steps on them"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_probes_never_synchronise(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4), nn.Softmax(dim=1)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    criterion = nn.CrossEntropyLoss()
    x, y = torch.randn(16, 32, device="cuda"), torch.randint(0, 4, (16,), device="cuda")
    with tuidiag.Recorder(tmp_path / "run", activations_every=0, weights_every=0) as rec:
        rec.watch(model, optimizer, loss_fn=criterion)
        for _ in range(5):  # warm-up outside the check
            rec.batch(x, y)
            criterion(model(x), y).backward()
            rec.step()
            optimizer.step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(30):  # no zero_grad: the stale probe reads non-zero, every branch runs
                rec.batch(x, y)
                loss = criterion(model(x), y)
                loss.backward()
                rec.step(loss)
                optimizer.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    run = tuidiag.open_run(tmp_path / "run")
    assert run.manifest["stats"]["errors"] == 0
    assert (run.series("grad/stale_norm").values > 0).all() and (run.series("loss_fn/prob_rows").values == 1).all()
    assert len(run.series("target/majority_class")) == 35

"""Activation evidence names a module by its type and place, never by a bare Sequential index.

Over a set of real torch models (plain and nested ``Sequential`` stacks, convolutions,
named blocks, ReLU6, a model with no weight layer before its activation), summarised by
the recorder's own ``summarize``: every probed activation is labelled with its own type and,
inside a ``Sequential``, the nearest layer with weights before it in ``named_modules()`` order,
computed here independently (a module named as an attribute, or called more than once per
pass, can run after any layer: no layer is named before it). The same models without the ``modules`` list (runs recorded before it) still
get the family and the weight layer before them among their siblings. Then the dead-ReLU and
LR-too-high findings on planted runs whose model summary carries the list name the module so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cause_runs  # noqa: E402
from evidence_checker import check_diagnosis  # noqa: E402
from tuidiag.diagnosis import diagnose  # noqa: E402
from tuidiag.diagnosis.module_names import module_label  # noqa: E402
from tuidiag.recorder.activations import DEAD_KINDS, SATURATING_KINDS  # noqa: E402
from tuidiag.recorder.model_summary import summarize  # noqa: E402
from tuidiag.store import open_run  # noqa: E402


class Block(nn.Module):
    """A named block: a linear layer then its activation."""

    def __init__(self, act: nn.Module) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = act


MODELS = {
    "mlp": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)),
    "conv": lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU6(), nn.Conv2d(4, 4, 3), nn.Tanh()),
    "nested": lambda: nn.Sequential(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), nn.Sequential(nn.Linear(8, 8), nn.Sigmoid())),
    "blocks": lambda: nn.Sequential(Block(nn.ReLU()), Block(nn.Tanh()), nn.Linear(8, 1)),
    "act-first": lambda: nn.Sequential(nn.ReLU(), nn.Linear(4, 4), nn.ReLU()),
}


def _expected(model: nn.Module, name: str) -> str:
    """The label computed from the model itself: its type, and the last weight-owning leaf before it when the module sits
    in a ``Sequential`` (named by its index: registration order is the order it runs in); a module named as an attribute
    can be called anywhere in its parent's ``forward``, so no layer is named before it."""
    leaves = [(n, m) for n, m in model.named_modules() if n and not any(m.children())]
    names = [n for n, _ in leaves]
    before = [(n, m) for n, m in leaves[: names.index(name)] if any(p.dim() >= 2 for p in m.parameters(recurse=False))]
    kind = type(dict(leaves)[name]).__name__
    ordered = name.rpartition(".")[2].isdigit()
    return f"{kind} '{name}'" + (f" (after {type(before[-1][1]).__name__} '{before[-1][0]}')" if before and ordered else "")


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_probed_activation_is_named_with_type_and_place(kind: str) -> None:
    model = MODELS[kind]()
    summary = summarize(model)
    probed = [n for n, m in model.named_modules() if isinstance(m, DEAD_KINDS + SATURATING_KINDS)]
    assert probed
    for name in probed:
        label = module_label(summary, name, "ReLU")
        assert label == _expected(model, name)
        assert not label.startswith("'")
        old = module_label({k: v for k, v in summary.items() if k != "modules"}, name, "ReLU")
        assert old.startswith(f"ReLU '{name}'")
        if "(after" in label and "." not in name:  # a Sequential index: the fallback finds the same weight layer
            assert old.endswith(label[label.index("'", label.index("(after")):])


@pytest.mark.parametrize("plants", [[("dead_relu", 40)], [("lr_too_high", 40), ("dead_relu", 120)]])
def test_dead_relu_lines_name_the_module(tmp_path: Path, plants: list[tuple[str, int]]) -> None:
    run_dir = cause_runs.write(tmp_path, "run", plants)
    diagnosis = diagnose(open_run(run_dir))
    lines = [line for f in diagnosis.findings for line in f.evidence if "dead units" in line]
    assert lines
    for line in lines:
        assert "'relu'" not in line or "ReLU 'relu'" in line, line
    check_diagnosis(run_dir, diagnosis)


class ReusedAct(nn.Module):
    """The review's CNN: one ReLU attribute, registered last, called after each of three layers."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 2)
        self.act = nn.ReLU()

    def forward(self, x):  # noqa: ANN001, ANN201
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


@pytest.mark.parametrize("name", ["act", "act#2", "act#3"])
def test_a_module_called_more_than_once_names_no_layer_before_it(name: str) -> None:
    """'act#2 (after Linear fc3)' was untrue: registration order says nothing of where a reused module runs."""
    label = module_label(summarize(ReusedAct()), name, "ReLU")
    assert "after" not in label and label.startswith(f"ReLU '{name}'")
    assert ("call 2 in each forward pass" in label) == (name == "act#2")

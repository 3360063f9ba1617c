"""Shared pieces of the framework callbacks: JSON-safe configs, batch splitting, the end-of-backward hook."""

from __future__ import annotations

import enum

import torch

from tuidiag.integrations.backward_end import BackwardEnd
from tuidiag.integrations.callback_base import json_safe_dict, split_batch


class Color(enum.Enum):
    RED = 1


def test_json_safe_dict_keeps_plain_values_and_drops_objects() -> None:
    config = {"lr": 0.1, "layers": [32, 32, Color.RED], "nested": {"ok": True, "fn": print}, "bad": float("nan"),
              "obj": object(), 3: "int key", "name": None}
    assert json_safe_dict(config) == {"lr": 0.1, "layers": [32, 32], "nested": {"ok": True}, "bad": "nan", "name": None}


def test_split_batch_finds_inputs_and_targets() -> None:
    x, y = torch.zeros(2, 3), torch.ones(2, dtype=torch.long)
    assert split_batch((x, y)) == (x, y)
    assert split_batch([x]) == (x, None)
    assert split_batch(x) == (x, None)
    found = split_batch({"attention_mask": y, "input_ids": y, "labels": x})
    assert found[0] is y and found[1] is x
    assert split_batch("text") == (None, None)


def test_backward_end_fires_once_per_wanted_pass_with_all_gradients() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
    seen: list[list[float]] = []
    wanted = iter([True, False, True])
    def fire() -> None:
        seen.append([p.grad.norm().item() for p in model.parameters()])

    hook = BackwardEnd(model, lambda: next(wanted), fire, lambda where, exc: None)
    for _ in range(3):
        model.zero_grad()
        model(torch.randn(5, 3)).sum().backward()
    assert len(seen) == 2
    assert seen[-1] == [p.grad.norm().item() for p in model.parameters()]  # every gradient was there
    hook.remove()
    model(torch.randn(5, 3)).sum().backward()
    assert len(seen) == 2


def test_backward_end_reports_errors_instead_of_raising_into_backward() -> None:
    model = torch.nn.Linear(3, 1)
    errors: list[str] = []

    def fire() -> None:
        raise RuntimeError("inside the recorder")

    BackwardEnd(model, lambda: True, fire, lambda where, exc: errors.append(f"{where}: {exc}"))
    model(torch.randn(2, 3)).sum().backward()
    assert errors == ["backward_end: inside the recorder"] and model.weight.grad is not None

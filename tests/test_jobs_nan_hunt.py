"""The NaN hunt on real recorded runs: each planted NaN source is located exactly."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path
from typing import Any

import jobs_factory
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from tests.conftest import examples
from tuidiag.cli.main import main
from tuidiag.jobs import JobError
from tuidiag.jobs.tensors import iter_tensors
from tuidiag.jobs.factory import as_parts
from tuidiag.jobs.nan_hunt import find_capture, load_capture, nan_hunt
from tuidiag.jobs.nonfinite_rule import OpCall
from tuidiag.store.job_results import list_results


def _record(tmp_path: Path, name: str) -> Path:
    run = tmp_path / name
    steps = jobs_factory.record(run, f"jobs_factory:{name}")
    assert steps == jobs_factory.POISON_STEP + 1, "the planted source must fire at the poisoned step"
    assert find_capture(run) is not None and find_capture(run).name == f"nan-r0-step{jobs_factory.POISON_STEP}.pt"
    return run


def _hunt(run: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["nan-hunt", str(run), "--yes", "--json", "--device", "cpu"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["step"] == jobs_factory.POISON_STEP and result["state_is_pre_step"] is True
    assert len(list_results(run, "nan_hunt")) == 1
    return result


def test_log_of_zero_in_the_loss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_log0"), capsys)
    assert (result["verdict"], result["pass"], result["module"], result["op"]) == ("forward", "forward", "loss_fn", "log")
    assert "log_mse" in result["module_type"]
    assert "torch.log(out)" in result["op_stack"][-1] and "jobs_factory.py" in result["op_stack"][-1]
    assert result["inputs"]["output"]["min"] == 0.0 and result["inputs"]["output"]["nan"] == 0
    assert result["output"]["loss"]["posinf"] == 1


def test_division_by_zero_in_a_custom_layer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_div0"), capsys)
    assert (result["verdict"], result["pass"], result["module"], result["module_type"]) == ("forward", "forward", "norm", "RowNormalize")
    assert result["op"] == "div" and "x / x.sum(dim=1" in result["op_stack"][-1]
    assert result["inputs"]["input"]["nan"] == 0 and result["inputs"]["input"]["min"] == 0.0
    assert result["output"]["output"]["nan"] == 6  # one empty row of 6 counts: 0/0
    assert result["parameters"] == {}


def test_overflow_from_huge_logits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_overflow"), capsys)
    assert (result["verdict"], result["module"], result["module_type"], result["op"]) == ("forward", "softmax", "NaiveSoftmax", "exp")
    assert "torch.exp(x)" in result["op_stack"][-1]
    assert result["inputs"]["input"]["abs_max"] > 88.7  # exp overflows float32 above ~88.7
    assert result["inputs"]["input"]["posinf"] == 0
    assert result["first_nan_op"]["op"] == "div"  # inf / inf


def test_exp_overflow_after_a_causal_mask_blames_exp_not_masked_fill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's example, end to end: a recorded run, its capture, ``tuidiag nan-hunt``, JSON and text."""
    run = _record(tmp_path, "nan_masked_attention")
    result = _hunt(run, capsys)
    assert (result["verdict"], result["module"], result["module_type"], result["op"]) == ("forward", "attn", "MaskedAttention", "exp")
    assert result["created"] is True and result["new"]["inf"] > 0 and result["first_nan_op"]["op"] == "div"
    assert "e = torch.exp(scores)" in result["op_stack"][-1] and "jobs_factory.py" in result["op_stack"][-1]
    assert ("masked_fill", False) in [(o["op"], o["created"]) for o in result["ops"]]
    assert main(["nan-hunt", str(run), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "module: attn (MaskedAttention), pass: forward" in out and "op: exp (created " in out
    assert "first NaN from: div" in out and "masked_fill" not in out.split("op: exp")[0]


def test_nan_in_one_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_batch"), capsys)
    assert result["verdict"] == "batch"
    assert result["tensors"]["x"]["nan"] == 1 and "y" not in result["tensors"]
    assert result["parameters"] == []  # BatchNorm's running stats went NaN in that forward: a note, not the cause
    assert any("running statistics" in note for note in result["notes"])


def test_inf_only_in_the_backward_of_a_custom_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = _hunt(_record(tmp_path, "nan_backward_inf"), capsys)
    assert (result["verdict"], result["pass"], result["module"], result["op"]) == ("backward", "backward", "act", "SafeLogBackward")
    assert result["module_type"] == "SafeLogAct"
    grad_in, grad_out = result["grad_input"]["grad_input"], result["grad_output"]["grad_output"]
    assert grad_out["nan"] == grad_out["posinf"] == grad_out["neginf"] == 0
    assert grad_in["posinf"] + grad_in["neginf"] > 0
    assert "SafeLog.apply(x)" in result["op_stack"][-1]  # the forward line, from anomaly mode


def test_text_report_names_the_culprit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _record(tmp_path, "nan_div0")
    capsys.readouterr()
    assert main(["nan-hunt", str(run), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "module: norm (RowNormalize), pass: forward" in out and "op: div" in out and "x / x.sum" in out


def test_parameters_already_non_finite(tmp_path: Path) -> None:
    run = _record(tmp_path, "nan_div0")
    capture = load_capture(find_capture(run))
    capture["model_state"]["head.weight"][0, 0] = float("inf")
    result = nan_hunt(as_parts(jobs_factory.nan_div0()), capture, torch.device("cpu"))
    assert result["verdict"] == "parameters" and result["parameters"] == ["head.weight"]


def test_no_capture_says_how_to_get_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    jobs_factory.record(run, "jobs_factory:healthy", steps=2)
    calls = jobs_factory.BUILD_CALLS["count"]
    assert main(["nan-hunt", str(run), "--yes", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["verdict"] == "no_capture" and "rec.batch(x, y)" in result["how_to_capture"]
    assert jobs_factory.BUILD_CALLS["count"] == calls  # nothing to replay: the factory is not run


def test_capture_with_code_objects_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "nan-r0-step1.pt"
    torch.save({"model_state": {}, "optimizer_state": {}, "batch": None, "step": 1, "evil": jobs_factory.RowNormalize()}, bad)
    with pytest.raises(JobError, match="cannot load capture"):
        load_capture(bad)


# ---- the culprit rule: a matrix of planted first non-finite ops -----------------------------
# Each model below is defined in this file, so the blamed source line must be in this file.

def _line(snippet: str) -> int:
    """The line of this file holding ``snippet`` (once)."""
    lines = [i + 1 for i, text in enumerate(Path(__file__).read_text().splitlines()) if text.endswith(snippet)]
    assert len(lines) == 1, f"{snippet!r} must occur once in {__file__}, found {lines}"
    return lines[0]


class CausalAttention(nn.Module):
    """Hand-written causal attention: the mask writes -inf by design; exp overflows on large scores."""

    def __init__(self, dims: int = 4) -> None:
        super().__init__()
        self.qk = nn.Linear(dims, dims, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.qk(x)
        scores = q @ q.transpose(-1, -2)
        mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        e = torch.exp(scores)  # culprit: exp_overflow
        weights = e / e.sum(-1, keepdim=True)
        return weights @ x


class FullyMaskedAttention(nn.Module):
    """Stable attention (softmax), but one query masks every key: softmax of an all -inf row is NaN."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = x @ x.transpose(-1, -2)
        mask = torch.zeros(x.shape[1], x.shape[1], dtype=torch.bool)
        mask[0] = True
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ x  # culprit: all_masked


class ReluLog(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.relu(x))  # culprit: log_relu


class Divide(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.sum(dim=1, keepdim=True)  # culprit: div


class SqrtShift(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x - 2.0)  # culprit: sqrt


class Power(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 100.0) ** 40  # culprit: pow


class InplaceTrueDiv(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x /= x.sum(1, keepdim=True)  # culprit: itruediv
        return x


class InplaceDiv(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.div_(x.sum(1, keepdim=True))  # culprit: div_


class InplaceLog(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(min=0.0).log_()  # culprit: log_


class InplaceExp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 100.0).exp_()  # culprit: exp_


class HugeLinear(nn.Module):
    """A built-in module whose weight is finite but huge: its matmul overflows."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        with torch.no_grad():
            self.fc.weight.fill_(1e38)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)  # culprit: huge_linear


class Net(nn.Module):
    """``pre`` (finite, with a LayerNorm that sees a constant row) -> the planted ``block`` -> a head."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        self.pre = nn.Sequential(OrderedDict(fc=nn.Linear(4, 4), norm=nn.LayerNorm(4)))
        with torch.no_grad():
            self.pre.fc.weight.copy_(torch.eye(4))
            self.pre.fc.bias.zero_()
        self.block = block
        self.head = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(self.pre(x) + 1.0)
        return self.head(h.flatten(1)[:, :4])


def _batch(rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of x after ``pre`` (identity + LayerNorm + 1): row 0 constant -> exactly 1.0 everywhere."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, 4, generator=gen)
    x[0] = 3.0  # a constant row: LayerNorm makes it 0 (finite: eps), then + 1
    return x, torch.randn(rows, 1, generator=gen)


# (case, planted module, blamed op, blamed module path, kind it created first)
CULPRITS = [
    ("exp_overflow", lambda: CausalAttention(), "exp", "block.inner", "inf"),
    ("all_masked", lambda: FullyMaskedAttention(), "softmax", "block.inner", "nan"),
    ("log_relu", lambda: ReluLog(), "log", "block.inner", "inf"),
    ("div", lambda: Divide(), "div", "block.inner", "nan"),
    ("sqrt", lambda: SqrtShift(), "sqrt", "block.inner", "nan"),
    ("pow", lambda: Power(), "pow", "block.inner", "inf"),
    ("itruediv", lambda: InplaceTrueDiv(), "div_", "block.inner", "nan"),
    ("div_", lambda: InplaceDiv(), "div_", "block.inner", "nan"),
    ("log_", lambda: InplaceLog(), "log_", "block.inner", "inf"),
    ("exp_", lambda: InplaceExp(), "exp_", "block.inner", "inf"),
    ("huge_linear", lambda: HugeLinear(), "linear", "block.inner.fc", "inf"),
]


def _shape_for(case: str, x: torch.Tensor) -> torch.Tensor:
    """Attention blocks take (batch, tokens, dims); the others take (batch, dims)."""
    if case == "exp_overflow":
        return x * 30.0
    if case in ("div", "itruediv", "div_"):
        return x - 1.0  # row 0 (constant 1 after pre) becomes all zeros: 0 / 0
    if case in ("log_relu", "log_"):
        return x - 1.0  # row 0 is zero: log(0)
    return x


class Shaped(nn.Module):
    """Applies the case's input transform, then the planted block (so the culprit is the block's op)."""

    def __init__(self, case: str, block: nn.Module) -> None:
        super().__init__()
        self.case, self.inner = case, block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _shape_for(self.case, x)
        if self.case in ("exp_overflow", "all_masked", "attention_ok"):
            return self.inner(x.unsqueeze(0).expand(2, -1, -1).contiguous()).mean(0)
        return self.inner(x)


def _parts(model: nn.Module) -> Any:
    return as_parts({"model": model, "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
                     "loss_fn": nn.MSELoss()})


def _capture(model: nn.Module, batch: Any) -> dict[str, Any]:
    return {"model_state": {k: v.clone() for k, v in model.state_dict().items()}, "optimizer_state": {},
            "batch": batch, "step": 7, "state_is_pre_step": True}


@pytest.mark.parametrize("case, make, op, module, kind", CULPRITS, ids=[c[0] for c in CULPRITS])
def test_first_op_that_creates_a_non_finite_value_is_blamed(case: str, make: Any, op: str, module: str, kind: str) -> None:
    torch.manual_seed(0)
    model = Net(Shaped(case, make()))
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert (result["verdict"], result["pass"], result["op"]) == ("forward", "forward", op), result["summary"]
    assert result["module"] == module
    assert result["created"] is True and result["new"].get(kind, 0) > 0
    where = f"{__file__}:{_line(f'# culprit: {case}')} in forward"
    assert result["op_stack"] and result["op_stack"][-1].startswith(where), result["op_stack"]
    assert where in result["summary"] and ".venv/bin" not in json.dumps(result) and "runpy" not in json.dumps(result)
    assert result["inputs"], "the culprit module's inputs, as they were when it was called"


def test_inplace_culprit_reports_its_input_before_it_was_overwritten() -> None:
    model = Net(Shaped("itruediv", InplaceTrueDiv()))
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert result["module"] == "block.inner" and result["module_type"] == "InplaceTrueDiv"
    assert result["inputs"]["input"]["nan"] == 0 and result["output"]["output"]["nan"] == 4  # row 0: 0/0


def test_mask_written_on_purpose_is_never_blamed() -> None:
    """The same attention without overflow: -inf from masked_fill, exp(-inf) = 0, the replay stays finite."""
    model = Net(Shaped("attention_ok", CausalAttention()))
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert result["verdict"] == "not_reproduced", result["summary"]


def test_layer_norm_of_a_constant_row_creates_nothing() -> None:
    """Every matrix model runs a LayerNorm over a constant row first (variance 0, saved by eps): never blamed."""
    model = Net(nn.Identity())
    x, y = _batch()
    assert torch.isfinite(model.pre(x)).all() and model.pre(x)[0].abs().max() == 0.0
    assert nan_hunt(_parts(model), _capture(model, (x, y)), torch.device("cpu"))["verdict"] == "not_reproduced"


def test_first_nan_is_named_after_the_first_inf() -> None:
    model = Net(Shaped("exp_overflow", CausalAttention()))
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert result["op"] == "exp" and result["first_nan_op"]["op"] == "div"  # inf / inf
    origins = [(o["op"], o["created"], o["produced"]) for o in result["ops"]]
    assert origins[:3] == [("masked_fill", False, "inf"), ("exp", True, "inf"), ("div", True, "nan")]


def test_built_in_module_called_by_a_built_in_module_has_no_source_line() -> None:
    """nn.Sequential -> nn.Linear: no frame of the user's own; the caller of the hunt is never reported."""
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    with torch.no_grad():
        model[0].weight.fill_(1e38)
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert (result["op"], result["module"], result["module_type"], result["aten_op"]) == ("linear", "0", "Linear", "addmm")
    assert result["op_stack"] == [] and " at " not in result["summary"]


class MaskOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.scale).masked_fill(x > 1.5, float("-inf"))  # passed in: mask_only


def test_loss_non_finite_only_from_a_value_written_on_purpose() -> None:
    """No op creates anything: the -inf written by masked_fill itself reaches the loss (MSE: inf)."""
    model = nn.Sequential(OrderedDict(mask=MaskOnly()))
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert (result["verdict"], result["created"], result["op"], result["module"]) == ("forward", False, "masked_fill", "mask")
    assert result["op_stack"][-1].startswith(f"{__file__}:{_line('# passed in: mask_only')}")
    assert "took from its arguments" in result["summary"]


def test_value_written_on_purpose_then_mixed_into_a_matmul() -> None:
    """-inf from the mask meets a Linear: +inf + -inf = NaN is created there; the mask is listed as an origin."""
    model = Net(MaskOnly())
    result = nan_hunt(_parts(model), _capture(model, _batch()), torch.device("cpu"))
    assert (result["op"], result["module"], result["created"]) == ("linear", "head", True) and result["new"]["nan"] > 0
    origins = [(o["op"], o["created"]) for o in result["ops"]]
    assert origins[0] == ("masked_fill", False) and ("linear", True) in origins


# ---- the per-op rule itself, on random tensors with planted NaN and infinities ---------------

class Rule(TorchDispatchMode):
    """Records, for each ATen op run under it, the elements the rule says it created."""

    def __init__(self) -> None:
        super().__init__()
        self.created: list[tuple[str, dict[str, int]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        call = OpCall(func, args, kwargs or {})
        out = func(*args, **(kwargs or {}))
        self.created.append((call.name, call.new_elements([t for t in iter_tensors(out) if t.is_floating_point()])))
        return out


def _planted(data: Any, shape: tuple[int, ...]) -> torch.Tensor:
    values = data.draw(st.lists(st.sampled_from([0.0, 1.5, -2.0, 1e3, math.inf, -math.inf, math.nan]),
                                min_size=math.prod(shape), max_size=math.prod(shape)))
    return torch.tensor(values, dtype=torch.float32).reshape(shape)


CARRIERS = {
    "neg": lambda a, b: -a, "abs": lambda a, b: a.abs(), "clone": lambda a, b: a.clone(),
    "relu": lambda a, b: torch.relu(a), "t": lambda a, b: a.t(), "flip": lambda a, b: a.flip(0),
    "cat": lambda a, b: torch.cat([a, b]), "index": lambda a, b: a[torch.tensor([2, 0, 2])],
    "where": lambda a, b: torch.where(b > 0, a, b), "max": lambda a, b: torch.maximum(a, b),
    "sum_rows": lambda a, b: a.amax(1), "exp_of_non_positive": lambda a, b: torch.exp(-a.abs()),
    "scale": lambda a, b: a * 2.0, "masked_fill_inf": lambda a, b: a.masked_fill(b > 0, -math.inf),
    "inplace_mul": lambda a, b: a.clone().mul_(3.0), "inplace_fill_nan": lambda a, b: a.clone().fill_(math.nan),
}


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(CARRIERS)))
def test_ops_that_only_carry_values_never_create_them(data: Any, name: str) -> None:
    """Whatever NaN/inf the inputs hold, these ops pass them on (or write them from an argument): nothing is new."""
    a, b = _planted(data, (3, 3)), _planted(data, (3, 3))
    with Rule() as rule:
        CARRIERS[name](a, b)
    assert all(not created for _, created in rule.created), rule.created


CREATORS = {
    "exp": lambda a: torch.exp(a * 100.0), "log": lambda a: torch.log(a), "div": lambda a: a / a.round(),
    "sqrt": lambda a: torch.sqrt(a), "pow": lambda a: (a * 1e3) ** 30, "matmul": lambda a: (a * 1e20) @ (a * 1e20),
    "inplace_div": lambda a: a.clone().div_(a.round()), "inplace_log": lambda a: a.clone().log_(),
}


@settings(max_examples=examples(40), deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(CREATORS)))
def test_from_finite_inputs_every_non_finite_element_is_created(data: Any, name: str) -> None:
    """With finite inputs, the op that returns a non-finite element created exactly those elements."""
    a = torch.tensor(data.draw(st.lists(st.floats(-3, 3, width=32), min_size=9, max_size=9))).reshape(3, 3)
    with Rule() as rule:
        out = CREATORS[name](a)
    created = sum(sum(c.values()) for _, c in rule.created)
    assert created >= int((~torch.isfinite(out)).sum())
    last = rule.created[-1][1]
    assert sum(last.values()) == int((~torch.isfinite(out)).sum())


def test_pointwise_rule_is_per_element_after_broadcasting() -> None:
    """exp of a row holding -inf (by design) and one overflowing value: the overflow is new, the mask is not."""
    scores = torch.tensor([[-math.inf, 100.0, 1.0], [-math.inf, -math.inf, 1.0]])
    with Rule() as rule:
        torch.exp(scores)
        scores + torch.tensor([math.inf, 0.0, 0.0])  # column 0: -inf + inf = NaN, created where both were inf
    assert [c for c in rule.created if c[0] in ("exp", "add")] == [("exp", {"inf": 1}), ("add", {"nan": 2})]


@pytest.mark.parametrize("case", ["all_frozen", "detached_output", "loss_without_grad_fn"])
def test_replay_without_a_graph_is_a_verdict_not_a_traceback(case: str) -> None:
    """A finite replay whose loss has no grad_fn cannot reach the backward pass: it says so."""
    parts = as_parts(jobs_factory.untrainable(case))
    x, y = parts.batches[0]
    result = nan_hunt(parts, _capture(parts.model, (x, y)), torch.device("cpu"))
    assert result["verdict"] == "not_reproduced" and "no grad_fn" in result["summary"]

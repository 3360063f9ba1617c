"""A NaN hunt that cannot reproduce says when finite gradients have a float32 norm that overflows.

The demo run lr-too-high is the named case: its recorder saw "non-finite gradients" at step
253, yet every gradient element there is finite (up to 1.6e27); only their float32 norms
overflow. Here a linear model's loss is scaled so that its gradients' norm lies far below or
far above the float32 overflow point (sum of squares past 3.4e38, a norm past ~1.8e19); the
oracle is the float64 norm, computed apart from the hunt.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tuidiag.jobs import Parts
from tuidiag.jobs.nan_hunt import nan_hunt

OVERFLOW_NORM = 1.8e19
"""About sqrt(float32 max): a float32 norm of a tensor whose float64 norm is past this is inf."""


def _parts(scale: float) -> Parts:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.Linear(4, 2))
    return Parts(model, torch.optim.SGD(model.parameters(), lr=0.1), lambda out, y: (out - y).pow(2).mean() * scale)


@pytest.mark.parametrize("scale", [1.0, 1e12, 1e24, 1e30])
def test_overflowing_gradient_norms_are_named(scale: float) -> None:
    parts = _parts(scale)
    gen = torch.Generator().manual_seed(1)
    batch = (torch.randn(8, 6, generator=gen), torch.randn(8, 2, generator=gen))
    capture = {"model_state": {k: v.clone() for k, v in parts.model.state_dict().items()}, "optimizer_state": None,
               "batch": batch, "step": 3, "rank": 0, "state_is_pre_step": True}
    reference = _parts(scale)  # the oracle: float64 norms of the same gradients
    reference.loss(*batch).backward()
    norms = {n: float(p.grad.double().norm()) for n, p in reference.model.named_parameters()}
    assert all(v < OVERFLOW_NORM / 10 or v > OVERFLOW_NORM * 10 for v in norms.values())  # clear of the boundary
    assert all(bool(torch.isfinite(p.grad).all()) for p in reference.model.parameters())
    result = nan_hunt(parts, capture, torch.device("cpu"))
    assert result["verdict"] == "not_reproduced"
    expected = [n for n, v in norms.items() if v > OVERFLOW_NORM]
    assert result.get("overflowing_grad_norms", []) == expected
    assert ("norm overflows to inf" in result["summary"]) == bool(expected)

"""What ``histograms_every`` records: every parameter's weights and gradient, as tensors to summarise.

The tensors go through the same path as a multi-element tensor given to ``log``
(:mod:`tuidiag.recorder.values`): quantiles, mean and non-finite count computed on
their device, so recording them never synchronises with the GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX


def distribution_values(named_params: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``{dist/weight/<name>: tensor, dist/grad/<name>: tensor}`` for each parameter (a gradient only when there is one)."""
    out: dict[str, Any] = {}
    for name, param in named_params:
        out[DIST_WEIGHT_PREFIX + name] = param.detach()
        if param.grad is not None:
            out[DIST_GRAD_PREFIX + name] = param.grad.detach()
    return out

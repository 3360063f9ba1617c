"""What ``histograms_every`` records: every parameter's weights and gradient, as tensors to summarise.

The tensors go through the summary of a multi-element tensor given to ``log``
(:mod:`tuidiag.recorder.values`): quantiles, mean and non-finite count computed on
their device, so recording them never synchronises with the GPU. Every tensor is
summarised, a one-element one included (``dist/weight/<name>/q50``, never a bare
``dist/weight/<name>`` row), and non-finite elements are counted, not refused.
A tensor that cannot be summarised (sparse, complex, meta, empty, quantized, a dtype
no kernel supports, one too large for its device's memory) is returned as rejected,
with why: the recorder counts and reports it (``rejected_value``), the others stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX
from tuidiag.recorder.values import Converted, add_distribution


def distribution_values(named_params: Sequence[tuple[str, Any]], torch: Any) -> Converted:
    """The summary rows of ``dist/weight/<name>`` and ``dist/grad/<name>`` (a gradient only when there is one)
    of each parameter, and the (key, reason) of each tensor that could not be summarised."""
    out = Converted()
    for name, param in named_params:
        for key, read in ((DIST_WEIGHT_PREFIX + name, _weights), (DIST_GRAD_PREFIX + name, _grad)):
            try:
                tensor = read(param)
            except Exception as exc:  # a tensor subclass whose .grad or .detach() raises: the others stay
                out.rejected.append((key, f"could not be read ({type(exc).__name__}: {str(exc)[:200]})"))
                continue
            if tensor is not None:
                add_distribution(out, key, tensor, torch)
    return out


def _weights(param: Any) -> Any:
    return param.detach()


def _grad(param: Any) -> Any:
    grad = param.grad
    return None if grad is None else grad.detach()

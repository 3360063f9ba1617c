"""Moving device values to the host without a host-device synchronisation.

On CUDA a metric vector is copied with ``non_blocking=True`` into pinned host
memory and a CUDA event is recorded after the copy; the *writer thread* waits on
that event, so the training thread never does. On CPU the tensor is already on
the host and is used as is. A multi-element tensor given to ``log`` is reduced to
summary statistics on its device first (:func:`tensor_summary`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from tuidiag.format import SYS_GPU_MEM_UTIL, SYS_GPU_UTIL, SYS_MEM_ALLOCATED, SYS_MEM_PEAK, SYS_MEM_RESERVED


class AsyncHostCopy:
    """A device tensor on its way to host memory; ``resolve()`` returns it as numpy."""

    __slots__ = ("_host", "_event")

    def __init__(self, tensor: torch.Tensor) -> None:
        tensor = tensor.detach()
        if tensor.device.type == "cuda":
            self._host = tensor.to("cpu", non_blocking=True)
            self._event: Any = torch.cuda.Event()
            self._event.record()
        else:
            self._host = tensor
            self._event = None

    def resolve(self) -> np.ndarray:
        """Wait for the copy (writer thread only) and return a float64 array."""
        if self._event is not None:
            self._event.synchronize()
        return self._host.to(torch.float64).numpy()


def norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """L2 norm of each tensor, on its device, in as few kernel launches as possible.

    ``torch._foreach_norm`` is what ``torch.nn.utils.clip_grad_norm_`` itself uses; it
    is not in the public API, so fall back to one ``vector_norm`` per tensor.
    """
    foreach_norm = getattr(torch, "_foreach_norm", None)
    if foreach_norm is not None and tensors:
        try:
            return list(foreach_norm(tensors))
        except (RuntimeError, TypeError):
            pass
    return [torch.linalg.vector_norm(_stored(t)) for t in tensors]


def _stored(tensor: torch.Tensor) -> torch.Tensor:
    """The values a tensor stores: a sparse one's (``nn.Embedding(sparse=True)``'s gradient), whose norm is
    the tensor's and which every norm kernel takes; a dense one as it is."""
    if tensor.layout is torch.strided:
        return tensor
    return tensor.coalesce().values() if tensor.layout is torch.sparse_coo else tensor.values()


def stack_scalars(parts: list[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Gather 0-d (and 1-d) tensors into one float32 vector on ``device``.

    The common case, all parts 0-d on ``device``, is a single ``torch.stack``.
    """
    if not parts:
        return torch.empty(0, device=device)
    try:
        return torch.stack(parts).to(torch.float32)
    except RuntimeError:  # mixed shapes or devices
        pass
    flat = [p.detach().to(device=device, dtype=torch.float32).reshape(-1) for p in parts]
    return torch.cat(flat)


_LEVELS: dict[tuple[torch.device, torch.dtype, tuple[float, ...]], torch.Tensor] = {}
"""Quantile levels already on each device (copied there once, not at every call)."""


def tensor_summary(tensor: torch.Tensor, levels: list[float], max_sample: int) -> torch.Tensor:
    """Quantiles ``levels`` of the finite elements, their mean and the non-finite count.

    One float32 vector on ``tensor``'s device, computed there without a host
    synchronisation: non-finite elements become NaN, a sort puts them last, and the
    quantiles (linear interpolation, as ``numpy.quantile``) are gathered at positions
    computed on the device from the finite count. Quantiles of a tensor with more than
    ``max_sample`` elements come from every k-th element; mean and count from all,
    summed in float64 (float32 on MPS). No finite element: NaN quantiles and mean.
    """
    with torch.no_grad():
        flat = tensor.detach().reshape(-1)
        size = flat.numel()
        work = torch.float32 if flat.device.type == "mps" else torch.float64  # MPS has no float64
        if flat.is_floating_point():
            finite = torch.isfinite(flat)
            count = finite.sum()
            total = torch.where(finite, flat, 0).sum(dtype=work)
        else:
            count = torch.full((), size, dtype=torch.int64, device=flat.device)
            total = flat.sum(dtype=work)
        mean = total / count
        sample = flat[:: max(1, -(-size // max_sample))].to(work)
        sample = torch.where(torch.isfinite(sample), sample, math.nan)
        ordered = torch.sort(sample).values  # NaN last
        usable = torch.isfinite(ordered).sum()
        key = (flat.device, work, tuple(levels))
        at = _LEVELS.get(key)
        if at is None:
            at = _LEVELS[key] = torch.tensor(levels, dtype=work, device=flat.device)
        position = at * (usable - 1).clamp(min=0)
        low, high = position.floor().long(), position.ceil().long()
        weight = position - low
        quantiles = ordered.gather(0, low) * (1 - weight) + ordered.gather(0, high) * weight
        return torch.cat([quantiles.float(), mean.reshape(1).float(), (size - count).reshape(1).float()])


def memory_stats(device: torch.device | None) -> dict[str, float]:
    """Allocator counters (host-side, no synchronisation) for a CUDA device, else ``{}``."""
    if device is None or device.type != "cuda" or not torch.cuda.is_available():
        return {}
    return {
        SYS_MEM_ALLOCATED: float(torch.cuda.memory_allocated(device)),
        SYS_MEM_RESERVED: float(torch.cuda.memory_reserved(device)),
        SYS_MEM_PEAK: float(torch.cuda.max_memory_allocated(device)),
    }


class NvmlProbe:
    """GPU utilisation through NVML when ``pynvml`` is installed; silent otherwise."""

    def __init__(self, device: torch.device | None) -> None:
        self._handle: Any = None
        if device is None or device.type != "cuda":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            index = device.index if device.index is not None else torch.cuda.current_device()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
        except Exception:
            self._handle = None

    def sample(self) -> dict[str, float]:
        """Current GPU and memory-controller utilisation in percent, or ``{}``."""
        if self._handle is None:
            return {}
        try:
            util = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
        except Exception:
            return {}
        return {SYS_GPU_UTIL: float(util.gpu), SYS_GPU_MEM_UTIL: float(util.memory)}

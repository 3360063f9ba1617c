"""What ``Recorder.log`` and ``Recorder.step`` accept: user values turned into rows, text or a rejection.

The rule (README "Logging values", docs/guarantees.md "Logging values"):

- a number (``int``, ``float``, ``bool``, numpy scalar, ``Decimal``, anything with
  ``__float__``): one row; NaN and infinities are kept; ``bool`` is 0/1; an int
  beyond 2**63 becomes the nearest float, one beyond float64's range is rejected;
- a one-element tensor or array (0-d included): one row; tensors stay on their
  device and reach the host through the asynchronous copy;
- a multi-element real tensor, numpy array, list or tuple: summary rows
  ``name/q0 ... name/q100`` (quantiles of its finite elements), ``name/mean`` and
  ``name/nonfinite`` (see :data:`tuidiag.format.SUMMARY_QUANTILES`);
- a nested mapping: flattened with ``/`` (``{"val": {"loss": 1}}`` is ``val/loss``);
- a ``str``: a ``text`` event (``data.key`` names it), cut at :data:`MAX_TEXT` characters;
- ``None``: skipped, silently (a metric not computed this time);
- anything else is rejected with a reason: complex numbers, empty tensors or
  arrays, non-numeric arrays, sparse, quantized, nested or meta tensors, bytes,
  objects that are not numbers, mappings nested deeper than :data:`MAX_DEPTH`.

Checks look only at types, dtypes, shapes and devices: nothing here waits for a
device. Nothing a caller gets back from :func:`convert` can make the writer fail:
each device part has exactly as many elements as it has names.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tuidiag.format import SUMMARY_QUANTILES, SUMMARY_SUFFIXES

_PLAIN = frozenset([float, int, bool, str, type(None)])
"""Types that are never mappings (checked before the slower ``isinstance(value, Mapping)``)."""
MAX_DEPTH = 16
"""Nesting levels of mappings flattened by ``log``; deeper ones are rejected (and cycles end)."""
MAX_TEXT = 65_536
"""Characters of a logged string kept in its ``text`` event."""
QUANTILE_SAMPLE = 1 << 16
"""Elements the quantiles of a larger tensor or array are computed from: every k-th element,
k = ceil(size / QUANTILE_SAMPLE), so the cost is bounded and the result deterministic.
Mean and non-finite count always cover every element."""


@dataclass
class Rejected:
    """Why a value was not recorded."""

    reason: str


class Converted:
    """The rows, texts and rejections that one ``log`` call turns into.

    ``dev_values`` are device tensors that together hold exactly ``len(dev_names)``
    elements, in order; ``rejected`` holds (key, reason) of each value not recorded.
    """

    __slots__ = ("host_names", "host_values", "dev_names", "dev_values", "texts", "rejected")

    def __init__(self) -> None:
        self.host_names: list[str] = []
        self.host_values: list[float] = []
        self.dev_names: list[str] = []
        self.dev_values: list[Any] = []
        self.texts: list[tuple[str, str]] = []
        self.rejected: list[tuple[str, str]] = []


def convert(metrics: Any, torch: Any) -> Converted:
    """Sort the values of a ``log`` call into host rows, device rows, texts and rejections.

    ``torch`` is the torch module, or ``None`` when it is not installed.
    """
    out = Converted()
    if not isinstance(metrics, Mapping):
        out.rejected.append(("<metrics>", f"is of type {_type(metrics)}; log() takes a mapping of name -> value"))
        return out
    for key, value in flatten(metrics):
        kind = type(value)
        if kind is float or kind is int:  # the common case first: a few hundred ns per value
            try:
                out.host_values.append(float(value))
                out.host_names.append(key)
                continue
            except OverflowError:
                pass
        if value is None:
            continue
        if isinstance(value, Rejected):
            out.rejected.append((key, value.reason))
        elif isinstance(value, str):
            out.texts.append((key, value[:MAX_TEXT]))
        elif torch is not None and isinstance(value, torch.Tensor):
            _add_tensor(out, key, value)
        elif isinstance(value, (np.ndarray, list, tuple)) or (hasattr(value, "__array__") and not isinstance(value, np.generic)):
            _add_array(out, key, value)
        else:
            number = as_number(value)
            if isinstance(number, Rejected):
                out.rejected.append((key, number.reason))
            else:
                out.host_names.append(key)
                out.host_values.append(number)
    return out


def leaves(metrics: Any) -> int:
    """How many values a ``log`` call holds (``None`` not counted): what a refused call rejects."""
    if not isinstance(metrics, Mapping):
        return 1
    return sum(value is not None for _, value in flatten(metrics))


def flatten(metrics: Mapping[Any, Any], prefix: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """``(name, value)`` of every leaf, nested names joined with ``/``; a value that cannot be
    recorded under its name (too deep, a key with no text, a name UTF-8 cannot store): a :class:`Rejected`."""
    try:
        for key, value in metrics.items():
            if type(key) is str:
                name = prefix + key if prefix else key
            else:
                text = _key_text(key)
                if text is None:
                    if value is not None:
                        yield prefix + f"<key of type {_type(key)}>", Rejected("has a key that cannot be shown as text (its str() raised)")
                    continue
                name = prefix + text
            if value is None:
                yield name, None
            elif not name.isascii() and not storable_name(name) and not isinstance(value, Mapping):
                yield name, Rejected("has a name that is not valid Unicode text (a lone surrogate): stored, it would read back as another name")
            elif type(value) in _PLAIN:
                yield name, value
            elif isinstance(value, Mapping):
                if depth + 1 >= MAX_DEPTH:
                    yield name, Rejected(f"is nested deeper than {MAX_DEPTH} levels (or is a mapping that contains itself)")
                else:
                    yield from flatten(value, name + "/", depth + 1)
            else:
                yield name, value
    except Exception as exc:  # a mapping whose items() raises: the leaves already read stay recorded
        yield (prefix.rstrip("/") or "<metrics>"), Rejected(f"is a mapping that could not be read to the end ({type(exc).__name__})")


def storable_name(name: str) -> bool:
    """Whether ``name`` can be written as UTF-8 as it is (no lone surrogates). A name that
    cannot would be stored altered (``"a\\ud800"`` as ``"a?"``) and read back as another name."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _key_text(key: Any) -> str | None:
    try:
        text = str(key)
        return text if type(text) is str else str.__str__(text)
    except Exception:  # a __str__ that raises or returns something else
        return None


def one_number(value: Any, torch: Any) -> float | Any | Rejected:
    """A value that must be one number (``step``'s loss): a float, a 0-d device tensor or a rejection."""
    if type(value) is float:
        return value
    if torch is not None and isinstance(value, torch.Tensor):
        found = _tensor_problem(value, torch)
        problem = _advised(found) if found is not None else None
        if problem is None and value.numel() != 1:
            problem = f"is a tensor of shape {tuple(value.shape)}, not one number (reduce it first, e.g. .mean())"
        if problem:
            return Rejected(problem)
        return value.detach() if value.dim() == 0 else value.detach().reshape(())
    if isinstance(value, (str, bytes, bytearray)):
        return Rejected(f"is of type {_type(value)}, not a number")
    if isinstance(value, (np.ndarray, list, tuple)):
        array = _as_array(value)
        if isinstance(array, Rejected):
            return array
        if array.size != 1:
            return Rejected(f"is an array of shape {array.shape}, not one number")
        return float(array.reshape(-1)[0])
    return as_number(value)


def as_number(value: Any) -> float | Rejected:
    """``float(value)`` for a real number; a :class:`Rejected` saying why not otherwise."""
    if isinstance(value, (bool, np.bool_)):
        return float(value)
    if isinstance(value, (complex, np.complexfloating)):
        return Rejected("is a complex number (log its .real and .imag, or abs(), instead)")
    if isinstance(value, np.generic) and value.dtype.kind not in "biuf":
        return Rejected(f"is a numpy {value.dtype} scalar, not a number")
    if isinstance(value, (str, bytes, bytearray)):
        return Rejected(f"is of type {_type(value)}, not a number")
    try:
        return float(value)
    except OverflowError:
        return Rejected("is an integer too large for a 64-bit float")
    except Exception as exc:  # __float__ of user objects may raise anything
        return Rejected(f"is of type {_type(value)}, not a number ({type(exc).__name__})")


def array_summary(array: np.ndarray) -> list[float]:
    """Quantiles of the finite elements, their mean and the non-finite count (``SUMMARY_SUFFIXES`` order)."""
    flat = array.reshape(-1)
    if flat.dtype.kind == "f":
        finite = np.isfinite(flat)
        count = int(finite.sum())
        mean = float(np.mean(flat[finite], dtype=np.float64)) if count else math.nan
        sample = flat[:: sample_stride(flat.size)].astype(np.float64)
        sample = sample[np.isfinite(sample)]
    else:
        count = flat.size
        mean = float(np.mean(flat, dtype=np.float64))
        sample = flat[:: sample_stride(flat.size)].astype(np.float64)
    levels = list(SUMMARY_QUANTILES.values())
    quantiles = np.quantile(sample, levels).tolist() if sample.size else [math.nan] * len(levels)
    return [*quantiles, mean, float(flat.size - count)]


def sample_stride(size: int) -> int:
    """Step between the elements the quantiles are computed from (1 up to ``QUANTILE_SAMPLE``)."""
    return max(1, -(-size // QUANTILE_SAMPLE))


def summary_names(key: str) -> list[str]:
    """The row names of a summarised tensor or array logged as ``key``."""
    return [f"{key}/{suffix}" for suffix in SUMMARY_SUFFIXES]


def _add_tensor(out: Converted, key: str, tensor: Any) -> None:
    import torch

    problem = _tensor_problem(tensor, torch)
    if problem is not None:
        out.rejected.append((key, _advised(problem)))
        return
    if tensor.numel() == 1:
        out.dev_names.append(key)
        out.dev_values.append(tensor.detach() if tensor.dim() == 0 else tensor.detach().reshape(()))
        return
    _add_summary(out, key, tensor)


def add_distribution(out: Converted, key: str, tensor: Any, torch: Any) -> None:
    """``histograms_every``'s summary rows of one parameter's weights or gradient (``key``): always the
    summary, a one-element tensor's included; a tensor that cannot be summarised goes to ``out.rejected``
    with why (no advice to log it otherwise: the user did not log it)."""
    problem = _tensor_problem(tensor, torch)
    if problem is not None:
        out.rejected.append((key, problem[0]))
        return
    _add_summary(out, key, tensor)


def _add_summary(out: Converted, key: str, tensor: Any) -> None:
    """The summary rows of a multi-element tensor, computed on its device; why not, should that fail."""
    from tuidiag.recorder.device import tensor_summary

    try:
        summary = tensor_summary(tensor, list(SUMMARY_QUANTILES.values()), QUANTILE_SAMPLE)
    except Exception as exc:  # a dtype no kernel supports, a device error, a tensor too large for the device's memory
        out.rejected.append((key, f"could not be summarised ({type(exc).__name__}: {str(exc)[:200]})"))
        return
    out.dev_names.extend(summary_names(key))
    out.dev_values.append(summary)


def _tensor_problem(tensor: Any, torch: Any) -> tuple[str, str] | None:
    """Why a tensor cannot be recorded, from its metadata only (cheapest checks first): (what it is, what to
    log instead, or ""); ``None`` when it can."""
    if tensor.is_nested:
        return "is a nested tensor", "log its parts"
    if tensor.layout is not torch.strided:
        return f"is a {str(tensor.layout).replace('torch.', '')} tensor", "log .to_dense()"
    if tensor.is_quantized:
        return "is a quantized tensor", "log .dequantize()"
    if tensor.dtype.is_complex:
        return f"is a complex tensor ({str(tensor.dtype).replace('torch.', '')})", "log .real and .imag, or .abs()"
    if tensor.is_meta:
        return "is a meta tensor (it holds no values)", ""
    if tensor.numel() == 0:
        return f"is an empty tensor (shape {tuple(tensor.shape)}), it holds no value", ""
    return None


def _advised(problem: tuple[str, str]) -> str:
    """A tensor problem as the reason ``log``'s caller reads: what it is, then what to log instead."""
    what, instead = problem
    if not instead:
        return what
    if what.endswith(")"):  # "is a complex tensor (complex64)" -> "... (complex64; log .real ...)"
        return f"{what[:-1]}; {instead})"
    return f"{what} ({instead})"


def _add_array(out: Converted, key: str, value: Any) -> None:
    array = _as_array(value)
    if isinstance(array, Rejected):
        out.rejected.append((key, array.reason))
    elif array.size == 1:
        out.host_names.append(key)
        out.host_values.append(float(array.reshape(-1)[0]))
    else:
        out.host_names.extend(summary_names(key))
        out.host_values.extend(array_summary(array))


def _as_array(value: Any) -> np.ndarray | Rejected:
    """A numeric, non-empty numpy array of ``value``, or why there is none."""
    try:
        array = np.asarray(value)
    except Exception as exc:  # ragged lists, device tensors inside a list
        return Rejected(f"is of type {_type(value)}, which numpy cannot read as an array ({type(exc).__name__})")
    if array.dtype.kind == "c":
        return Rejected(f"is a complex array ({array.dtype}; log its .real and .imag, or abs())")
    if array.dtype.kind not in "biuf":
        return Rejected(f"is an array of {array.dtype}, not of numbers")
    if array.size == 0:
        return Rejected(f"is an empty array (shape {array.shape}), it holds no value")
    return array


def _type(value: Any) -> str:
    return type(value).__name__

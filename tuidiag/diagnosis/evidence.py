"""Evidence lines that carry the claims they make, so that each can be checked against the run.

An evidence line is an :class:`Evidence`: a ``str`` (what the user reads, and what the JSON
contract holds) that also carries structured claims about the run's series. A
:class:`Measure` is one statistic of one metric over a named window of steps; the
claims relate measures: a level (:class:`Level`), a change between two disjoint windows
(:class:`Change`), a comparison of two measures (:class:`Compare`), the steps where
something happened (:class:`Occurrences`), replicas that disagree (:class:`Disagreement`),
spikes at a fixed period (:class:`Periodic`) and facts of the manifest or the events
(:class:`Fact`).

Rules build measures from the very arrays they judge (:func:`measure`), so the numbers
they print are the numbers they computed, and a test (``tests/test_evidence_truth.py``)
recomputes every claim from the raw run and checks the text's numbers, windows and
direction words against it. The meaning of each statistic is fixed here:

- ``median``, ``mean``: over the finite values in the window (NaN when none); medians of
  windows beyond 100,000 values use an evenly strided sample
- ``min``, ``max``: over the values that are not NaN (an inf counts; NaN when none); ``max_finite``: the largest finite value
- ``first``, ``last``: the value at the window's first or last recorded step
- ``count``: how many values the window holds; ``nonfinite``: how many of them are NaN or inf
- ``share_above`` / ``share_equal`` (``arg``): the share of the window's values above / equal to ``arg``
- ``typical_change``: the median of ``|v[i] / v[i-1] - 1|`` over consecutive positive finite values
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from tuidiag.diagnosis.stats import finite, median

STATS = ("median", "mean", "min", "max", "max_finite", "first", "last", "count", "nonfinite", "share_above", "share_equal",
         "typical_change")

Rank = Union[int, tuple[int, ...], None]


def _typical_change(values: np.ndarray) -> float:
    good = values[np.isfinite(values) & (values > 0)]
    return median(np.abs(good[1:] / good[:-1] - 1)) if len(good) >= 2 else float("nan")


def stat_of(values: np.ndarray, stat: str, arg: float | None = None) -> float:
    """The statistic ``stat`` (see the module docstring) of the values of one window."""
    values = np.asarray(values, dtype=float)
    if stat in ("first", "last"):
        return float(values[0 if stat == "first" else -1]) if len(values) else float("nan")
    if stat == "count":
        return float(len(values))
    if stat == "nonfinite":
        return float((~np.isfinite(values)).sum())
    if stat in ("share_above", "share_equal"):
        if not len(values) or arg is None:
            return float("nan")
        return float((values > arg).mean() if stat == "share_above" else (values == arg).mean())
    if stat == "typical_change":
        return _typical_change(values)
    if stat == "median":
        return median(values)
    good = finite(values) if stat in ("mean", "max_finite") else values[~np.isnan(values)]
    if not len(good):
        return float("nan")
    return float({"mean": np.mean, "min": np.min, "max": np.max, "max_finite": np.max}[stat](good))


def where(first: int, last: int) -> str:
    """How a line names a window: ``step 5`` or ``steps 0-9``."""
    return f"step {first}" if first == last else f"steps {first}-{last}"


@dataclass(frozen=True)
class Measure:
    """One statistic of ``metric`` over steps ``first..last``.

    ``metric`` may be a tuple of names and ``rank`` a tuple of ranks (their values pooled);
    ``rank`` ``None`` reads the lowest rank that recorded the metric.
    """

    metric: str | tuple[str, ...]
    first: int
    last: int
    stat: str
    value: float
    arg: float | None = None
    rank: Rank = None

    @property
    def where(self) -> str:
        """The window as the line names it."""
        return where(self.first, self.last)


def measure(metric: str | tuple[str, ...], steps: np.ndarray, values: np.ndarray, stat: str, arg: float | None = None,
            rank: Rank = None) -> Measure:
    """``stat`` of ``values``, the values ``metric`` recorded at ``steps`` (every value of a contiguous window)."""
    if stat not in STATS:
        raise ValueError(f"unknown statistic {stat!r}")
    if not len(steps):
        raise ValueError(f"empty window for {metric!r}")
    return Measure(metric, int(steps[0]), int(steps[-1]), stat, stat_of(values, stat, arg), arg, rank)


def at_step(metric: str, steps: np.ndarray, values: np.ndarray, i: int, rank: Rank = None) -> Measure:
    """The value ``metric`` recorded at index ``i`` (a one-step window)."""
    return measure(metric, steps[i : i + 1], values[i : i + 1], "last", rank=rank)


@dataclass(frozen=True)
class Level:
    """The line states ``m``; with ``above``/``below`` it also implies the value is beyond that bound, with ``equal`` exactly that."""

    m: Measure
    above: float | None = None
    below: float | None = None
    equal: float | None = None


@dataclass(frozen=True)
class Change:
    """``after`` against ``before``, two windows of one metric, ``before`` ending before ``after`` starts.

    ``says`` is the direction the line's words give (``down``, ``up``; ``flat`` with
    ``within``, the largest relative change it may hide; ``""`` for none).
    """

    before: Measure
    after: Measure
    says: str
    within: float | None = None

    @property
    def relative(self) -> float:
        """``after / before - 1`` (NaN when ``before`` is 0)."""
        return self.after.value / self.before.value - 1 if self.before.value else float("nan")


@dataclass(frozen=True)
class Fact:
    """A fact outside the series: ``source`` ``manifest`` (``key`` a dotted path, ``value`` its value)
    or ``event`` (``key`` the event kind, ``value`` its step and the names its data lists)."""

    source: str
    key: str
    value: Any


@dataclass(frozen=True)
class Product:
    """The product of numeric ``factors`` (a samples-seen count: batch size times steps)."""

    factors: tuple[Measure | Fact, ...]


Operand = Union[Measure, Fact, Product]


@dataclass(frozen=True)
class Compare:
    """Two quantities side by side (a ratio, a share, a difference, orders of magnitude).

    ``says``: ``above`` (a > b), ``below`` (a < b) or ``""``.
    """

    a: Operand
    b: Operand
    says: str = ""


@dataclass(frozen=True)
class Occurrences:
    """Steps in ``first..last`` where any of ``metrics`` is ``predicate``.

    Predicates: ``nonfinite``, ``positive``, ``above`` / ``below`` ``arg``.

    ``steps``: the first occurrences, in order (all that the line lists); ``total``:
    how many there are in the window (``None``: the line does not say).
    """

    metrics: tuple[str, ...]
    first: int
    last: int
    predicate: str
    steps: tuple[int, ...]
    total: int | None
    arg: float | None = None
    rank: int | None = None


@dataclass(frozen=True)
class Disagreement:
    """Replicas of ``metric`` disagree beyond ``tolerance`` (relative): first at step ``since``, by ``gap`` at step ``at``.

    ``since`` is ``None`` when the line says they agree.
    """

    metric: str
    since: int | None
    at: int | None
    gap: float
    tolerance: float


@dataclass(frozen=True)
class Periodic:
    """The listed ``steps`` recur every ``every`` steps (gaps within 10% of each other)."""

    steps: tuple[int, ...]
    every: int


Claim = Union[Level, Change, Compare, Occurrences, Disagreement, Periodic, Fact]


class Evidence(str):
    """An evidence line: its text, the claims it makes (``claims``) and reference numbers that are not data (``refs``)."""

    claims: tuple[Claim, ...]
    refs: tuple[float, ...]

    def __new__(cls, text: str, *claims: Claim, refs: tuple[float, ...] = ()) -> Evidence:
        """A line saying ``text``, backed by ``claims``; ``refs`` are the thresholds or healthy ranges it quotes."""
        line = super().__new__(cls, text)
        line.claims = tuple(claims)
        line.refs = tuple(float(r) for r in refs)
        return line

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (str(self), self.claims, self.refs))


def _rebuild(text: str, claims: tuple[Claim, ...], refs: tuple[float, ...]) -> Evidence:
    return Evidence(text, *claims, refs=refs)


def quoted(name: str) -> str:
    """A name from the run (metric, parameter, layer) as lines quote it, so it never reads as a number.

    Written as a Python string literal in single quotes: a control character, a bidi
    control or a lone surrogate shows as its escape (``'a\\x00'``), never raw and never
    replaced, so two distinct names are always quoted differently."""
    text = repr(str(name))
    if text[0] == '"':  # repr chose double quotes: the name holds a ' and no "
        text = "'" + text[1:-1].replace("'", "\\'") + "'"
    return text


def signed_percent(fraction: float, digits: int = 0) -> str:
    """``+12%`` / ``-0.5%``: a relative change with its sign (``0%`` without one)."""
    text = f"{fraction:+.{digits}%}"
    return text[1:] if float(text[1:-1]) == 0 else text


def change_words(change: Change, noun: str = "") -> str:
    """``fell 12%`` / ``rose 30%`` / ``changed 0%``: the verb matches the sign, the number carries none."""
    pct = abs(change.relative)
    lead = noun + " " if noun else ""
    if not change.says or not pct > 0 or not math.isfinite(pct):
        return f"{lead}changed {pct:.0%}" if math.isfinite(pct) else f"{lead}changed"
    verb = "fell" if change.says == "down" else "rose"
    # two significant digits below 10%: a small change never reads as "rose 0.0%"
    digits = 0 if pct >= 0.1 else min(8, 1 - math.floor(math.log10(pct * 100)))
    if verb == "fell" and 0.995 <= pct < 1:  # a loss that fell 99.98% did not reach zero: never "fell 100%"
        digits = min(8, max(1, -math.floor(math.log10((1 - pct) * 100))))
        return f"{lead}{verb} {pct:.{digits}%}"
    return f"{lead}{verb} {pct:.{max(digits, 1) if pct < 0.1 else 0}%}"


def direction(before: float, after: float) -> str:
    """``down``, ``up`` or ``""`` (equal or not comparable): the word a change of ``before`` to ``after`` earns."""
    if not (np.isfinite(before) and np.isfinite(after)) or before == after:
        return ""
    return "down" if after < before else "up"

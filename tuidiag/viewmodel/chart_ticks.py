"""Which values a chart axis ticks, and what their labels say.

Ticks sit on round values people read at a glance: multiples of 1, 2 or 5 times
a power of ten on a linear axis, whole steps (``0 250 500``, ``250k``, ``1.5M``)
on the step axis, decades (``1e-3 1e-2 0.1 1``, or 1-2-5 within one decade) on a
log axis, and round durations (``0s 5m 10m``) on a wall-clock axis. Every function
returns tick values inside [lo, hi], increasing; callers place them on screen.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

from tuidiag.text.numbers import duration, fmt

MANTISSAS = (1.0, 2.0, 2.5, 5.0)
"""Round tick spacings within a decade: 1, 2, 2.5, 5, 10, 20, 25, 50, ..."""
LOG_MANTISSAS = ((1.0, 2.0, 5.0), tuple(float(m) for m in range(1, 10)))
"""Ticks on a log axis that spans less than two decades: 1-2-5, then every digit."""
DECADE_STRIDES = (1, 2, 3, 5, 10, 20, 30, 50, 100)
"""A log axis spanning many decades ticks every n-th one."""
DURATIONS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800)
"""Round spans of time, in seconds, for a wall-clock axis (then multiples of a week)."""
EXACT_INTEGERS = 2.0**53
"""Beyond this, floats skip integers: the step axis falls back to linear ticks."""


def nice_steps(rough: float) -> list[float]:
    """Candidate tick spacings of the form 1, 2, 2.5 or 5 x 10^k around ``rough`` (> 0), smallest first."""
    exponent = math.floor(math.log10(rough))
    return [m * 10.0**e for e in (exponent - 1, exponent, exponent + 1) for m in MANTISSAS]


def _multiples(lo: float, hi: float, step: float) -> list[float]:
    """Multiples of ``step`` inside [lo, hi], increasing, without repeats (float error filtered)."""
    first, last = math.ceil(lo / step), math.floor(hi / step)
    if not (math.isfinite(first) and math.isfinite(last)) or last - first > 1000:
        return []
    return sorted({v for v in (k * step for k in range(int(first), int(last) + 1)) if lo <= v <= hi})


def _most_within(lo: float, hi: float, spacings: list[float], count: int, whole: bool = False) -> list[float]:
    """The multiples of the first spacing (smallest first) that gives 2..``count`` ticks in [lo, hi]."""
    for step in spacings:
        if whole and not step.is_integer():
            continue
        values = _multiples(lo, hi, step)
        if 2 <= len(values) <= count:
            return values
    return []


def linear_ticks(lo: float, hi: float, count: int) -> list[float]:
    """2 to ``count`` (at least 2) round values inside [lo, hi]; [] when none fit (a flat, overflowing,
    subnormal or awkward range: the caller spaces ticks evenly instead)."""
    span = hi - lo
    if not (hi > lo and math.isfinite(span) and span / max(2, count) >= sys.float_info.min):
        return []
    return _most_within(lo, hi, nice_steps(span / max(2, count)), max(2, count))


def integer_ticks(lo: float, hi: float, count: int) -> list[float]:
    """Whole-number ticks inside [lo, hi] (steps): every integer when few fit, else round multiples;
    [] when the range holds no integer or floats no longer hold every integer there."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) >= EXACT_INTEGERS:
        return []
    first, last = math.ceil(lo), math.floor(hi)
    if last < first:
        return []
    count = max(2, count)
    if last - first + 1 <= count:
        return [float(v) for v in range(first, last + 1)]
    values = _most_within(float(first), float(last), nice_steps((last - first) / count), count, whole=True)
    return values or [float(first), float(last)]


def log_ticks(lo: float, hi: float, count: int) -> list[float]:
    """Ticks on an axis of log10 values, as log10 values: whole decades when two or more fit (every
    2nd, 3rd, 5th, 10th... when many), else 1-2-5 (then 1..9) times a power of ten; [] when none fit."""
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        return []
    count = max(2, count)
    decades = list(range(math.ceil(lo), math.floor(hi) + 1))
    if len(decades) >= 2:
        for stride in DECADE_STRIDES + (math.ceil(len(decades) / count),):
            picked = [float(d) for d in decades if d % stride == 0]
            if 2 <= len(picked) <= count:
                return picked
        return [float(decades[0]), float(decades[-1])]
    for mantissas in LOG_MANTISSAS:
        values = [math.log10(m) + e for e in range(math.floor(lo), math.ceil(hi) + 1) for m in mantissas]
        inside = [v for v in values if lo <= v <= hi]
        if 2 <= len(inside) <= count:
            return inside
    return []


def duration_ticks(lo: float, hi: float, count: int) -> list[float]:
    """Round durations (seconds) inside [lo, hi]: 1s, 5s, 15s, 1m, 5m, 30m, 1h, 6h, 1d, 1w and multiples
    of a week; below a second per tick, round decimal fractions of a second."""
    span = hi - lo
    if not (hi > lo and math.isfinite(span)):
        return []
    count = max(2, count)
    if span / count < 1:
        return linear_ticks(lo, hi, count)
    week = float(DURATIONS[-1])
    weeks = [week * m for m in nice_steps(max(1.0, span / count / week)) if m >= 1]
    return _most_within(lo, hi, sorted({float(d) for d in DURATIONS} | set(weeks)), count)


def step_label(value: float) -> str:
    """A step for an axis, always exact: plain below 100000, then ``250k`` or ``1.5M`` when that is
    exact and shorter; ``fmt`` only for what is not a whole step a float holds exactly."""
    if not math.isfinite(value) or not float(value).is_integer() or abs(value) >= EXACT_INTEGERS:
        return fmt(value)
    whole = int(value)
    plain = str(whole)
    if abs(whole) < 100_000:
        return plain
    size, suffix = (10**6, "M") if abs(whole) >= 10**6 else (10**3, "k")
    for digits in range(4):
        text = f"{whole / size:.{digits}f}"
        if len(text) + 1 < len(plain) and Fraction(text) * size == whole:
            return text + suffix
    return plain


def time_label(seconds: float) -> str:
    """One wall-clock value alone (a flat axis): the elapsed time since the run's first step (``12m``)."""
    return duration(seconds)


CLOCK_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def duration_labels(values: list[float]) -> tuple[str, ...]:
    """Labels of wall-clock ticks, exact and apart: down to the finest unit the ticks need
    (``0m 30m 1h00m``, ``1h00m01s 1h00m02s``, ``0.2s 0.4s``)."""
    spacing = min((b - a for a, b in zip(values, values[1:])), default=1.0)
    decimals = 0
    while decimals < 9 and any(abs(round(v, decimals) - v) > 1e-6 * spacing for v in values):
        decimals += 1
    finest = 1
    if not decimals:
        for _, size in CLOCK_UNITS[:-1][::-1]:  # minutes, hours, days: the coarsest unit every tick is a multiple of
            if all(round(v) % size == 0 for v in values):
                finest = size
    return tuple(_clock(v, finest, decimals) for v in values)


def _clock(value: float, finest: int, decimals: int) -> str:
    """``value`` seconds in units from the largest it reaches down to ``finest``; later units padded."""
    rest = round(abs(value), decimals)
    parts: list[str] = []
    for name, size in CLOCK_UNITS:
        if size < finest:
            break
        if size == 1:
            amount = f"{rest:0{(3 + decimals) if decimals else 2}.{decimals}f}" if parts else f"{rest:.{decimals}f}"
            parts.append(amount + name)
            break
        count, rest = int(rest // size), round(rest - (rest // size) * size, decimals)
        if parts:
            parts.append(f"{count:02d}{name}")
        elif count or size == finest:
            parts.append(f"{count}{name}")
    return ("-" if value < 0 else "") + "".join(parts)

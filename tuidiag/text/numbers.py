"""Numbers written for people: the one format evidence lines, widgets, the report and the CLI share.

No numpy here: ``tuidiag status`` (a tmux status line, once a second) formats with these and stays
free of numpy and pyarrow imports; numpy scalars are numbers to :mod:`math` as well.
"""

from __future__ import annotations

import math


def fmt(value: float) -> str:
    """A number for evidence text: 3 significant digits, scientific when tiny or huge."""
    if not math.isfinite(value):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.3g}"
    return f"{value:.2e}"


def confidence(share: float) -> str:
    """A finding's confidence as a whole percentage; one that would round to 0% or 100% reads ``<1%`` / ``>99%``,
    so a finding listed as possible never reads as impossible, or a likely one as certain."""
    if not math.isfinite(share):
        return str(share)
    text = f"{share:.0%}"
    return "<1%" if text in ("0%", "-0%") or share < 0 else ">99%" if text == "100%" else text


def duration(seconds: float) -> str:
    """A span of time in at most two units, the larger first: ``45s``, ``12m``, ``1h05m``, ``2d03h``.

    Sub-second and fractional second spans keep 3 significant digits (``0.25s``)."""
    if not math.isfinite(seconds):
        return str(seconds)
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < 60:
        return f"{fmt(seconds)}s"
    whole = int(round(seconds))
    for big, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if whole >= size:
            count, rest = divmod(whole, size)
            rest //= small_size
            return f"{count}{big}" + (f"{rest:02d}{small}" if rest else "")
    return f"{whole}s"  # not reached: whole >= 60 here

"""Reading a chart's labels back: the number a tick label stands for."""

from __future__ import annotations

from fractions import Fraction

UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
SUFFIXES = {"G": 1e9, "M": 1e6, "k": 1e3}


def label_value(label: str) -> float:
    """``250k`` -> 250000, ``1.5M`` -> 1500000, ``1h05m`` -> 3900, ``0.25s`` -> 0.25, ``1e-3`` -> 0.001."""
    text = label.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.removeprefix("-")
    if text[-1:] in SUFFIXES:  # exact: 266650.83M is 266650830000, not ...0.00003
        return sign * float(Fraction(text[:-1]) * int(SUFFIXES[text[-1]]))
    if text[-1:] in UNITS:
        total, number = 0.0, ""
        for ch in text:
            if ch in UNITS:
                total, number = total + float(number) * UNITS[ch], ""
            else:
                number += ch
        return sign * total
    return sign * float(text)

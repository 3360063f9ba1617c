"""Numbers written for people: the one format evidence lines, widgets, the report and the CLI share."""

from __future__ import annotations

import numpy as np

def fmt(value: float) -> str:
    """A number for evidence text: 3 significant digits, scientific when tiny or huge."""
    if not np.isfinite(value):
        return str(value)
    if value == 0 or 1e-3 <= abs(value) < 1e5:
        return f"{value:.3g}"
    return f"{value:.2e}"

"""Numbers behind the plots and the checklist: smoothing, windows, per-layer medians.

Pure numpy/pandas over :class:`~tuidiag.diagnosis.view.RunView` series; no plotting here.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.stats import median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_PREFIX

Curve = tuple[np.ndarray, np.ndarray]


def smoothing_window(n: int) -> int:
    """Moving-average window for a series of ``n`` points: about 3% of it, at least 5, odd."""
    window = max(5, n // 30)
    return window + 1 if window % 2 == 0 else window


def moving_average(values: np.ndarray, window: int, log: bool = False) -> np.ndarray:
    """Trailing moving average of finite ``values`` (same length); geometric when ``log``.

    Trailing, so a late blow-up never bends the curve before it happened; geometric on
    log axes, so one huge value does not dominate its window.
    """
    import pandas as pd

    data = np.log(values) if log else values
    smooth = pd.Series(data, dtype=float).rolling(window, min_periods=1).mean().to_numpy()
    return np.exp(smooth) if log else smooth


def finite_part(steps: np.ndarray, values: np.ndarray) -> Curve:
    """The points whose value is finite."""
    keep = np.isfinite(values)
    return steps[keep], values[keep]


def nonfinite_steps(steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Steps at which the value is NaN or infinite."""
    return steps[~np.isfinite(values)]


def start_count(n: int) -> int:
    """How many of a series' first ``n`` points count as "the start": 10%, between 10 and 100."""
    return min(n, max(10, min(100, n // 10)))


def spans_decades(values: np.ndarray, decades: float = 2.0) -> bool:
    """True when the positive finite values span more than ``decades`` orders of magnitude."""
    good = values[np.isfinite(values) & (values > 0)]
    if len(good) < 2 or len(good) < len(values[np.isfinite(values)]):
        return False
    return bool(np.log10(good.max() / good.min()) > decades)


def rolling_share(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing share of non-zero values over ``window`` points (0..1)."""
    import pandas as pd

    return pd.Series(values != 0, dtype=float).rolling(window, min_periods=1).mean().to_numpy()


def layer_grad_curves(view: RunView) -> dict[str, Curve]:
    """Per-layer gradient norm series (finite values) for each weight layer, input to output."""
    curves = {}
    for name in view.weight_params:
        steps, values = finite_part(*view.series(GRAD_NORM_PREFIX + name))
        if len(values):
            curves[name] = (steps, values)
    return curves


def layer_grad_medians(view: RunView) -> dict[str, float]:
    """Median gradient norm of each weight layer over the run, input to output."""
    return {name: median(values) for name, (_, values) in layer_grad_curves(view).items()}


def orders_apart(medians: dict[str, float]) -> float | None:
    """Orders of magnitude between the largest and smallest positive layer median."""
    good = [m for m in medians.values() if np.isfinite(m) and m > 0]
    if len(good) < 2:
        return None
    return float(np.log10(max(good) / min(good)))

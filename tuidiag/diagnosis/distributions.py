"""Which rows of a run form a distribution, in which order they are shown, and how one is named.

A distribution is a family of rows ``<name>/q0`` ... ``<name>/q100``
(:data:`~tuidiag.format.SUMMARY_QUANTILES`): what ``rec.log(name=tensor)`` and
``histograms_every=N`` (``dist/weight/<param>``, ``dist/grad/<param>``) record. The
monitor's distribution tab and the report's distribution plot both read them here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tuidiag.diagnosis.view import natural_key
from tuidiag.format import DIST_GRAD_PREFIX, DIST_WEIGHT_PREFIX, SUMMARY_NONFINITE, SUMMARY_QUANTILES

MEDIAN = "q50"
NO_DISTRIBUTIONS = "no distributions recorded: Recorder(histograms_every=N) or rec.log(name=tensor)"
"""What the monitor's distribution tab and the report say of a tuidiag run without any."""
FOREIGN_NO_DISTRIBUTIONS = {
    "tensorboard": "histograms in TensorBoard logs are not read yet: scalars only",
    "wandb": "histograms in W&B runs are not read yet: scalars only",
    "csv": "a CSV log holds scalars only: no distributions",
}
"""What the distribution tab says of another tracker's run, by its kind (the Recorder's advice does not apply)."""


def no_distributions(source: str) -> str:
    """What to say of a run of kind ``source`` (``tuidiag``, ``tensorboard``, ...) that shows no distributions."""
    return FOREIGN_NO_DISTRIBUTIONS.get(source, NO_DISTRIBUTIONS if source == "tuidiag" else
                                        "distributions from this log are not read: scalars only")


def distribution_names(metric_names: Iterable[str], param_order: Sequence[str] = ()) -> tuple[str, ...]:
    """The distributions among ``metric_names`` (every family with all quantile rows), in the order the cycle
    key goes through them: logged names first (natural order), then each parameter's weights and gradient
    in model order (``param_order``; parameters not in it after, in natural order)."""
    names = set(metric_names)
    families = {name[: -len(MEDIAN) - 1] for name in names if name.endswith("/" + MEDIAN)}
    complete = [f for f in families if f and all(f"{f}/{suffix}" in names for suffix in SUMMARY_QUANTILES)]
    params = {f[len(prefix):] for f in complete for prefix in (DIST_WEIGHT_PREFIX, DIST_GRAD_PREFIX) if f.startswith(prefix)}
    rank = {name: i for i, name in enumerate(param_order)}
    ordered_params = sorted(params, key=lambda p: (rank.get(p, len(rank)), natural_key(p)))
    logged = sorted((f for f in complete if not f.startswith((DIST_WEIGHT_PREFIX, DIST_GRAD_PREFIX))), key=natural_key)
    present = set(complete)
    per_param = [prefix + p for p in ordered_params for prefix in (DIST_WEIGHT_PREFIX, DIST_GRAD_PREFIX) if prefix + p in present]
    return (*logged, *per_param)


def distribution_label(name: str) -> str:
    """How a chart title names distribution ``name``: ``weights of fc.weight``, ``gradient of fc.weight``, or
    the logged name itself."""
    if name.startswith(DIST_WEIGHT_PREFIX):
        return f"weights of {name[len(DIST_WEIGHT_PREFIX):]}"
    if name.startswith(DIST_GRAD_PREFIX):
        return f"gradient of {name[len(DIST_GRAD_PREFIX):]}"
    return name


def nonfinite_name(name: str) -> str:
    """The row that counts distribution ``name``'s non-finite elements (left out of its quantiles)."""
    return f"{name}/{SUMMARY_NONFINITE}"

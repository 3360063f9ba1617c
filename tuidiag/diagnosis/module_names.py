"""A module of the watched model named as a reader finds it: its type and its place, ``ReLU '3' (after Linear '2')``.

Activation metrics are keyed by the module's name in ``named_modules()``, which in an
``nn.Sequential`` is a bare index (``'3'``): on its own it reads as a number. The recorder's
model summary lists the leaf modules in order with their types (``model.modules``); from it a
name gets its type and the nearest layer with weights before it. Runs recorded before that
list existed fall back to the parameters: the type is the activation family the metric is
recorded for, and the place is the layer whose weight parameter comes last before the module
in its parent (by index in a ``Sequential``).
"""

from __future__ import annotations

from typing import Any

from tuidiag.diagnosis.evidence import quoted
from tuidiag.diagnosis.view import natural_key


DEAD_FAMILY = ("ReLU", "ReLU6")
"""The module types the recorder measures dead units of."""
SATURATING_FAMILY = ("Sigmoid", "Tanh", "Hardtanh")
"""The module types the recorder measures saturated units of."""


def family(model: dict[str, Any], kinds: tuple[str, ...]) -> str:
    """The one type of ``kinds`` the model uses (from its summary's activations), else them all joined by ``/``."""
    used = [k for k in kinds if k in (model.get("activations") or [])]
    return used[0] if len(used) == 1 else "/".join(kinds)


def _leaf_modules(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, type) of the model's leaf modules in order, as the recorder listed them (``[]`` for older runs)."""
    listed = model.get("modules")
    if not isinstance(listed, list):
        return []
    return [(str(item[0]), str(item[1])) for item in listed if isinstance(item, (list, tuple)) and len(item) == 2]


def _weight_owners(model: dict[str, Any]) -> list[str]:
    """Names of the modules that own a weight matrix or kernel (a parameter of 2+ dimensions), in model order."""
    owners = []
    for p in model.get("params", []):
        if isinstance(p, dict) and len(p.get("shape") or []) >= 2 and "." in str(p.get("name", "")):
            owner = str(p["name"]).rsplit(".", 1)[0]
            if owner not in owners:
                owners.append(owner)
    return owners


def _before_by_params(model: dict[str, Any], name: str) -> str | None:
    """The weight layer just before ``name`` among its siblings (same parent), ordered as a ``Sequential`` orders them."""
    parent, _, own = name.rpartition(".")
    siblings = [o for o in _weight_owners(model) if o.rpartition(".")[0] == parent]
    before = [o for o in siblings if natural_key(o.rpartition(".")[2]) < natural_key(own)]
    return max(before, key=lambda o: natural_key(o.rpartition(".")[2])) if before else None


def module_label(model: dict[str, Any], name: str, family: str) -> str:
    """``ReLU '3' (after Linear '2')``: the module ``name`` with its type (``family`` where the run does not say) and the
    layer with weights before it; just the typed name where none is known.

    The layer before is read from the order the modules were registered in, which is the order they run in only in a
    ``Sequential`` (or a list of modules): a module named by its index there. A module named as an attribute of a
    model's own ``forward``, or called more than once per pass (recorded as ``name#2``, ...), can run after any layer:
    it gets no 'after' clause, and a repeated call says which it is."""
    leaves = _leaf_modules(model)
    types = dict(leaves)
    own, _, call = name.partition("#")  # a module called twice in one forward pass records 'name#2'
    kind = types.get(own, family)
    if call or not own.rpartition(".")[2].isdigit():
        return f"{kind} {quoted(name)}" + (f" (call {call} in each forward pass)" if call else "")
    owners = set(_weight_owners(model))
    order = [n for n, _ in leaves]
    if own in order:
        before = [n for n in order[: order.index(own)] if n in owners]
        prev, prev_kind = (before[-1], types[before[-1]]) if before else (None, "")
    else:
        prev, prev_kind = _before_by_params(model, own), "layer"
    where = f" (after {prev_kind} {quoted(prev)})" if prev is not None else ""
    return f"{kind} {quoted(name)}{where}"

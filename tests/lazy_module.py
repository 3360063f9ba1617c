"""``LazyModule``: a module imported when one of its names is first used, not when the test file is collected.

Every xdist worker imports every test file to collect it; Lightning (about 3 s with torchmetrics) and
Transformers (about 1 s) were imported by each worker, most of which never ran a test that uses them,
while every worker waited for the slowest to finish collecting.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``: the first read of a public attribute imports it (``importlib.import_module``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)  # kept in sys.modules after the first time

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # pytest's collection probes every module-level object (``__test__``): no import for it
            raise AttributeError(attr)
        return getattr(self._module(), attr)


def installed(*names: str) -> bool:
    """Whether every top-level package of ``names`` can be imported, without importing it."""
    return all(importlib.util.find_spec(name.split(".")[0]) is not None for name in names)

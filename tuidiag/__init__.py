"""tuidiag: record a PyTorch training's health and find out why it is failing.

Training side::

    with tuidiag.Recorder("runs/exp1", config={"lr": 3e-4}) as rec:
        rec.watch(model, optimizer, max_grad_norm=1.0)
        ...
        rec.step(loss)

Reading side: ``tuidiag.open_run(path)`` and ``tuidiag.find_runs(root)``.
"""

from tuidiag.recorder import Recorder
from tuidiag.store import Event, Run, Series, find_runs, open_run

__version__ = "0.1.0"

__all__ = ["Event", "Recorder", "Run", "Series", "__version__", "find_runs", "open_run"]

"""Jobs that act on a run: LR range test, NaN hunt, overfit-one-batch, sharpness.

A job needs the training's model, optimizer, loss and data. In a live training
the recorder runs it on its own parts when asked through ``RUN/control``
(:mod:`tuidiag.jobs.in_training`, :mod:`tuidiag.recorder.request_runner`). For a finished or
crashed run it gets them from the **factory** the run names
(``Recorder(..., factory="train:build")``, stored in ``run.json`` as ``factory``).

The factory contract
--------------------
``"module:function"``: ``module`` is importable from the directory of the training
script (``run.json``'s ``command[0]``, stored as an absolute path), the directory the
training ran in (``run.json``'s ``cwd``), the current directory or ``PYTHONPATH``, so a
job started from any directory finds it; ``function`` (a dotted attribute path is
allowed) is called with no arguments and returns a mapping or an object with these
entries, or a tuple of them in this order (``forward`` last, optional):

=========== =================================================================
``model``     the ``torch.nn.Module`` (its initial weights, or load your latest
              checkpoint into it: jobs start from what the factory returns; the
              NaN hunt loads the capture's state into it)
``optimizer`` a ``torch.optim.Optimizer`` over ``model``'s parameters
``loss_fn``   ``loss_fn(output, y) -> scalar tensor``
``batches``   an iterable of ``(x, y)`` batches (a DataLoader, a list, ...);
              an iterable that is not an iterator is restarted when exhausted.
              Not needed by the NaN hunt.
``forward``   optional: ``forward(model, x) -> output`` (default ``model(x)``)
=========== =================================================================

The module is imported, and ``function`` called, with ``sys.argv = ["module"]``: a
module-level ``argparse`` ``parse_args()`` sees no arguments and takes its defaults
(tuidiag's own arguments never reach it); one that requires an argument ends the job
with a message saying so, not with argparse's exit.

The factory should build everything on the CPU; the job moves the model and
the batches to its device. Running a factory runs code that a run directory
names: the CLI shows the exact factory and asks before importing it.

Every job restores the model (parameters, buffers, gradients, train/eval flags),
the optimizer (state and hyperparameters) and the random generators (torch,
CUDA, numpy, ``random``) exactly when it ends, also when it fails
(:func:`tuidiag.jobs.isolation.isolated`). Jobs take their parts as arguments,
so the same functions can run inside a live training process.
"""

from tuidiag.jobs.job_handle import JobCancelled, JobError, JobHandle
from tuidiag.jobs.tensors import choose_device
from tuidiag.jobs.factory import FactoryError, Parts, load_factory
from tuidiag.jobs.isolation import isolated

__all__ = [
    "JobHandle",
    "FactoryError",
    "JobCancelled",
    "JobError",
    "Parts",
    "choose_device",
    "isolated",
    "load_factory",
]

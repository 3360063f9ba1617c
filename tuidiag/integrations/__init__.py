"""Callbacks that record a framework's training with :class:`tuidiag.Recorder`.

Import the one you need; neither is imported by ``import tuidiag``:

- ``tuidiag.integrations.lightning.TuidiagCallback`` for PyTorch Lightning,
- ``tuidiag.integrations.transformers.TuidiagCallback`` for the Hugging Face ``Trainer``.
"""

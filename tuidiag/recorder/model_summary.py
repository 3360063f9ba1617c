"""A JSON summary of the watched model for the manifest: parameters in order, layer kinds.

The diagnosis needs what the curves cannot say: which parameter comes first in
the network (vanishing gradients are judged first layer against last), how many
parameters there are, how deep the stack is and whether it has normalization,
residual-looking structure, dropout, and which activations it uses; and the leaf modules in
order with their types (``modules``, the first ``MAX_MODULES``), so a metric keyed by a bare
``Sequential`` index can be named ``ReLU '3' (after Linear '2')``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch import nn

NORM_KINDS = (
    nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.LayerNorm, nn.GroupNorm,
    nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, *([nn.RMSNorm] if hasattr(nn, "RMSNorm") else []),
)
CONV_KINDS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
WEIGHT_KINDS = (nn.Linear, *CONV_KINDS, nn.RNNBase, nn.MultiheadAttention, nn.Embedding)
DROPOUT_KINDS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
ACTIVATION_KINDS = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Softplus, nn.Mish, nn.Hardtanh, nn.PReLU)

MAX_MODULES = 2000
"""Leaf modules listed at most (a manifest stays small for very large models)."""


def summarize(model: nn.Module) -> dict[str, Any]:
    """Parameters in registration order, counts of module kinds, depth, norm/dropout presence."""
    params = [
        {"name": name, "shape": list(p.shape), "numel": p.numel(), "trainable": p.requires_grad}
        for name, p in model.named_parameters()
    ]
    kinds = Counter(type(m).__name__ for m in model.modules())
    return {
        "class": type(model).__name__,
        "params": params,
        "n_params": sum(p["numel"] for p in params),
        "n_trainable": sum(p["numel"] for p in params if p["trainable"]),
        "weight_layers": sum(isinstance(m, WEIGHT_KINDS) for m in model.modules()),
        "has_norm": any(isinstance(m, NORM_KINDS) for m in model.modules()),
        "has_dropout": any(isinstance(m, DROPOUT_KINDS) for m in model.modules()),
        "activations": sorted({type(m).__name__ for m in model.modules() if isinstance(m, ACTIVATION_KINDS)}),
        "module_kinds": dict(kinds.most_common(30)),
        "modules": [[name, type(m).__name__] for name, m in model.named_modules() if name and not any(m.children())][:MAX_MODULES],
    }

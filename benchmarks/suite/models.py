"""Small models for the suite (MLP, CNN, GRU/LSTM/RNN, transformer, residual nets) with knobs to plant faults.

The residual nets are the normalised ones: ``resmlp`` has pre-LayerNorm residual blocks,
``rescnn`` residual convolution blocks with BatchNorm.

Every builder accepts the same fault knobs:

- ``init_gain``: scale every weight matrix after the default init (saturation, explosion);
- ``bias_init``: set every bias to this value (a large negative one kills ReLUs);
- ``unused``: register an extra layer that ``forward`` never calls (a dead layer);
- ``detach``: cut the graph after the first block (everything before it gets no gradient).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benchmarks.suite.data import CLASSES, SEQ_DIM, VEC_DIM, VOCAB, TOK_LEN

ACTS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "gelu": nn.GELU}


class Blocks(nn.Module):
    """A stem of blocks, then a head; optionally a detached stem or an unused extra layer."""

    def __init__(self, blocks: list[nn.Module], head: nn.Module, detach: bool = False, unused: nn.Module | None = None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.head = head
        self.detach = detach
        if unused is not None:
            self.unused = unused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Blocks in order (the first one's output detached if asked), then the head."""
        for i, block in enumerate(self.blocks):
            x = block(x)
            if self.detach and i == 0:
                x = x.detach()
        return self.head(x)


def mlp(width: int = 64, depth: int = 2, act: str = "relu", dropout: float = 0.0, in_dim: int = VEC_DIM, **knobs: Any) -> nn.Module:
    """``depth`` hidden Linear+activation blocks of ``width`` units."""
    blocks, size = [], in_dim
    for _ in range(depth):
        blocks.append(nn.Sequential(nn.Linear(size, width), ACTS[act](), *([nn.Dropout(dropout)] if dropout else [])))
        size = width
    return _finish(Blocks(blocks, nn.Linear(size, CLASSES), knobs.get("detach", False), _unused(knobs, width)), knobs)


def cnn(channels: int = 8, depth: int = 2, act: str = "relu", batchnorm: bool = False, dropout: float = 0.0, **knobs: Any) -> nn.Module:
    """3x3 convolutions on 1x8x8 images, average-pooled into a linear head."""
    blocks, size = [], 1
    for _ in range(depth):
        norm = [nn.BatchNorm2d(channels)] if batchnorm else []
        blocks.append(nn.Sequential(nn.Conv2d(size, channels, 3, padding=1), *norm, ACTS[act]()))
        size = channels
    head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), *([nn.Dropout(dropout)] if dropout else []), nn.Linear(4 * channels, CLASSES))
    return _finish(Blocks(blocks, head, knobs.get("detach", False), _unused(knobs, channels)), knobs)


class Residual(nn.Module):
    """``x + body(x)``: one residual block."""

    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The input plus the body's output."""
        return x + self.body(x)


def resmlp(width: int = 48, depth: int = 3, act: str = "relu", dropout: float = 0.0, **knobs: Any) -> nn.Module:
    """A linear stem, then ``depth`` pre-norm residual blocks ``x + W2 act(W1 LayerNorm(x))``, then a normed head."""
    blocks: list[nn.Module] = [nn.Linear(VEC_DIM, width)]
    for _ in range(depth):
        drop = [nn.Dropout(dropout)] if dropout else []
        body = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), ACTS[act](), *drop, nn.Linear(width, width))
        blocks.append(Residual(body))
    head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, CLASSES))
    return _finish(Blocks(blocks, head, knobs.get("detach", False), _unused(knobs, width)), knobs)


def rescnn(channels: int = 8, depth: int = 2, act: str = "relu", dropout: float = 0.0, **knobs: Any) -> nn.Module:
    """A convolution stem, then ``depth`` residual blocks ``act(x + BN(conv(act(BN(conv(x))))))``, pooled into a linear head."""
    blocks: list[nn.Module] = [nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), nn.BatchNorm2d(channels), ACTS[act]())]
    for _ in range(depth):
        body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), ACTS[act](),
                             nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels))
        blocks.append(nn.Sequential(Residual(body), ACTS[act]()))
    drop = [nn.Dropout(dropout)] if dropout else []
    head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), *drop, nn.Linear(4 * channels, CLASSES))
    return _finish(Blocks(blocks, head, knobs.get("detach", False), _unused(knobs, channels)), knobs)


class Recurrent(nn.Module):
    """GRU/LSTM/RNN over the sequence; the last hidden state feeds a linear head."""

    def __init__(self, kind: str, hidden: int, layers: int, dropout: float, detach: bool, unused: nn.Module | None, nonlinearity: str) -> None:
        super().__init__()
        cls = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}[kind]
        extra = {"nonlinearity": nonlinearity} if kind == "rnn" else {}
        self.proj = nn.Linear(SEQ_DIM, hidden)
        self.rnn = cls(hidden, hidden, num_layers=layers, batch_first=True, dropout=dropout if layers > 1 else 0.0, **extra)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, CLASSES)
        self.detach = detach
        if unused is not None:
            self.unused = unused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Project, run the recurrence, classify from the last step."""
        h = self.proj(x)
        h = h.detach() if self.detach else h
        out, _ = self.rnn(h)
        return self.head(self.drop(out[:, -1]))


def recurrent(kind: str = "gru", hidden: int = 32, layers: int = 1, dropout: float = 0.0, nonlinearity: str = "tanh", **knobs: Any) -> nn.Module:
    """A GRU, LSTM or plain RNN classifier for ``data.sequences``."""
    model = Recurrent(kind, hidden, layers, dropout, knobs.get("detach", False), _unused(knobs, hidden), nonlinearity)
    return _finish(model, knobs)


class TinyTransformer(nn.Module):
    """Token and position embeddings, a small encoder, mean pooling, a linear head."""

    def __init__(self, dim: int, layers: int, dropout: float, detach: bool, unused: nn.Module | None) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(TOK_LEN, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, CLASSES)
        self.detach = detach
        if unused is not None:
            self.unused = unused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Embed, encode, pool over positions, classify."""
        h = self.embed(x) + self.pos
        h = h.detach() if self.detach else h
        return self.head(self.encoder(h).mean(1))


def transformer(dim: int = 32, layers: int = 1, dropout: float = 0.0, **knobs: Any) -> nn.Module:
    """A tiny transformer encoder classifier for ``data.tokens``."""
    return _finish(TinyTransformer(dim, layers, dropout, knobs.get("detach", False), _unused(knobs, dim)), knobs)


def _unused(knobs: dict[str, Any], width: int) -> nn.Module | None:
    return nn.Linear(width, width) if knobs.get("unused") else None


def _finish(model: nn.Module, knobs: dict[str, Any]) -> nn.Module:
    """Apply ``init_gain``, ``recurrent_gain`` and ``bias_init`` to the freshly built model."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2 and "init_gain" in knobs and "weight_hh" not in name:
                param.mul_(knobs["init_gain"])
            if "weight_hh" in name and "recurrent_gain" in knobs:
                param.mul_(knobs["recurrent_gain"])
            if name.endswith("bias") and "bias_init" in knobs and not name.startswith("head"):
                param.fill_(knobs["bias_init"])
    return model


ARCHS = {"mlp": mlp, "cnn": cnn, "rnn": recurrent, "transformer": transformer, "resmlp": resmlp, "rescnn": rescnn}
TASK_OF = {"mlp": "vectors", "cnn": "images", "rnn": "sequences", "transformer": "tokens", "resmlp": "vectors",
           "rescnn": "images"}


def architecture(arch: str, model: dict[str, Any]) -> str:
    """The architecture a scenario is held out by: the builder's name, or the recurrence's kind (gru, lstm, rnn)."""
    return str(model.get("kind", "gru")) if arch == "rnn" else arch


def build(arch: str, **kwargs: Any) -> nn.Module:
    """The model of ``arch`` with the given size and fault knobs."""
    return ARCHS[arch](**kwargs)

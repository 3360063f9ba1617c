"""How good the LR finder's suggestions are: training at each rule's LR against the best LR of a grid.

For each case (a tiny model, a synthetic but learnable task made here, an
optimizer, and a starting point: a fresh init or a mid-training checkpoint):

1. the empirical best LR: short trainings at a log-spaced grid of constant LRs
   (half-decade steps, extended while the best is at an edge, then refined a
   quarter decade either side of it), ``--seeds`` data orders each, scored by the
   mean validation loss on held-out data at the end;
2. ``tuidiag``'s range test (``tuidiag.jobs.lr_find.lr_find``, default settings)
   from the same starting point, and every rule of ``tuidiag.jobs.lr_suggest``;
3. torch-lr-finder itself (``LRFinder.range_test`` + ``plot(suggest_lr=True)``,
   its defaults) from the same starting point, as the baseline in the same run;
4. a training at each suggestion, with the same seeds, scored the same way.

A rule's score on a case is ``ratio = loss at its LR / grid's best loss`` (below 1
when it beats every grid point). It is "within 10%" when ``loss <= 1.1 x best``
or ``loss - best <= 1% of the untrained loss`` (the second only matters for a
best loss near 0). A training whose loss is not finite, or ends above the
untrained loss, counts as the untrained loss. Prints one table and a summary
per rule: share of cases within 10%, geometric mean and worst ratio, cases
where it beats steepest descent. CPU only, one thread. Usage::

    nice -n 10 python benchmarks/lr_finder_quality.py [--quick] [--cases a,b] [--workers 2] [--dump FILE]

With the default two worker processes: 659-868 s on a 2-core machine shared with
other busy jobs (load average 6-9); the first 14 cases alone took 200 s at load 3.

``--quick`` is a smoke run (two cases, short trainings, one seed, coarse grid).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from tuidiag.jobs.factory import Parts  # noqa: E402
from tuidiag.jobs.lr_find import LRFindConfig, lr_find  # noqa: E402
from tuidiag.jobs.lr_suggest import DEFAULT_RULE, RULES  # noqa: E402

BASELINE = "torch-lr-finder"
WITHIN = 1.10
"""A suggestion is good when its loss is at most this many times the grid's best."""
NEAR_ZERO = 0.01
"""...or when it is within this share of the untrained loss of the best (for best losses near 0)."""


# ---------------------------------------------------------------- tasks


@dataclass
class Task:
    """Training and held-out data of one synthetic problem, and its loss."""

    x: torch.Tensor
    y: torch.Tensor
    vx: torch.Tensor
    vy: torch.Tensor
    loss: nn.Module


class SequenceCE(nn.Module):
    """Cross-entropy over every position of a ``(batch, time, classes)`` output."""

    def forward(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def _split(x: torch.Tensor, y: torch.Tensor, n_val: int, loss: nn.Module) -> Task:
    return Task(x[n_val:], y[n_val:], x[:n_val], y[:n_val], loss)


def _sample_labels(logits: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Labels drawn from softmax(logits): the task has a Bayes loss above 0."""
    return torch.multinomial(torch.softmax(logits, dim=1), 1, generator=g).squeeze(1)


def _teacher_mlp(d_in: int, d_out: int, g: torch.Generator) -> Callable[[torch.Tensor], torch.Tensor]:
    w1 = torch.randn(d_in, 32, generator=g) * (2.0 / math.sqrt(d_in))
    w2 = torch.randn(32, d_out, generator=g) / math.sqrt(32)
    return lambda x: torch.tanh(x @ w1) @ w2


def teacher_regression(n: int, seed: int) -> Task:
    """16 inputs, 4 outputs of a random tanh network (unit variance) plus noise of std 0.2."""
    g = torch.Generator().manual_seed(seed)
    teacher = _teacher_mlp(16, 4, g)
    x = torch.randn(n, 16, generator=g)
    y = teacher(x)
    y = (y - y.mean(0)) / y.std(0) + 0.2 * torch.randn(y.shape, generator=g)
    return _split(x, y, 1024, nn.MSELoss())


def teacher_classes(n: int, seed: int) -> Task:
    """16 inputs, 8 classes drawn from the softmax of a random tanh network's logits (std 3)."""
    g = torch.Generator().manual_seed(seed)
    teacher = _teacher_mlp(16, 8, g)
    x = torch.randn(n, 16, generator=g)
    logits = teacher(x)
    y = _sample_labels(3.0 * logits / logits.std(), g)
    return _split(x, y, 1024, nn.CrossEntropyLoss())


def conv_images(n: int, seed: int) -> Task:
    """Blurred noise images 1x8x8, 6 classes drawn from a random conv teacher's logits (std 3)."""
    g = torch.Generator().manual_seed(seed)
    blur = torch.ones(1, 1, 3, 3) / 9.0
    x = nn.functional.conv2d(torch.randn(n, 1, 10, 10, generator=g), blur)
    x = (x - x.mean()) / x.std()
    k = torch.randn(4, 1, 3, 3, generator=g) / 3.0
    w = torch.randn(4 * 4 * 4, 6, generator=g) / 8.0
    h = nn.functional.avg_pool2d(torch.relu(nn.functional.conv2d(x, k, padding=1)), 2)
    logits = h.flatten(1) @ w
    y = _sample_labels(3.0 * logits / logits.std(), g)
    return _split(x, y, 1024, nn.CrossEntropyLoss())


def _noisy(y: torch.Tensor, classes: int, share: float, g: torch.Generator) -> torch.Tensor:
    """``y`` with ``share`` of its entries replaced by uniform random classes."""
    flip = torch.rand(y.shape, generator=g) < share
    return torch.where(flip, torch.randint(0, classes, y.shape, generator=g), y)


def seq_recall(n: int, seed: int) -> Task:
    """Sequences of 10 tokens out of 8; the label is the first token (10% of labels random)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 8, (n, 10), generator=g)
    return _split(x, _noisy(x[:, 0], 8, 0.1, g), 1024, nn.CrossEntropyLoss())


def seq_sums(n: int, seed: int) -> Task:
    """2-d sequences of 12 steps; targets: the scaled sum of the first feature, a decaying sum of the second (noise std 0.3)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, 2, generator=g)
    decay = 0.8 ** torch.arange(11, -1, -1, dtype=torch.float32)
    y = torch.stack([x[:, :, 0].sum(1) / math.sqrt(12), (x[:, :, 1] * decay).sum(1)], dim=1)
    y = (y - y.mean(0)) / y.std(0) + 0.3 * torch.randn(y.shape, generator=g)
    return _split(x, y, 1024, nn.MSELoss())


def seq_reverse(n: int, seed: int) -> Task:
    """Sequences of 8 tokens out of 8, to be output reversed (10% of target tokens random)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 8, (n, 8), generator=g)
    return _split(x, _noisy(x.flip(1), 8, 0.1, g), 1024, SequenceCE())


def seq_histogram(n: int, seed: int) -> Task:
    """Sequences of 8 tokens out of 6; at each position, how often its token occurs (9 classes)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 6, (n, 8), generator=g)
    counts = (x.unsqueeze(2) == x.unsqueeze(1)).sum(2)
    return _split(x, _noisy(counts, 9, 0.05, g), 1024, SequenceCE())


# ---------------------------------------------------------------- models


def mlp(d_in: int, d_out: int, batchnorm: bool = False, width: int = 64) -> nn.Module:
    """Two hidden ReLU layers, optionally each followed by BatchNorm."""
    layers: list[nn.Module] = []
    for a, b in ((d_in, width), (width, width)):
        layers += [nn.Linear(a, b)] + ([nn.BatchNorm1d(b)] if batchnorm else []) + [nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, d_out))


def cnn(classes: int, batchnorm: bool = False) -> nn.Module:
    """Two 3x3 convolutions (the second with stride 2), optionally with BatchNorm, then a linear head."""
    def norm(c: int) -> list[nn.Module]:
        return [nn.BatchNorm2d(c)] if batchnorm else []
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), *norm(8), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), *norm(16), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 4 * 4, classes),
    )


class TokenRNN(nn.Module):
    """Embedding, a one-layer GRU or LSTM, a linear head on the last state."""

    def __init__(self, cell: str, vocab: int | None, d_in: int, classes: int, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_in) if vocab else None
        self.rnn = (nn.GRU if cell == "gru" else nn.LSTM)(d_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        out, _ = self.rnn(self.embed(x) if self.embed is not None else x)
        return self.head(out[:, -1])


class TinyTransformer(nn.Module):
    """Token and learned position embeddings, one encoder layer (d=32, 2 heads), a per-position head."""

    def __init__(self, vocab: int, length: int, classes: int, d: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(0.1 * torch.randn(length, d))
        self.encoder = nn.TransformerEncoderLayer(d, 2, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return self.head(self.encoder(self.embed(x) + self.pos))


OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "SGD": lambda p, lr: torch.optim.SGD(p, lr=lr),
    "momentum": lambda p, lr: torch.optim.SGD(p, lr=lr, momentum=0.9),
    "Adam": lambda p, lr: torch.optim.Adam(p, lr=lr),
    "AdamW": lambda p, lr: torch.optim.AdamW(p, lr=lr, weight_decay=0.01),
    "RMSprop": lambda p, lr: torch.optim.RMSprop(p, lr=lr),
}
GRID = {"SGD": (-2.5, 1.0), "momentum": (-3.5, 0.0), "Adam": (-4.0, -0.5), "AdamW": (-4.0, -0.5), "RMSprop": (-4.5, -1.0)}
"""log10 of the lowest and highest LR of each optimizer's coarse grid (8 points, half a decade apart)."""


@dataclass
class Case:
    """A model, its task and optimizer, and where training starts (``pretrain`` steps at ``pretrain_lr``)."""

    name: str
    model: Callable[[], nn.Module]
    task: Callable[[int, int], Task]
    optimizer: str
    batch: int = 32
    pretrain: int = 0
    pretrain_lr: float = 0.0
    held_out: bool = False
    """Added after the default rule was chosen: the rule was not tuned on it."""


CASES = [
    Case("mlp-regression/SGD", lambda: mlp(16, 4), teacher_regression, "SGD"),
    Case("mlp-classes/momentum", lambda: mlp(16, 8), teacher_classes, "momentum"),
    Case("mlp-regression/Adam", lambda: mlp(16, 4), teacher_regression, "Adam"),
    Case("mlp-classes/RMSprop", lambda: mlp(16, 8), teacher_classes, "RMSprop"),
    Case("mlp-batchnorm-classes/SGD", lambda: mlp(16, 8, batchnorm=True), teacher_classes, "SGD"),
    Case("cnn-images/AdamW", lambda: cnn(6), conv_images, "AdamW"),
    Case("cnn-batchnorm-images/momentum", lambda: cnn(6, batchnorm=True), conv_images, "momentum"),
    Case("gru-recall/Adam", lambda: TokenRNN("gru", 8, 16, 8), seq_recall, "Adam"),
    Case("lstm-sums/RMSprop", lambda: TokenRNN("lstm", None, 2, 2), seq_sums, "RMSprop"),
    Case("transformer-reverse/AdamW", lambda: TinyTransformer(8, 8, 8), seq_reverse, "AdamW"),
    Case("transformer-histogram/Adam", lambda: TinyTransformer(6, 8, 9), seq_histogram, "Adam"),
    Case("mlp-regression/Adam@mid", lambda: mlp(16, 4), teacher_regression, "Adam", pretrain=150, pretrain_lr=1e-3),
    Case("cnn-images/momentum@mid", lambda: cnn(6), conv_images, "momentum", pretrain=150, pretrain_lr=1e-2),
    Case("gru-recall/AdamW@mid", lambda: TokenRNN("gru", 8, 16, 8), seq_recall, "AdamW", pretrain=150, pretrain_lr=3e-3),
    # held out: added after valley_floor was chosen on the cases above
    Case("mlp-regression/momentum", lambda: mlp(16, 4), teacher_regression, "momentum", batch=64, held_out=True),
    Case("mlp-wide-classes/Adam", lambda: mlp(16, 8, width=128), teacher_classes, "Adam", held_out=True),
    Case("cnn-images/Adam", lambda: cnn(6), conv_images, "Adam", held_out=True),
    Case("cnn-batchnorm-images/RMSprop", lambda: cnn(6, batchnorm=True), conv_images, "RMSprop", held_out=True),
    Case("gru-recall/momentum", lambda: TokenRNN("gru", 8, 16, 8), seq_recall, "momentum", held_out=True),
    Case("lstm-sums/AdamW", lambda: TokenRNN("lstm", None, 2, 2), seq_sums, "AdamW", held_out=True),
    Case("transformer-reverse/Adam", lambda: TinyTransformer(8, 8, 8), seq_reverse, "Adam", batch=64, held_out=True),
    Case("mlp-classes/SGD@mid", lambda: mlp(16, 8), teacher_classes, "SGD", pretrain=150, pretrain_lr=0.05, held_out=True),
    Case("transformer-histogram/AdamW@mid", lambda: TinyTransformer(6, 8, 9), seq_histogram, "AdamW", pretrain=150,
         pretrain_lr=1e-3, held_out=True),
]


# ---------------------------------------------------------------- training


@dataclass
class Settings:
    """How long and how often to train."""

    steps: int = 300
    seeds: int = 3
    coarse: int = 8
    refine: bool = True
    extend: int = 2
    n_train: int = 8192


QUICK = Settings(steps=60, seeds=1, coarse=4, refine=False, extend=0, n_train=2048)


def _set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def _order(n: int, count: int, seed: int) -> torch.Tensor:
    """``count`` sample indices: shuffled passes over ``range(n)``."""
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randperm(n, generator=g) for _ in range(count // n + 1)])[:count]


@dataclass
class Bench:
    """One case, ready to train: its data, its starting state, and the losses measured so far."""

    case: Case
    settings: Settings
    task: Task = field(init=False)
    start: tuple[dict[str, Any], dict[str, Any]] = field(init=False)
    untrained: float = field(init=False)
    memo: dict[tuple[float, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.task = self.case.task(self.settings.n_train + 1024, 0)
        torch.manual_seed(0)
        model = self.case.model()
        opt = OPTIMIZERS[self.case.optimizer](model.parameters(), self.case.pretrain_lr or 1e-3)
        if self.case.pretrain:
            self._train(model, opt, self.case.pretrain, seed=999)
        self.start = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()))
        self.untrained = self._validate(model)

    def fresh(self, lr: float) -> tuple[nn.Module, torch.optim.Optimizer]:
        """The model and optimizer at the starting point, the optimizer's LR set to ``lr``."""
        model = self.case.model()
        model.load_state_dict(self.start[0])
        opt = OPTIMIZERS[self.case.optimizer](model.parameters(), lr)
        opt.load_state_dict(self.start[1])
        _set_lr(opt, lr)
        return model, opt

    def batches(self, count: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``count`` training batches in the order of ``seed``."""
        idx = _order(len(self.task.x), count * self.case.batch, seed).view(count, self.case.batch)
        return [(self.task.x[i], self.task.y[i]) for i in idx]

    def _train(self, model: nn.Module, opt: torch.optim.Optimizer, steps: int, seed: int) -> bool:
        model.train()
        for x, y in self.batches(steps, seed):
            loss = self.task.loss(model(x), y)
            if not torch.isfinite(loss):
                return False
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return True

    def _validate(self, model: nn.Module) -> float:
        model.eval()
        with torch.no_grad():
            return float(self.task.loss(model(self.task.vx), self.task.vy))

    def loss_at(self, lr: float) -> float:
        """Mean validation loss after training at ``lr`` over the seeds (capped at the untrained loss)."""
        losses = []
        for seed in range(self.settings.seeds):
            key = (float(lr), seed)
            if key not in self.memo:
                model, opt = self.fresh(lr)
                ok = self._train(model, opt, self.settings.steps, seed)
                value = self._validate(model) if ok else math.inf
                self.memo[key] = value if math.isfinite(value) else math.inf
            losses.append(min(self.memo[key], self.untrained))
        return float(np.mean(losses))


def grid_search(bench: Bench) -> tuple[float, float, list[tuple[float, float]]]:
    """The best LR of the grid, its loss, and every (lr, loss) tried, sorted by LR."""
    s = bench.settings
    lo, hi = GRID[bench.case.optimizer]
    exps = list(np.linspace(lo, hi, s.coarse))
    step = exps[1] - exps[0]
    scores = {e: bench.loss_at(10.0**e) for e in exps}
    for _ in range(s.extend):
        best = min(scores, key=scores.__getitem__)
        edge = best - step if best == min(scores) else best + step if best == max(scores) else None
        if edge is None:
            break
        scores[edge] = bench.loss_at(10.0**edge)
    if s.refine:
        best = min(scores, key=scores.__getitem__)
        for e in (best - step / 2, best + step / 2):
            scores[e] = bench.loss_at(10.0**e)
    best = min(scores, key=scores.__getitem__)
    return 10.0**best, scores[best], sorted((10.0**e, v) for e, v in scores.items())


# ---------------------------------------------------------------- the finders


def ours(bench: Bench) -> dict[str, Any]:
    """tuidiag's range test from the starting point (default settings), on batches of seed 1000."""
    model, opt = bench.fresh(1e-3)
    parts = Parts(model, opt, bench.task.loss, bench.batches(LRFindConfig().steps, 1000))
    return lr_find(parts, torch.device("cpu"), LRFindConfig())


def theirs(bench: Bench) -> tuple[float, dict[str, list[float]]]:
    """torch-lr-finder's suggestion and curve, from the same starting point on the same batches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from torch.utils.data import DataLoader, TensorDataset
    from torch_lr_finder import LRFinder

    batches = bench.batches(LRFindConfig().steps, 1000)
    data = TensorDataset(torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches]))
    model, opt = bench.fresh(1e-3)
    finder = LRFinder(model, opt, bench.task.loss, device="cpu")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        finder.range_test(DataLoader(data, batch_size=bench.case.batch, shuffle=False), start_lr=1e-7, end_lr=10, num_iter=100)
        fig, ax = plt.subplots()
        _, suggestion = finder.plot(ax=ax, suggest_lr=True)
        plt.close(fig)
    return float(suggestion), {"lr": list(finder.history["lr"]), "loss": list(finder.history["loss"])}


# ---------------------------------------------------------------- scoring


def within(loss: float, best: float, untrained: float) -> bool:
    """The "within 10%" criterion (see the module docstring)."""
    return loss <= WITHIN * best or loss - best <= NEAR_ZERO * untrained


def run_case(case: Case, settings: Settings) -> dict[str, Any]:
    """Everything measured on one case, as JSON-ready data."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    bench = Bench(case, settings)
    best_lr, best, tried = grid_search(bench)
    found = ours(bench)
    lrs = {name: found["suggestions"][name] for name in RULES}
    lrs[BASELINE], their_curve = theirs(bench)
    scores = {}
    for name, lr in lrs.items():
        loss = bench.loss_at(lr) if lr else bench.untrained
        scores[name] = {"lr": lr, "loss": loss, "ratio": loss / best, "within": within(loss, best, bench.untrained)}
    edge = best_lr in (tried[0][0], tried[-1][0])
    return {
        "case": case.name, "held_out": case.held_out, "reliable": found["reliable"],
        "best_lr": best_lr, "best": best, "untrained": bench.untrained, "edge": edge,
        "grid": tried, "scores": scores, "seconds": time.perf_counter() - t0,
        "curve": {"lr": found["lrs"], "loss": found["losses"], "smoothed": found["smoothed"],
                  "window": found["suggestions"]["window"], "stopped": found["stopped"]},
        "their_curve": their_curve,
    }


def run_named(name: str, settings: Settings) -> dict[str, Any]:
    """:func:`run_case` on the case called ``name`` (what a worker process is sent)."""
    return run_case(next(c for c in CASES if c.name == name), settings)


def _geomean(values: list[float]) -> float:
    return float(math.exp(np.mean(np.log(values))))


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rule: share within 10%, geometric mean / median / worst ratio, wins and losses against steepest."""
    rows = []
    for name in [*RULES, BASELINE]:
        ratios = [r["scores"][name]["ratio"] for r in results]
        ins = sum(r["scores"][name]["within"] for r in results)
        rel = [r["scores"][name]["loss"] - r["scores"]["steepest"]["loss"] for r in results]
        rows.append({
            "rule": name, "within": ins / len(results), "n": len(results), "geomean": _geomean(ratios),
            "median": float(np.median(ratios)), "worst": max(ratios),
            "better": sum(d < 0 for d in rel), "worse": sum(d > 0 for d in rel),
        })
    return rows


GROUPS: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
    ("all cases", lambda r: True),
    ("held-out cases (added after the default rule was chosen)", lambda r: r["held_out"]),
    ("sweeps tuidiag calls reliable (a clear descent)", lambda r: r["reliable"]),
]


def table(results: list[dict[str, Any]], settings: Settings) -> str:
    """The results as Markdown: one row per case, then the summary per rule for each group of cases."""
    names = [*RULES, BASELINE]
    head = "| case | untrained | best LR (grid) | best loss | " + " | ".join(f"{n}: LR, ratio" for n in names) + " |"
    lines = [head, "|" + "---|" * (4 + len(names))]
    for r in results:
        cells = [f"{s['lr']:.2g}, {s['ratio']:.2f}{'' if s['within'] else ' x'}" for s in (r["scores"][n] for n in names)]
        notes = ("*" if r["held_out"] else "") + ("" if r["reliable"] else " (flat)") + (" (edge)" if r["edge"] else "")
        lines.append(f"| {r['case']}{notes} | {r['untrained']:.3f} | {r['best_lr']:.2g} | {r['best']:.3f} | "
                     + " | ".join(cells) + " |")
    for title, keep in GROUPS:
        chosen = [r for r in results if keep(r)]
        if not chosen:
            continue
        lines += ["", f"{title}: {len(chosen)}", "",
                  "| rule | within 10% of best | geometric mean ratio | median ratio | worst ratio "
                  "| lower loss than steepest | higher |",
                  "|---|---|---|---|---|---|---|"]
        for s in summary(chosen):
            mark = " (default)" if s["rule"] == DEFAULT_RULE else ""
            lines.append(f"| {s['rule']}{mark} | {s['within']:.0%} ({round(s['within'] * s['n'])}/{s['n']}) "
                         f"| {s['geomean']:.3f} | {s['median']:.3f} | {s['worst']:.2f} | {s['better']} | {s['worse']} |")
    lines += ["", f"{settings.steps} steps at a constant LR, {settings.seeds} data orders per LR; ratio = validation loss / "
              "grid's best; x = not within 10%; * = held out; (flat) = tuidiag flagged the sweep as showing no clear "
              "descent; (edge) = the grid's best is at its edge."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the cases (in ``--workers`` processes), print the table and the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: two cases, short trainings, one seed")
    parser.add_argument("--cases", help="comma-separated case names (default: all; with --quick, the first two)")
    parser.add_argument("--workers", type=int, default=2, help="processes, each on one thread (default: 2)")
    parser.add_argument("--dump", type=Path, help="write every curve and grid result to this JSON file")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else Settings()
    chosen = CASES[:2] if args.quick else CASES
    if args.cases:
        names = args.cases.split(",")
        unknown = set(names) - {c.name for c in CASES}
        if unknown:
            parser.error(f"unknown cases {sorted(unknown)}; known: {[c.name for c in CASES]}")
        chosen = [c for c in CASES if c.name in names]
    t0 = time.perf_counter()
    torch.set_num_threads(1)
    workers = min(args.workers, len(chosen))
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            results = list(pool.map(run_named, [c.name for c in chosen], [settings] * len(chosen)))
    else:
        results = []
        for c in chosen:
            results.append(run_case(c, settings))
            print(f"# {c.name}: {results[-1]['seconds']:.0f} s", file=sys.stderr, flush=True)
    print(table(results, settings))
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")
    if args.dump:
        args.dump.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

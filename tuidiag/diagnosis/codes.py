"""The diagnosis codes: every finding's stable ``code``, defined once.

The shared contract (``shared/diagnosis-codes.md``) lists the codes scripts and CI
gates may rely on; tuidiag adds a few of its own (``origin="extension"``). Every
code a rule emits, and every code the combiner names, must be listed here; the
user-facing table in ``docs/diagnosis-codes.md`` is generated from this registry
(``python -m tuidiag.diagnosis.codes``) and a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuidiag.diagnosis.moves import (
    BATCH_UP, CAPACITY_DOWN, CAPACITY_UP, CLIP_LOOSER, CLIP_TIGHTER, INIT_SMALLER, LR_DOWN, LR_UP, MIN_LR_UP, REG_DOWN, REG_UP,
    WARMUP_UP, WORKERS_UP, FixText, Move,
)


@dataclass(frozen=True)
class Code:
    """One diagnosis code: what it means, the usual fix, where it comes from, and the settings its fix moves."""

    name: str
    meaning: str
    fix: str
    origin: str = "shared"
    """``shared`` (the stable contract) or ``extension`` (tuidiag's own)."""
    detected: bool = True
    """False for codes of the contract that no rule emits yet."""
    moves: tuple[Move, ...] = field(kw_only=True)
    """The settings the fix may move (required; ``()`` for none). The combiner never lets two findings
    of one diagnosis move one setting both ways."""
    live: tuple[Move, ...] = field(default=(), kw_only=True)
    """The moves the monitor offers to try on the live training when this finding is raised (its ``a`` key,
    :mod:`tuidiag.viewmodel.actions`): ``LR_DOWN``/``LR_UP`` scale the LR, ``CLIP_TIGHTER`` turns clipping on."""
    short: str = field(default="", kw_only=True)
    """A few words for the health badge where room is short (the overview at 80 columns); at most
    ``SHORT_MAX`` characters. Empty: the badge shows ``name``."""


_ALL = [
    Code("nonfinite_loss", "loss became NaN or Inf", "reduce LR, clip gradients, clamp log/div inputs, check the batch",
         moves=(LR_DOWN, WARMUP_UP, CLIP_TIGHTER), live=(LR_DOWN, CLIP_TIGHTER), short="NaN loss"),
    Code("exploding_gradients", "gradient norms grow without bound or jump by orders of magnitude",
         "clip by global norm, reduce LR, fix init", moves=(CLIP_TIGHTER, INIT_SMALLER, LR_DOWN),
         live=(LR_DOWN, CLIP_TIGHTER), short="grads explode"),
    Code("vanishing_gradients", "early layers get gradients orders of magnitude smaller than late layers, or near zero overall",
         "residual connections, ReLU-family activations, normalization, better init", moves=(), short="grads vanish"),
    Code("dead_layer", "a parameter gets no gradient at all (None or exactly zero)",
         "reconnect the graph (detach, no_grad, frozen by mistake)", moves=(), short="dead layer"),
    Code("lr_too_high", "loss oscillates or diverges because steps overshoot", "reduce LR 3-10x, add warmup",
         moves=(LR_DOWN, WARMUP_UP, CLIP_TIGHTER), live=(LR_DOWN, CLIP_TIGHTER), short="LR too high"),
    Code("lr_too_low", "loss falls far too slowly with healthy gradients",
         "raise LR until updates are ~1e-3 of the weights (10-1000x; 2-10x if unmeasured), run the LR finder",
         moves=(LR_UP,), live=(LR_UP,), short="LR too low"),
    Code("lr_decayed_too_early", "progress stopped after the schedule drove LR near zero",
         "longer schedule, higher floor, check scheduler step unit", moves=(MIN_LR_UP,), short="LR decayed"),
    Code("lr_schedule_cycles", "the LR went near zero and gradually back up: a schedule period shorter than the run",
         "set the cosine schedule's T_max to the run's scheduler steps (or step it per epoch); ignore for cycles on purpose",
         origin="extension", moves=(), short="LR cycles"),
    Code("overfitting", "training loss keeps falling while validation loss rises", "regularization, more data, early stopping",
         moves=(REG_UP,), short="overfitting"),
    Code("underfitting", "train and validation losses plateau high and close together",
         "bigger model, less regularization, higher LR", moves=(CAPACITY_UP, REG_DOWN, LR_UP), live=(LR_UP,),
         short="underfitting"),
    Code("loss_spikes", "isolated spikes that recover (atypical batches)", "validate data, robust loss, clipping",
         moves=(CLIP_TIGHTER,), live=(LR_DOWN, CLIP_TIGHTER), short="loss spikes"),
    Code("over_clipping", "gradient clipping is active on most steps (> 80%)", "raise max_norm or reduce LR",
         moves=(CLIP_LOOSER, LR_DOWN), short="over-clipping"),
    Code("dead_relu", "a large share of ReLU units never activate", "lower LR, fix bias init, LeakyReLU/GELU",
         moves=(LR_DOWN,), short="dead ReLU"),
    Code("activation_saturation", "sigmoid/tanh units stuck in their flat regions",
         "normalization, smaller init, other activation",
         moves=(INIT_SMALLER,), short="saturation"),
    Code("bad_input_data", "inputs are non-finite, extreme or far from normalized", "normalize, validate and filter batches",
         moves=(), short="bad inputs"),
    Code("frozen_val_metric", "a validation metric repeats exactly while training changes",
         "evaluate the current model, check the eval pipeline", moves=(), short="frozen val"),
    Code("train_mode_bug", "the model is in eval mode during training steps (or train mode during validation)",
         "call model.train() at the top of each epoch", moves=(), short="eval mode"),
    Code("data_loading_bottleneck", "the run is slow because steps wait for data",
         "more loader workers, pinned memory, prefetching, faster storage or decoding", moves=(WORKERS_UP,), short="data-bound"),
    Code("grad_not_zeroed", "gradients accumulate across optimizer steps because zero_grad() is missing",
         "call optimizer.zero_grad() once per optimizer step (or set_to_none=True), before loss.backward()",
         moves=(), short="no zero_grad"),
    Code("double_softmax", "probabilities (softmax/sigmoid outputs) are fed to a loss that expects logits",
         "return logits from the model; drop the final softmax, or use NLLLoss on log-probabilities",
         moves=(), short="softmax twice"),
    Code("loss_shape_mismatch", "loss inputs of different shapes broadcast silently",
         "reshape so input and target shapes match (squeeze(-1)) where the loss is called", moves=(), short="shape mismatch"),
    Code("labels_misaligned", "targets do not correspond to their inputs (shuffled or offset separately)",
         "shuffle inputs and targets together; check the dataset's __getitem__", moves=(), short="labels off"),
    Code("unshuffled_data", "batches ordered by class or time", "shuffle=True in the DataLoader (or a sampler that shuffles)",
         moves=(), short="unshuffled"),
    Code("healthy", "nothing wrong detected", "none", moves=(), short="healthy"),
    Code("unreadable", "the log could not be read at all (a package its format needs is missing): nothing was judged",
         "install the extra it names (pip install 'tuidiag[tensorboard]' or 'tuidiag[wandb]')", "extension", moves=(),
         short="unreadable"),
    Code("rank_nonfinite_first", "one rank's loss or gradient norm turned non-finite before the others'",
         "inspect the batch that rank loaded at that step; nan-hunt its capture", "extension", moves=(), short="rank NaN"),
    Code("rank_desync", "replicas drifted apart: weight norms differ between ranks",
         "same LR/schedule on every rank, every rank steps every iteration, all-reduce every gradient", "extension",
         moves=(), short="rank desync"),
    Code("straggler_rank", "one rank is much slower and sets the pace", "that rank's input pipeline, host or device", "extension",
         moves=(WORKERS_UP,), short="straggler"),
    Code("class_imbalance", "a few classes dominate the targets", "reweight the loss or resample the classes", "extension",
         moves=(), short="imbalance"),
    Code("low_gpu_utilization", "the GPU is idle much of the time", "larger batches, faster input pipeline", "extension",
         moves=(BATCH_UP,), short="GPU idle"),
    Code("overparameterized", "many parameters per training sample seen (a review note)",
         "more data, augmentation or a smaller model", "extension", moves=(REG_UP, CAPACITY_DOWN), short="too many params"),
    Code("deep_unnormalized", "a deep network without normalization layers (a review note)",
         "add BatchNorm/LayerNorm or residual connections", "extension", moves=(), short="no norm layers"),
    Code("loss_accuracy_mismatch", "the loss falls while accuracy stalls (a review note)",
         "check the metric and the label mapping", "extension", moves=(), short="acc stalls"),
    Code("recorder_losses", "the recorder refused values at the call or lost rows: findings judge only what was recorded (a note)",
         "log what the recorder accepts (README 'Logging values'); the rejected_value and lost_rows events say what was not",
         "extension", moves=(), short="values lost"),
    Code("metrics_missing", "the run was not recorded by tuidiag's recorder (a TensorBoard, W&B or CSV log) and lacks "
         "metrics some rules read: those rules did not judge it (a note)",
         "record with tuidiag.Recorder (rec.watch(model)) to have every rule judge the run", "extension", moves=(), short="not recorded"),
]

CODES: dict[str, Code] = {code.name: code for code in _ALL}
"""Every known diagnosis code, by name."""
SHORT_MAX = 15
"""The longest short form of a code: a badge with its confidence (``LR too high 97%``) fits the overview at 80 columns."""


def badge(name: str) -> str:
    """The short form of code ``name`` for a health badge (``name`` itself for a text that is not a registered code)."""
    code = CODES.get(name)
    return name if code is None else (code.short or code.name)


def live_codes(move: Move) -> tuple[str, ...]:
    """The codes whose finding makes the monitor offer ``move`` on the live training (:attr:`Code.live`)."""
    return tuple(code.name for code in _ALL if move in code.live)


def moves_of(name: str, fix: str) -> dict[Move, str]:
    """The moves ``fix`` makes, each with its clause; refuses a code not registered, or a move its entry does not list.

    A :class:`~tuidiag.diagnosis.moves.FixText` names its clauses' moves; plain text makes every move the code lists.
    """
    if name not in CODES:
        raise ValueError(f"finding code {name!r} is not declared in tuidiag.diagnosis.codes (with the moves its fix makes)")
    allowed = CODES[name].moves
    if not isinstance(fix, FixText):
        return {move: str(fix) for move in allowed}
    extra = [m for m in fix.moves if m not in allowed]
    if extra:
        raise ValueError(f"the fix of {name!r} makes moves its entry in tuidiag.diagnosis.codes does not list: {extra}")
    return dict(fix.moves)


def markdown_table() -> str:
    """The user-facing table of codes, as ``docs/diagnosis-codes.md`` holds it."""
    lines = [
        "# Diagnosis codes",
        "",
        "Every finding `tuidiag diagnose RUN --json` prints carries one stable `code` from this table.",
        "Codes marked *shared* are the stable contract (none is ever renamed); *extension* codes are",
        "tuidiag's own. Codes not yet detected are reserved: no rule emits them yet.",
        "A finding's `confidence` is calibrated on labelled trainings, not hand-set: see [calibration.md](calibration.md).",
        "Generated from `tuidiag/diagnosis/codes.py` by `python -m tuidiag.diagnosis.codes`.",
        "",
        "| code | what it means | typical fix | origin | detected |",
        "| --- | --- | --- | --- | --- |",
    ]
    for code in _ALL:
        lines.append(f"| `{code.name}` | {code.meaning} | {code.fix} | {code.origin} | {'yes' if code.detected else 'not yet'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown_table(), end="")

"""The labelled suite: faulty and healthy CPU trainings, split into ``tune`` and ``held_out``.

Each scenario plants one fault (its ``family``, a diagnosis code, or ``healthy``) in a small
training of one ``architecture`` (mlp, resmlp, cnn, rescnn, gru, lstm, rnn, transformer).
``acceptable`` lists the codes that count as a correct top finding (the planted cause, plus
a code whose fix is the same where the fault legitimately shows as it); ``false_alarm``
lists codes that would be wrong to raise.

The split is by family and by architecture, never by seed: a scenario is ``held_out``
when its family is one of :data:`HELD_OUT_FAMILIES` or its architecture one of
:data:`HELD_OUT_ARCHS`, so whole kinds of fault and whole kinds of network are never seen
while tuning (thresholds, and the confidence calibration fitted by
``benchmarks/diagnosis_accuracy.py --fit-calibration``). Healthy runs are split by
architecture only, so both parts have them.
"""

from __future__ import annotations

import math
from typing import Any

from benchmarks.suite.train import Spec

ALL_CODES = (
    "nonfinite_loss", "exploding_gradients", "vanishing_gradients", "dead_layer", "lr_too_high", "lr_too_low",
    "lr_decayed_too_early", "overfitting", "underfitting", "loss_spikes", "over_clipping", "dead_relu",
    "activation_saturation", "bad_input_data", "frozen_val_metric", "train_mode_bug", "data_loading_bottleneck",
    "class_imbalance", "grad_not_zeroed", "double_softmax", "loss_shape_mismatch", "labels_misaligned", "unshuffled_data",
)

ALSO_OK: dict[str, tuple[str, ...]] = {
    "lr_too_high": ("nonfinite_loss",),
    "dead_relu": (),
    "activation_saturation": ("vanishing_gradients",),
}
"""Codes accepted besides the family's own (same fix, or the fault's direct signature)."""

WRONG: dict[str, tuple[str, ...]] = {
    "lr_too_high": ("lr_too_low", "vanishing_gradients", "overfitting", "dead_layer", "frozen_val_metric"),
    "lr_too_low": ("lr_too_high", "exploding_gradients", "overfitting", "loss_spikes", "nonfinite_loss"),
    "lr_decayed_too_early": ("lr_too_high", "exploding_gradients", "overfitting", "nonfinite_loss"),
    "overfitting": ("underfitting", "lr_too_low", "lr_too_high", "vanishing_gradients", "nonfinite_loss"),
    "underfitting": ("overfitting", "lr_too_high", "exploding_gradients", "nonfinite_loss"),
    "vanishing_gradients": ("exploding_gradients", "lr_too_high", "overfitting", "nonfinite_loss"),
    "exploding_gradients": ("vanishing_gradients", "lr_too_low", "overfitting", "underfitting"),
    "dead_layer": ("exploding_gradients", "lr_too_high", "nonfinite_loss", "loss_spikes"),
    "over_clipping": ("exploding_gradients", "lr_too_high", "nonfinite_loss", "overfitting"),
    "dead_relu": ("exploding_gradients", "overfitting", "activation_saturation", "nonfinite_loss"),
    "activation_saturation": ("dead_relu", "overfitting", "exploding_gradients", "nonfinite_loss"),
    "bad_input_data": ("lr_too_low", "overfitting", "vanishing_gradients", "dead_layer"),
    "loss_spikes": ("lr_too_low", "underfitting", "vanishing_gradients", "nonfinite_loss", "dead_layer"),
    "frozen_val_metric": ("overfitting", "underfitting", "lr_too_high", "nonfinite_loss"),
    "train_mode_bug": ("lr_too_high", "exploding_gradients", "nonfinite_loss", "dead_layer"),
    "class_imbalance": ("lr_too_high", "exploding_gradients", "nonfinite_loss", "dead_layer"),
    "data_loading_bottleneck": ("lr_too_high", "lr_too_low", "overfitting", "nonfinite_loss", "dead_layer"),
    "grad_not_zeroed": ("lr_too_low", "vanishing_gradients", "dead_layer", "overfitting"),
    "double_softmax": ("lr_too_high", "exploding_gradients", "nonfinite_loss", "dead_layer"),
    "loss_shape_mismatch": ("lr_too_high", "exploding_gradients", "nonfinite_loss", "dead_layer"),
    "labels_misaligned": ("lr_too_high", "exploding_gradients", "nonfinite_loss", "dead_layer", "lr_too_low"),
    "unshuffled_data": ("class_imbalance", "lr_too_low", "nonfinite_loss", "dead_layer"),
    "nonfinite_loss": ("lr_too_high", "exploding_gradients", "lr_too_low", "dead_layer", "overfitting"),
    "healthy": ALL_CODES,
}


HELD_OUT_FAMILIES = ("loss_spikes", "over_clipping", "frozen_val_metric", "activation_saturation", "labels_misaligned",
                     "unshuffled_data")
"""Fault families never seen while tuning: two symptom families of the curves, one of the
activations, one of the evaluation loop and two silent bugs."""
HELD_OUT_ARCHS = ("lstm", "resmlp", "transformer")
"""Architectures never seen while tuning: a gated recurrence, a pre-LayerNorm residual net and attention."""


def part_of(family: str, arch: str) -> str:
    """``held_out`` for a held-out family or architecture, else ``tune``."""
    return "held_out" if family in HELD_OUT_FAMILIES or arch in HELD_OUT_ARCHS else "tune"


COLLAPSED = 1e-3
"""An LR schedule has collapsed (the fault of ``lr_decayed_too_early`` has begun) once the LR is this share of its start."""


def collapse_step(spec: Spec) -> int:
    """The step at which a per-batch schedule has driven the LR down to :data:`COLLAPSED` of its start."""
    if spec.schedule == "per_batch_decay":
        return math.ceil(math.log(COLLAPSED) / math.log(spec.fault.get("gamma", 0.95)))
    return spec.fault.get("step_size", 30) * round(math.log10(1 / COLLAPSED))


def S(name: str, family: str, acceptable: tuple[str, ...] | None = None, **kwargs: Any) -> Spec:
    """A spec with the family's default labels (``acceptable`` overrides the accepted codes) and its part of the split.

    A collapsing LR schedule's fault starts where the LR has collapsed (its ``onset``, for the detection delay)."""
    accepted = acceptable or (family, *ALSO_OK.get(family, ()))
    spec = Spec(name, family, "tune", accepted, tuple(c for c in WRONG[family] if c not in accepted), **kwargs)
    spec.split = part_of(family, spec.architecture)
    if family == "lr_decayed_too_early" and "onset" not in kwargs:
        spec.onset = min(collapse_step(spec), spec.steps - 1)
    return spec


SGD_MOM = {"optim": "sgd", "momentum": 0.9}
RNN = {"arch": "rnn"}
LSTM = {"arch": "rnn", "model": {"kind": "lstm"}}
PLAIN_RNN = {"arch": "rnn", "model": {"kind": "rnn"}}

SUITE: list[Spec] = [
    # ---- LR too high: diverging to NaN, and oscillating (or collapsing) without NaN
    S("lr-high-nan-mlp", "lr_too_high", model={"act": "gelu", "width": 128, "depth": 3}, lr=0.4, steps=300, **SGD_MOM),
    S("lr-high-nan-transformer", "lr_too_high", arch="transformer", lr=0.8, steps=250, **SGD_MOM),
    S("lr-high-osc-mlp-tanh", "lr_too_high", model={"act": "tanh"}, lr=2.0, steps=400, **SGD_MOM),
    S("lr-high-osc-gru", "lr_too_high", **RNN, lr=3.0, steps=300, **SGD_MOM),
    S("lr-high-osc-transformer", "lr_too_high", arch="transformer", lr=0.05, steps=300),
    S("lr-high-osc-cnn", "lr_too_high", acceptable=("lr_too_high", "dead_relu"), arch="cnn", lr=3.0, steps=300, **SGD_MOM),
    S("lr-high-nan-transformer-fast", "lr_too_high", arch="transformer", lr=1.2, steps=200, **SGD_MOM),
    S("lr-high-osc-transformer-sgd", "lr_too_high", arch="transformer", lr=0.3, steps=300, **SGD_MOM),
    S("lr-high-osc-lstm", "lr_too_high", **RNN, model={"kind": "lstm"}, lr=5.0, steps=300, **SGD_MOM),
    # ---- LR too low
    S("lr-low-mlp", "lr_too_low", lr=1e-5, steps=400, optim="sgd"),
    S("lr-low-cnn", "lr_too_low", arch="cnn", lr=1e-4, batch_size=32, steps=300, optim="sgd"),
    S("lr-low-gru", "lr_too_low", **RNN, lr=1e-6, steps=300),
    S("lr-low-transformer", "lr_too_low", arch="transformer", lr=1e-6, steps=300, optim="adamw"),
    S("lr-low-mlp-momentum", "lr_too_low", model={"width": 128}, lr=3e-6, steps=400, **SGD_MOM),
    # ---- LR decayed too early (an epoch schedule stepped per batch)
    S("lr-decay-mlp", "lr_decayed_too_early", lr=0.1, steps=500, optim="sgd", schedule="per_batch_decay", fault={"gamma": 0.98}),
    S("lr-decay-gru", "lr_decayed_too_early", **RNN, lr=1e-3, steps=400, schedule="step_per_batch", fault={"step_size": 50}),
    S("lr-decay-transformer-step", "lr_decayed_too_early", arch="transformer", lr=2e-3, steps=400, schedule="step_per_batch", fault={"step_size": 40}),
    S("lr-decay-cnn", "lr_decayed_too_early", arch="cnn", lr=2e-3, steps=400, schedule="step_per_batch", fault={"step_size": 40}),
    S("lr-decay-transformer", "lr_decayed_too_early", arch="transformer", lr=1e-3, steps=400, optim="adamw", schedule="per_batch_decay", fault={"gamma": 0.98}),
    # ---- overfitting (tiny noisy train set, big model)
    S("overfit-mlp", "overfitting", model={"width": 256}, lr=2e-3, train_size=128, batch_size=32, steps=600, fault={"label_noise": 0.3}),
    S("overfit-transformer", "overfitting", arch="transformer", model={"dim": 64}, lr=1e-3, train_size=96, batch_size=32, steps=500, fault={"label_noise": 0.3}),
    S("overfit-cnn", "overfitting", arch="cnn", model={"channels": 32}, lr=3e-3, train_size=96, batch_size=32, steps=600, fault={"label_noise": 0.3}),
    S("overfit-gru", "overfitting", **RNN, model={"hidden": 128}, lr=3e-3, train_size=96, batch_size=32, steps=500, fault={"label_noise": 0.3}),
    # ---- underfitting (tiny model, hard task)
    S("underfit-mlp", "underfitting", model={"width": 2, "depth": 1}, task="xor", lr=1e-2, steps=500),
    S("underfit-cnn", "underfitting", arch="cnn", model={"channels": 1, "depth": 1}, lr=1e-2, steps=500),
    S("underfit-gru", "underfitting", **RNN, model={"hidden": 1}, lr=1e-2, steps=500),
    # ---- vanishing gradients (deep sigmoid stacks)
    S("vanish-mlp-sgd", "vanishing_gradients", model={"depth": 12, "act": "sigmoid"}, lr=0.05, steps=400, optim="sgd"),
    S("vanish-cnn", "vanishing_gradients", arch="cnn", model={"depth": 8, "act": "sigmoid"}, lr=0.05, steps=300, optim="sgd"),
    S("vanish-mlp-momentum", "vanishing_gradients", model={"depth": 10, "act": "sigmoid", "width": 48}, lr=0.02, steps=400, **SGD_MOM),
    # ---- exploding gradients (deep stacks or a recurrence with a far too large init)
    S("explode-mlp-adam", "exploding_gradients", model={"depth": 8, "init_gain": 6.0}, lr=1e-3, steps=300),
    S("explode-cnn-adam", "exploding_gradients", arch="cnn", model={"depth": 6, "init_gain": 8.0}, lr=1e-3, steps=300),
    S("explode-rnn-adam", "exploding_gradients", **RNN, model={"kind": "rnn", "nonlinearity": "relu", "recurrent_gain": 6.0}, lr=1e-3, steps=300),
    S("explode-mlp-sgd", "exploding_gradients", model={"depth": 8, "init_gain": 6.0}, lr=1e-3, steps=300, optim="sgd"),
    # ---- dead layer (a module left out of forward, or a detached stem)
    S("dead-layer-mlp-unused", "dead_layer", model={"unused": True}, steps=300),
    S("dead-layer-cnn-detach", "dead_layer", arch="cnn", model={"detach": True}, steps=300),
    S("dead-layer-mlp-detach", "dead_layer", model={"detach": True, "depth": 3}, batch_size=128, steps=300),
    S("dead-layer-transformer-unused", "dead_layer", arch="transformer", model={"unused": True}, steps=250, optim="adamw"),
    # ---- over-clipping (max_norm tiny)
    S("overclip-mlp", "over_clipping", lr=0.05, max_grad_norm=1e-3, batch_size=128, steps=400, optim="sgd"),
    S("overclip-cnn", "over_clipping", arch="cnn", lr=0.05, max_grad_norm=1e-3, steps=300, optim="sgd"),
    S("overclip-gru", "over_clipping", **RNN, lr=0.05, max_grad_norm=1e-3, steps=300, **SGD_MOM),
    # ---- dead ReLU (huge negative bias init, or a huge LR)
    S("dead-relu-mlp-bias", "dead_relu", model={"bias_init": -3.0}, steps=300),
    S("dead-relu-mlp-lr", "dead_relu", acceptable=("dead_relu", "lr_too_high"), model={"width": 128}, lr=0.3, steps=300),
    S("dead-relu-cnn-bias", "dead_relu", arch="cnn", model={"bias_init": -2.0}, steps=300),
    # ---- activation saturation (tanh/sigmoid with a huge init)
    S("saturation-mlp-tanh", "activation_saturation", model={"act": "tanh", "init_gain": 10.0}, steps=300),
    S("saturation-mlp-sigmoid", "activation_saturation", model={"act": "sigmoid", "init_gain": 12.0}, steps=300, optim="sgd", lr=0.1),
    S("saturation-cnn-tanh", "activation_saturation", arch="cnn", model={"act": "tanh", "init_gain": 20.0}, steps=300),
    # ---- bad input data (unnormalized x1000, NaN samples)
    S("bad-input-scale-mlp", "bad_input_data", fault={"input_scale": 1000.0}, steps=300),
    S("bad-input-nan-mlp", "bad_input_data", fault={"nan_at": 200}, onset=200, steps=300),
    S("bad-input-scale-cnn", "bad_input_data", arch="cnn", fault={"input_scale": 1000.0}, steps=300, optim="sgd", lr=0.01),
    S("bad-input-nan-gru", "bad_input_data", **RNN, fault={"nan_at": 150}, onset=150, steps=250),
    # ---- loss spikes (corrupted batches every so often)
    S("spikes-mlp-labels", "loss_spikes", lr=3e-3, batch_size=128, steps=500, fault={"corrupt_every": 60, "corrupt_from": 200}, onset=200),
    S("spikes-transformer-labels", "loss_spikes", arch="transformer", lr=1e-3, steps=500, fault={"corrupt_every": 50, "corrupt_from": 250}, onset=250),
    S("spikes-mlp-inputs", "loss_spikes", acceptable=("loss_spikes", "bad_input_data"), lr=3e-3, steps=450, fault={"corrupt_every": 40, "corrupt_from": 150, "corrupt": "inputs"}, onset=150),
    S("spikes-cnn-inputs", "loss_spikes", acceptable=("loss_spikes", "bad_input_data"), arch="cnn", steps=450, lr=3e-3, fault={"corrupt_every": 50, "corrupt_from": 150, "corrupt": "inputs"}, onset=150),
    # ---- frozen validation metric (eval on a stale copy)
    S("frozen-val-mlp", "frozen_val_metric", fault={"stale_eval": True}, steps=300),
    S("frozen-val-cnn", "frozen_val_metric", arch="cnn", fault={"stale_eval": True}, steps=300, lr=0.05, **SGD_MOM),
    S("frozen-val-gru", "frozen_val_metric", **RNN, fault={"stale_eval": True}, batch_size=32, steps=300),
    # ---- model.eval() left on during training
    S("eval-mode-mlp-dropout", "train_mode_bug", model={"dropout": 0.5}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-cnn-bn", "train_mode_bug", arch="cnn", model={"batchnorm": True}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-transformer", "train_mode_bug", arch="transformer", model={"dropout": 0.2}, fault={"eval_mode_bug": True}, onset=1, steps=250),
    # ---- class imbalance
    S("imbalance-mlp", "class_imbalance", fault={"imbalance": 0.95}, train_size=8192, batch_size=128, steps=300),
    S("imbalance-cnn", "class_imbalance", arch="cnn", fault={"imbalance": 0.95}, train_size=8192, steps=300),
    # ---- data loading bottleneck (the loader sleeps per batch)
    S("slow-loader-mlp", "data_loading_bottleneck", fault={"loader_sleep": 0.006}, steps=250),
    S("slow-loader-cnn", "data_loading_bottleneck", arch="cnn", fault={"loader_sleep": 0.008}, steps=250),
    # ---- the silent bugs (one each; thresholds were set on tests/test_silent_bugs.py, not here)
    S("no-zero-grad-mlp", "grad_not_zeroed", fault={"no_zero_grad": True}, steps=300),
    S("softmax-into-ce-cnn", "double_softmax", arch="cnn", fault={"softmax_output": True}, steps=300),
    S("mse-broadcast-mlp", "loss_shape_mismatch", fault={"mse_flat": True}, steps=300),
    S("labels-misaligned-mlp", "labels_misaligned", fault={"misaligned_labels": True}, steps=300),
    S("unshuffled-mlp", "unshuffled_data", fault={"unshuffled": True}, steps=300),
    # ---- healthy runs
    S("healthy-mlp-adam", "healthy", steps=400),
    S("healthy-cnn-adamw", "healthy", arch="cnn", lr=3e-3, steps=400, optim="adamw", schedule="cosine"),
    S("healthy-gru-adam", "healthy", **RNN, lr=3e-3, batch_size=32, steps=400),
    S("healthy-mlp-bs256-dropout", "healthy", model={"dropout": 0.1, "width": 128}, batch_size=256, lr=2e-3, steps=300, optim="adamw", schedule="cosine"),
    S("healthy-gru-sgd-bs16", "healthy", **RNN, batch_size=16, lr=0.02, steps=400, **SGD_MOM),
    S("healthy-mlp-sgd-momentum", "healthy", lr=0.02, steps=400, **SGD_MOM),
    S("healthy-cnn-sgd-bs16", "healthy", arch="cnn", batch_size=16, lr=0.02, steps=400, **SGD_MOM),
    S("healthy-lstm-clipped", "healthy", **RNN, model={"kind": "lstm"}, lr=3e-3, max_grad_norm=5.0, steps=400),
    S("healthy-transformer-warmup", "healthy", arch="transformer", lr=1e-3, batch_size=32, steps=400, optim="adamw", schedule="warmup_cosine"),
    # ==== more architectures, optimizers, data, lengths (50-5000 steps), batch sizes, seeds and resumed runs
    # ---- LR too high
    S("lr-high-adam-mlp", "lr_too_high", lr=0.1, steps=300, seed=1),
    S("lr-high-sgd-mom05-mlp", "lr_too_high", lr=0.5, steps=300, batch_size=32, **SGD_MOM),
    S("lr-high-sgd5-relu-mlp", "lr_too_high", lr=5.0, steps=1000, optim="sgd"),
    S("lr-high-resmlp", "lr_too_high", arch="resmlp", lr=2.0, steps=300, **SGD_MOM),
    S("lr-high-rescnn", "lr_too_high", arch="rescnn", lr=5.0, steps=300, **SGD_MOM),
    S("lr-high-adam-gru", "lr_too_high", **RNN, lr=0.1, steps=300, seed=2),
    S("lr-high-adam-lstm", "lr_too_high", **LSTM, lr=0.1, steps=300),
    S("lr-high-plain-rnn", "lr_too_high", **PLAIN_RNN, lr=2.0, steps=300, **SGD_MOM),
    S("lr-high-rmsprop-mlp", "lr_too_high", lr=0.2, steps=300, optim="rmsprop", batch_size=128),
    S("lr-high-adam-transformer", "lr_too_high", arch="transformer", lr=0.05, steps=300, batch_size=32, seed=1),
    S("lr-high-short-mlp", "lr_too_high", lr=3.0, steps=60, **SGD_MOM),
    S("lr-high-after-resume-mlp", "lr_too_high", lr=1e-3, steps=500, resume_at=200, onset=200, fault={"resume_lr": 300.0}),
    # ---- LR too low
    S("lr-low-resmlp", "lr_too_low", arch="resmlp", lr=1e-5, steps=400, optim="sgd"),
    S("lr-low-rescnn", "lr_too_low", arch="rescnn", lr=1e-6, steps=300),
    S("lr-low-lstm", "lr_too_low", **LSTM, lr=1e-6, steps=300),
    S("lr-low-plain-rnn", "lr_too_low", **PLAIN_RNN, lr=1e-5, steps=300, optim="sgd"),
    S("lr-low-cnn-adam-bs16", "lr_too_low", arch="cnn", lr=1e-6, batch_size=16, steps=300, seed=1),
    S("lr-low-mlp-long", "lr_too_low", lr=3e-7, steps=2000, batch_size=128, seed=2),
    S("lr-low-transformer-sgd", "lr_too_low", arch="transformer", lr=1e-4, steps=300, optim="sgd"),
    S("lr-low-rmsprop-gru", "lr_too_low", **RNN, lr=1e-6, steps=300, optim="rmsprop"),
    # ---- LR decayed too early
    S("lr-decay-mlp-step30", "lr_decayed_too_early", lr=3e-3, steps=500, schedule="step_per_batch", fault={"step_size": 30}),
    S("lr-decay-resmlp-exp95", "lr_decayed_too_early", arch="resmlp", lr=1e-3, steps=400, schedule="per_batch_decay", fault={"gamma": 0.95}),
    S("lr-decay-rescnn", "lr_decayed_too_early", arch="rescnn", lr=0.05, steps=400, schedule="step_per_batch", fault={"step_size": 40}, **SGD_MOM),
    S("lr-decay-lstm", "lr_decayed_too_early", **LSTM, lr=3e-3, steps=400, schedule="step_per_batch", fault={"step_size": 50}),
    S("lr-decay-plain-rnn", "lr_decayed_too_early", **PLAIN_RNN, lr=0.05, steps=400, schedule="per_batch_decay", fault={"gamma": 0.97}, **SGD_MOM),
    S("lr-decay-mlp-long", "lr_decayed_too_early", lr=0.05, steps=3000, schedule="per_batch_decay", fault={"gamma": 0.99}, val_every=100, **SGD_MOM),
    S("lr-decay-cnn-adam", "lr_decayed_too_early", arch="cnn", lr=3e-3, steps=500, schedule="per_batch_decay", fault={"gamma": 0.97}, seed=1),
    # ---- overfitting
    S("overfit-resmlp", "overfitting", arch="resmlp", model={"width": 128}, lr=2e-3, train_size=128, batch_size=32, steps=600, fault={"label_noise": 0.3}),
    S("overfit-rescnn", "overfitting", arch="rescnn", model={"channels": 16}, lr=3e-3, train_size=96, batch_size=32, steps=600, fault={"label_noise": 0.3}),
    S("overfit-lstm", "overfitting", arch="rnn", model={"kind": "lstm", "hidden": 128}, lr=3e-3, train_size=96, batch_size=32, steps=500, fault={"label_noise": 0.3}),
    S("overfit-mlp-adamw-s1", "overfitting", model={"width": 256}, lr=2e-3, train_size=128, batch_size=32, steps=600, optim="adamw", seed=1, fault={"label_noise": 0.3}),
    S("overfit-transformer-long", "overfitting", arch="transformer", model={"dim": 64}, lr=1e-3, train_size=96, batch_size=32, steps=1500, val_every=50, fault={"label_noise": 0.3}),
    S("overfit-plain-rnn", "overfitting", arch="rnn", model={"kind": "rnn", "hidden": 128}, lr=1e-3, train_size=96, batch_size=32, steps=500, fault={"label_noise": 0.3}),
    S("overfit-mlp-resumed", "overfitting", model={"width": 256}, lr=2e-3, train_size=128, batch_size=32, steps=600, resume_at=300, resume_from=250, seed=2, fault={"label_noise": 0.3}),
    # ---- underfitting
    S("underfit-resmlp", "underfitting", arch="resmlp", model={"width": 2, "depth": 1}, task="xor", lr=1e-2, steps=500),
    S("underfit-lstm", "underfitting", arch="rnn", model={"kind": "lstm", "hidden": 1}, lr=1e-2, steps=500),
    S("underfit-plain-rnn", "underfitting", arch="rnn", model={"kind": "rnn", "hidden": 1}, lr=1e-2, steps=500, seed=1),
    S("underfit-mlp-sgd", "underfitting", model={"width": 1, "depth": 1}, task="xor", lr=0.05, steps=500, **SGD_MOM),
    S("underfit-mlp-long", "underfitting", model={"width": 2, "depth": 1}, task="xor", lr=1e-2, batch_size=128, steps=800, optim="adamw", seed=1),
    # ---- vanishing gradients
    S("vanish-mlp-adam", "vanishing_gradients", model={"depth": 12, "act": "sigmoid"}, lr=1e-3, steps=400),
    S("vanish-mlp-deep-bs32", "vanishing_gradients", model={"depth": 16, "act": "sigmoid", "width": 32}, lr=0.05, batch_size=32, steps=400, optim="sgd"),
    S("vanish-cnn-momentum", "vanishing_gradients", arch="cnn", model={"depth": 10, "act": "sigmoid"}, lr=0.01, steps=300, **SGD_MOM),
    S("vanish-mlp-tanh-small-init", "vanishing_gradients", model={"depth": 20, "act": "tanh", "init_gain": 0.3}, lr=0.05, steps=400, optim="sgd"),
    # ---- exploding gradients
    S("explode-rnn-sgd", "exploding_gradients", arch="rnn", model={"kind": "rnn", "nonlinearity": "relu", "recurrent_gain": 5.0}, lr=1e-3, steps=300, optim="sgd"),
    S("explode-cnn-sgd", "exploding_gradients", arch="cnn", model={"depth": 6, "init_gain": 8.0}, lr=1e-3, steps=300, optim="sgd"),
    S("explode-mlp-adamw", "exploding_gradients", model={"depth": 10, "init_gain": 5.0}, lr=1e-3, steps=300, optim="adamw"),
    S("explode-mlp-bs32-s1", "exploding_gradients", model={"depth": 8, "init_gain": 6.0}, lr=1e-3, batch_size=32, steps=300, seed=1),
    # ---- dead layer: a module left out, a detached stem, every parameter frozen, an optimizer over another model
    S("dead-layer-rescnn-unused", "dead_layer", arch="rescnn", model={"unused": True}, steps=300),
    S("dead-layer-gru-detach", "dead_layer", **RNN, model={"detach": True}, steps=300),
    S("dead-layer-lstm-unused", "dead_layer", arch="rnn", model={"kind": "lstm", "unused": True}, steps=300),
    S("dead-layer-resmlp-detach", "dead_layer", arch="resmlp", model={"detach": True}, steps=300),
    S("dead-layer-cnn-unused-sgd", "dead_layer", arch="cnn", model={"unused": True}, lr=0.02, steps=300, **SGD_MOM),
    S("dead-layer-mlp-unused-short", "dead_layer", model={"unused": True}, steps=60),
    S("dead-layer-transformer-detach", "dead_layer", arch="transformer", model={"detach": True}, steps=250),
    S("frozen-all-mlp", "dead_layer", fault={"frozen": True}, steps=300),
    S("frozen-all-cnn", "dead_layer", arch="cnn", fault={"frozen": True}, steps=200, **SGD_MOM),
    S("frozen-all-lstm", "dead_layer", **LSTM, fault={"frozen": True}, steps=200),
    S("frozen-all-transformer-short", "dead_layer", arch="transformer", fault={"frozen": True}, steps=80),
    S("orphan-optimizer-mlp", "dead_layer", fault={"orphan_optimizer": True}, steps=300),
    S("orphan-optimizer-gru", "dead_layer", **RNN, fault={"orphan_optimizer": True}, steps=300, seed=1),
    S("orphan-optimizer-resmlp", "dead_layer", arch="resmlp", fault={"orphan_optimizer": True}, lr=0.02, steps=200, **SGD_MOM),
    # ---- over-clipping
    S("overclip-resmlp", "over_clipping", arch="resmlp", lr=0.05, max_grad_norm=1e-3, steps=300, optim="sgd"),
    S("overclip-rescnn", "over_clipping", arch="rescnn", lr=0.05, max_grad_norm=1e-3, steps=300, optim="sgd"),
    S("overclip-lstm", "over_clipping", **LSTM, lr=0.05, max_grad_norm=1e-3, steps=300, **SGD_MOM),
    S("overclip-transformer", "over_clipping", arch="transformer", lr=0.05, max_grad_norm=1e-3, steps=300, optim="sgd"),
    S("overclip-mlp-adam", "over_clipping", lr=1e-3, max_grad_norm=1e-2, steps=300, seed=1),
    # ---- dead ReLU
    S("dead-relu-mlp-bias-sgd", "dead_relu", model={"bias_init": -5.0}, lr=0.05, steps=300, optim="sgd"),
    S("dead-relu-resmlp-bias", "dead_relu", arch="resmlp", model={"bias_init": -3.0}, steps=300),
    S("dead-relu-rescnn-bias", "dead_relu", arch="rescnn", model={"bias_init": -3.0}, steps=300),
    S("dead-relu-cnn-bias-s1", "dead_relu", arch="cnn", model={"bias_init": -3.0}, batch_size=32, steps=300, seed=1),
    S("dead-relu-mlp-deep-bias", "dead_relu", model={"depth": 3, "width": 128, "bias_init": -2.0}, steps=300),
    # ---- activation saturation
    S("saturation-mlp-tanh-sgd", "activation_saturation", model={"act": "tanh", "init_gain": 8.0}, lr=0.05, steps=300, optim="sgd"),
    S("saturation-mlp-sigmoid-adam", "activation_saturation", model={"act": "sigmoid", "init_gain": 15.0}, steps=300),
    S("saturation-cnn-sigmoid", "activation_saturation", arch="cnn", model={"act": "sigmoid", "init_gain": 20.0}, steps=300),
    S("saturation-resmlp-tanh", "activation_saturation", arch="resmlp", model={"act": "tanh", "init_gain": 10.0}, steps=300),
    S("saturation-mlp-tanh-deep", "activation_saturation", model={"act": "tanh", "depth": 4, "init_gain": 6.0}, batch_size=32, steps=300),
    # ---- bad input data
    S("bad-input-scale-rescnn", "bad_input_data", arch="rescnn", fault={"input_scale": 1000.0}, steps=300),
    S("bad-input-nan-lstm", "bad_input_data", **LSTM, fault={"nan_at": 100}, onset=100, steps=200),
    S("bad-input-scale-gru", "bad_input_data", **RNN, fault={"input_scale": 1000.0}, steps=300),
    S("bad-input-scale-resmlp", "bad_input_data", arch="resmlp", fault={"input_scale": 1000.0}, steps=300),
    S("bad-input-nan-mlp-short", "bad_input_data", fault={"nan_at": 40}, onset=40, steps=80),
    S("bad-input-nan-cnn-sgd", "bad_input_data", arch="cnn", fault={"nan_at": 120}, onset=120, lr=0.02, steps=200, **SGD_MOM),
    S("bad-input-nan-after-resume-cnn", "bad_input_data", arch="cnn", fault={"nan_at": 200}, onset=200, steps=300, resume_at=150),
    # ---- loss spikes
    S("spikes-resmlp-labels", "loss_spikes", arch="resmlp", lr=3e-3, batch_size=128, steps=500, train_size=8192, fault={"corrupt_every": 60, "corrupt_from": 200}, onset=200),
    S("spikes-rescnn-labels", "loss_spikes", arch="rescnn", lr=3e-3, steps=450, train_size=8192, fault={"corrupt_every": 50, "corrupt_from": 150}, onset=150),
    S("spikes-gru-labels", "loss_spikes", **RNN, lr=3e-3, batch_size=128, steps=500, fault={"corrupt_every": 60, "corrupt_from": 200}, onset=200),
    S("spikes-lstm-labels", "loss_spikes", **LSTM, lr=3e-3, batch_size=128, steps=500, fault={"corrupt_every": 50, "corrupt_from": 200}, onset=200),
    S("spikes-mlp-long", "loss_spikes", lr=3e-3, batch_size=128, steps=3000, train_size=32768, val_every=100, fault={"corrupt_every": 300, "corrupt_from": 600}, onset=600),
    S("spikes-transformer-labels-s1", "loss_spikes", arch="transformer", lr=1e-3, steps=500, seed=1, fault={"corrupt_every": 40, "corrupt_from": 250}, onset=250),
    S("spikes-after-resume-mlp", "loss_spikes", lr=3e-3, batch_size=128, steps=500, resume_at=150, fault={"corrupt_every": 60, "corrupt_from": 200}, onset=200),
    # ---- frozen validation metric
    S("frozen-val-transformer", "frozen_val_metric", arch="transformer", fault={"stale_eval": True}, steps=300),
    S("frozen-val-resmlp", "frozen_val_metric", arch="resmlp", fault={"stale_eval": True}, steps=300),
    S("frozen-val-rescnn", "frozen_val_metric", arch="rescnn", fault={"stale_eval": True}, steps=300, lr=0.02, **SGD_MOM),
    S("frozen-val-lstm", "frozen_val_metric", **LSTM, fault={"stale_eval": True}, steps=300),
    S("frozen-val-mlp-sgd-s1", "frozen_val_metric", fault={"stale_eval": True}, steps=300, lr=0.02, seed=1, **SGD_MOM),
    # ---- model.eval() left on during training
    S("eval-mode-resmlp-dropout", "train_mode_bug", arch="resmlp", model={"dropout": 0.3}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-rescnn-bn", "train_mode_bug", arch="rescnn", fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-lstm-dropout", "train_mode_bug", arch="rnn", model={"kind": "lstm", "layers": 2, "dropout": 0.3}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-gru-dropout", "train_mode_bug", arch="rnn", model={"layers": 2, "dropout": 0.3}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-mlp-dropout-sgd", "train_mode_bug", model={"dropout": 0.3}, fault={"eval_mode_bug": True}, onset=1, lr=0.02, steps=300, **SGD_MOM),
    # ---- class imbalance
    S("imbalance-gru", "class_imbalance", **RNN, fault={"imbalance": 0.95}, train_size=8192, steps=300),
    S("imbalance-transformer", "class_imbalance", arch="transformer", fault={"imbalance": 0.95}, train_size=8192, steps=300),
    S("imbalance-resmlp", "class_imbalance", arch="resmlp", fault={"imbalance": 0.95}, train_size=8192, steps=300),
    S("imbalance-rescnn", "class_imbalance", arch="rescnn", fault={"imbalance": 0.9}, train_size=8192, steps=300),
    S("imbalance-lstm", "class_imbalance", **LSTM, fault={"imbalance": 0.95}, train_size=8192, steps=300),
    # ---- data loading bottleneck
    S("slow-loader-gru", "data_loading_bottleneck", **RNN, fault={"loader_sleep": 0.006}, steps=250),
    S("slow-loader-transformer", "data_loading_bottleneck", arch="transformer", fault={"loader_sleep": 0.008}, steps=250),
    S("slow-loader-resmlp", "data_loading_bottleneck", arch="resmlp", fault={"loader_sleep": 0.006}, steps=250),
    S("slow-loader-lstm", "data_loading_bottleneck", **LSTM, fault={"loader_sleep": 0.006}, steps=250),
    S("slow-loader-mlp-short", "data_loading_bottleneck", fault={"loader_sleep": 0.02}, steps=100),
    # ---- the silent bugs across architectures
    S("no-zero-grad-cnn", "grad_not_zeroed", arch="cnn", fault={"no_zero_grad": True}, steps=300),
    S("no-zero-grad-gru", "grad_not_zeroed", **RNN, fault={"no_zero_grad": True}, steps=300),
    S("no-zero-grad-transformer", "grad_not_zeroed", arch="transformer", fault={"no_zero_grad": True}, steps=250),
    S("no-zero-grad-resmlp", "grad_not_zeroed", arch="resmlp", fault={"no_zero_grad": True}, steps=300),
    S("no-zero-grad-lstm", "grad_not_zeroed", **LSTM, fault={"no_zero_grad": True}, steps=300),
    S("no-zero-grad-mlp-sgd", "grad_not_zeroed", fault={"no_zero_grad": True}, lr=1e-3, steps=300, **SGD_MOM),
    S("softmax-into-ce-mlp", "double_softmax", fault={"softmax_output": True}, steps=300),
    S("softmax-into-ce-gru", "double_softmax", **RNN, fault={"softmax_output": True}, steps=300),
    S("softmax-into-ce-transformer", "double_softmax", arch="transformer", fault={"softmax_output": True}, steps=250),
    S("softmax-into-ce-resmlp", "double_softmax", arch="resmlp", fault={"softmax_output": True}, steps=300),
    S("softmax-into-ce-lstm", "double_softmax", **LSTM, fault={"softmax_output": True}, steps=300),
    S("softmax-into-ce-rescnn-short", "double_softmax", arch="rescnn", fault={"softmax_output": True}, steps=100),
    S("mse-broadcast-cnn", "loss_shape_mismatch", arch="cnn", fault={"mse_flat": True}, steps=300),
    S("mse-broadcast-gru", "loss_shape_mismatch", **RNN, fault={"mse_flat": True}, steps=300),
    S("mse-broadcast-transformer", "loss_shape_mismatch", arch="transformer", fault={"mse_flat": True}, steps=250),
    S("mse-broadcast-resmlp", "loss_shape_mismatch", arch="resmlp", fault={"mse_flat": True}, steps=300),
    S("mse-broadcast-lstm-short", "loss_shape_mismatch", **LSTM, fault={"mse_flat": True}, steps=80),
    S("labels-misaligned-cnn", "labels_misaligned", arch="cnn", fault={"misaligned_labels": True}, steps=300),
    S("labels-misaligned-gru", "labels_misaligned", **RNN, fault={"misaligned_labels": True}, steps=300),
    S("labels-misaligned-transformer", "labels_misaligned", arch="transformer", fault={"misaligned_labels": True}, steps=250),
    S("labels-misaligned-resmlp", "labels_misaligned", arch="resmlp", fault={"misaligned_labels": True}, steps=300),
    S("labels-misaligned-lstm", "labels_misaligned", **LSTM, fault={"misaligned_labels": True}, steps=300),
    S("labels-misaligned-rescnn", "labels_misaligned", arch="rescnn", fault={"misaligned_labels": True}, steps=300, seed=1),
    S("unshuffled-cnn", "unshuffled_data", arch="cnn", fault={"unshuffled": True}, steps=300),
    S("unshuffled-gru", "unshuffled_data", **RNN, fault={"unshuffled": True}, steps=300),
    S("unshuffled-transformer", "unshuffled_data", arch="transformer", fault={"unshuffled": True}, steps=250),
    S("unshuffled-resmlp", "unshuffled_data", arch="resmlp", fault={"unshuffled": True}, steps=300),
    S("unshuffled-lstm", "unshuffled_data", **LSTM, fault={"unshuffled": True}, steps=300),
    # ---- a numerical fault in the loss at a normal LR (log of a ReLU output): non-finite at once, ending the run there
    S("poisson-log-relu-mlp", "nonfinite_loss", model={"width": 32}, lr=3e-3, batch_size=32, steps=300, fault={"poisson": True}, onset=-1),
    S("poisson-log-relu-mlp-adam1e3", "nonfinite_loss", lr=1e-3, steps=300, fault={"poisson": True}, onset=-1),
    S("poisson-log-relu-gru", "nonfinite_loss", **RNN, lr=3e-3, batch_size=32, steps=600, fault={"poisson": True}, onset=-1),
    S("poisson-log-relu-resmlp", "nonfinite_loss", arch="resmlp", lr=3e-3, batch_size=32, steps=300, fault={"poisson": True}, onset=-1),
    S("poisson-log-relu-mlp-s1", "nonfinite_loss", model={"width": 32}, lr=2e-3, batch_size=32, steps=400, seed=1, fault={"poisson": True}, onset=-1),
    # ---- healthy runs: every architecture, short and long, other optimizers and batch sizes, resumed runs
    S("healthy-resmlp-adam", "healthy", arch="resmlp", steps=400),
    S("healthy-rescnn-sgd", "healthy", arch="rescnn", lr=0.05, steps=400, **SGD_MOM),
    S("healthy-lstm-adam-bs16", "healthy", **LSTM, lr=3e-3, batch_size=16, steps=300),
    S("healthy-plain-rnn-sgd", "healthy", **PLAIN_RNN, lr=0.02, steps=400, **SGD_MOM),
    S("healthy-transformer-adam-s1", "healthy", arch="transformer", lr=1e-3, steps=400, seed=1),
    S("healthy-mlp-short", "healthy", steps=50),
    S("healthy-cnn-short", "healthy", arch="cnn", lr=3e-3, steps=80),
    S("healthy-gru-short", "healthy", **RNN, lr=3e-3, steps=60),
    S("healthy-transformer-short", "healthy", arch="transformer", steps=100, optim="adamw"),
    S("healthy-mlp-long", "healthy", model={"width": 32}, lr=1e-3, batch_size=128, train_size=8192, steps=5000, val_every=250, schedule="cosine"),
    S("healthy-resmlp-long", "healthy", arch="resmlp", model={"width": 32, "depth": 2}, lr=1e-3, batch_size=64, steps=3000, train_size=32768, val_every=150, optim="adamw", schedule="warmup_cosine"),
    S("healthy-cnn-long", "healthy", arch="cnn", lr=0.02, steps=2000, val_every=100, **SGD_MOM),
    S("healthy-mlp-rmsprop", "healthy", lr=1e-3, steps=400, optim="rmsprop", seed=1),
    S("healthy-mlp-bs512", "healthy", lr=3e-3, batch_size=512, train_size=8192, steps=300),
    S("healthy-mlp-bs8", "healthy", lr=1e-3, batch_size=8, steps=400, seed=2),
    S("healthy-cnn-batchnorm", "healthy", arch="cnn", model={"batchnorm": True}, lr=3e-3, steps=400),
    S("healthy-mlp-class-skew", "healthy", fault={"imbalance": 0.4}, train_size=4096, steps=400),
    S("healthy-mlp-deep-relu", "healthy", model={"depth": 8}, lr=1e-3, steps=400),
    S("healthy-mlp-tanh", "healthy", model={"act": "tanh"}, lr=3e-3, steps=400, seed=1),
    S("healthy-mlp-clipped-sometimes", "healthy", lr=3e-3, max_grad_norm=1.0, steps=400),
    S("healthy-mlp-warmup-sgd", "healthy", lr=0.05, steps=400, schedule="warmup_cosine", **SGD_MOM),
    S("healthy-mlp-grad-accumulation", "healthy", lr=1e-3, steps=200, accumulate=4),
    S("healthy-mlp-resumed", "healthy", lr=1e-3, steps=400, resume_at=200),
    S("healthy-cnn-resumed-older-checkpoint", "healthy", arch="cnn", lr=3e-3, steps=400, resume_at=250, resume_from=200),
    S("healthy-gru-resumed-fresh-optimizer", "healthy", **RNN, lr=3e-3, steps=400, resume_at=200, fault={"resume_fresh_optimizer": True}),
    S("healthy-lstm-resumed", "healthy", **LSTM, lr=3e-3, steps=400, resume_at=200),
    S("healthy-transformer-resumed", "healthy", arch="transformer", lr=1e-3, steps=400, resume_at=150, resume_from=100, optim="adamw"),
    # ==== tune runs added to check the classes of later fixes (never the held-out runs that showed them)
    # ---- an LR too high whose loss fell at first, then stalled under large updates; RMSprop's first update
    S("lr-high-adam-gru-s1", "lr_too_high", **RNN, lr=0.05, steps=300, seed=1),
    S("lr-high-rmsprop-cnn", "lr_too_high", arch="cnn", lr=0.05, steps=300, optim="rmsprop"),
    S("lr-high-rmsprop-gru", "lr_too_high", **RNN, lr=0.1, steps=300, optim="rmsprop", seed=1),
    # ---- a memorised train set whose validation loss rose less than 25%
    S("overfit-rescnn-s1", "overfitting", arch="rescnn", model={"channels": 16}, lr=3e-3, train_size=96, batch_size=32, steps=600,
      seed=1, fault={"label_noise": 0.3}),
    # ---- models too small for a task they can partly learn (the loss ends a little below the chance level)
    S("underfit-mlp-xor-s2", "underfitting", model={"width": 2, "depth": 1}, task="xor", lr=1e-2, steps=500, seed=2),
    S("underfit-mlp-xor-deep", "underfitting", model={"width": 2, "depth": 2}, task="xor", lr=1e-2, steps=500, seed=1),
    S("underfit-gru-h2", "underfitting", **RNN, model={"hidden": 2}, lr=1e-2, steps=500, seed=2),
    # ---- gradient accumulation: slow data still reads as a bottleneck, fast data does not
    S("slow-loader-mlp-accum", "data_loading_bottleneck", fault={"loader_sleep": 0.004}, steps=150, accumulate=4),
    S("healthy-cnn-grad-accumulation", "healthy", arch="cnn", lr=3e-3, steps=200, accumulate=4),
]


def by_name(name: str) -> Spec:
    """The scenario called ``name``."""
    return next(s for s in SUITE if s.name == name)


def split(part: str) -> list[Spec]:
    """The scenarios of ``tune`` or ``held_out``."""
    return [s for s in SUITE if s.split == part]

"""The labelled suite: faulty and healthy CPU trainings, split into ``tune`` and ``held_out``.

Each scenario plants one fault (or none) in a small training. ``acceptable`` lists the
codes that count as a correct top finding (the planted cause, plus a code whose fix
is the same where the fault legitimately shows as it); ``false_alarm`` lists codes that
would be wrong to raise. The split is fixed here: thresholds are tuned on ``tune``
only and accuracy is reported on ``held_out``. Every fault family with two or more
variants has some in each part.
"""

from __future__ import annotations

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
    "healthy": ALL_CODES,
}


def S(name: str, family: str, split: str, acceptable: tuple[str, ...] | None = None, **kwargs: Any) -> Spec:
    """A spec with the family's default labels (``acceptable`` overrides the accepted codes)."""
    accepted = acceptable or (family, *ALSO_OK.get(family, ()))
    return Spec(name, family, split, accepted, tuple(c for c in WRONG[family] if c not in accepted), **kwargs)


SGD_MOM = {"optim": "sgd", "momentum": 0.9}
RNN = {"arch": "rnn"}

SUITE: list[Spec] = [
    # ---- LR too high: diverging to NaN, and oscillating (or collapsing) without NaN
    S("lr-high-nan-mlp", "lr_too_high", "tune", model={"act": "gelu", "width": 128, "depth": 3}, lr=0.4, steps=300, **SGD_MOM),
    S("lr-high-nan-transformer", "lr_too_high", "held_out", arch="transformer", lr=0.8, steps=250, **SGD_MOM),
    S("lr-high-osc-mlp-tanh", "lr_too_high", "tune", model={"act": "tanh"}, lr=2.0, steps=400, **SGD_MOM),
    S("lr-high-osc-gru", "lr_too_high", "tune", **RNN, lr=3.0, steps=300, **SGD_MOM),
    S("lr-high-osc-transformer", "lr_too_high", "held_out", arch="transformer", lr=0.05, steps=300),
    S("lr-high-osc-cnn", "lr_too_high", "tune", acceptable=("lr_too_high", "dead_relu"), arch="cnn", lr=3.0, steps=300, **SGD_MOM),
    S("lr-high-nan-transformer-fast", "lr_too_high", "tune", arch="transformer", lr=1.2, steps=200, **SGD_MOM),
    S("lr-high-osc-transformer-sgd", "lr_too_high", "tune", arch="transformer", lr=0.3, steps=300, **SGD_MOM),
    S("lr-high-osc-lstm", "lr_too_high", "held_out", **RNN, model={"kind": "lstm"}, lr=5.0, steps=300, **SGD_MOM),
    # ---- LR too low
    S("lr-low-mlp", "lr_too_low", "tune", lr=1e-5, steps=400, optim="sgd"),
    S("lr-low-cnn", "lr_too_low", "held_out", arch="cnn", lr=1e-4, batch_size=32, steps=300, optim="sgd"),
    S("lr-low-gru", "lr_too_low", "tune", **RNN, lr=1e-6, steps=300),
    S("lr-low-transformer", "lr_too_low", "held_out", arch="transformer", lr=1e-6, steps=300, optim="adamw"),
    S("lr-low-mlp-momentum", "lr_too_low", "tune", model={"width": 128}, lr=3e-6, steps=400, **SGD_MOM),
    # ---- LR decayed too early (an epoch schedule stepped per batch)
    S("lr-decay-mlp", "lr_decayed_too_early", "tune", lr=0.1, steps=500, optim="sgd", schedule="per_batch_decay", fault={"gamma": 0.98}),
    S("lr-decay-gru", "lr_decayed_too_early", "tune", **RNN, lr=1e-3, steps=400, schedule="step_per_batch", fault={"step_size": 50}),
    S("lr-decay-transformer-step", "lr_decayed_too_early", "tune", arch="transformer", lr=2e-3, steps=400, schedule="step_per_batch", fault={"step_size": 40}),
    S("lr-decay-cnn", "lr_decayed_too_early", "held_out", arch="cnn", lr=2e-3, steps=400, schedule="step_per_batch", fault={"step_size": 40}),
    S("lr-decay-transformer", "lr_decayed_too_early", "held_out", arch="transformer", lr=1e-3, steps=400, optim="adamw", schedule="per_batch_decay", fault={"gamma": 0.98}),
    # ---- overfitting (tiny noisy train set, big model)
    S("overfit-mlp", "overfitting", "tune", model={"width": 256}, lr=2e-3, train_size=128, batch_size=32, steps=600, fault={"label_noise": 0.3}),
    S("overfit-transformer", "overfitting", "tune", arch="transformer", model={"dim": 64}, lr=1e-3, train_size=96, batch_size=32, steps=500, fault={"label_noise": 0.3}),
    S("overfit-cnn", "overfitting", "held_out", arch="cnn", model={"channels": 32}, lr=3e-3, train_size=96, batch_size=32, steps=600, fault={"label_noise": 0.3}),
    S("overfit-gru", "overfitting", "held_out", **RNN, model={"hidden": 128}, lr=3e-3, train_size=96, batch_size=32, steps=500, fault={"label_noise": 0.3}),
    # ---- underfitting (tiny model, hard task)
    S("underfit-mlp", "underfitting", "tune", model={"width": 2, "depth": 1}, task="xor", lr=1e-2, steps=500),
    S("underfit-cnn", "underfitting", "tune", arch="cnn", model={"channels": 1, "depth": 1}, lr=1e-2, steps=500),
    S("underfit-gru", "underfitting", "held_out", **RNN, model={"hidden": 1}, lr=1e-2, steps=500),
    # ---- vanishing gradients (deep sigmoid stacks)
    S("vanish-mlp-sgd", "vanishing_gradients", "tune", model={"depth": 12, "act": "sigmoid"}, lr=0.05, steps=400, optim="sgd"),
    S("vanish-cnn", "vanishing_gradients", "tune", arch="cnn", model={"depth": 8, "act": "sigmoid"}, lr=0.05, steps=300, optim="sgd"),
    S("vanish-mlp-momentum", "vanishing_gradients", "held_out", model={"depth": 10, "act": "sigmoid", "width": 48}, lr=0.02, steps=400, **SGD_MOM),
    # ---- exploding gradients (deep stacks or a recurrence with a far too large init)
    S("explode-mlp-adam", "exploding_gradients", "tune", model={"depth": 8, "init_gain": 6.0}, lr=1e-3, steps=300),
    S("explode-cnn-adam", "exploding_gradients", "tune", arch="cnn", model={"depth": 6, "init_gain": 8.0}, lr=1e-3, steps=300),
    S("explode-rnn-adam", "exploding_gradients", "held_out", **RNN, model={"kind": "rnn", "nonlinearity": "relu", "recurrent_gain": 6.0}, lr=1e-3, steps=300),
    S("explode-mlp-sgd", "exploding_gradients", "held_out", model={"depth": 8, "init_gain": 6.0}, lr=1e-3, steps=300, optim="sgd"),
    # ---- dead layer (a module left out of forward, or a detached stem)
    S("dead-layer-mlp-unused", "dead_layer", "tune", model={"unused": True}, steps=300),
    S("dead-layer-cnn-detach", "dead_layer", "tune", arch="cnn", model={"detach": True}, steps=300),
    S("dead-layer-mlp-detach", "dead_layer", "held_out", model={"detach": True, "depth": 3}, batch_size=128, steps=300),
    S("dead-layer-transformer-unused", "dead_layer", "held_out", arch="transformer", model={"unused": True}, steps=250, optim="adamw"),
    # ---- over-clipping (max_norm tiny)
    S("overclip-mlp", "over_clipping", "tune", lr=0.05, max_grad_norm=1e-3, batch_size=128, steps=400, optim="sgd"),
    S("overclip-cnn", "over_clipping", "tune", arch="cnn", lr=0.05, max_grad_norm=1e-3, steps=300, optim="sgd"),
    S("overclip-gru", "over_clipping", "held_out", **RNN, lr=0.05, max_grad_norm=1e-3, steps=300, **SGD_MOM),
    # ---- dead ReLU (huge negative bias init, or a huge LR)
    S("dead-relu-mlp-bias", "dead_relu", "tune", model={"bias_init": -3.0}, steps=300),
    S("dead-relu-mlp-lr", "dead_relu", "tune", acceptable=("dead_relu", "lr_too_high"), model={"width": 128}, lr=0.3, steps=300),
    S("dead-relu-cnn-bias", "dead_relu", "held_out", arch="cnn", model={"bias_init": -2.0}, steps=300),
    # ---- activation saturation (tanh/sigmoid with a huge init)
    S("saturation-mlp-tanh", "activation_saturation", "tune", model={"act": "tanh", "init_gain": 10.0}, steps=300),
    S("saturation-mlp-sigmoid", "activation_saturation", "tune", model={"act": "sigmoid", "init_gain": 12.0}, steps=300, optim="sgd", lr=0.1),
    S("saturation-cnn-tanh", "activation_saturation", "held_out", arch="cnn", model={"act": "tanh", "init_gain": 20.0}, steps=300),
    # ---- bad input data (unnormalized x1000, NaN samples)
    S("bad-input-scale-mlp", "bad_input_data", "tune", fault={"input_scale": 1000.0}, steps=300),
    S("bad-input-nan-mlp", "bad_input_data", "tune", fault={"nan_at": 200}, onset=200, steps=300),
    S("bad-input-scale-cnn", "bad_input_data", "held_out", arch="cnn", fault={"input_scale": 1000.0}, steps=300, optim="sgd", lr=0.01),
    S("bad-input-nan-gru", "bad_input_data", "held_out", **RNN, fault={"nan_at": 150}, onset=150, steps=250),
    # ---- loss spikes (corrupted batches every so often)
    S("spikes-mlp-labels", "loss_spikes", "tune", lr=3e-3, batch_size=128, steps=500, fault={"corrupt_every": 60, "corrupt_from": 200}, onset=200),
    S("spikes-transformer-labels", "loss_spikes", "tune", arch="transformer", lr=1e-3, steps=500, fault={"corrupt_every": 50, "corrupt_from": 250}, onset=250),
    S("spikes-mlp-inputs", "loss_spikes", "tune", acceptable=("loss_spikes", "bad_input_data"), lr=3e-3, steps=450, fault={"corrupt_every": 40, "corrupt_from": 150, "corrupt": "inputs"}, onset=150),
    S("spikes-cnn-inputs", "loss_spikes", "held_out", acceptable=("loss_spikes", "bad_input_data"), arch="cnn", steps=450, lr=3e-3, fault={"corrupt_every": 50, "corrupt_from": 150, "corrupt": "inputs"}, onset=150),
    # ---- frozen validation metric (eval on a stale copy)
    S("frozen-val-mlp", "frozen_val_metric", "tune", fault={"stale_eval": True}, steps=300),
    S("frozen-val-cnn", "frozen_val_metric", "tune", arch="cnn", fault={"stale_eval": True}, steps=300, lr=0.05, **SGD_MOM),
    S("frozen-val-gru", "frozen_val_metric", "held_out", **RNN, fault={"stale_eval": True}, batch_size=32, steps=300),
    # ---- model.eval() left on during training
    S("eval-mode-mlp-dropout", "train_mode_bug", "tune", model={"dropout": 0.5}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-cnn-bn", "train_mode_bug", "tune", arch="cnn", model={"batchnorm": True}, fault={"eval_mode_bug": True}, onset=1, steps=300),
    S("eval-mode-transformer", "train_mode_bug", "held_out", arch="transformer", model={"dropout": 0.2}, fault={"eval_mode_bug": True}, onset=1, steps=250),
    # ---- class imbalance
    S("imbalance-mlp", "class_imbalance", "tune", fault={"imbalance": 0.95}, train_size=8192, batch_size=128, steps=300),
    S("imbalance-cnn", "class_imbalance", "held_out", arch="cnn", fault={"imbalance": 0.95}, train_size=8192, steps=300),
    # ---- data loading bottleneck (the loader sleeps per batch)
    S("slow-loader-mlp", "data_loading_bottleneck", "tune", fault={"loader_sleep": 0.006}, steps=250),
    S("slow-loader-cnn", "data_loading_bottleneck", "held_out", arch="cnn", fault={"loader_sleep": 0.008}, steps=250),
    # ---- the silent bugs (one each; thresholds were set on tests/test_silent_bugs.py, not here)
    S("no-zero-grad-mlp", "grad_not_zeroed", "held_out", fault={"no_zero_grad": True}, steps=300),
    S("softmax-into-ce-cnn", "double_softmax", "held_out", arch="cnn", fault={"softmax_output": True}, steps=300),
    S("mse-broadcast-mlp", "loss_shape_mismatch", "held_out", fault={"mse_flat": True}, steps=300),
    S("labels-misaligned-mlp", "labels_misaligned", "held_out", fault={"misaligned_labels": True}, steps=300),
    S("unshuffled-mlp", "unshuffled_data", "held_out", fault={"unshuffled": True}, steps=300),
    # ---- healthy runs
    S("healthy-mlp-adam", "healthy", "tune", steps=400),
    S("healthy-cnn-adamw", "healthy", "tune", arch="cnn", lr=3e-3, steps=400, optim="adamw", schedule="cosine"),
    S("healthy-gru-adam", "healthy", "tune", **RNN, lr=3e-3, batch_size=32, steps=400),
    S("healthy-mlp-bs256-dropout", "healthy", "tune", model={"dropout": 0.1, "width": 128}, batch_size=256, lr=2e-3, steps=300, optim="adamw", schedule="cosine"),
    S("healthy-gru-sgd-bs16", "healthy", "tune", **RNN, batch_size=16, lr=0.02, steps=400, **SGD_MOM),
    S("healthy-mlp-sgd-momentum", "healthy", "held_out", lr=0.02, steps=400, **SGD_MOM),
    S("healthy-cnn-sgd-bs16", "healthy", "held_out", arch="cnn", batch_size=16, lr=0.02, steps=400, **SGD_MOM),
    S("healthy-lstm-clipped", "healthy", "held_out", **RNN, model={"kind": "lstm"}, lr=3e-3, max_grad_norm=5.0, steps=400),
    S("healthy-transformer-warmup", "healthy", "held_out", arch="transformer", lr=1e-3, batch_size=32, steps=400, optim="adamw", schedule="warmup_cosine"),
]


def by_name(name: str) -> Spec:
    """The scenario called ``name``."""
    return next(s for s in SUITE if s.name == name)


def split(part: str) -> list[Spec]:
    """The scenarios of ``tune`` or ``held_out``."""
    return [s for s in SUITE if s.split == part]

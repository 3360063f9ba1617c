"""The four jobs tuidiag ships: LR range test, NaN hunt, overfit one batch, sharpness."""

from __future__ import annotations

from typing import Any

from tuidiag.job_kinds.configs import (LRFindConfig, NanHuntConfig, OverfitConfig, SharpnessConfig, overfit_from_options,
                                       overfit_informative)
from tuidiag.job_kinds.kind import JobKind, Option, Verdict

RUNNERS = "tuidiag.jobs.kind_runners"
RENDERERS = "tuidiag.text.jobs"


DIVERGED = Verdict("NOT INFORMATIVE: the model had diverged when it ran (see its note)", negative=True)
"""The verdict of a live job that measured weights that had blown up (:mod:`tuidiag.jobs.diverged_start`)."""


def _lr_verdict(result: dict[str, Any]) -> str:
    if result.get("suggested_lr") is None:
        return "no_suggestion"
    return "suggested" if result.get("reliable", True) else "unreliable"


LR_FIND = JobKind(
    name="lr_find", command="lr-find", key="l", label="LR finder", title="the LR finder",
    help="LR range test in the live training or on the run's factory: suggested LR with a chart",
    config=LRFindConfig, steps=lambda c: c.steps,
    describe=lambda c: f"LR range test: {c.steps} training steps, LR {c.start:g} -> {c.end:g}",
    runner=f"{RUNNERS}:lr_find", renderer=f"{RENDERERS}:render_lr_find", verdict_of=_lr_verdict,
    verdicts={"suggested": Verdict("suggested an LR"),
              "unreliable": Verdict("suggested an LR it marks unreliable (see its warning)"),
              "no_suggestion": Verdict("no LR suggestion", negative=True)},
    options=(Option("--steps", "steps", "sweep length in training steps"),
             Option("--start", "start", "first learning rate"),
             Option("--end", "end", "last learning rate")),
)

NAN_HUNT = JobKind(
    name="nan_hunt", command="nan-hunt", key="n", label="NaN hunt", title="the NaN hunt",
    help="replay the captured NaN step and name the module and op that produced it",
    config=NanHuntConfig, steps=lambda c: 1, unit="replayed step",
    describe=lambda c: "NaN hunt: replay of the captured failing step with hooks",
    runner=f"{RUNNERS}:nan_hunt", renderer=f"{RENDERERS}:render_nan_hunt", verdict_of=lambda r: str(r.get("verdict")),
    verdicts={"parameters": Verdict("the parameters were already non-finite"),
              "batch": Verdict("the batch itself was non-finite"),
              "forward": Verdict("found the op of the forward pass that made the first non-finite value"),
              "backward": Verdict("found where the backward pass made the first non-finite gradient"),
              "not_reproduced": Verdict("the replay stayed finite", negative=True),
              "no_capture": Verdict("no NaN capture to replay", negative=True),
              "no_batch": Verdict("the capture holds no batch to replay", negative=True),
              "no_nonfinite": Verdict("no non-finite step came while it was armed", negative=True)},
    options=(Option("--capture", "capture", "a capture file", type=str,
                    metavar="PATH", default_text="the earliest in RUN/captures"),
             Option("--arm-steps", "steps", "live run without a capture: wait up to K steps for a non-finite one",
                    metavar="K")),
    needs_capture=True,
)

OVERFIT_BATCH = JobKind(
    name="overfit_batch", command="overfit-batch", key="o", label="Overfit one batch", title="the overfit-one-batch test",
    help="can the model memorise one batch? pass/fail with the loss curve",
    config=OverfitConfig, steps=lambda c: c.steps,
    describe=lambda c: (f"overfit one batch: up to {c.steps} steps with {c.optimizer}, "
                        f"target loss {c.target:g} or start/100 if lower"),
    runner=f"{RUNNERS}:overfit_batch", renderer=f"{RENDERERS}:render_overfit",
    verdict_of=lambda r: ("diverged" if r.get("diverged") else "uninformative" if not overfit_informative(r)
                          else "pass" if r.get("passed") else "fail"),
    verdicts={"pass": Verdict("PASS: it memorised one batch"),
              "diverged": DIVERGED,
              "uninformative": Verdict("NOT INFORMATIVE: the loss started at or near the target, so passing says nothing"),
              "fail": Verdict("FAIL: it could not memorise one batch", negative=True)},
    options=(Option("--steps", "steps", "most training steps on the batch"),
             Option("--lr", "lr", "learning rate", type=float, default_text="1e-3 for adam, the run's for run", unset=True),
             Option("--target", "target", "loss that counts as memorised (lowered to 1/100 of the starting loss if that is lower)"),
             Option("--optimizer", "optimizer", "a fresh Adam or the run's optimizer", choices=("adam", "run"))),
    configure=overfit_from_options, shown=False,
)

SHARPNESS = JobKind(
    name="sharpness", command="sharpness", key="s", label="Sharpness", title="the sharpness check",
    help="flat or sharp minimum: loss increase under random weight perturbations",
    config=SharpnessConfig, steps=lambda c: (c.samples + 1) * c.batches, unit="forward passes", takes_checkpoint=True,
    describe=lambda c: f"sharpness: {c.samples} perturbations of {c.epsilon:g} x ||w|| on {c.batches} batches",
    runner=f"{RUNNERS}:sharpness", renderer=f"{RENDERERS}:render_sharpness",
    verdict_of=lambda r: "diverged" if r.get("diverged") else str(r.get("verdict")),
    verdicts={"flat": Verdict("FLAT: the loss barely rises under perturbation"),
              "diverged": DIVERGED,
              "sharp": Verdict("SHARP: the loss rises under small perturbations"),
              "untrainable": Verdict("not measured: the model cannot train", negative=True)},
    options=(Option("--epsilon", "epsilon", "perturbation norm relative to each weight's norm"),
             Option("--samples", "samples", "random perturbations"),
             Option("--batches", "batches", "batches the loss is measured on"),
             Option("--seed", "seed", "seed of the perturbations")),
    shown=False,
)

BUILTIN = (LR_FIND, NAN_HUNT, OVERFIT_BATCH, SHARPNESS)
"""In the order the monitor, the CLI and the Jobs tab list them."""

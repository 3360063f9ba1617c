"""How often the diagnosis engine names the planted cause, on the labelled suite of real CPU trainings.

Records every scenario of ``benchmarks/suite/scenarios.py`` through the real
``tuidiag.Recorder`` (cached under ``--cache``; retrained only when missing, when the
scenario changed, or with ``--retrain``), diagnoses each run and prints, for the
``tune`` and ``held_out`` parts separately (held out: whole fault families and whole
architectures, see ``scenarios.py``): top-1 and top-3 accuracy, false alarms on healthy
runs at the end and at any earlier step of a grid, per-code precision, recall, confidence
and delay, top-1 per architecture, the expected calibration error of the top finding's
confidence before (raw rule scores) and after calibration with its table, and the median
detection delay, overall and per code: from the step the fault became observable
(``metrics.observable_from``: its onset, or for an overfitting run the lowest point of its
validation loss and for a frozen validation metric its second evaluation) to the first
step of a grid (every 1% of the run up to 6%, coarser later) at which
``diagnose(run, at=step)`` ranks an acceptable code first ("top-1", the headline figure)
or among the first three ("top-3"), as a share of the run's length.

``--fit-calibration`` first refits ``tuidiag/diagnosis/calibration.json`` from the tune
split's final diagnoses (``benchmarks/suite/calibrate.py``), then reports. Usage::

    python benchmarks/diagnosis_accuracy.py [--cache /tmp/tuidiag_suite] [--retrain] [--workers 2] [-v]
    python benchmarks/diagnosis_accuracy.py --fit-calibration [--cache ...]
    python benchmarks/diagnosis_accuracy.py --record-only [--cache ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.suite import calibrate  # noqa: E402
from benchmarks.suite.metrics import (  # noqa: E402
    Outcome, Report, detection_delay, early_alarms, observable_from, outcome, report,
)
from benchmarks.suite.runner import record_all  # noqa: E402
from benchmarks.suite.scenarios import SUITE  # noqa: E402
from benchmarks.suite.train import Spec  # noqa: E402
from tuidiag.diagnosis import Diagnosis, diagnose  # noqa: E402
from tuidiag.diagnosis.calibration import TABLE_PATH, load_tables  # noqa: E402
from tuidiag.store import open_run  # noqa: E402

PARTS = ("tune", "held_out")
VAL_LOSS = "val/loss"
"""The suite's trainings log their validation loss under this name."""
TARGETS = {"top1": 0.95, "top3": 0.99, "ece": 0.05, "delay_share": 0.05}
"""The issue's targets on the held-out part."""


def evaluate(spec: Spec, run_dir: Path, with_delay: bool = True) -> Outcome:
    """Diagnose one recorded scenario (and, unless told not to, find its detection delay)."""
    run = open_run(run_dir)
    result = outcome(spec, diagnose(run), run.last_step)
    if with_delay and run.last_step is not None:
        seen: dict[int, Diagnosis] = {}

        def at(step: int) -> Diagnosis:
            if step not in seen:
                seen[step] = diagnose(run, at=step)
            return seen[step]

        val = run.series(VAL_LOSS)
        onset = observable_from(spec, run.last_step, val.steps.tolist(), val.values.tolist())
        result.delay = detection_delay(spec, run.last_step, at, onset)
        result.delay_top3 = detection_delay(spec, run.last_step, at, onset, top=3)
        result.scanned = True
        if spec.family == "healthy":
            result.live_alarms = early_alarms(run.last_step, at)
    return result


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def print_report(part: str, rep: Report) -> None:
    """The figures of one part, as a plain-text block."""
    print(f"\n=== {part}: {rep.n} scenarios ===")
    print(f"top-1 accuracy      {_pct(rep.top1)}   (target on held_out >= {TARGETS['top1']:.0%})")
    print(f"top-3 accuracy      {_pct(rep.top3)}   (target on held_out >= {TARGETS['top3']:.0%})")
    print(f"false alarms        {rep.healthy_alarmed} of {rep.healthy_runs} healthy runs with a warning/critical finding "
          "at any step (target 0)")
    alarms = len(rep.healthy_false_alarms)
    print(f"                    {alarms} of {rep.healthy_runs} healthy runs with a warning/critical finding at the end"
          + "".join(f"\n                      {line}" for line in rep.healthy_false_alarms))
    print(f"                    {len(rep.healthy_live_alarms)} healthy runs with an alarm at some earlier step of the grid"
          + "".join(f"\n                      {line}" for line in rep.healthy_live_alarms))
    print(f"                    {rep.faulty_false_alarms} faulty runs raise a code labelled a false alarm for them")
    delay = "not measured" if rep.median_delay is None else f"{rep.median_delay:.0f} steps"
    share = "" if rep.median_delay_share is None else f", {_pct(rep.median_delay_share).strip()} of the run"
    top3 = "" if rep.median_delay_top3_share is None else f"; in the top 3: {_pct(rep.median_delay_top3_share).strip()}"
    print(f"median delay        {delay}{share}{top3}   (target {TARGETS['delay_share']:.0%}; from the step the fault became "
          f"observable; {rep.undetected} faulty runs never ranked an acceptable code first)")
    print(f"calibration (ECE)   {rep.ece:.3f} calibrated, {rep.ece_raw:.3f} raw rule scores   (target <= {TARGETS['ece']})")
    print("top-1 by arch       " + ", ".join(f"{a} {_pct(acc).strip()} of {n}" for a, (acc, n) in rep.per_arch.items()))
    print_tables(rep)
    if rep.misses:
        print("misses:" + "".join(f"\n    {line}" for line in rep.misses))


def print_tables(rep: Report) -> None:
    """The calibration table and the per-code table."""
    print("    bin       mean conf  accuracy    n   (calibrated confidence of the top finding)")
    for label, conf, acc, n in rep.calibration:
        print(f"    {label}   {conf:8.2f}  {acc:8.2f}  {n:4d}")
    print("    code                       precision  recall   n  confidence  delay top-1  top-3  never")
    for code, row in rep.per_code.items():
        cells = [("    -" if v is None else f"{v:5.2f}") for v in (row.precision, row.recall, row.confidence)]
        delays = [("    -" if v is None else _pct(v)) for v in (row.delay_share, row.delay_top3_share)]
        print(f"    {code:<26} {cells[0]:>9}  {cells[1]:>6}  {row.n:2d}  {cells[2]:>10}  {delays[0]:>11}  {delays[1]:>6}  "
              f"{row.undetected:5d}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/tuidiag_suite"), help="where recorded runs are kept")
    parser.add_argument("--retrain", action="store_true", help="record every scenario again")
    parser.add_argument("--workers", type=int, default=2, help="parallel training processes")
    parser.add_argument("--no-delay", action="store_true", help="skip the detection-delay scan (faster)")
    parser.add_argument("--part", choices=PARTS, help="diagnose and report only this part")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every scenario's ranked findings")
    parser.add_argument("--fit-calibration", action="store_true",
                        help="refit tuidiag/diagnosis/calibration.json on the tune split")
    parser.add_argument("--record-only", action="store_true", help="record what is missing, print the time it took, and stop")
    return parser.parse_args(argv)


def print_outcomes(outcomes: list[Outcome]) -> None:
    """One line per scenario: hit or miss, confidence, ranked codes, delay, labelled false alarms."""
    for o in outcomes:
        mark = "ok  " if o.top1 else "MISS"
        wrong = f"  FALSE ALARM: {', '.join(o.false_alarms)}" if o.false_alarms else ""
        print(f"{mark} {o.spec.split:<8} {o.spec.name:<38} {o.confidence:.2f} ({o.raw_confidence:.2f}) {', '.join(o.codes)}  "
              f"delay={o.delay} top3={o.delay_top3} of {(o.last_step or 0) + 1}{wrong}")


def main(argv: list[str] | None = None) -> int:
    """Record (cached), diagnose and report; exit 1 when a held-out target is missed."""
    args = parse_args(argv)
    start = time.perf_counter()
    runs = record_all(SUITE, args.cache, retrain=args.retrain, workers=args.workers)
    if args.record_only:
        print(f"{len(SUITE)} scenarios recorded under {args.cache} ({time.perf_counter() - start:.0f} s)")
        return 0
    if args.fit_calibration:
        fit_calibration(runs)
    parts = (args.part,) if args.part else PARTS
    start = time.perf_counter()
    outcomes = [evaluate(spec, runs[spec.name], not args.no_delay) for spec in SUITE if spec.split in parts]
    if args.verbose:
        print_outcomes(outcomes)
    reports = {part: report([o for o in outcomes if o.spec.split == part]) for part in parts}
    for part in parts:
        print_report(part, reports[part])
    print(f"\n(diagnosed {len(outcomes)} runs in {time.perf_counter() - start:.1f} s)")
    held = reports.get("held_out")
    if held is None:
        return 0
    return 0 if held.top1 >= TARGETS["top1"] and held.top3 >= TARGETS["top3"] and not held.healthy_alarmed else 1


def fit_calibration(runs: dict[str, Path], path: Path = TABLE_PATH) -> None:
    """Refit the package's calibration tables on the tune split's final diagnoses and write them to ``path``."""
    tune = [spec for spec in SUITE if spec.split == "tune"]
    points = []
    for spec in tune:
        result = evaluate(spec, runs[spec.name], with_delay=False)
        points.append((spec.family, [(code, raw, int(code in spec.acceptable)) for code, _, raw in result.findings]))
    strength, scores = calibrate.choose_strength(points)
    tables = calibrate.fit(points, strength)
    source = f"the tune split of benchmarks/suite/scenarios.py: {len(tune)} runs, final diagnoses"
    calibrate.write(path, tables, strength, scores, points, source)
    load_tables.cache_clear()
    print(f"fitted {len(tables)} tables on {sum(len(found) for _, found in points)} findings of {len(tune)} tune runs "
          f"(prior strength {strength:g}, leave-one-run-out Brier {scores[strength]:.4f}) into {path}")


if __name__ == "__main__":
    sys.exit(main())

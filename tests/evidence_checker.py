"""An independent checker of diagnosis evidence: every line must be a true statement about the run up to its step.

Each evidence line carries structured claims (``tuidiag.diagnosis.evidence``). This module
recomputes every claim from the raw run, read through the store (not the rules' view),
with its own implementation of each statistic, and then checks the text against the
recomputed values:

- every measure's value, every listed step, count, fact and disagreement is recomputed;
- windows end at or before the diagnosis step; a change's two windows never overlap and
  ``before`` comes first; every window a line relies on is named in it (``steps 0-9``);
- every number in the text (names quoted with ``'...'`` aside) equals, to the precision it
  is printed with, a value recomputed for one of the line's claims or a reference number
  it quotes; a signed number must match the signed value;
- direction words agree with the data: ``fell``/``rose`` only where the line makes a
  change claim in that direction, and such a claim always has its word; a direction word
  is never followed by a signed number ("fell -0.1%");
- a line without claims contains no number, except "also seen: <title> (listed below)",
  which must name another finding of the same diagnosis.

``fix_moves_in_text`` reads the settings a fix's words move, independently of the tags,
for the no-conflicting-fixes checks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np

from tuidiag.diagnosis import Diagnosis, Finding
from tuidiag.diagnosis.evidence import (
    Change, Compare, Disagreement, Evidence, Fact, Level, Measure, Occurrences, Periodic, Product,
)
from tuidiag.diagnosis.moves import (
    BATCH_UP, CAPACITY_DOWN, CAPACITY_UP, CLIP_LOOSER, CLIP_TIGHTER, LR_DOWN, LR_UP, REG_DOWN, REG_UP, Move,
)
from tuidiag.store import open_run

DOWN_WORDS = ("fell", "falling", "dropped", "decreased", "improved")
UP_WORDS = ("rose", "rising", "grew", "growing", "increased", "climbed")
NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+])?"
    r"(?:(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?|\.\d+)|(?P<word>inf|nan)\b)(?P<pct>%)?",
    re.IGNORECASE,
)
ALSO_SEEN = re.compile(r"^also seen: (.*) \(listed below\)$")


class Untrue(AssertionError):
    """An evidence line that is not a true statement about the run."""


@dataclass
class RawRun:
    """The run's series as the store reads them, cut at the diagnosis step."""

    path: Path
    at: int | None

    def __post_init__(self) -> None:
        self.run = open_run(self.path)

    def window(self, metric: str | tuple[str, ...], first: int, last: int, rank: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of ``metric`` (pooled over names and ranks) with ``first <= step <= last``."""
        names = metric if isinstance(metric, tuple) else (metric,)
        ranks = rank if isinstance(rank, tuple) else (rank,)
        steps, values = [], []
        for name in names:
            for r in ranks:
                s = self.run.series(name, r)
                keep = (s.steps >= first) & (s.steps <= last)
                if self.at is not None:
                    keep &= s.steps <= self.at
                steps.append(s.steps[keep])
                values.append(s.values[keep])
        return (np.concatenate(steps), np.concatenate(values)) if steps else (np.empty(0, np.int64), np.empty(0))


def recompute(stat: str, values: np.ndarray, arg: float | None) -> float:
    """The statistic, computed here independently of ``tuidiag.diagnosis.evidence``."""
    v = np.asarray(values, dtype=float)
    fin = v[np.isfinite(v)]
    nonnan = v[~np.isnan(v)]
    if stat == "median":
        return float(np.median(fin)) if len(fin) else math.nan
    if stat == "mean":
        return float(fin.mean()) if len(fin) else math.nan
    if stat == "min":
        return float(nonnan.min()) if len(nonnan) else math.nan
    if stat == "max":
        return float(nonnan.max()) if len(nonnan) else math.nan
    if stat == "max_finite":
        return float(fin.max()) if len(fin) else math.nan
    if stat == "first":
        return float(v[0]) if len(v) else math.nan
    if stat == "last":
        return float(v[-1]) if len(v) else math.nan
    if stat == "count":
        return float(len(v))
    if stat == "nonfinite":
        return float(len(v) - len(fin))
    if stat == "share_above":
        return float(np.mean(v > arg)) if len(v) else math.nan
    if stat == "share_equal":
        return float(np.mean(v == arg)) if len(v) else math.nan
    if stat == "typical_change":
        pos = v[np.isfinite(v) & (v > 0)]
        return float(np.median(np.abs(pos[1:] / pos[:-1] - 1))) if len(pos) >= 2 else math.nan
    raise Untrue(f"unknown statistic {stat!r}")


def same(a: float, b: float) -> bool:
    """Equal, both NaN, or the same infinity (a tiny relative tolerance for float order)."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 1e-15


class LineCheck:
    """Checks one evidence line of one finding; collects the numbers its claims justify."""

    def __init__(self, raw: RawRun, step: int | None, line: str, where: str) -> None:
        self.raw, self.step, self.line, self.where = raw, step, line, where
        self.numbers: list[float] = []
        self.windows: list[str] = []

    def fail(self, why: str) -> None:
        raise Untrue(f"{self.where}: {why}\n  line: {self.line}")

    def _window_ok(self, first: int, last: int) -> None:
        if first > last:
            self.fail(f"window {first}-{last} is reversed")
        if self.step is not None and last > self.step:
            self.fail(f"window {first}-{last} reaches past the diagnosis step {self.step}")

    def measure(self, m: Measure, named: bool = True) -> float:
        """Recompute ``m``; add its value, window and size to the justified numbers."""
        self._window_ok(m.first, m.last)
        steps, values = self.raw.window(m.metric, m.first, m.last, m.rank)
        if not len(steps):
            self.fail(f"empty window {m.where} for {m.metric!r}")
        if m.rank is None and (int(steps.min()) != m.first or int(steps.max()) != m.last):
            self.fail(f"window {m.where} of {m.metric!r} does not start and end at recorded steps ({steps.min()}-{steps.max()})")
        value = recompute(m.stat, values, m.arg)
        if not same(value, m.value):
            self.fail(f"{m.stat} of {m.metric!r} over {m.where} is {value!r}, the line claims {m.value!r}")
        self.numbers += [value, m.first, m.last, float(len(values))]
        self.numbers += [float(r) for r in (m.rank if isinstance(m.rank, tuple) else (m.rank,)) if r is not None]
        if m.arg is not None:
            self.numbers.append(m.arg)
        if named and m.rank is None:
            self.windows.append(m.where)
        return value

    def operand(self, op: Measure | Fact | Product) -> float:
        if isinstance(op, Measure):
            return self.measure(op)
        if isinstance(op, Fact):
            self.fact(op)
            return float(op.value)
        value = float(np.prod([self.operand(f) for f in op.factors]))
        self.numbers.append(value)
        return value

    def level(self, c: Level) -> None:
        v = self.measure(c.m)
        if c.above is not None and not v > c.above:
            self.fail(f"{c.m.metric!r} {v!r} is not above {c.above!r}")
        if c.below is not None and not v < c.below:
            self.fail(f"{c.m.metric!r} {v!r} is not below {c.below!r}")
        if c.equal is not None and v != c.equal:
            self.fail(f"{c.m.metric!r} {v!r} is not exactly {c.equal!r}")

    def change(self, c: Change) -> None:
        if c.before.metric != c.after.metric or c.before.rank != c.after.rank:
            self.fail("a change compares different series")
        if not c.before.last < c.after.first:
            self.fail(f"start window {c.before.where} and end window {c.after.where} overlap or are out of order")
        b, a = self.measure(c.before), self.measure(c.after)
        if c.says == "down" and not a < b:
            self.fail(f"says it fell, but {b!r} -> {a!r}")
        if c.says == "up" and not a > b:
            self.fail(f"says it rose, but {b!r} -> {a!r}")
        if c.says == "flat" and not (b and abs(a / b - 1) <= (c.within or 0.0)):
            self.fail(f"says it is flat (within {c.within}), but {b!r} -> {a!r}")
        self.numbers += derived(a, b)

    def compare(self, c: Compare) -> None:
        a, b = self.operand(c.a), self.operand(c.b)
        if c.says == "above" and not a > b:
            self.fail(f"says {a!r} is above {b!r}")
        if c.says == "below" and not a < b:
            self.fail(f"says {a!r} is below {b!r}")
        self.numbers += derived(a, b)

    def occurrences(self, c: Occurrences) -> None:
        self._window_ok(c.first, c.last)
        hits: set[int] = set()
        recorded = 0
        for name in c.metrics:
            steps, values = self.raw.window(name, c.first, c.last, c.rank)
            recorded += len(values)
            with np.errstate(invalid="ignore"):
                mask = {"nonfinite": ~np.isfinite(values), "positive": values > 0,
                        "above": values > (c.arg if c.arg is not None else math.inf),
                        "below": values < (c.arg if c.arg is not None else -math.inf)}[c.predicate]
            hits |= {int(s) for s in steps[mask]}
        ordered = sorted(hits)
        if tuple(ordered[: len(c.steps)]) != c.steps:
            self.fail(f"the first {c.predicate} steps of {c.metrics} over {c.first}-{c.last} are {ordered[: len(c.steps)]}, "
                      f"not {c.steps}")
        if c.total is not None and len(ordered) != c.total:
            self.fail(f"{len(ordered)} {c.predicate} steps of {c.metrics} over {c.first}-{c.last}, the line claims {c.total}")
        self.numbers += [*c.steps, float(len(ordered)), c.first, c.last, float(recorded)] + ([c.arg] if c.arg is not None else [])
        self.numbers += [float(c.rank)] if c.rank is not None else []

    def disagreement(self, c: Disagreement) -> None:
        since, at, gap = replica_gap(self.raw, c.metric, c.tolerance)
        if c.since is None:
            if since is not None:
                self.fail(f"says replicas of {c.metric!r} agree, but they differ from step {since}")
            return
        if since != c.since or at != c.at or not same(gap, c.gap):
            self.fail(f"replicas of {c.metric!r}: first gap at {since}, newest common step {at}, gap {gap}; the line claims "
                      f"{c.since}, {c.at}, {c.gap}")
        self.numbers += [since, at, gap]

    def periodic(self, c: Periodic) -> None:
        gaps = np.diff(np.asarray(c.steps))
        if len(gaps) < 2 or int(np.median(gaps)) != c.every or np.ptp(gaps) > 0.1 * np.median(gaps):
            self.fail(f"steps {c.steps} do not recur every {c.every} steps")
        self.numbers += [*c.steps, c.every]

    def fact(self, c: Fact) -> None:
        if c.source == "manifest":
            value: Any = self.raw.run.manifest
            for key in c.key.split("."):
                value = value.get(key) if isinstance(value, dict) else None
            if isinstance(value, list):
                value = tuple(value)
            if value != c.value:
                self.fail(f"manifest {c.key} is {value!r}, the line claims {c.value!r}")
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.numbers.append(float(value))
        elif c.source == "event":
            step, names = c.value
            events = [e for e in self.raw.run.events if e.kind == c.key and e.step == step]
            named = {str(n) for e in events for n in e.data.get("params", [e.data.get("key")])}
            if not events or not set(names) <= named:
                self.fail(f"no {c.key!r} event at step {step} naming {names}")
            self.numbers += [step, float(len(names))]
        else:
            self.fail(f"unknown fact source {c.source!r}")

    def claims(self, claims: tuple[Any, ...]) -> None:
        handlers = {Level: self.level, Change: self.change, Compare: self.compare, Occurrences: self.occurrences,
                    Disagreement: self.disagreement, Periodic: self.periodic, Fact: self.fact}
        for claim in claims:
            handlers[type(claim)](claim)
        counts = {}
        for claim in claims:
            counts[type(claim)] = counts.get(type(claim), 0) + 1
        self.numbers += [float(n) for n in counts.values()]


def derived(a: float, b: float) -> list[float]:
    """Numbers a line may print about two values: both, ratio both ways, relative change, difference, orders of magnitude."""
    out = [a, b, a - b]
    if b:
        out += [a / b, a / b - 1]
    if a:
        out.append(b / a)
    if a > 0 and b > 0:
        out.append(math.log10(a / b))
    return out


def replica_gap(raw: RawRun, metric: str, tolerance: float) -> tuple[int | None, int | None, float]:
    """(first step where the ranks' values disagree beyond ``tolerance``, newest common finite step, gap there)."""
    per_rank = {}
    for r in raw.run.ranks:
        steps, values = raw.window(metric, -(2**62), 2**62, r)
        if len(steps):
            per_rank[r] = dict(zip(steps.tolist(), values.tolist()))
    if len(per_rank) < 2:
        return None, None, 0.0
    common = sorted(reduce(lambda x, y: x & y, (set(d) for d in per_rank.values())))
    rows = [(s, np.array([d[s] for d in per_rank.values()])) for s in common]
    rows = [(s, v) for s, v in rows if np.isfinite(v).all()]
    if not rows:
        return None, None, 0.0
    gaps = [(s, float((v.max() - v.min()) / max(abs(np.median(v)), 1e-12))) for s, v in rows]
    if gaps[-1][1] <= tolerance:
        return None, gaps[-1][0], gaps[-1][1]
    first = next(s for s, g in gaps if g > tolerance)
    return first, gaps[-1][0], gaps[-1][1]


def _tokens(text: str) -> list[re.Match[str]]:
    return list(NUMBER.finditer(re.sub(r"'[^']*'", "''", text)))


def _matches(token: re.Match[str], candidates: list[float]) -> bool:
    sign = token.group("sign")
    if token.group("word"):
        kind = token.group("word").lower()
        want = math.nan if kind == "nan" else (-math.inf if sign == "-" else math.inf)
        return any(same(c, want) or (sign is None and kind == "inf" and c == -math.inf) for c in candidates)
    digits = token.group("num").replace(",", "")
    mantissa = re.split("e", digits, flags=re.IGNORECASE)[0]
    exponent = int(re.split("e", digits, flags=re.IGNORECASE)[1]) if "e" in digits.lower() else 0
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    value = float(digits) * (-1 if sign == "-" else 1)
    tolerance = 0.5 * 10 ** (exponent - decimals)
    scales = (0.01, 1.0) if token.group("pct") else (1.0, 1e-3)  # 12% of a share, or of a value in percent; ms of seconds
    for c in candidates:
        if not math.isfinite(c):
            continue
        for scale in scales:
            shown = value * scale
            target = c if sign else abs(c)
            if abs(target - shown) <= tolerance * scale * (1 + 1e-9) + 1e-300:
                return True
        if not sign and c and abs(abs(1 / c) - abs(value)) <= tolerance * (1 + 1e-9):  # a rate (steps/s) of a duration
            return True
    return False


def check_line(raw: RawRun, diagnosis: Diagnosis, finding: Finding, line: str) -> None:
    """Raise :class:`Untrue` unless ``line`` of ``finding`` is a true statement about the run up to the diagnosis step."""
    where = f"{finding.code} in {raw.path.name} at {diagnosis.step}"
    if not isinstance(line, Evidence):
        seen = ALSO_SEEN.match(line)
        if seen:
            if not any(f.title == seen.group(1) for f in diagnosis.findings + diagnosis.notes if f is not finding):
                raise Untrue(f"{where}: names a finding that is not in the diagnosis: {line}")
            return
        if _tokens(line) or any(re.search(rf"\b{w}\b", line) for w in DOWN_WORDS + UP_WORDS):
            raise Untrue(f"{where}: a line with numbers or a direction word but no claims: {line}")
        return
    check = LineCheck(raw, diagnosis.step, line, where)
    check.claims(line.claims)
    for label in check.windows:
        if label not in line:
            check.fail(f"does not name its window {label!r}")
    candidates = check.numbers + list(line.refs)
    for token in _tokens(line):
        if not _matches(token, candidates):
            known = sorted({round(c, 6) for c in candidates if math.isfinite(c)})[:40]
            check.fail(f"the number {token.group(0)!r} is not backed by any claim (recomputed: {known})")
    _check_words(check, line)


def _check_words(check: LineCheck, line: Evidence) -> None:
    text = line.lower()
    says = {c.says for c in line.claims if isinstance(c, Change)}
    down = any(re.search(rf"\b{w}\b", text) for w in DOWN_WORDS)
    up = any(re.search(rf"\b{w}\b", text) for w in UP_WORDS)
    if down and "down" not in says:
        check.fail("says something fell without a claim that it did")
    if up and "up" not in says:
        check.fail("says something rose without a claim that it did")
    if "down" in says and not down:
        check.fail("claims a fall but no word says so")
    if "up" in says and not up:
        check.fail("claims a rise but no word says so")
    if re.search(rf"\b({'|'.join(DOWN_WORDS + UP_WORDS)})( only)? [-+]\d", text):
        check.fail("a direction word followed by a signed number")
    if re.search(r"[-+]\s*[-+]\d", text):
        check.fail("a doubled sign")


def check_diagnosis(run_dir: Path, diagnosis: Diagnosis, at: int | None = None) -> int:
    """Check every evidence line of every finding and note; returns how many lines were checked."""
    raw = RawRun(run_dir, at)
    checked = 0
    for finding in diagnosis.findings + diagnosis.notes:
        if finding.first_step is not None and diagnosis.step is not None and finding.first_step > diagnosis.step:
            raise Untrue(f"{finding.code}: first step {finding.first_step} is after the diagnosis step {diagnosis.step}")
        for line in finding.evidence:
            check_line(raw, diagnosis, finding, line)
            checked += 1
    return checked


CLAUSE_MOVES: list[tuple[re.Pattern[str], Move]] = [
    (re.compile(r"\braise max_norm\b"), CLIP_LOOSER),
    (re.compile(r"\bclip"), CLIP_TIGHTER),
    (re.compile(r"\b(raise|increase|higher)\b(?!.*\b(floor|min lr|max_norm|batch)).*\blr\b"), LR_UP),
    (re.compile(r"\b(reduce|lower|decrease)\b.*\blr\b"), LR_DOWN),
    (re.compile(r"\b(add|more)\b.*\bregulari[sz]ation\b|\bweight decay\b"), REG_UP),
    (re.compile(r"\breduce regulari[sz]ation\b"), REG_DOWN),
    (re.compile(r"\b(increase capacity|wider|deeper|bigger model)\b"), CAPACITY_UP),
    (re.compile(r"\bsmaller model\b"), CAPACITY_DOWN),
    (re.compile(r"\braise the batch size\b"), BATCH_UP),
]
"""What a fix clause's words move, read from the text alone (the tags are not consulted)."""


def fix_moves_in_text(fix: str) -> set[Move]:
    """The moves the words of ``fix`` advise, clause by clause (a resolver's "not ...: conflicts with" note advises nothing)."""
    moves: set[Move] = set()
    for clause in str(fix).lower().split("; "):
        if clause.startswith("not ") and "conflicts with" in clause:
            continue
        for pattern, move in CLAUSE_MOVES:
            if pattern.search(clause):
                moves.add(move)
                if move is CLIP_LOOSER:
                    break
    return moves

"""Charts that read at a glance: ticks, smoothing, the cursor readout and the labels, as properties.

Issue 16: the x axis showed fractional steps and no "step" label, y labels ran into x
labels ("0.10.0"), the log-scale gradient-norm chart had no y tick, train and val
differed only by colour, and there was no smoothing and no cursor. The pure parts are
tested over generated inputs (hypothesis), the drawing against plotext's own frame.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.chart_helpers import label_value
from tuidiag.app.widgets.chart import GLYPHS, draw_chart, glyph_of
from tuidiag.text.numbers import duration, fmt
from tuidiag.viewmodel.chart_axes import Axis, log_axis, plot_data, step_axis
from tuidiag.viewmodel.chart_clock import clock_of, elapsed_at
from tuidiag.viewmodel.chart_cursor import BIG_MOVE, move_cursor, nearest_index, readout, readout_text
from tuidiag.viewmodel.chart_labels import cell, x_labels, y_labels
from tuidiag.viewmodel.chart_smoothing import STRENGTHS, VIEWPORT_POINTS, ema, next_strength
from tuidiag.viewmodel.chart_ticks import duration_labels, duration_ticks, integer_ticks, linear_ticks, log_ticks, step_label
from tuidiag.viewmodel.snapshot import Chart

EXAMPLES = int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", "30"))
PURE = settings(max_examples=2 * EXAMPLES, deadline=None, derandomize=True)
DRAW = settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=True)

finite = st.floats(allow_nan=False, allow_infinity=False)
magnitudes = st.one_of(st.floats(-1e6, 1e6), finite, st.sampled_from([0.0, 1e-300, -1e-300, 1.7e308, -1.7e308, 5e-324]))
step_ranges = st.tuples(st.integers(-(2**60), 2**60), st.integers(0, 2**40)).map(lambda t: (float(t[0]), float(t[0] + t[1])))
counts = st.integers(1, 12)


# ---------------------------------------------------------------------------- ticks

@PURE
@given(span=step_ranges, count=counts)
@example(span=(0.0, 1499.0), count=8)  # the issue's demo run: 374.8 749.5 1124.2 before
def test_step_ticks_are_whole_steps_inside_the_range(span: tuple[float, float], count: int) -> None:
    lo, hi = span
    ticks = integer_ticks(lo, hi, count)
    if max(abs(lo), abs(hi)) < 2**53:
        assert ticks, (lo, hi)
    assert all(t.is_integer() and lo <= t <= hi for t in ticks)
    assert ticks == sorted(set(ticks)) and len(ticks) <= max(2, count)
    axis = step_axis(lo, hi, count)
    for label in axis.labels:  # every label names a whole step, exactly
        assert label_value(label) == int(label_value(label)) or not ticks
    if ticks and hi > lo:
        assert [label_value(label) for label in axis.labels] == ticks


@PURE
@given(lo=magnitudes, width=magnitudes, count=counts)
def test_linear_ticks_are_round_and_inside(lo: float, width: float, count: int) -> None:
    hi = lo + abs(width)
    ticks = linear_ticks(lo, hi, count)
    assert ticks == sorted(set(ticks)) and all(lo <= t <= hi for t in ticks)
    assert not ticks or 2 <= len(ticks) <= max(2, count)
    if len(ticks) >= 2 and max(abs(lo), abs(hi)) < 1e12 * (hi - lo):  # spaced 1, 2, 2.5 or 5 x 10^k (where floats hold it)
        step = ticks[1] - ticks[0]
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert any(math.isclose(mantissa, m, rel_tol=1e-3) for m in (1, 2, 2.5, 5, 10))


@PURE
@given(lo=st.floats(-323.3, 308.25), width=st.floats(0, 632), count=counts)
@example(lo=math.log10(0.229), width=math.log10(1.85 / 0.229), count=3)  # the healthy demo's grad norm: 0.229..1.85
@example(lo=-10.1, width=10.5, count=5)  # vanishing gradients: 1e-10..1
def test_log_ticks_are_decades_when_two_fit(lo: float, width: float, count: int) -> None:
    hi = min(lo + width, 308.25)  # log10 of the largest float
    ticks = log_ticks(lo, hi, count)
    assert ticks == sorted(ticks) and all(lo <= t <= hi for t in ticks)
    if math.floor(hi) - math.ceil(lo) >= 1:  # two decades inside: decade ticks only
        assert len(ticks) >= 2 and all(t.is_integer() for t in ticks)
    axis = log_axis(lo, hi, count)
    assert len(axis.labels) >= 1 and all(math.isfinite(label_value(label)) for label in axis.labels)


@PURE
@given(lo=st.floats(0, 1e7), width=st.floats(1e-3, 1e8), count=counts)
def test_time_ticks_are_round_durations_that_read_back(lo: float, width: float, count: int) -> None:
    hi = lo + width
    ticks = duration_ticks(lo, hi, count)
    assert ticks == sorted(set(ticks)) and all(lo <= t <= hi for t in ticks)
    labels = duration_labels(ticks)
    assert len(set(labels)) == len(labels)
    for tick, label in zip(ticks, labels):
        assert math.isclose(label_value(label), tick, rel_tol=1e-12, abs_tol=1e-9), (tick, label)


@PURE
@given(value=st.integers(-(2**53) + 1, 2**53 - 1))
def test_step_labels_read_back_exactly(value: int) -> None:
    assert label_value(step_label(float(value))) == value


@given(seconds=st.integers(0, 10**8))
@PURE
def test_durations_read_back(seconds: int) -> None:
    text = duration(float(seconds))
    value = label_value(text)
    assert value <= seconds and seconds - value < (3600 if seconds >= 86400 else 60 if seconds >= 3600 else 1)


# ---------------------------------------------------------------------------- labels on screen

@st.composite
def axes(draw) -> Axis:
    ticks = sorted(set(draw(st.lists(st.floats(0, 1), min_size=1, max_size=12))))
    labels = [draw(st.text(alphabet="0123456789.ekMs-+", min_size=1, max_size=9)) for _ in ticks]
    return Axis(tuple(ticks), tuple(labels))


@PURE
@given(axis=axes(), width=st.integers(12, 300), margin=st.integers(4, 10), name=st.sampled_from(["step", "time"]))
def test_x_labels_never_touch(axis: Axis, width: int, margin: int, name: str) -> None:
    columns = width - margin - 2
    xs = x_labels(axis, width, margin, columns, name)
    assert len(xs.row) == width and xs.row[:margin].strip() == name
    spans = []
    for tick in xs.ticks:
        label = axis.labels[axis.ticks.index(tick)]
        column = margin + 1 + cell(tick, columns)
        start = xs.row.find(label, max(margin + 1, column - len(label)))
        assert start >= 0 and start <= column <= start + len(label) - 1 or start + len(label) == width, (xs.row, label, column)
        spans.append((start, start + len(label)))
    words = re.findall(r"\S+", xs.row[margin:])
    assert len(words) == len(xs.ticks)  # every kept label stands alone: at least one blank between two


@PURE
@given(axis=axes(), rows=st.integers(1, 100))
def test_y_labels_have_a_free_row_between_them(axis: Axis, rows: int) -> None:
    ys = y_labels(axis, rows, min_width=4)
    taken = sorted(ys.rows)
    assert all(b - a >= 2 for a, b in zip(taken, taken[1:]))
    assert all(0 <= r < rows for r in taken) and len(ys.ticks) == len(taken)
    assert ys.width >= 4 and all(len(label) <= ys.width for label in ys.rows.values())


values = st.one_of(finite, st.sampled_from([math.nan, math.inf, 0.0, 1e-300, 1e300]))


@st.composite
def charts(draw) -> Chart:
    lines = []
    for i in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 60))
        start = draw(st.integers(0, 10**6))
        x = np.sort(np.array(draw(st.lists(st.integers(start, start + 10**5), min_size=n, max_size=n)), dtype=np.float64))
        y = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
        lines.append((f"s{i}", x, y))
    return Chart("chart", tuple(lines), threshold=draw(st.one_of(st.none(), st.floats(0.1, 10))))


def _frame(text: str) -> tuple[list[str], int]:
    rows = text.split("\n")
    top = next(i for i, row in enumerate(rows) if "┌" in row)
    return rows, top


@DRAW
@given(chart=charts(), width=st.integers(12, 220), height=st.integers(5, 60), log=st.booleans(),
       smoothing=st.sampled_from(STRENGTHS), cursor=st.one_of(st.none(), st.integers(0, 2 * 10**6)))
def test_labels_sit_on_plotexts_tick_marks(chart: Chart, width: int, height: int, log: bool, smoothing: float, cursor: int | None) -> None:
    """Every y label is on a row where the frame has a tick mark, every x label under one; no label touches another."""
    text = draw_chart(chart, log=log, marker=None, width=width, height=height, smoothing=smoothing, cursor=cursor).plain
    if "┌" not in text:
        return  # nothing drawable: a note
    rows, top = _frame(text)
    left = rows[top].index("┌")
    bottom = next(i for i in range(top + 1, len(rows)) if rows[i][left] == "└")
    marked_rows = [i for i in range(top + 1, bottom) if rows[i][left] in "┤┼├"]
    labelled_rows = [i for i in range(top + 1, bottom) if rows[i][:left].strip()]
    assert (labelled_rows or width < 40) and set(labelled_rows) <= set(marked_rows), text  # y labels may not fit a narrow chart
    assert all(b - a >= 2 for a, b in zip(labelled_rows, labelled_rows[1:]))
    assert len(rows) == height and all(len(row) == width for row in rows)
    x_row = rows[bottom + 1]
    assert x_row[:left].strip() in ("step", "time")
    marks = [j for j, ch in enumerate(rows[bottom]) if ch in "┬┼"]
    for match in re.finditer(r"\S+", x_row[left:]):
        start, end = left + match.start(), left + match.end()
        assert any(start <= j < end for j in marks) or end == width, (x_row, rows[bottom])


def test_the_issue_charts_have_whole_step_ticks_a_step_label_and_decade_ticks() -> None:
    loss = Chart("loss", (("train", np.arange(1499.0), np.linspace(2, 0.1, 1499)), ("val", np.arange(0.0, 1499, 100), np.linspace(2, 0.3, 15))))
    text = draw_chart(loss, log=False, marker=None, width=80, height=14).plain
    x_row = text.split("\n")[-2]
    assert x_row.split()[0] == "step" and all(re.fullmatch(r"\d+", word) for word in x_row.split()[1:]), x_row
    assert "⠤ train  • val" in text.split("\n")[-1]  # the legend names each series' glyph
    grad = Chart("gradient norm (pre-clip)", (("grad norm", np.arange(1200.0), np.logspace(-10, 0.3, 1200)),), log_default=True)
    rows = draw_chart(grad, log=True, marker=None, width=80, height=12).plain.split("\n")
    y_words = [row.split("┤")[0].strip() for row in rows if "┤" in row and row.split("┤")[0].strip()]
    assert len(y_words) >= 2 and all(re.fullmatch(r"1e-\d+|0\.0*1|1", w) for w in y_words), y_words


# ---------------------------------------------------------------------------- smoothing

steps_and_values = st.integers(1, 60).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 10**9), min_size=n, max_size=n).map(lambda v: np.sort(np.array(v, dtype=np.float64))),
    st.lists(magnitudes, min_size=n, max_size=n).map(lambda v: np.array(v, dtype=np.float64)),
))


@PURE
@given(data=steps_and_values, weight=st.floats(0.01, 0.999), constant=magnitudes)
def test_ema_of_a_constant_is_the_constant(data, weight: float, constant: float) -> None:
    steps, _ = data
    assert np.array_equal(ema(steps, np.full(len(steps), constant), weight), np.full(len(steps), constant))


@PURE
@given(data=steps_and_values, weight=st.sampled_from(STRENGTHS))
def test_ema_stays_within_what_it_has_seen(data, weight: float) -> None:
    steps, values = data
    smooth = ema(steps, values, weight)
    assert len(smooth) == len(values) and np.isfinite(smooth).all()
    assert (smooth >= np.minimum.accumulate(values)).all() and (smooth <= np.maximum.accumulate(values)).all()
    assert smooth[0] == values[0]  # debiased: the first point is not pulled towards zero
    if weight == 0:
        assert np.array_equal(smooth, values)


@PURE
@given(seed=st.integers(0, 2**32 - 1), scale=st.floats(1e-6, 1e6), weight=st.sampled_from(STRENGTHS[1:]),
       start=st.integers(0, 10**6), stride=st.integers(1, 50))
def test_ema_on_1000_even_intervals_is_tensorboards(seed: int, scale: float, weight: float, start: int, stride: int) -> None:
    """TensorBoard: last = last * w + (1 - w) * v; smoothed = last / (1 - w ** n)."""
    values = np.random.default_rng(seed).lognormal(size=VIEWPORT_POINTS + 1) * scale
    last, expected = 0.0, []
    for n, v in enumerate(values, 1):
        last = last * weight + (1 - weight) * v
        expected.append(last / (1 - weight**n))
    steps = start + stride * np.arange(len(values), dtype=np.float64)
    assert np.allclose(ema(steps, values, weight), expected, rtol=1e-9, atol=0)


@PURE
@given(data=steps_and_values, weight=st.sampled_from(STRENGTHS[1:]), scale=st.integers(1, 1000), shift=st.integers(-(10**6), 10**6))
def test_ema_does_not_depend_on_the_step_unit(data, weight: float, scale: int, shift: int) -> None:
    """Weighted per fraction of the step range: the same curve for steps x1000 or offset (a resumed count)."""
    steps, values = data
    values = np.clip(values, -1e6, 1e6)
    assert np.allclose(ema(steps, values, weight), ema(steps * scale + shift, values, weight), rtol=1e-6, atol=1e-6)


def test_smoothing_cycles_off_and_back() -> None:
    seen, weight = [], 0.0
    for _ in range(len(STRENGTHS)):
        weight = next_strength(weight)
        seen.append(weight)
    assert seen == [*STRENGTHS[1:], 0.0]


# ---------------------------------------------------------------------------- cursor and readout

@st.composite
def chart_lines(draw):
    lines = []
    for i in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 25))
        x = np.array(draw(st.lists(st.one_of(st.integers(0, 5000).map(float), st.just(math.nan)), min_size=n, max_size=n)))
        y = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
        lines.append((f"l{i}", x, y))
    return tuple(lines)


@PURE
@given(lines=chart_lines(), at=st.integers(-100, 6000))
@example(lines=(("train", np.array([0.0, 10.0, 20.0]), np.array([1.0, 2.0, 3.0])),), at=15)  # a tie takes the earlier
def test_the_readout_is_the_recorded_point_nearest_the_cursor(lines, at: int) -> None:
    samples = readout(lines, float(at))
    assert len(samples) == len(lines)
    for (label, x, y), sample in zip(lines, samples):
        usable = np.isfinite(x) & np.isfinite(y)
        if not usable.any():
            assert sample is None
            continue
        assert sample is not None and sample.label == label
        pairs = set(zip(x[usable].tolist(), y[usable].tolist()))
        assert (sample.step, sample.value) in pairs  # a point the run recorded, not an interpolation
        assert abs(sample.step - at) == np.abs(x[usable] - at).min()
        nearer_before = x[usable][np.abs(x[usable] - at) == abs(sample.step - at)]
        assert sample.step == nearer_before[0]  # ties: the first recorded
    text = readout_text(at, samples, tuple(glyph_of(i) for i in range(len(lines))))
    assert text.startswith(f"step {at}")
    for (label, _, _), sample in zip(lines, samples):
        if sample is not None:
            assert f"{label} {fmt(sample.value)}" in text


@PURE
@given(first=st.integers(-(10**9), 10**9), length=st.integers(0, 10**9), columns=st.integers(1, 400),
       moves=st.lists(st.tuples(st.sampled_from([-1, 1]), st.booleans()), max_size=30))
def test_the_cursor_stays_on_the_run_and_always_moves_when_it_can(first: int, length: int, columns: int, moves) -> None:
    last = first + length
    cursor = move_cursor(None, first, last, columns, -1)
    assert cursor == last  # it appears at the newest step
    per_column = max(1, round(length / columns))
    for direction, big in moves:
        moved = move_cursor(cursor, first, last, columns, direction, big)
        assert first <= moved <= last
        want = cursor + direction * per_column * (BIG_MOVE if big else 1)
        assert moved == max(first, min(last, want))
        cursor = moved


def test_nearest_index_of_huge_steps_does_not_overflow() -> None:
    assert nearest_index(np.array([-1.7e308, 1.7e308]), 1.7e308) == 1
    assert nearest_index(np.array([math.nan]), 1.0) is None


def test_the_cursor_readout_in_a_drawn_chart_names_the_data_at_its_step() -> None:
    x = np.arange(0.0, 1000.0, 10.0)
    y = np.cos(x / 50) + 2
    val_x, val_y = np.arange(0.0, 1000.0, 100.0), np.linspace(3, 1, 10)
    chart = Chart("loss", (("train", x, y), ("val", val_x, val_y)))
    text = draw_chart(chart, log=False, marker=None, width=100, height=20, smoothing=0.9, cursor=433).plain
    bottom = text.split("\n")[-1]
    assert f"step 433:  ⠤ train {fmt(y[43])} (ema " in bottom and "@430" in bottom, bottom
    assert f"• val {fmt(val_y[4])}" in bottom and "@400" in bottom, bottom
    assert "┊" in text and "EMA 0.9" in text.split("\n")[0]


# ---------------------------------------------------------------------------- colour-free series and the time axis

def test_every_series_has_its_own_glyph() -> None:
    assert len(set(GLYPHS)) == len(GLYPHS) and len({glyph_of(i) for i in range(len(GLYPHS))}) == len(GLYPHS)
    lines = tuple((f"s{i}", np.arange(5.0), np.full(5, float(i))) for i in range(4))
    text = draw_chart(Chart("c", lines), log=False, marker=None, width=60, height=14).plain
    canvas = "\n".join(text.split("\n")[2:-3])
    for glyph in GLYPHS[1:4]:
        assert glyph in canvas  # each line drawn with its glyph, so no colour is needed to tell them apart
    assert "⠤ s0  • s1  + s2  x s3" in text


@PURE
@given(steps=st.lists(st.integers(0, 10**6), min_size=2, max_size=200, unique=True), rate=st.floats(1e-3, 1e3), points=st.integers(2, 500))
def test_the_clock_gives_the_elapsed_time_at_its_steps(steps: list[int], rate: float, points: int) -> None:
    x = np.sort(np.array(steps, dtype=np.float64))
    walls = 1.7e9 + x / rate
    clock = clock_of(x, walls, points)
    assert clock is not None and len(clock[0]) <= max(2, points)
    assert clock[1][0] == 0 and np.allclose(elapsed_at(clock, clock[0]), (clock[0] - x[0]) / rate, rtol=1e-9, atol=1e-6)


def test_the_time_axis_reads_elapsed_time() -> None:
    steps = np.arange(0.0, 2000.0)
    clock = clock_of(steps, 1.7e9 + steps * 0.45, 400)  # 0.45 s per step: 15 minutes
    chart = Chart("loss", (("train", steps, 1 / (steps + 1)),), clock=clock)
    data = plot_data(chart, False, None, 6, 4, time_axis=True)
    assert data is not None and data.x_name == "time"
    assert [label_value(label) for label in data.x_axis.labels] == [0.0, 300.0, 600.0]  # 0s 5m 10m
    text = draw_chart(chart, log=False, marker=None, width=80, height=12, time_axis=True, cursor=1000).plain
    words = text.split("\n")[-2].split()
    assert words[0] == "time" and [label_value(w) for w in words[1:]] == [120.0 * i for i in range(len(words) - 1)]  # 0m 2m 4m ...
    assert "step 1000 (7m30s):" in text.split("\n")[-1]
    without = draw_chart(Chart("loss", chart.lines), log=False, marker=None, width=80, height=12, time_axis=True).plain
    assert without.split("\n")[-2].split()[0] == "step"  # no clock: the x axis stays the step

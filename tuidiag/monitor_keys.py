"""The keys the monitor binds on every screen and in the run view, defined once as plain data.

The app's and the run view's bindings are built from :data:`APP_KEYS`, :data:`RUN_VIEW_KEYS` and
:data:`RUN_TABS` (``tuidiag.app``), and the job registry (:mod:`tuidiag.job_kinds.registry`) refuses
a job whose key one of them already binds. Nothing here imports Textual, torch or the rest of
tuidiag, so that the job kinds, which every process reads, can check a key without the UI.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Key:
    """One binding: the keys (Textual's names, comma-separated) and what they do."""

    keys: str
    action: str
    description: str
    tooltip: str = ""
    show: bool = False
    """Whether the footer shows it (help lists every key with a description)."""
    key_display: str | None = None
    priority: bool = False


@dataclass(frozen=True)
class RunTab:
    """One tab of the run view."""

    id: str
    """The pane's id; for a chart tab also the key of its chart in ``RunDetail.charts``."""
    key: str
    """The key that shows the tab."""
    label: str
    """The tab bar's label: short, so that every tab fits at 80 columns."""
    shows: str
    """What the tab shows, for the help screen."""
    chart: bool = False
    """Whether the pane is a ``MetricChart`` of ``RunDetail.charts[id]``."""
    smoothed: bool = False
    """Whether the smoothing key (``e``) smooths its chart (not the LR's: smoothing a schedule only makes it lag)."""


TEXTUAL_KEYS: tuple[Key, ...] = (
    Key("ctrl+q", "quit", "Quit"),
    Key("ctrl+c", "help_quit", ""),
    Key("tab", "app.focus_next", "Focus Next"),
    Key("shift+tab", "app.focus_previous", "Focus Previous"),
    Key("ctrl+c,super+c", "screen.copy_text", "Copy selected text"),
)
"""What Textual itself binds on every app and screen (``App.BINDINGS``, ``Screen.BINDINGS``)."""

APP_KEYS: tuple[Key, ...] = (
    Key("q", "quit", "Quit", show=True),
    Key("question_mark", "help", "Help", "this help: every key, by screen", show=True),
    Key("r", "reload", "Reload", "re-read all runs now"),
    Key("ctrl+p", "command_palette", "palette", "open or replay any run by name", priority=True),
)
"""The app's keys, bound on every screen (``TuidiagApp.BINDINGS``)."""

RUN_TABS: tuple[RunTab, ...] = (
    RunTab("loss", "1", "Loss", "training and validation loss", chart=True, smoothed=True),
    RunTab("grad", "2", "Grad", "global gradient norm before clipping, the clip threshold", chart=True, smoothed=True),
    RunTab("lr", "3", "LR", "learning rate of each parameter group", chart=True),
    RunTab("update", "4", "Update", "update/weight ratio (healthy near 1e-3)", chart=True, smoothed=True),
    RunTab("layers", "5", "Layers", "per-layer gradient norms (layers x time)"),
    RunTab("events-tab", "6", "Events", "non-finite values, clipping, recorder errors; enter shows one whole"),
    RunTab("jobs-tab", "7", "Jobs", "the newest result of each job"),
    RunTab("dist", "8", "Dist", "one distribution at a time (weights, gradients, logged tensors): median, "
           "q25-q75, q5-q95, min/max over steps", chart=True),
)
"""Every tab of the run view, in tab-bar order (its key shows it)."""

CANCEL_KEY = "x"
"""Cancels the running job (the progress bar names it)."""
NEXT_DIST_KEY, PREVIOUS_DIST_KEY = "h", "H"
"""Show the next (previous) distribution in the distribution tab; its chart title names them."""

RUN_VIEW_KEYS: tuple[Key, ...] = (
    Key("escape", "back", "Back", "to the overview; from the full diagnosis, to the charts", show=True),
    Key("d", "toggle_diagnosis", "Diagnosis", "the whole diagnosis, full height and scrollable; d again returns", show=True),
    Key("g", "toggle_log", "Log y", "log or linear y axis of the chart", show=True),
    Key("f", "next_finding", "Finding", "mark the next finding's first step", show=True),
    Key("space", "play", "Play/pause", "replay: play or pause"),
    Key("left", "step(-1)", "Step back", "replay: move the cursor back", priority=True),
    Key("right", "step(1)", "Step forward", "replay: move the cursor forward", priority=True),
    Key("plus,equals_sign", "speed(1)", "Faster", "replay: play faster"),
    Key("minus", "speed(-1)", "Slower", "replay: play slower"),
    Key("right_square_bracket", "jump(1)", "Event", "mark the next event or finding", show=True),
    Key("left_square_bracket", "jump(-1)", "Previous event", "mark the previous event or finding"),
    Key("home", "goto('start')", "Start", "replay: the first step"),
    Key("end", "goto('end')", "End/live", "replay: the last step; live: drop the mark"),
    Key(CANCEL_KEY, "app.cancel_job", "Cancel job", "stop the running job or the armed NaN hunt"),
    Key("a", "live_action", "Apply fix", "change the live training: scale the LR, clip, checkpoint"),
    Key("k", "rank_mode", "Ranks", "multi-rank runs: all ranks, their spread, one rank"),
    Key("e", "smoothing", "Smooth", "smooth the charts (EMA): off, 0.6, 0.9, 0.99; the raw series stays faint"),
    Key("t", "time_axis", "Step/time", "x axis: step, or wall-clock time since the first step"),
    Key("comma", "cursor(-1)", "Cursor left", "move the chart cursor one column left; the readout shows each series there",
        key_display=","),
    Key("full_stop", "cursor(1)", "Cursor right", "move the chart cursor one column right", key_display="."),
    Key("less_than_sign", "cursor(-1, True)", "Cursor far left", "move the chart cursor ten columns left", key_display="<"),
    Key("greater_than_sign", "cursor(1, True)", "Cursor far right", "move the chart cursor ten columns right", key_display=">"),
    Key("z", "zoom", "Zoom", "zoom: then left/right keep the left/right half of the steps shown"),
    Key("Z", "zoom_reset", "Unzoom", "show every step again"),
    Key(NEXT_DIST_KEY, "distribution(1)", "Next distribution",
        "distribution tab: show the next recorded distribution (logged tensors, then each parameter's weights and gradient)"),
    Key(PREVIOUS_DIST_KEY, "distribution(-1)", "Previous distribution", "distribution tab: show the previous one"),
)
"""The run view's own keys (``RunScreen.BINDINGS``), besides its tab keys and the job keys."""


_SHORT_NAMES = {"solidus": "slash", "reverse_solidus": "backslash", "commercial_at": "at", "hyphen_minus": "minus",
                "plus_sign": "plus", "low_line": "underscore"}
"""Characters Textual names more shortly than Unicode does (its ``KEY_NAME_REPLACEMENTS``)."""
_CONTROL_NAMES = {"\t": "tab", "\x1b": "escape", "\r": "enter", "\x7f": "backspace"}
"""Control characters by the name of the key that types them."""


def key_name(key: str) -> str:
    """``key`` as Textual names it: a single character by its Unicode name (``?`` -> ``question_mark``,
    ``-`` -> ``minus``), letters and digits as themselves, a name (``escape``, ``ctrl+p``) as written."""
    if key in _CONTROL_NAMES:
        return _CONTROL_NAMES[key]
    if len(key) == 1 and not key.isalnum():
        try:
            name = unicodedata.name(key).lower().replace("-", "_").replace(" ", "_")
        except ValueError:  # a character without a Unicode name: itself
            return key
        return _SHORT_NAMES.get(name, name)
    return _SHORT_NAMES.get(key, key)


def run_view_bindings() -> dict[str, str]:
    """Every key bound while the run view is shown, but the job keys: Textual name -> what it does
    (``the run view's 'Zoom'``, ``the app's 'Quit'``)."""
    owners = (("Textual's", TEXTUAL_KEYS), ("the app's", APP_KEYS), ("the run view's", RUN_VIEW_KEYS),
              ("the run view's", tuple(Key(tab.key, f"tab('{tab.id}')", f"{tab.label} tab") for tab in RUN_TABS)))
    bound: dict[str, str] = {}
    for owner, keys in owners:
        for key in keys:
            for name in key.keys.split(","):
                bound.setdefault(key_name(name.strip()), f"{owner} {(key.description or key.action)!r}")
    return bound

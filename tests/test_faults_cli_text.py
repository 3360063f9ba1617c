"""Every CLI command prints any text from run files safely and exits as usual.

Hypothesis builds hostile strings from the pieces that broke the CLI (lone surrogates,
ESC/CSI/OSC 8/BEL/CR/C1 escapes, bidi overrides, Rich markup, tmux formats, very long
text) mixed with arbitrary text, and puts them in a run's name, directory name, config
keys and values, metric names, event kinds, messages and data. Each example runs the
command matrix (ls, status, diagnose, diagnose --json, compare, report, query as a
table, CSV and JSON) as the console script, in one subprocess per environment: the
default one (``PYTHONIOENCODING`` unset) and ``LC_ALL=C PYTHONIOENCODING=ascii``. Every
command must exit 0 and print no raw escape, control or surrogate. Functions all
commands share are checked in-process on many more examples.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.conftest import examples
import tuidiag
from tests.cli_driver import results
from tuidiag.text.safe import clean, escape_surrogates, escaped

ROOT = Path(__file__).resolve().parent.parent
PIECES = [
    "\ud800", "\udcff", "\udfff",  # lone surrogates (what \ud800 in JSON decodes to)
    "\x1b[31m", "\x1b[2J", "\x1b]8;;http://evil.example\x07", "\x1b]8;;\x1b\\", "\x1b]0;title\x07", "\x1bP+q\x1b\\",
    "\x07", "\r", "\x08", "\x00", "\x9b5m", "\x85",  # BEL, CR, BS, NUL, C1 CSI, NEL
    "\u202e", "\u2066", "\u200f", "\u2028",  # bidi overrides and isolates, a line separator
    "[red]", "[/]", "[link=http://evil.example]x[/link]", "#[fg=red]", "$\\frac{1}{$", "\n", "\t",
    "\u6f22\u5b57", "\U0001f642", "e\u0301",
]
RAW = [b"\x1b", b"\x07", b"\r", b"\x00", b"\x08", b"\xc2\x9b", b"\xc2\x85", b"\xe2\x80\xae", b"\xe2\x81\xa6"]
"""What must never reach a terminal from run-file text: ESC, BEL, CR, NUL, BS, C1 CSI/NEL, RLO, LRI (UTF-8)."""

hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), min_size=1, max_size=10).map("".join)
very_long = hostile.map(lambda s: (s or "x") * (3000 // max(1, len(s)) + 1))
ALL_PIECES = "".join(PIECES)
"""Every piece at once: one string of each example holds all of them."""

ENVIRONMENTS = {
    "default": {"PYTHONIOENCODING": None},
    "ascii": {"PYTHONIOENCODING": "ascii", "LC_ALL": "C", "LANG": "C"},
}


def _record(run_dir: Path, texts: list[str]) -> None:
    """A finished run carrying ``texts`` in every place a run file holds text."""
    name, key, value, metric, message = texts
    config = {key: value, "lr": 0.1, "nested": {value[:50]: [key[:50], message[:50]]}}
    with tuidiag.Recorder(run_dir, name=name, config=config, flush_interval=3600) as rec:
        for step in range(40):
            rec.log({"train/loss": 2.0 / (step + 1), f"grad_norm/{metric}": 0.5, metric[:200]: float(step),
                     "val/loss": 2.5 / (step + 1)}, step=step)
        rec.event(message[:40] or "k", message, severity="warning", data={key[:40]: value[:200]}, step=20)


def _hostile_dir(parent: Path, text: str) -> Path:
    """A directory name holding ``text``'s escapes and a byte that is not UTF-8 (a surrogate in ``str``)."""
    raw = os.fsencode(parent) + b"/run\xff" + escape_surrogates(text)[:40].encode("utf-8").replace(b"/", b"_") + b"\x1b[7m"
    return Path(os.fsdecode(raw.replace(b"\x00", b"")))


def _commands(root: Path, a: Path, b: Path, out: Path) -> list[list[str]]:
    return [
        ["ls", str(root)],
        ["status", str(a)], ["status", "--tmux", str(b)],
        ["diagnose", str(a)], ["diagnose", "--json", str(a)], ["diagnose", str(b)],
        ["compare", str(a), str(b)], ["compare", "--json", str(a), str(b)],
        ["report", str(a), "-o", str(out)],
        ["query", "--root", str(root)],
        ["query", "--root", str(root), "select run, name, status, config from runs"],
        ["query", "--root", str(root), "--csv", "select * from events"],
        ["query", "--root", str(root), "--json", "select * from runs"],
        ["query", "--root", str(root), "select distinct metric from metrics"],
    ]


def _env(changes: dict[str, str | None], cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LC_ALL", "LANG", "PYTHONUTF8")}
    env |= {"PYTHONPATH": str(ROOT), "TUIDIAG_CACHE_DIR": str(cache), "COLUMNS": "100"}
    env |= {k: v for k, v in changes.items() if v is not None}
    return env


def _check_output(label: str, data: bytes, ascii_only: bool) -> None:
    found = [raw for raw in RAW if raw in data]
    assert not found, f"{label}: raw {found} in output"
    text = data.decode("ascii" if ascii_only else "utf-8")  # strict: a surrogate could not have been written
    assert not any("\ud800" <= c <= "\udfff" for c in text)


@pytest.mark.parametrize("label", list(ENVIRONMENTS))
@settings(max_examples=1, deadline=None, derandomize=True, phases=[Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts=st.lists(hostile, min_size=4, max_size=4), long=very_long)
def test_every_command_prints_hostile_text_escaped_and_exits_0(tmp_path_factory: pytest.TempPathFactory, label: str,
                                                                texts: list[str], long: str) -> None:
    """One subprocess per environment runs the whole matrix (one interpreter start, not one per command)."""
    root = tmp_path_factory.mktemp("hostile-cli")
    a, b = root / "a", _hostile_dir(root, texts[0])
    _record(a, [ALL_PIECES + texts[0], texts[1], long, texts[2] + ALL_PIECES, texts[3] + ALL_PIECES])
    _record(root / "b-tmp", [texts[3], ALL_PIECES, texts[0], long, ALL_PIECES[::-1]])
    os.rename(root / "b-tmp", b)
    commands = _commands(root, a, b, root / "report")
    done = subprocess.run([sys.executable, "-m", "tests.cli_driver", json.dumps(commands)], capture_output=True,
                          timeout=240, env=_env(ENVIRONMENTS[label], root / "cache"), cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-3000:]
    errors = [err for _, err in results(done.stderr, len(commands))]
    for (rc, out), err, command in zip(results(done.stdout, len(commands)), errors, commands, strict=True):
        where = f"{label}: tuidiag {' '.join(command[:2])}"
        assert rc == 0, f"{where} exited {rc}: {err.decode('utf-8', 'replace')[-2000:]}"
        _check_output(where, out, ascii_only=label == "ascii")
    _check_output(f"{label}: stderr", done.stderr, ascii_only=label == "ascii")
    assert b"Traceback" not in done.stderr
    _check_output("report.md", (root / "report" / "report.md").read_bytes(), ascii_only=False)


TEXT = st.text(alphabet=st.characters(), max_size=60) | hostile
"""Any code point, surrogates included, and the hostile pieces."""


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(value=TEXT)
def test_what_every_command_prints_through_can_be_written_anywhere(value: str) -> None:
    for text in (clean(value), escaped(value), escape_surrogates(value)):
        text.encode("utf-8")  # no lone surrogate left
    shown = clean(value, max_len=80)
    assert len(shown) <= 80 and not any(c in shown for c in "\x1b\x07\r\x00\x9b\u202e\n")
    assert not any(0x00 <= ord(c) < 0x20 and c not in "\t\n" for c in escaped(value))
    assert len(escaped(value)) >= len(value)  # nothing removed from CSV cells


@settings(max_examples=20, deadline=None, derandomize=True)
@given(config=st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | TEXT,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                           max_leaves=12),
       name=TEXT)
def test_query_takes_any_manifest_values(config: object, name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The ``runs`` view takes any run.json: odd types become NULL, surrogates and non-finite numbers are escaped."""
    duckdb = pytest.importorskip("duckdb")
    from tuidiag.store.sql_views import RUNS_COLUMNS, _run_row

    run_dir = tmp_path_factory.mktemp("manifest")
    manifest = {"name": name, "config": {"c": config}, "run_id": config, "created": config, "last_step": config,
                "world_size": config, "status": "finished"}
    (run_dir / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    con = duckdb.connect(":memory:")
    con.execute(f"CREATE TABLE runs ({', '.join(RUNS_COLUMNS)})")
    con.execute(f"INSERT INTO runs VALUES ({', '.join('?' * len(RUNS_COLUMNS))})", _run_row(run_dir, "r", []))
    row = con.execute("SELECT name, json_valid(config), json_valid(manifest), json_extract(config, '$.c') FROM runs").fetchone()
    assert row is not None and row[0] == escape_surrogates(name or run_dir.name) and row[1] and row[2] and row[3] is not None

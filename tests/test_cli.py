"""The command line as a user types it: --help, ls, demo."""

from __future__ import annotations

import subprocess

from tuidiag.cli.main import main


def _tuidiag(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "tuidiag", *args], capture_output=True, text=True, timeout=300)


def test_help_lists_the_subcommands(python) -> None:
    result = _tuidiag(python, "--help")
    assert result.returncode == 0
    assert "ls" in result.stdout and "demo" in result.stdout


def test_demo_then_ls_shows_the_runs(tmp_path, python, capsys) -> None:
    # one scenario, trained until it diverges (step 254): what demo prints and ls then lists; each scenario's
    # training is checked in tests/test_demo_factory.py, the checked-in demo runs by the snapshots. The demo
    # trains in this process (a process of its own would import torch again); ls runs as the user types it
    assert main(["demo", str(tmp_path), "--only", "lr-too-high", "--steps", "270"]) == 0
    assert "stopped as intended" in capsys.readouterr().out  # lr-too-high diverges to NaN
    listing = _tuidiag(python, "ls", str(tmp_path))
    assert listing.returncode == 0
    lines = listing.stdout.splitlines()
    too_high = next(line for line in lines if line.startswith("lr-too-high"))
    assert "failed" in too_high and "nan" in too_high
    assert too_high.split()[2] == "254"  # the last step, as the monitor shows it


def test_ls_prints_markup_in_run_names_literally(tmp_path, capsys) -> None:
    import tuidiag

    with tuidiag.Recorder(tmp_path / "odd", name="[red]evil[/red]\x1b]0;title\x07") as rec:
        rec.step(1.0)
    assert main(["ls", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[red]evil[/red]" in out and "\x1b]0;" not in out


def test_ls_of_a_missing_directory_fails_clearly(tmp_path, capsys) -> None:
    assert main(["ls", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err

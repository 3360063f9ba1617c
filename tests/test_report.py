"""``tuidiag report``: real demo runs in, a Markdown report with valid PNG plots out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tuidiag
from tuidiag.cli.main import main
from tuidiag.diagnosis import diagnose
from tuidiag.report.mdtext import md

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_runs"
SECTIONS = ("# Training report:", "**Summary:**", "## Findings", "## Notes", "## Pre-training checklist", "## Plots", "## Run info")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Reports of two demo runs, written once through the CLI."""
    out = tmp_path_factory.mktemp("reports")
    paths = {}
    for name in ("lr-too-high", "healthy"):
        assert main(["report", str(DEMO / name), "-o", str(out / name)]) == 0
        paths[name] = out / name / "report.md"
    return paths


def _check_png(path: Path) -> None:
    from matplotlib.image import imread

    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    height, width = imread(path).shape[:2]
    assert height > 100 and width > 100, (path, width, height)


@pytest.mark.parametrize("name", ["lr-too-high", "healthy"])
def test_report_writes_markdown_and_valid_pngs(reports: dict[str, Path], name: str) -> None:
    report = reports[name]
    text = report.read_text(encoding="utf-8")
    pngs = sorted(report.parent.glob("*.png"))
    assert len(pngs) >= 5
    for png in pngs:
        _check_png(png)
        assert f"]({png.name})" in text, f"{png.name} is not linked"
    linked = set(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text))
    assert linked == {p.name for p in pngs}
    for section in SECTIONS:
        assert section in text, section


@pytest.mark.parametrize("name", ["lr-too-high", "healthy"])
def test_report_names_the_top_finding(reports: dict[str, Path], name: str) -> None:
    text = reports[name].read_text(encoding="utf-8")
    top = diagnose(tuidiag.open_run(DEMO / name)).top
    summary = next(line for line in text.splitlines() if line.startswith("**Summary:**"))
    assert f"`{top.code}`" in summary and md(top.title) in summary
    if name == "lr-too-high":
        assert top.code == "lr_too_high"
        assert "**Fix:**" in text and "Evidence:" in text and "first step" in text


def test_checklist_and_skipped_plots(reports: dict[str, Path]) -> None:
    bad = reports["lr-too-high"].read_text(encoding="utf-8")
    good = reports["healthy"].read_text(encoding="utf-8")
    assert re.search(r"\| No NaN/Inf in loss or gradients \| ❌ fail \|", bad)
    assert re.search(r"\| No NaN/Inf in loss or gradients \| ✅ pass \|", good)
    assert "❌ fail" not in good
    # lr-too-high was recorded without max_grad_norm: no clipping plot, and the report says why
    assert not (reports["lr-too-high"].parent / "clip_rate.png").exists()
    assert "(clip_rate.png): no grad/clipped recorded" in bad.split("### Plots not drawn")[1]
    assert (reports["healthy"].parent / "clip_rate.png").exists()


def test_run_text_is_escaped_and_stripped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "odd"
    with tuidiag.Recorder(run_dir, config={"note": "<b>|`x`|</b>"}, name="[x](y) *b* \x1b[31m|") as rec:
        for step in range(30):
            rec.step(1.0 / (step + 1))
    out = tmp_path / "report"
    assert main(["report", str(run_dir), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report.md")
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "\x1b" not in text
    assert "# Training report: \\[x\\](y) \\*b\\* \\|" in text
    assert "[x](y)" not in text and "<b>" not in text
    assert "\\<b\\>\\|\\`x\\`\\|\\</b\\>" in text
    for png in out.glob("*.png"):
        _check_png(png)
    assert (out / "loss.png").exists() and "### Plots not drawn" in text


def test_unreadable_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing"), "-o", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_md_escapes_markdown_syntax() -> None:
    assert md("a_b*c[d]e<f>g|h`i\\j") == "a\\_b\\*c\\[d\\]e\\<f\\>g\\|h\\`i\\\\j"
    assert md("x\x1b]0;title\x07y\nz") == "xy z"

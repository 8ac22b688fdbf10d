"""The HTML report: one self-contained page, rendered by a real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from kernelpick.cli import main
from kernelpick.reports import load_report, plots_of
from tests.reports.samples import write_gemm_log

#: The orange of the star that marks the picked candidate in every time-by-config plot.
PICKED_STAR = (0xF4, 0xA2, 0x61)


@pytest.fixture
def page(real_log: Path, tmp_path: Path) -> Path:
    log = write_gemm_log(tmp_path / "tunings.jsonl")
    log.write_text(real_log.read_text() + log.read_text())
    assert main(["report", "--log", str(log), "--html", str(tmp_path / "report.html")]) == 0
    return tmp_path / "report.html"


def test_the_page_is_self_contained_with_every_plot_embedded(
    page: Path, real_log: Path, tmp_path: Path
) -> None:
    html = page.read_text()
    sources = re.findall(r'(?:src|href)="([^"#][^"]*)"', html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)  # no network, no files
    assert "<script" not in html and "<link" not in html
    plots = plots_of(load_report(tmp_path / "tunings.jsonl"))
    assert html.count("<img ") == len(plots) == 16  # 1 + 2 * 3 + 2 * 4 + the roofline
    assert "add_kernel(n=1000, float32, float32, float32)" in html and "compile_error" in html
    assert "kernelpick.ops.mm(float16[4096, 4096], float16[4096, 4096])" in html
    assert "% of roof" in html and "H100 SXM5 80GB" in html and "(compute bound)" in html
    assert html.count('class="picked"') == 5  # the winner's row, once per key


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "Chromium is not installed (apt-get install chromium; tools/ensure-test-programs does it): the page is not rendered"
    )


def test_chromium_renders_the_page_with_its_tables_and_plots(page: Path, tmp_path: Path) -> None:
    screenshot = tmp_path / "report.png"
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        f"--screenshot={screenshot}",
        "--window-size=1280,2000",
        page.resolve().as_uri(),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert screenshot.is_file(), (
        f"no screenshot; Chromium exited {finished.returncode}: {finished.stderr[-2000:]}"
    )
    with Image.open(screenshot) as shot:
        pixels = shot.convert("RGB")
        assert pixels.size == (1280, 2000)
        colours = pixels.getcolors(maxcolors=2**24) or []
    assert (
        len(colours) > 1000
    )  # text, tables and plots; a blank page has one colour, text alone a few hundred
    background = max(colours)[0]
    assert background < 0.95 * 1280 * 2000
    star = sum(count for count, rgb in colours if all(abs(a - b) <= 6 for a, b in zip(rgb, PICKED_STAR)))
    assert star > 40  # the embedded plots were decoded and drawn (about 150 pixels of stars)


def test_a_selectors_decisions_head_its_section_each_m_linking_to_its_candidates(page: Path) -> None:
    html = page.read_text()
    section = html[html.index('<h2 id="kernelpick.ops.mm">') :]
    titles = re.findall(r'<h3 class="decisions">([^<]*)</h3>', section)
    assert titles == [
        "Decisions on NVIDIA H100 80GB HBM3 (sm_90): N=512, K=8192, float16, B row-major",
        "Decisions on NVIDIA H100 80GB HBM3 (sm_90): N=4096, K=4096, float16, B row-major",
    ]
    assert section.index('<h3 class="decisions">') < section.index("<h3 id=")  # before the keys
    links = re.findall(r'<td><a href="#([^"]+)">(\d+)</a></td>', section)
    assert [m for _, m in links] == ["512", "4096"]
    assert all(f'<h3 id="{slug}">' in section for slug, _ in links)
    assert "ridge point 295 FLOP/B" in section and '<td class="name">compute</td>' in section

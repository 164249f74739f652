"""The report as a user sees it: rendered by a real (headless) browser, images loaded.

Checks what a test of the HTML text cannot: the page renders to something that is not blank,
every <img> loads (the browser's naturalWidth, not only the file's existence), the summary is
at the top, and printing gives one page per series after the summary.
Needs Debian's ``chromium`` (``apt-get install chromium``); skipped with that reason without it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kit.cli import main
from kit.fit import synth

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(apt-get install chromium)")

#: Appended to a copy of the page: after load, list every image's natural width.
_PROBE = """<script>
window.addEventListener("load", () => {
  const out = document.createElement("pre");
  out.id = "img-check";
  out.textContent = Array.from(document.images)
      .map(i => i.getAttribute("src") + "=" + i.naturalWidth).join("\\n");
  document.body.appendChild(out);
});
</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--virtual-time-budget=10000", *args],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-series report (TCP-like and a faster copy), fitted and validated by kit."""
    from kit.data.ingest import ingest

    root = tmp_path_factory.mktemp("browser")
    for transport, scale, seed in (("tcp", 1.0, 3), ("shm", 0.2, 4)):
        size, time = synth.sample(synth.ethernet_like(), 1500, grid=30, seed=seed)
        csv = root / f"{transport}.csv"
        pl.DataFrame({"size": size.astype(np.uint64), "duration": time * scale}).write_csv(csv)
        assert not ingest([csv], root / "ds", campaign="synthetic",
                          transport=transport).files_failed
    assert main(["report", str(root / "ds"), "-o", str(root / "report")]) == 0
    return root / "report"


def test_the_page_renders_with_every_image_loaded(report: Path) -> None:
    from PIL import Image, ImageStat

    html = (report / "index.html").read_text(encoding="utf-8")
    sources = re.findall(r'<img src="([^"]+)"', html)
    assert len(sources) >= 6 and all((report / s).is_file() for s in sources)
    # The summary comes first: what a user came for is on the first screen.
    assert html.index('id="summary"') < html.index('class="series"')
    for term in ("CRPS", "floor", "coverage", "Hockney", "regime", "gmm", "bandwidth"):
        assert html.index(term) < html.index('class="series"'), term  # defined before use

    check = report / "check.html"
    check.write_text(html.replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = _chromium("--dump-dom", check.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="img-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stdout[-2000:]
    widths = dict(line.rsplit("=", 1) for line in found.group(1).strip().splitlines())
    assert set(widths) == set(sources)
    assert all(int(w) > 100 for w in widths.values()), widths  # 0 = the image did not load

    shot = report.parent / "report.png"
    run = _chromium(f"--screenshot={shot}", "--window-size=1280,1600", check.as_uri())
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 1600)
    stat = ImageStat.Stat(image)
    assert stat.stddev[0] > 20  # not a blank page: text, tables and a plot
    dark = sum(image.histogram()[:128]) / (image.size[0] * image.size[1])
    assert 0.01 < dark < 0.5, dark


def test_printing_gives_one_page_per_series(report: Path) -> None:
    pdf = report.parent / "report.pdf"
    run = _chromium(f"--print-to-pdf={pdf}", "--no-pdf-header-footer",
                    (report / "index.html").as_uri())
    assert run.returncode == 0 and pdf.is_file(), run.stderr[-2000:]
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes()))
    n_series = (report / "index.html").read_text(encoding="utf-8").count('class="series"')
    assert n_series == 2
    # The summary and the terms (one or two pages), then exactly one page per series.
    assert n_series + 1 <= pages <= n_series + 2, pages

"""The HTML report in a real headless chromium (Debian's, driven by playwright): the page renders offline, every
chart is drawn (the Explain section's bars too), no console errors, and the screenshot is not blank."""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from crafted_results import make_case, make_results, sample_results
from infermeter.report.chart_list import report_charts
from infermeter.report.html import render_html
from infermeter.report.merged import MergedReport, SourceFile, merge_results
from infermeter.results.explain import ExplainRecord
from report.crafted_explain import explain_record

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Distinct colours in the screenshot, counted in the browser itself: a canvas reads the PNG back.
COUNT_COLOURS = """async (uri) => {
  const img = new Image(); img.src = uri; await img.decode();
  const canvas = document.createElement('canvas'); canvas.width = img.width; canvas.height = img.height;
  const ctx = canvas.getContext('2d'); ctx.drawImage(img, 0, 0);
  const data = ctx.getImageData(0, 0, img.width, img.height).data; const seen = new Set();
  for (let i = 0; i < data.length; i += 4 * 97) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
  return seen.size;
}"""


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    can_install = hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") is not None
    if not can_install:
        pytest.skip("Debian's chromium is not installed and cannot be (needs root and apt-get): see `make browser`")
    pytest.fail("chromium is missing but installable: run `make browser` (make test does it)")


def _inspect(
    context: Any, report: MergedReport, tmp_path: Path, name: str, explain: ExplainRecord | None = None
) -> dict[str, Any]:
    page_path = tmp_path / f"{name}.html"
    page_path.write_text(render_html(report, explain=explain), encoding="utf-8")
    shot = tmp_path / f"{name}.png"
    errors: list[str] = []
    remote: list[str] = []
    page = context.new_page()
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("request", lambda req: remote.append(req.url) if not req.url.startswith(("file:", "data:")) else None)
    page.goto(page_path.as_uri(), wait_until="load")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot').length === "
        "document.querySelectorAll('section.chart').length",
        timeout=30_000,
    )
    page.screenshot(path=str(shot), full_page=True)
    seen = {
        "errors": list(errors),
        "remote": list(remote),
        "summary": page.locator("#summary").inner_text(),
        "plots": page.locator(".js-plotly-plot").count(),
        "svgs_per_plot": page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')]"
            ".map(p => p.querySelectorAll('svg.main-svg').length)"
        ),
        "roofline_points": page.evaluate(
            "() => { const el = document.getElementById('chart-roofline');"
            " return el ? el.querySelectorAll('.scatterlayer .point').length : -1; }"
        ),
        "explain_bars": page.evaluate(
            "() => { const el = document.getElementById('chart-explain-blocks');"
            " return el ? el.querySelectorAll('.barlayer .point').length : -1; }"
        ),
        # A data: URI, because a file: image would taint the canvas (cross-origin) and forbid reading it.
        "colours": page.evaluate(
            COUNT_COLOURS, "data:image/png;base64," + base64.b64encode(shot.read_bytes()).decode()
        ),
        "shot_bytes": shot.stat().st_size,
    }
    page.close()
    return seen


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    _require_chromium()
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the test extra)")
    full = merge_results([SourceFile("sample.json", sample_results())])
    plain = merge_results(
        [SourceFile("plain.json", make_results([make_case("torch", 1, 2.0, seed=1), make_case("ort", 1, 1.0)]))]
    )
    with playwright.sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh --user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            seen = _inspect(context, full, tmp_path, "full", explain_record())
            seen_plain = _inspect(context, plain, tmp_path, "plain")
        finally:
            context.close()

    assert seen["errors"] == [], seen["errors"]
    assert seen["remote"] == [], "the page must not fetch anything (offline, no CDN)"
    assert len(report_charts(full)) == 6
    assert seen["plots"] == 7  # the report's six charts and the Explain section's
    assert seen["explain_bars"] == 4 * 2  # four blocks, two profiled engines
    assert all(count >= 1 for count in seen["svgs_per_plot"]), seen["svgs_per_plot"]
    summary = seen["summary"]
    for backend in ("torch", "onnxruntime", "openvino"):
        assert backend in summary
    assert "FAILED" in summary and "FAIL" in summary
    assert seen["roofline_points"] == 2  # the two cases that carry roofline fields
    assert seen["shot_bytes"] > 10_000
    assert seen["colours"] > 20, "the screenshot looks blank"

    # Without roofline fields there is no roofline chart at all (not an empty one).
    assert seen_plain["errors"] == []
    assert seen_plain["plots"] == 5
    assert seen_plain["roofline_points"] == -1
    assert seen_plain["explain_bars"] == -1
    assert "ort" in seen_plain["summary"]

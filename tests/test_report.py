"""trajlab.report / `trajlab report`: a self-contained HTML page with real charts, checked in headless Chromium."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.query_run import build_run
from helpers.report_html import CHROMIUM, js_problems, parse_page, run_chromium

from trajlab.cli import main
from trajlab.report import report


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("rep") / "run")


@pytest.fixture(scope="module")
def page(run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report(run, tmp_path_factory.mktemp("html") / "report.html")


def test_page_is_self_contained_and_has_labelled_charts(page: Path, run: Path) -> None:
    html = page.read_text(encoding="utf-8")
    s = parse_page(page)
    assert s.refs == []  # nothing loaded from anywhere: no CDN, no file, no font
    assert "link" not in s.tags and "iframe" not in s.tags and "img" not in s.tags
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert s.charts == ["overview", "categories"]
    ov, cat = (" ".join(s.svg_text[c]) for c in s.charts)
    for label in ("training step", "% of tool calls", "mean score", "reward", "final answer"):
        assert label in ov, label
    assert "training step" in cat and "% of tool calls" in cat
    cats = [r["category"] for r in pq.read_table(run / "findings.parquet", columns=["category"]).to_pylist()]
    calls = pq.read_table(run / "calls.parquet", columns=["categories"]).to_pylist()
    per_category = Counter(c for r in calls for c in set(r["categories"]))
    ranked = sorted(per_category, key=lambda c: (-per_category[c], c))
    assert len(ranked) == 9  # the scan of this run: one more category than the chart's legend holds (8)
    for c in ranked[:8]:  # one panel per category, most flagged calls first; a long name may end in "…" to fit
        assert c in cat or any(w.endswith("…") and c.startswith(w[:-1]) and len(w) > 8 for w in cat.split()), c
    assert ranked[8] not in cat and "other (1 categories)" in cat
    assert sorted(s.examples) == sorted(set(cats))  # one example per category


def test_early_warning_is_marked_and_the_rate_rises_after_it(page: Path, run: Path) -> None:
    ew = json.loads((run / "manifest.json").read_text())["summary"]["early_warning"]
    assert ew is not None
    s = parse_page(page)
    for chart in ("overview", "categories"):
        texts = " ".join(s.svg_text[chart])
        assert f"step {ew['step']}" in texts and "early warning" in texts
    html = page.read_text(encoding="utf-8")
    assert f"Early warning at step {ew['step']}" in html
    m = re.search(r"Before step (\d+) ([\d.]+)% of tool calls were malformed; from step \d+ on, ([\d.]+)%", html)
    assert m and int(m.group(1)) == ew["step"]
    assert float(m.group(3)) > 3 * float(m.group(2))


def test_example_shows_the_span_highlighted_next_to_the_repair(page: Path, run: Path) -> None:
    html = page.read_text(encoding="utf-8")
    block = re.search(r'<article class="ex" data-category="garbled_function_name">.*?</article>', html, re.S)
    assert block
    marked = re.search(r"<mark[^>]*>(.*?)</mark>", block.group(0)).group(1)
    names = {r["function_name"] for r in pq.read_table(run / "calls.parquet").to_pylist()}
    assert marked in names and marked not in ("search_web", "fetch_page")
    assert 'class="repair"' in block.group(0) and "trajlab show" in block.group(0)


def test_report_without_rescore_has_no_rescore_section(page: Path) -> None:
    assert 'id="rescore"' not in page.read_text(encoding="utf-8")


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_cli_and_deterministic_output(run: Path, page: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "r.html"
    assert main(["report", str(run), "-o", str(dest), "--title", "my run"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert "<title>my run</title>" in dest.read_text(encoding="utf-8")
    again = report(run, tmp_path / "again.html")
    assert again.read_bytes() == page.read_bytes()  # same tables, same bytes
    assert main(["report", str(tmp_path / "missing"), "-o", str(dest)]) == 2


@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    p = run_chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", "--hide-scrollbars")
    assert p.returncode == 0, p.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1280, 2400) and len(png) > 50_000  # a real page, not a blank one
    d = run_chromium(page, tmp_path, "--dump-dom")
    assert d.returncode == 0, d.stderr[-2000:]
    n_charts = len(parse_page(page).charts)
    ready = re.search(r'data-charts-ready="(\d+)"', d.stdout)
    assert ready and int(ready.group(1)) == n_charts == 2  # every chart drew a non-empty SVG
    assert js_problems(d, d.stdout) == []
    # the detector does detect: the same page with a JS error and an external image reports both
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text(encoding="utf-8").replace(
        "</main>", '<img src="https://cdn.example.com/x.png"><script>noSuchFunction();</script></main>'),
        encoding="utf-8")
    b = run_chromium(broken, tmp_path, "--dump-dom")
    problems = " ".join(js_problems(b, b.stdout))
    assert "noSuchFunction" in problems and "cdn.example.com" in problems


def test_rolling_ratio_pools_calls_and_auto_window() -> None:
    from trajlab.report.data import auto_window, rolling_ratio

    assert rolling_ratio([1, 0, 3, None], [10, 0, 10, 5], 2) == [0.1, 0.1, 0.3, 0.3]
    assert rolling_ratio([1, 2], [4, 4], 1) == [0.25, 0.5]
    assert rolling_ratio([0], [0], 3) == [None]
    assert auto_window([14] * 150) == 4  # ~50 calls per window
    assert auto_window([200] * 150) == 1
    assert auto_window([1] * 16) == 2  # at most 1/8 of the run
    assert auto_window([]) == 1


def test_empty_scan_gives_a_report_without_charts(tmp_path: Path) -> None:
    from trajlab.scan import scan

    dumps = tmp_path / "dumps"
    dumps.mkdir()
    (dumps / "1.jsonl").write_text('{"input": "x", "outp\n', encoding="utf-8")  # no record: every table empty
    out = tmp_path / "empty"
    scan([dumps], out, progress=False)
    assert pq.read_metadata(out / "trajectories.parquet").num_rows == 0
    page = report(out, tmp_path / "e.html")
    s = parse_page(page)
    html = page.read_text(encoding="utf-8")
    assert s.charts == [] and s.refs == []
    assert "No early warning" in html and "No steps to plot" in html and "No findings" in html


def test_category_panel_titles_never_overlap_their_call_counts() -> None:
    """Measured on the laid-out figure: each panel's category title ends before its "N calls" label."""
    import matplotlib.pyplot as plt

    from trajlab.report.charts import category_figure

    steps = list(range(1, 41))
    names = ["missing_required_parameter", "garbled_function_name", "unknown_parameter_with_long_name_x",
             "stray_attribute", "text_after_call", "unclosed_tag", "json_in_xml_format", "format_mismatch",
             "missing_call_close"]
    counts = {n: [i % 3 + k for i in steps] for k, n in enumerate(names)}
    fig = category_figure(steps, [1000] * len(steps), counts, [50] * len(steps), 20, "train")
    try:
        fig.draw_without_rendering()
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert len(panels) == len(names)
        for ax in panels:
            left, right = ax._left_title, ax._right_title
            assert right.get_text().endswith(" calls")
            assert left.get_window_extent().x1 < right.get_window_extent().x0, (left.get_text(), right.get_text())
        assert any(ax._left_title.get_text().endswith("…") for ax in panels)  # a long name was shortened to fit
    finally:
        plt.close(fig)

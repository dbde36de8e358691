"""The issue's acceptance checks on the sample run: a real `trajlab scan` of sample_data/qwen35_xml_run, then
`trajlab report` (rate rising after the rot, early warning marked, renders in Chromium), `trajlab sql` (the
documented example queries answer) and `trajlab show` (a garbled-name trajectory with its span highlighted)."""

from __future__ import annotations

import importlib.util
import io
import json
import re
from pathlib import Path

import pytest
from helpers.docs import doc_queries
from helpers.report_html import CHROMIUM, js_problems, parse_page, run_chromium
from helpers.show_style import highlighted
from rich.console import Console
from rich.text import Text

from trajlab.query import sql
from trajlab.report import report
from trajlab.show import show

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "qwen35_xml_run"


def _run_config():
    """The sample run's own schedule (onset of the rot), from the generator that wrote it."""
    spec = importlib.util.spec_from_file_location("sample_generate_for_report", REPO / "sample_data" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.RUNS["qwen35_xml"]


@pytest.fixture(scope="module")
def sample_scan(sample_xml_scan) -> Path:
    summary = sample_xml_scan.summary  # the session's scan of SAMPLE (read-only here)
    assert summary.trajectories > 0 and summary.calls > 0, "the scan classified nothing"
    return sample_xml_scan.out


@pytest.fixture(scope="module")
def sample_report(sample_scan: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return report(sample_scan, tmp_path_factory.mktemp("sample_html") / "report.html")


def test_report_shows_the_rate_rising_after_the_rot_with_the_early_warning(sample_scan: Path, sample_report: Path) -> None:
    cfg = _run_config()
    ew = json.loads((sample_scan / "manifest.json").read_text())["summary"]["early_warning"]
    assert ew is not None and ew["split"] == "train"
    assert cfg.onset < ew["step"] <= cfg.onset + (cfg.schedule_steps - cfg.onset) // 2
    html = sample_report.read_text(encoding="utf-8")
    s = parse_page(sample_report)
    # the run ships the reward's records (sample_data/generate_records.py): the exact-token panel follows the overview
    assert s.charts[:3] == ["overview", "exact_tokens", "categories"] and s.refs == []
    for chart in ("overview", "categories"):
        texts = " ".join(s.svg_text[chart])
        assert "early warning" in texts and f"step {ew['step']}" in texts and "training step" in texts
    m = re.search(r"Before step (\d+) ([\d.]+)% of tool calls were malformed; from step \d+ on, ([\d.]+)%", html)
    assert m and int(m.group(1)) == ew["step"] and float(m.group(3)) > 3 * float(m.group(2))
    rates = sql(sample_scan, "SELECT step, malformed_rate FROM steps WHERE split = 'train' ORDER BY step").to_pylist()
    early = [r["malformed_rate"] for r in rates if r["step"] <= cfg.onset and r["malformed_rate"] is not None]
    late = [r["malformed_rate"] for r in rates if r["step"] > cfg.schedule_steps - 20 and r["malformed_rate"] is not None]
    assert sum(late) / len(late) > 4 * sum(early) / len(early)
    # the garbled names of the story are listed with their nearest declared tool
    names = sql(sample_scan, "SELECT function_name, nearest_tool FROM garbled_names").to_pylist()
    assert names and all(n["nearest_tool"] in ("search_web", "fetch_web") for n in names)
    assert "Top garbled function names" in html and names[0]["function_name"] in html


@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
def test_sample_report_renders_in_chromium(sample_report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "sample.png"
    p = run_chromium(sample_report, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", "--hide-scrollbars")
    assert p.returncode == 0 and shot.stat().st_size > 50_000
    d = run_chromium(sample_report, tmp_path, "--dump-dom")
    ready = re.search(r'data-charts-ready="(\d+)"', d.stdout)
    assert ready and int(ready.group(1)) == len(parse_page(sample_report).charts)
    assert js_problems(d, d.stdout) == []


def test_documented_queries_answer_on_the_sample_scan(sample_scan: Path) -> None:
    # rescore_* tables need a rescore; rollout_tokens needs a dump with exact tokens (tests/test_nemo_rl.py)
    queries = [q for q in doc_queries() if "rescore_" not in q and "rollout_tokens" not in q]
    assert len(queries) >= 5
    for q in queries:
        t = sql(sample_scan, q)
        assert t.num_columns > 0 and t.num_rows > 0, q


def test_show_highlights_a_garbled_name_of_the_sample_run(sample_scan: Path) -> None:
    rows = sql(sample_scan, """
        SELECT fs.trajectory_id, fs.span, fs.message FROM finding_spans fs
        JOIN garbled_names g ON g.function_name = fs.function_name
        WHERE fs.span = fs.function_name ORDER BY fs.step, fs.trajectory_id LIMIT 1""").to_pylist()
    assert rows, "no finding spans a garbled function name"
    r = rows[0]
    buf = io.StringIO()
    show(sample_scan, r["trajectory_id"], console=Console(file=buf, force_terminal=True, color_system="truecolor",
                                                          width=200))
    out = buf.getvalue()
    assert highlighted(r["span"]) in out
    plain = Text.from_ansi(out).plain
    assert r["message"].splitlines()[0] in plain

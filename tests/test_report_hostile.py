"""`trajlab report` on hostile scans: a 200 KB garbled function name and long run names stay inside their boxes
in headless Chromium (measured), and a damaged ``manifest.json`` (a list, invalid, empty, nested too deep, fields
of the wrong shape) gives a degraded report with a one-line warning, never a traceback."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
from helpers.report_html import CHROMIUM, run_chromium
from helpers.verl_lines import output_of, qwen35_prompt, v1_line, write_jsonl, xml_call

from trajlab.cli import main
from trajlab.report import report
from trajlab.scan import ScanOptions, scan

HUGE = 200_000
RUN_NAME = "run_" + "verylongrunname" * 12  # 184 characters, no space to wrap at


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile_report")
    good = xml_call("search_web", queries=["japan gdp"])
    huge = good.replace("<function=search_web>", "<function=search_web" + "x" * HUGE + ">")
    for run in ("a", "b"):
        for step in (1, 2, 3):
            rows = [v1_line(step, qwen35_prompt(f"case {run} {step} {i}"),
                            output_of([huge if (step == 3 and i == 0) else good, "done"], ["result"]), 1.0,
                            session=i)
                    for i in range(3)]
            write_jsonl(root / "dumps" / f"{run}_{RUN_NAME}" / "rollout" / f"{step}.jsonl", rows)
    scan([root / "dumps"], root / "out", ScanOptions(jobs=1), progress=False)
    return root / "out"


#: measures every table against its box and every block that overflows; written into a data attribute
MEASURE = """<script>window.addEventListener('load', function () {
  var r = {tables: [], over: []};
  document.querySelectorAll('table').forEach(function (t) {
    r.tables.push([(t.querySelector('th') || {}).textContent || '', Math.round(t.getBoundingClientRect().width),
                   t.parentElement.clientWidth]);
  });
  document.querySelectorAll('main *').forEach(function (x) {
    if (x.closest('figure, table, details')) { return; }
    if (x.scrollWidth > x.clientWidth + 1 && getComputedStyle(x).display !== 'inline') {
      r.over.push(x.tagName + '.' + x.className + ' ' + x.scrollWidth + '>' + x.clientWidth);
    }
  });
  r.doc = document.documentElement.scrollWidth; r.win = window.innerWidth;
  document.documentElement.setAttribute('data-widths', JSON.stringify(r));
});</script>"""


@pytest.mark.chromium
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium)")
@pytest.mark.slow  # a report and a headless Chromium run (> 5 s on 2 shared cores)
def test_long_cells_stay_inside_their_boxes(out: Path, tmp_path: Path) -> None:
    page = report(out, tmp_path / "report.html")
    text = page.read_text(encoding="utf-8")
    assert "x" * (HUGE // 2) in text  # the name is kept (behind "show the full value"), only its display is cut
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</main>", MEASURE + "</main>"), encoding="utf-8")
    for width in (1280, 800):
        d = run_chromium(probe, tmp_path, "--dump-dom", f"--window-size={width},2400")
        assert d.returncode == 0, d.stderr[-2000:]
        m = re.search(r'data-widths="([^"]*)"', d.stdout)
        assert m, d.stderr[-2000:]
        w = json.loads(html.unescape(m.group(1)))
        heads = [t[0] for t in w["tables"]]
        assert "run" in heads and "name as generated" in heads  # the runs table and the garbled-names table
        for head, table, box in w["tables"]:
            assert table <= box + 1, f"{head!r} table is {table / box:.2f}x its box at {width} px"
        assert w["over"] == [] and w["doc"] <= w["win"]


DAMAGED = [
    ("[]", "holds a JSON list"),
    ('{"summary": ', "is not valid JSON"),
    ("", "is empty"),
    ("[" * 100_000 + "]" * 100_000, "is not valid JSON"),
    ('"a string"', "holds a JSON string"),
    ("\xff\xfe{}", "is not valid JSON"),
]


@pytest.mark.parametrize(("content", "why"), DAMAGED)
def test_every_manifest_reader_gets_an_object_or_a_reason(out: Path, tmp_path: Path, content: str, why: str) -> None:
    from trajlab.outpaths import read_json_object
    from trajlab.rules_match import check_scan_rules
    from trajlab.scan.cache import previous_merge_key

    assert isinstance(previous_merge_key(out), str) and check_scan_rules(out, ()) is not None
    damaged = tmp_path / "out"
    shutil.copytree(out, damaged)
    (damaged / "manifest.json").write_bytes(b"\xff\xfe{}" if content.startswith("\xff") else content.encode())
    obj, reason = read_json_object(damaged / "manifest.json")
    assert obj == {} and reason is not None and reason.startswith(f"manifest.json {why}")
    assert read_json_object(tmp_path / "missing.json") == ({}, None)
    assert check_scan_rules(damaged, ()) is None  # `rules check`, `build-sft-pool`: nothing to compare with
    assert previous_merge_key(damaged) is None  # an incremental scan merges again


@pytest.mark.parametrize(("content", "why"), [DAMAGED[0], DAMAGED[3]])
def test_damaged_manifest_gives_a_degraded_report_not_a_traceback(
        out: Path, tmp_path: Path, content: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    damaged = tmp_path / "out"
    shutil.copytree(out, damaged)
    (damaged / "manifest.json").write_text(content, encoding="utf-8")
    assert main(["report", str(damaged), "-o", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"manifest.json {why}" in err and "re-run the scan" in err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert f"manifest.json {why}" in page  # the page says so too
    assert "Top garbled function names" in page or "name as generated" in page  # built from the tables


def test_manifest_fields_of_the_wrong_shape_are_dropped(out: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "out"
    shutil.copytree(out, damaged)
    m = json.loads((damaged / "manifest.json").read_text(encoding="utf-8"))
    clean = report(out, tmp_path / "clean.html").read_text(encoding="utf-8")
    m["inputs"], m["schema_version"], m["summary"]["early_warning"] = 7, ["x"], "step 3"
    (damaged / "manifest.json").write_text(json.dumps(m), encoding="utf-8")
    page = report(damaged, tmp_path / "r.html").read_text(encoding="utf-8")
    assert "input files" not in page and "schema –" in page and "input files" in clean
    # the early warning is the scan's own statistic recomputed from the steps table (the same as recorded)
    assert ("No early warning" in page) == ("No early warning" in clean)

"""Adversarial suite, classes 5 and 11 of issue 11: text from the data never drives the terminal (no rich markup,
no raw ESC / C1 / OSC / bidi bytes in anything printed, the HTML report shows them visibly), and ``trajlab sql``
runs with bounded resources and a timeout.

Observed on the captured bytes of real CLI runs over dumps whose model output carries the hostile strings."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from helpers.adversarial import RAW_CONTROL, assert_clean_failure, cli, good_line, scan_json
from helpers.verl_lines import legacy_line, output_of, qwen35_prompt, xml_call

HOSTILE = [
    "\x1b[2J\x1b[31mred\x1b[0m",  # clear screen + colour (CSI)
    "\x1b]8;;http://evil.example\x07click\x1b]8;;\x07",  # OSC 8 hyperlink
    "\x1b]0;owned title\x07",  # OSC window title
    "\x9b31m C1-CSI \x9d0;t\x9c",  # C1 controls
    "\u202eevil\u202c \u2066iso\u2069 \u200f",  # bidi override / isolate / RLM
    "[red]markup[/red] [/INST] [link=http://x.y]z[/link] [bold",  # rich markup
    "bell\x07 backspace\x08 del\x7f nul\x00",
]
MARKUP = "[red]markup[/red] [/INST] [link=http://x.y]z[/link]"


@pytest.fixture(scope="module")
def hostile_scan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("adv_term")
    d = root / "run" / "rollout"
    d.mkdir(parents=True)
    lines = []
    for h in HOSTILE:
        out = output_of([xml_call(f"search_web{h}", queries=[h])], [f"tool says {h}"]) + f"answer {h}"
        lines.append(json.dumps(legacy_line(1, qwen35_prompt(f"question {h}"), out, 1.0), ensure_ascii=False))
    (d / "1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "\x1b[31mevil\u202e.jsonl").write_bytes(b"{broken\n" + good_line(2))  # a hostile file name with a bad line
    from trajlab.scan import ScanOptions, scan

    scan([root / "run"], root / "out", ScanOptions(jobs=1), progress=False)
    return root / "out"


def _clean(data: bytes) -> None:
    m = RAW_CONTROL.search(data)
    assert m is None, f"raw control bytes {m.group(0)!r} at {m.start()}: {data[max(0, m.start() - 60):m.end() + 20]!r}"


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_show_prints_data_literally(hostile_scan, capfd, index):
    rc, out, err = cli(["show", hostile_scan, "--step", "1", "--index", str(index), "--prompt"], capfd)
    assert rc == 0, err
    _clean(out)
    _clean(err)
    if "[red]" in HOSTILE[index]:
        assert b"[red]markup[/red]" in out and b"[/INST]" in out


@pytest.mark.parametrize("fmt", ["table", "jsonl", "json", "csv"])
def test_sql_output_is_safe_on_a_terminal(hostile_scan, capfd, fmt):
    q = "SELECT function_name, raw FROM calls ORDER BY call_id"
    rc, out, err = cli(["sql", hostile_scan, q, "--format", fmt, "--max-width", "0"], capfd)
    assert rc == 0, err
    if fmt in ("json", "jsonl"):
        _clean(out)  # escapes, still the same JSON value
        rows = [json.loads(x) for x in out.splitlines()] if fmt == "jsonl" else json.loads(out)
        assert any("\u202e" in r["function_name"] for r in rows)
    elif fmt == "table":
        _clean(out)
        assert MARKUP.encode() in out.replace(b"\n", b"") or b"[/INST]" in out
    _clean(err)


def test_sql_export_to_a_file_keeps_the_data_exact(hostile_scan, tmp_path, capfd):
    dest = tmp_path / "calls.jsonl"
    rc, _, err = cli(["sql", hostile_scan, "SELECT raw FROM calls", "-o", dest], capfd)
    assert rc == 0, err
    vals = [json.loads(x)["raw"] for x in dest.read_text(encoding="utf-8").splitlines()]
    assert any("\x1b[2J" in v for v in vals) and any("\x9b" in v for v in vals)


@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_rules_check_prints_literally(tmp_path, capfd, index):
    text = xml_call(f"search_web{HOSTILE[index]}", queries=[HOSTILE[index]])
    f = tmp_path / "snippet.txt"
    f.write_text(text, encoding="utf-8")
    for extra in ([], ["--json"]):
        rc, out, err = cli(["rules", "check", f, *extra], capfd)
        assert rc in (0, 1) and b"Traceback" not in err
        _clean(out)
        _clean(err)
        if extra:
            assert json.loads(out)["text"] == text


def test_warnings_and_errors_naming_hostile_files(hostile_scan, tmp_path, capfd):
    run = tmp_path / "run"
    run.mkdir()
    (run / "\x1b]0;title\x07[red]x[bold]\u202e.jsonl").write_bytes(b"{broken\n" + good_line(3))
    rc, out, err = cli(["scan", run, "-o", tmp_path / "out", "--no-progress", "-j", "1"], capfd)
    assert rc == 0 and b"warning:" in err
    _clean(out)
    _clean(err)
    assert b"[red]x[bold]" in err
    rc, out, err = cli(["report", tmp_path / "\x1b[2Jnope[red]", "-o", tmp_path / "r.html"], capfd)
    assert_clean_failure(rc, err)
    _clean(err)
    assert b"nope[red]" in err


def test_usage_errors_with_hostile_values(tmp_path, capfd):
    rc, out, err = cli(["scan", tmp_path, "-o", tmp_path / "o", "--window", "\x1b[31m[red]x"], capfd)
    assert rc == 2 and b"Traceback" not in err
    _clean(err)


def test_scan_summary_table_is_safe(hostile_scan, tmp_path, capfd):
    run = tmp_path / "r"
    (run / "\x1b[1m.hidden\u202e").mkdir(parents=True)
    (run / "1.jsonl").write_bytes(good_line(1))
    rc, out, err = cli(["scan", run, "-o", tmp_path / "o", "--no-progress", "-j", "1"], capfd)
    assert rc == 0
    _clean(out)
    _clean(err)


def test_html_report_shows_controls_and_clips_huge_names(tmp_path, capfd):
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    huge = "search_web" + "\u202e" + "x" * 200_000
    lines = []
    for s in (1, 2):
        for name in (huge, "search_web\x1b[31m", "search_web\u202egnp.exe"):
            out = output_of([xml_call(name, queries=["a"])], ["r"]) + "done"
            lines.append(json.dumps(legacy_line(s, qwen35_prompt("q"), out, 1.0), ensure_ascii=False))
        (d / f"{s}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert scan_json([tmp_path / "run", "-o", tmp_path / "out"], capfd)[0] == 0
    rc, _, err = cli(["report", tmp_path / "out", "-o", tmp_path / "r.html"], capfd)
    assert rc == 0, err
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "\u202e" not in html and "\x1b" not in html
    assert "\\u202e" in html and "\\x1b" in html
    assert "more characters: show the full value" in html  # clipped in the table, full value one click away
    assert "x" * 199_000 in html  # the whole long text is in the page (the example), escaped


# --------------------------------------------------------------------------------------------------- class 11
def test_sql_resources_are_bounded_and_temp_is_not_cwd(hostile_scan, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    q = ("SELECT current_setting('threads') AS t, current_setting('memory_limit') AS m, "
         "current_setting('temp_directory') AS d")
    rc, out, err = cli(["sql", hostile_scan, q, "--format", "json"], capfd)
    assert rc == 0, err
    row = json.loads(out)[0]
    assert int(row["t"]) <= 4
    assert "GiB" in row["m"] or "MiB" in row["m"]
    assert Path(row["d"]).is_absolute() and Path(row["d"]).parent == Path(tempfile.gettempdir())
    assert not os.listdir(tmp_path)  # nothing written into the caller's cwd


def test_sql_timeout_interrupts_a_runaway_query(hostile_scan, capfd):
    q = "SELECT count(*) FROM range(100000000000) a WHERE hash(a.range) % 7 = 3"
    rc, _, err = cli(["sql", hostile_scan, q, "--timeout", "1"], capfd)
    assert_clean_failure(rc, err)
    assert b"--timeout" in err

"""`trajlab scan` end to end: real verl-format dumps in, real Parquet tables out, read back with DuckDB
and polars; stable ids, identical bytes on re-run, incremental re-scans, bad input, the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
from helpers.scan_runs import GOOD, make_run
from helpers.verl_lines import (
    TOOLS,
    output_of,
    qwen35_prompt,
    v1_line,
    write_jsonl,
    xml_call,
)

from trajlab.cli import main
from trajlab.scan import ScanOptions, scan
from trajlab.tables import SCAN_TABLES, SCHEMA_VERSION
from trajlab.trends import early_warning


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def scanned(run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    summary = scan([run_dir], out, ScanOptions(jobs=1), progress=False)
    return out, summary


def test_all_tables_written_with_documented_schema(scanned):
    out, summary = scanned
    for name, spec in SCAN_TABLES.items():
        t = pq.read_table(out / f"{name}.parquet")
        assert t.schema.equals(spec.schema, check_metadata=False), name
        if t.num_rows:
            assert pq.ParquetFile(out / f"{name}.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    m = json.loads((out / "manifest.json").read_text())
    assert m["schema_version"] == SCHEMA_VERSION and m["trajlab_version"]
    assert len(m["inputs"]) == 31 and all(i["sha1"] for i in m["inputs"])
    assert summary.trajectories == 30 * 8 + 1


def test_tables_content(scanned):
    out, summary = scanned
    con = duckdb.connect()
    q = lambda s: con.execute(s.replace("OUT", str(out))).fetchall()  # noqa: E731
    assert q("select split, count(*) from 'OUT/trajectories.parquet' group by 1 order by 1") == [("train", 240), ("val", 1)]
    # V1 groups: uid prefix; 2 groups of 4 per step
    assert q("select count(distinct group_id) from 'OUT/trajectories.parquet' where step = 3 and split='train'") == [(2,)]
    assert q("select tool_format, count(*) from 'OUT/trajectories.parquet' group by 1 order by 1") == [("hermes", 1), ("qwen3_coder", 240)]
    # every call row points into output
    rows = q("select c.raw, substr(t.output, c.char_start + 1, c.char_end - c.char_start) from 'OUT/calls.parquet' c "
             "join 'OUT/trajectories.parquet' t using (trajectory_id)")
    assert rows and all(a == b for a, b in rows)
    # turns tile output
    bad = q("select t.trajectory_id from 'OUT/trajectories.parquet' t join (select trajectory_id, string_agg(text, '' order by turn_index) s "
            "from 'OUT/turns.parquet' group by 1) u using (trajectory_id) where u.s <> t.output")
    assert bad == []
    # malformed only from step 20, half the calls there
    per_step = dict(q("select step, malformed_rate from 'OUT/steps.parquet' where split='train'"))
    assert all(per_step[s] == 0 for s in range(1, 20)) and all(per_step[s] == 0.5 for s in range(20, 31))
    cats = dict(q("select category, count(*) from (select unnest(categories) category from 'OUT/calls.parquet') group by 1"))
    assert cats["garbled_function_name"] == 11 * 2 and cats["stray_attribute"] == 11 * 2
    # findings carry spans inside output
    f = q("select f.category, substr(t.output, f.char_start + 1, f.char_end - f.char_start) from 'OUT/findings.parquet' f "
          "join 'OUT/trajectories.parquet' t using (trajectory_id) where f.category = 'garbled_function_name' limit 1")
    assert "英文明确" in f[0][1]
    assert summary.early_warning and 20 <= summary.early_warning["step"] <= 22
    assert q("select count(*) from 'OUT/trajectories.parquet' where not has_final_answer") == [(0,)]


def test_rerun_same_bytes_and_incremental(run_dir, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    scan([run_dir], a, ScanOptions(jobs=1), progress=False)
    scan([run_dir], b, ScanOptions(jobs=2, chunk_bytes=8192), progress=False)  # different parallelism and chunking
    for name in SCAN_TABLES:
        assert (a / f"{name}.parquet").read_bytes() == (b / f"{name}.parquet").read_bytes(), name
    first = pl.read_parquet(a / "trajectories.parquet")["trajectory_id"].to_list()
    before = {n: (a / f"{n}.parquet").stat().st_mtime_ns for n in SCAN_TABLES}
    s2 = scan([run_dir], a, ScanOptions(jobs=1), progress=False)
    assert s2.files_reused == s2.files == 31
    # nothing changed: the tables are not even rewritten
    assert {n: (a / f"{n}.parquet").stat().st_mtime_ns for n in SCAN_TABLES} == before
    assert pl.read_parquet(a / "trajectories.parquet")["trajectory_id"].to_list() == first
    # touch one file: only it is re-read, ids of untouched records stay
    f = run_dir / "rollout" / "5.jsonl"
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    s3 = scan([run_dir], a, ScanOptions(jobs=1), progress=False)
    assert s3.files_reused == 30
    assert (a / "trajectories.parquet").stat().st_mtime_ns != before["trajectories"]
    assert pl.read_parquet(a / "trajectories.parquet")["trajectory_id"].to_list() == first


def test_progress_bars_on_a_terminal(run_dir, tmp_path, monkeypatch):
    """On a terminal, scan shows a bar over bytes while reading and one over part files while merging; the
    tables are the same bytes as a scan without progress."""
    import io

    from rich.console import Console

    import trajlab.console

    buf = io.StringIO()
    monkeypatch.setattr(trajlab.console, "err_console", Console(file=buf, force_terminal=True, width=120))
    scan([run_dir], tmp_path / "p", ScanOptions(jobs=1), progress=True)
    shown = buf.getvalue()
    assert "scan" in shown and "files" in shown
    from trajlab.scan.parts import PART_TABLES

    n_parts = 31 * len(PART_TABLES)  # one part file per input file per merged table
    assert f"{n_parts}/{n_parts}" in shown and "part files" in shown
    scan([run_dir], tmp_path / "q", ScanOptions(jobs=1), progress=False)
    for name in SCAN_TABLES:
        assert (tmp_path / "p" / f"{name}.parquet").read_bytes() == (tmp_path / "q" / f"{name}.parquet").read_bytes()


def test_bad_directory_keeps_good_records(tmp_path):
    root = tmp_path / "in"
    good = v1_line(1, qwen35_prompt("q"), output_of([GOOD, "fine"], ["r"]), 1.0)
    write_jsonl(root / "1.jsonl", [good, good], tail=b'{"input": "sys", "outp')
    write_jsonl(root / "rollout" / "1.jsonl", [good, good], tail=b'{"input": "sys", "outp')  # duplicate step file (same run)
    (root / "odd.jsonl").write_text('{"hello": 1}\n')
    (root / "empty.jsonl").write_text("")
    s = scan([root, tmp_path / "missing"], tmp_path / "out", progress=False)
    errs = pl.read_parquet(tmp_path / "out" / "ingest_errors.parquet")
    reasons = " | ".join(errs["reason"].to_list())
    assert "truncated last line" in reasons and "duplicate of 1.jsonl" in reasons
    assert "unknown format" in reasons and "empty file" in reasons and "path does not exist" in reasons
    assert s.trajectories == 2
    rc = main(["scan", str(root), "-o", str(tmp_path / "out2"), "--strict", "--no-progress"])
    assert rc == 2


def test_empty_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    s = scan([tmp_path / "empty"], tmp_path / "out", progress=False)
    assert s.trajectories == 0 and s.ingest_errors == 1
    assert pq.read_table(tmp_path / "out" / "trajectories.parquet").num_rows == 0


def test_tools_override_and_schema_skipped(tmp_path):
    prompt = "system\nYou are a search agent.\nuser\nq\nassistant\n"  # no tool block
    out = output_of([xml_call("search_web", queries=["x"], depth=3), "ok"], ["r"])
    write_jsonl(tmp_path / "in" / "1.jsonl", [v1_line(1, prompt, out, 1.0)])
    s = scan([tmp_path / "in"], tmp_path / "o1", progress=False)
    assert s.schema_checked_rate == 0.0
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS))
    s = scan([tmp_path / "in"], tmp_path / "o2", ScanOptions(tools=tools, tool_format="qwen3_coder"), progress=False)
    assert s.schema_checked_rate == 1.0
    calls = pl.read_parquet(tmp_path / "o2" / "calls.parquet")
    assert "unknown_parameter" in calls["categories"][0].to_list()


def test_early_warning_statistic():
    rows = [{"split": "train", "step": s, "calls": 100, "malformed_calls": 2 if s < 80 else 2 + (s - 79) * 2} for s in range(1, 151)]
    ew = early_warning(rows)
    assert ew is not None and 80 <= ew["step"] <= 86 and ew["p_value"] < 1e-3
    flat = [{"split": "train", "step": s, "calls": 100, "malformed_calls": 2 + (s % 3)} for s in range(1, 151)]
    assert early_warning(flat) is None


def test_cli_scan_json_and_fail_above(run_dir, tmp_path, capsys):
    rc = main(["scan", str(run_dir), "-o", str(tmp_path / "o"), "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["trajectories"] == 241 and d["early_warning"]["step"] >= 20
    assert main(["scan", str(run_dir), "-o", str(tmp_path / "o"), "--fail-above", "0.3", "--window", "5", "--no-progress"]) == 3
    assert main(["scan", str(run_dir), "-o", str(tmp_path / "o"), "--fail-above", "0.6", "--window", "5", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "early warning" in out and "malformed-call rate per step" in out
    assert main(["scan", str(run_dir), "-o", str(tmp_path / "o"), "--tool-format", "nope"]) == 2


def test_scan_other_input_formats_from_sample_data(tmp_path):
    root = Path(__file__).resolve().parents[1] / "sample_data"
    s = scan([root / "verl_tool_run", root / "openai_messages"], tmp_path / "o", progress=False)
    t = pl.read_parquet(tmp_path / "o" / "trajectories.parquet")
    assert set(t["source_format"]) == {"verl_tool_json", "openai_messages"}
    assert s.ingest_errors == 0 and s.calls > 0
    assert set(t.filter(pl.col("source_format") == "verl_tool_json")["split"]) == {"train", "val"}
    calls = pl.read_parquet(tmp_path / "o" / "calls.parquet")
    # the OpenAI log's broken `arguments` strings are reported, not dropped
    bad = calls.join(t.select("trajectory_id", "source_format"), on="trajectory_id").filter(
        (pl.col("source_format") == "openai_messages") & (pl.col("status") == "malformed")
    )
    assert bad.height > 0 and any("invalid_json" in c for c in bad["categories"].to_list())


_WORKER_MODULES = """
import json, sys
from pathlib import Path
from trajlab.ingest import detect_format, plan_tasks
from trajlab.scan.ids import file_digest
from trajlab.scan.options import ScanOptions, worker_options
from trajlab.scan.worker import process_unit
opts = worker_options(ScanOptions(engine=sys.argv[3]))
unit = []
for k, p in enumerate(sorted(Path(sys.argv[1]).rglob("*.jsonl")) + sorted(Path(sys.argv[1]).rglob("*.parquet"))):
    fmt, _ = detect_format(p)
    if fmt:
        for t in plan_tasks(p, p.name, fmt, 1 << 30):
            unit.append((t, file_digest(p), str(Path(sys.argv[2]) / f"f{k}")))
process_unit(unit, opts, str(Path(sys.argv[2]) / "u-unit"))
from trajlab.trends import steps_table
print(json.dumps(sorted(m for m in sys.modules if m == "trajlab" or m.startswith("trajlab."))))
"""


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["columnar", "records"])
def test_the_cache_fingerprint_covers_every_module_a_worker_loads(tmp_path, engine):
    """The fingerprint's code is derived (the import closure of the worker, the merge and the steps
    aggregation), not listed by hand: every trajlab module a real worker process loads while reading every
    sample run's format is in it."""
    import json
    import subprocess
    import sys

    from trajlab.codeprint import import_closure
    from trajlab.scan.options import CODE_ROOTS

    sample = Path(__file__).resolve().parents[1] / "sample_data"
    got = subprocess.run([sys.executable, "-c", _WORKER_MODULES, str(sample), str(tmp_path), engine],
                         capture_output=True, text=True, timeout=300, check=True)
    loaded = set(json.loads(got.stdout.strip().splitlines()[-1]))
    closure = set(import_closure(CODE_ROOTS))
    assert {"trajlab.toolcalls", "trajlab.ingest", "trajlab.tables", "trajlab.exactsum"} <= closure
    assert len(loaded) > 40 and loaded - closure == set()


def test_the_cache_fingerprint_covers_the_classifier_code(tmp_path, monkeypatch):
    """Parts made by other classifier code are never reused: the fingerprint hashes the source of every module
    that shapes the tables, and changes when one of them does."""
    from pathlib import Path as P

    import trajlab.scan.options as so

    before = so.WorkerOptions().fingerprint()
    real = P.read_bytes

    def edited(self: P) -> bytes:
        data = real(self)
        return data + b"\n# edited" if self.name == "type_checks.py" else data

    so.code_hash.cache_clear()
    monkeypatch.setattr(P, "read_bytes", edited)
    try:
        assert so.WorkerOptions().fingerprint() != before
    finally:
        monkeypatch.undo()
        so.code_hash.cache_clear()
    assert so.WorkerOptions().fingerprint() == before

"""trajlab.query / `trajlab sql`: views over every table, helper views, read-only guarantees, exports, CLI."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.docs import doc_queries
from helpers.query_run import build_run

import trajlab
from trajlab.cli import main
from trajlab.commands.options import flag_for
from trajlab.errors import TableError, TrajlabError
from trajlab.query import HELPERS, connect, export, list_views, preview, sql
from trajlab.tables import SCAN_TABLES

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("q") / "run")


def _listing(out: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(out.rglob("*"))}


def test_every_scan_table_is_a_view_with_its_rows_and_columns(run: Path) -> None:
    con = trajlab.connect(run)
    for name, spec in SCAN_TABLES.items():
        t = pq.read_table(run / f"{name}.parquet")
        assert con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0] == t.num_rows
        cols = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
        assert cols == spec.column_names
    infos = {v.name: v for v in list_views(run)}
    assert {*SCAN_TABLES, "malformed_by_step", "finding_spans", "call_findings", "garbled_names"} <= set(infos)
    assert infos["calls"].rows == pq.read_metadata(run / "calls.parquet").num_rows
    assert infos["trajectories_at"].kind == "macro" and infos["trajectories_at"].rows is None
    assert ("category", "VARCHAR") in infos["malformed_by_step"].columns


def test_malformed_by_step_matches_the_calls_table(run: Path) -> None:
    calls = pq.read_table(run / "calls.parquet").to_pylist()
    per_step = Counter(c["step"] for c in calls)
    flagged = Counter((c["step"], cat) for c in calls if c["status"] == "malformed" for cat in set(c["categories"]))
    rows = sql(run, "SELECT step, category, calls, flagged_calls, rate FROM malformed_by_step").to_pylist()
    cats = {cat for _, cat in flagged}
    assert len(rows) == len(per_step) * len(cats)  # dense: every step x every category
    for r in rows:
        assert r["calls"] == per_step[r["step"]]
        assert r["flagged_calls"] == flagged.get((r["step"], r["category"]), 0)
        assert r["rate"] == pytest.approx(flagged.get((r["step"], r["category"]), 0) / per_step[r["step"]])


def test_finding_spans_and_call_findings_carry_the_offending_text(run: Path) -> None:
    trajs = {t["trajectory_id"]: t["output"] for t in pq.read_table(run / "trajectories.parquet").to_pylist()}
    spans = sql(run, "SELECT trajectory_id, char_start, char_end, span, category FROM finding_spans").to_pylist()
    assert spans
    for r in spans:  # DuckDB's substring counts code points like Python (garbled names hold CJK characters)
        assert r["span"] == trajs[r["trajectory_id"]][r["char_start"]:r["char_end"]]
    assert any(not s["span"].isascii() for s in spans if s["category"] == "garbled_function_name")
    cf = sql(run, "SELECT trajectory_id, status, n_findings, findings FROM call_findings").to_pylist()
    n_findings = pq.read_metadata(run / "findings.parquet").num_rows
    assert sum(r["n_findings"] for r in cf) == n_findings
    assert all((r["n_findings"] > 0) == (r["status"] == "malformed") for r in cf)
    for r in cf:
        for f in r["findings"] or []:
            assert f["span"] == trajs[r["trajectory_id"]][f["char_start"]:f["char_end"]] != ""


def test_garbled_names_and_trajectories_at(run: Path) -> None:
    calls = pq.read_table(run / "calls.parquet").to_pylist()
    declared = {"search_web", "fetch_page"}
    expected = Counter(c["function_name"] for c in calls if c["function_name"] not in declared)
    rows = sql(run, "SELECT * FROM garbled_names").to_pylist()
    assert {r["function_name"]: r["calls"] for r in rows} == dict(expected)
    for r in rows:
        assert r["function_name"].startswith(r["nearest_tool"])
        assert 0 < r["similarity"] <= 1
    step = sorted({c["step"] for c in calls})[3]
    at = sql(run, f"SELECT trajectory_id, step FROM trajectories_at({step})").to_pylist()
    n = sum(1 for t in pq.read_table(run / "trajectories.parquet", columns=["step"]).to_pylist() if t["step"] == step)
    assert len(at) == n and {r["step"] for r in at} == {step}
    assert sql(run, f"SELECT count(*) AS n FROM trajectories_at({step}, split_name := 'val')").to_pylist()[0]["n"] == 0


@pytest.mark.parametrize("stmt", [
    "COPY (SELECT 1 AS x) TO '{out}/x.csv'",
    "COPY calls TO '{out}/calls.parquet' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS x) TO '{out}/x.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{out}/export'",
    "ATTACH '{out}/db.duckdb' AS db",
    "SELECT * FROM read_parquet('{out}/calls.parquet')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SET enable_external_access = true",
    "SET allowed_directories = ['{out}']",
    "INSTALL httpfs",
])
def test_nothing_can_touch_the_file_system(run: Path, stmt: str) -> None:
    before = _listing(run)
    with pytest.raises(TrajlabError) as ei:
        sql(run, stmt.format(out=run))
    assert re.search(r"Permission Error|configuration has been locked|disabled", str(ei.value)), str(ei.value)
    assert _listing(run) == before


def test_connection_is_locked_but_read_only_false_is_an_ordinary_connection(run: Path, tmp_path: Path) -> None:
    import duckdb

    con = connect(run)
    with pytest.raises(duckdb.Error):
        con.execute(f"COPY steps TO '{tmp_path / 'steps.csv'}'")
    with pytest.raises(duckdb.Error):
        con.execute("SET lock_configuration = false")
    assert not (tmp_path / "steps.csv").exists()
    rw = connect(run, read_only=False)
    rw.execute(f"COPY (SELECT step, malformed_rate FROM steps) TO '{tmp_path / 'steps.csv'}'")
    assert len((tmp_path / "steps.csv").read_text().splitlines()) == pq.read_metadata(run / "steps.parquet").num_rows + 1


def test_bad_sql_is_duckdbs_message_not_a_traceback(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TrajlabError, match=r"Parser Error: syntax error at or near \"SELEC\""):
        sql(run, "SELEC 1")
    with pytest.raises(TrajlabError, match=r'Binder Error: Referenced column "nope" not found'):
        sql(run, "SELECT nope FROM calls")
    with pytest.raises(TrajlabError, match="Catalog Error"):
        sql(run, "SELECT * FROM no_such_table")
    rc = main(["sql", str(run), "SELECT nope FROM calls"])
    err = capsys.readouterr().err
    assert rc == 2 and "Binder Error" in err and "Traceback" not in err


def test_missing_directory_empty_directory_and_a_broken_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TableError, match="no such directory"):
        connect(tmp_path / "nope")
    with pytest.raises(TableError, match="no trajlab tables"):
        connect(tmp_path)
    out = build_run(tmp_path / "run")
    data = (out / "calls.parquet").read_bytes()
    (out / "calls.parquet").write_bytes(data[: len(data) // 2])  # a crash mid-copy
    with pytest.raises(TableError, match=r"calls\.parquet: not a readable Parquet file"):
        connect(out)
    assert main(["sql", str(out), "SELECT 1"]) == 2
    assert "not a readable Parquet file" in capsys.readouterr().err


def test_rescore_tables_union_across_checkpoints_and_sft_pool(tmp_path: Path) -> None:
    out = build_run(tmp_path / "run")
    rows = {"step_80": [0.1, 0.2], "step_120": [0.5, 0.6, 0.7]}
    for label, vals in rows.items():
        d = out / "rescore" / label
        d.mkdir(parents=True)
        pq.write_table(pa.table({"trajectory_id": [f"t{i}" for i in range(len(vals))], "p": vals}),
                       d / "tokens.parquet")
    # a later checkpoint whose table gained a column: UNION ALL BY NAME keeps both shapes
    d = out / "rescore" / "step_150"
    d.mkdir()
    pq.write_table(pa.table({"trajectory_id": ["t0"], "p": [0.9], "entropy": [1.5]}), d / "tokens.parquet")
    pq.write_table(pa.table({"token": ["<tool_call>"], "delta": [0.4]}), out / "rescore" / "compare.parquet")
    (out / "sft_pool").mkdir()
    pq.write_table(pa.table({"messages": ["[]", "[]"], "kind": ["positive", "hint"]}), out / "sft_pool" / "train.parquet")
    got = sql(out, "SELECT checkpoint, count(*) AS n, sum(p) AS s, count(entropy) AS e FROM rescore_tokens "
                   "GROUP BY checkpoint ORDER BY checkpoint").to_pylist()
    assert got == [
        {"checkpoint": "step_120", "n": 3, "s": pytest.approx(1.8), "e": 0},
        {"checkpoint": "step_150", "n": 1, "s": pytest.approx(0.9), "e": 1},
        {"checkpoint": "step_80", "n": 2, "s": pytest.approx(0.3), "e": 0},
    ]
    assert sql(out, "SELECT * FROM rescore_compare").to_pylist() == [{"token": "<tool_call>", "delta": 0.4}]
    assert sql(out, "SELECT count(*) AS n FROM sft_train").to_pylist() == [{"n": 2}]
    kinds = {v.name: v.kind for v in list_views(out)}
    assert kinds["rescore_tokens"] == "rescore" and kinds["rescore_compare"] == "rescore" and kinds["sft_train"] == "sft"


def test_exports_round_trip(run: Path, tmp_path: Path) -> None:
    q = "SELECT step, malformed_rate, category_counts FROM steps ORDER BY step"
    ref = sql(run, q).to_pylist()
    n = export(run, q, "parquet", tmp_path / "s.parquet")
    assert n == len(ref) and pq.read_table(tmp_path / "s.parquet").to_pylist() == ref
    export(run, q, "json", tmp_path / "s.json")
    js = json.loads((tmp_path / "s.json").read_text())
    assert [r["step"] for r in js] == [r["step"] for r in ref]
    assert js[-1]["category_counts"] == dict(ref[-1]["category_counts"])
    export(run, q, "jsonl", tmp_path / "s.jsonl")
    assert [json.loads(x)["step"] for x in (tmp_path / "s.jsonl").read_text().splitlines()] == [r["step"] for r in ref]
    export(run, q, "csv", tmp_path / "s.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "s.csv").read_text())))
    assert [int(r["step"]) for r in rows] == [r["step"] for r in ref]
    assert json.loads(rows[-1]["category_counts"]) == dict(ref[-1]["category_counts"])
    export(run, "SELECT 1 AS x WHERE false", "csv", tmp_path / "empty.csv")
    assert (tmp_path / "empty.csv").read_text() == "x\n"
    assert export(run, "SELECT 1 AS x WHERE false", "json", tmp_path / "e.json") == 0
    assert json.loads((tmp_path / "e.json").read_text()) == []
    with pytest.raises(TrajlabError, match="refusing to overwrite"):
        export(run, q, "parquet", run / "steps.parquet")
    with pytest.raises(TrajlabError, match="fmt='parquet' needs dest") as e:
        export(run, q, "parquet", None)
    assert e.value.render(flag_for) == "--format parquet needs -o FILE"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_preview_stops_at_the_limit(run: Path) -> None:
    n = pq.read_metadata(run / "calls.parquet").num_rows
    t, more = preview(run, "SELECT call_id FROM calls ORDER BY call_id", limit=7)
    assert t.num_rows == 7 and more
    assert t.column("call_id").to_pylist() == sql(run, "SELECT call_id FROM calls ORDER BY call_id LIMIT 7")["call_id"].to_pylist()
    t, more = preview(run, "SELECT * FROM calls", limit=n)
    assert t.num_rows == n and not more
    t, more = preview(run, "SELECT * FROM calls", limit=0)
    assert t.num_rows == n and not more


def test_cli_lists_views_and_prints_results(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", str(run)]) == 0
    listing = capsys.readouterr().out
    for h in HELPERS:
        assert h.name in listing
    assert main(["sql", str(run), "SELECT step, malformed_rate FROM steps ORDER BY step", "-n", "3"]) == 0
    cap = capsys.readouterr()
    first_step = sql(run, "SELECT min(step) AS s FROM steps").to_pylist()[0]["s"]
    assert str(first_step) in cap.out and "first 3 rows shown" in cap.err
    assert main(["sql", str(run), "SELECT step FROM steps ORDER BY step", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "step" and len(out.splitlines()) == pq.read_metadata(run / "steps.parquet").num_rows + 1
    dest = tmp_path / "g.parquet"
    assert main(["sql", str(run), "SELECT * FROM garbled_names", "-f", "parquet", "-o", str(dest)]) == 0
    assert pq.read_table(dest).num_rows == sql(run, "SELECT * FROM garbled_names").num_rows
    dest = tmp_path / "steps.jsonl"  # -o alone: the format follows the suffix
    assert main(["sql", str(run), "SELECT step FROM steps", "-o", str(dest)]) == 0
    assert len(dest.read_text().splitlines()) == pq.read_metadata(run / "steps.parquet").num_rows
    assert main(["sql", str(run), "SELECT 1", "-o", str(tmp_path / "x.txt")]) == 2
    assert "cannot tell the format" in capsys.readouterr().err
    assert main(["sql", str(run), "SELECT 1", "-f", "xml"]) == 2
    assert "choose one of" in capsys.readouterr().err


def test_documented_example_queries_run(run: Path, tmp_path: Path) -> None:
    queries = doc_queries() + [h.example for h in HELPERS]
    assert len(queries) >= len(HELPERS) + 5, "the documentation should show at least 5 example queries"
    # rescore examples bind against tables with the rescore schemas (empty here; test_report fills them)
    from trajlab.rescore.outputs import PER_CHECKPOINT
    from trajlab.rescore.specs import CALIBRATION, COMPARE, DISCOVERED, DISTRIBUTION, PAIRED
    from trajlab.tables import empty_table, write_table

    shutil.copytree(run, tmp_path / "run")
    for key, spec in PER_CHECKPOINT:
        write_table(spec, empty_table(spec), tmp_path / "run" / "rescore" / "step_100" / f"{key}.parquet")
    for name, spec in (("compare", COMPARE), ("calibration", CALIBRATION), ("paired", PAIRED),
                       ("discovered", DISCOVERED), ("distribution", DISTRIBUTION)):
        write_table(spec, empty_table(spec), tmp_path / "run" / "rescore" / f"{name}.parquet")
    for q in queries:
        t = sql(tmp_path / "run" if "rescore_" in q else run, q)
        assert t.num_columns > 0, q
        # rows need a rescore (rescore_*), exact tokens (rollout_tokens: test_nemo_rl.py) or the trainer's logs
        # (metrics: test_report_sample.py runs these on the sample scan, which has them)
        if "rescore_" not in q and "rollout_tokens" not in q and not re.search(r"\b(from|join)\s+metrics\b", q, re.I):
            assert t.num_rows > 0, q


def test_views_scan_in_small_batches_and_still_prune_and_filter(tmp_path: Path) -> None:
    """The views read their Parquet through a dataset whose scanner reads ahead one small batch (a big table's
    read-ahead is otherwise held outside DuckDB's memory limit); projection, filters and results are unchanged."""
    from trajlab.query.sources import SCAN_BATCH_ROWS, lean_dataset

    n = SCAN_BATCH_ROWS * 3 + 17
    t = pa.table({"step": pa.array([i // 1000 for i in range(n)], pa.int64()),
                  "text": pa.array([f"row {i} " * (i % 7) for i in range(n)])})
    path = tmp_path / "t.parquet"
    pq.write_table(t, path, row_group_size=5000)
    d = lean_dataset(path)
    batches = list(d.scanner(columns=["step"]).to_batches())
    assert max(b.num_rows for b in batches) <= SCAN_BATCH_ROWS and sum(b.num_rows for b in batches) == n
    import duckdb

    con = duckdb.connect()
    con.register("t", d)
    got = con.execute("SELECT step, count(*), sum(length(text)) FROM t WHERE step IN (3, 40) GROUP BY step "
                      "ORDER BY step").fetchall()
    want = [(s, sum(1 for i in range(n) if i // 1000 == s), sum(len(f"row {i} " * (i % 7)) for i in range(n)
                                                              if i // 1000 == s)) for s in (3, 40)]
    assert got == want
    with pytest.raises(TableError, match="not a readable Parquet file"):
        lean_dataset(tmp_path / "missing.parquet")

"""Damaged input costs only itself, on every reader path: a seeded slice of the whole-file fuzz harness
(``tests/helpers/fuzz_trees.py``; the long run is ``benchmarks/fuzz_scan.py``) and one regression test per class
of failure it found -- text that skipped the sanitiser (a cut JSON list with a lone surrogate escape crashed the
scan), a damaged JSON-list record that cost every record after it, a file whose first record decided the format
of all the others, a Parquet footer row count read on trust, records between two damaged list records."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.adversarial import good_record, scan_json
from helpers.fuzz_trees import REPO, fuzz

from trajlab.ingest.salvage import salvage_json_list
from trajlab.ingest.sanitize import clean_record, decode, may_hold_surrogates

SAMPLES = REPO / "sample_data"
TOOL = SAMPLES / "verl_tool_run/verl_step_records/run1/fcl-step-1.json"
OAI = SAMPLES / "openai_messages/agent_log.jsonl"
V09 = SAMPLES / "qwen35_xml_run/rollout/5.jsonl"


def _tables(out: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return (pq.read_table(out / "trajectories.parquet").to_pylist(),
            pq.read_table(out / "ingest_errors.parquet").to_pylist())


def _scan(capfd: Any, root: Path, out: Path, *extra: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rc, summary, err = scan_json([root, "-o", out, *extra], capfd)
    assert rc == 0 and summary is not None and b"Traceback" not in err, err.decode(errors="replace")
    return _tables(out)


def test_fuzz_slice_every_reader(tmp_path: Path) -> None:
    """A seeded slice: 32 trees over every reader but NeMo-RL (its tokenizer load is the slow test below)."""
    n, failures, kinds = fuzz(32, 20261203, tmp_path, nemo=False, big=200_000)
    assert n == 32 and not failures, failures
    assert {"truncate", "flip", "utf8", "surrogate", "nul", "wrong_type", "foreign"} <= set(kinds)


@pytest.mark.slow  # loads the NeMo-RL step's tokenizer
def test_fuzz_slice_with_nemo_rl(tmp_path: Path) -> None:
    n, failures, _ = fuzz(8, 7, tmp_path, nemo=True, big=100_000, per_batch=8)
    assert n == 8 and not failures, failures


# -- one sanitiser on every path (item 1) ----------------------------------------------------------------------


def test_sanitiser_units() -> None:
    assert decode(b"ok \xff x") == ("ok \ufffd x", "invalid UTF-8 at byte 3 of the line; bad bytes replaced with "
                                                  "U+FFFD, record kept")
    assert may_hold_surrogates(b'"\\ud800"') and not may_hold_surrogates(b'"\\u00e9"')
    obj, note = clean_record(json.loads('{"a\\udfff": ["x\\ud800", {"b": "\\ud83d\\ude00"}]}'))
    assert obj == {"a\ufffd": ["x\ufffd", {"b": "\U0001f600"}]} and note and "replaced" in note
    assert clean_record({"a": "fine"}) == ({"a": "fine"}, None)


@pytest.mark.parametrize("layout", ["pretty", "one_line"])
def test_cut_json_list_with_a_lone_surrogate_scans(tmp_path: Path, capfd: Any, layout: str) -> None:
    """The crash: a verl-tool list cut short whose complete records hold ``\\ud800`` (salvage path)."""
    recs = json.loads(TOOL.read_text())[:4]
    recs[0]["response"] += "\ud800"
    text = json.dumps(recs, indent=4 if layout == "pretty" else None)
    d = tmp_path / "in" / "verl_step_records" / "run1"
    d.mkdir(parents=True)
    (d / "fcl-step-1.json").write_text(text[: len(text) - 300])
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    assert len(rows) == 3 and rows[0]["output"].endswith("\ufffd")
    reasons = {e["line"]: e["reason"] for e in errs}
    assert "lone UTF-16 surrogate" in reasons[1] and "cut short" in reasons[4] and "kept the 3" in reasons[4]


@pytest.mark.parametrize("engine", ["records", "columnar"])
def test_lone_surrogate_and_bad_utf8_in_json_lines_on_both_engines(tmp_path: Path, capfd: Any, engine: str) -> None:
    lines = V09.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"output": "', b'"output": "\\udc00', 1)
    lines[2] = lines[2].replace(b'"output": "', b'"output": "\xff', 1)
    (tmp_path / "in" / "rollout").mkdir(parents=True)
    (tmp_path / "in" / "rollout" / "5.jsonl").write_bytes(b"".join(lines))
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out", "--engine", engine)
    assert len(rows) == 8 and {e["line"] for e in errs} == {2, 3}
    assert rows[1]["output"].startswith("\ufffd") and rows[2]["output"].startswith("\ufffd")


def test_json_list_of_openai_records_with_a_lone_surrogate(tmp_path: Path, capfd: Any) -> None:
    recs = [json.loads(x) for x in OAI.read_text().splitlines()[:3]]
    recs[2]["messages"][1]["content"] += "\udbff"
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "agent_log.json").write_text(json.dumps(recs))
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    assert len(rows) == 3 and [e["line"] for e in errs] == [3]


# -- JSON lists resynchronise after a damaged record (item 2) --------------------------------------------------


def _list_bytes(recs: list[dict[str, Any]], pretty: bool) -> list[bytes]:
    return [json.dumps(r, indent=4 if pretty else None).encode() for r in recs]


@pytest.mark.parametrize("pretty", [True, False])
@pytest.mark.parametrize("source", ["verl_tool", "openai"])
def test_damaged_list_record_costs_only_itself(tmp_path: Path, capfd: Any, pretty: bool, source: str) -> None:
    if source == "verl_tool":
        recs, rel = json.loads(TOOL.read_text())[:6], "verl_step_records/run1/fcl-step-1.json"
    else:
        recs, rel = [json.loads(x) for x in OAI.read_text().splitlines()[:6]], "agent_log.json"
    parts = _list_bytes(recs, pretty)
    parts[1] = parts[1][:40] + b"\x01\x02" + parts[1][40:]  # raw control bytes: invalid JSON
    parts[3] = parts[3][:-1]  # a record that lost its closing brace
    p = tmp_path / "in" / rel
    p.parent.mkdir(parents=True)
    p.write_bytes(b"[" + (b",\n" if pretty else b", ").join(parts) + b"]")
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    assert sorted(r["source_line"] for r in rows) == [1, 3, 5, 6]  # every complete record kept, in place
    damaged = sorted(e["line"] for e in errs if "cannot be read" in e["reason"])
    assert damaged == [2, 4]  # one error row per damaged record


def test_unresynchronisable_damage_says_how_many_records_were_not_read() -> None:
    recs = [good_record(1, i) for i in range(5)]
    text = "[" + ", ".join(json.dumps(r) for r in recs) + "]"
    cut = text.index(json.dumps(recs[2])) + 10
    damaged = text[:cut] + '"' + text[cut:].replace("}, {", "} {")  # a stray quote, separators gone after it
    items = list(salvage_json_list("f.json", damaged, "x", None, None))
    kept = [i for i in items if isinstance(i, tuple)]
    assert [k for k, _ in kept] == [1, 2]
    err = items[-1]
    assert not isinstance(err, tuple) and err.line == 3 and "about 3 record(s)" in err.reason and "kept the 2" in err.reason


# -- the format is decided per record (item 3) -----------------------------------------------------------------


def test_foreign_first_record_does_not_cost_the_file(tmp_path: Path, capfd: Any) -> None:
    (tmp_path / "in" / "rollout").mkdir(parents=True)
    oai = OAI.read_bytes().splitlines(keepends=True)
    verl = V09.read_bytes().splitlines(keepends=True)
    (tmp_path / "in" / "rollout" / "5.jsonl").write_bytes(oai[0] + b"".join(verl))  # OpenAI record heading verl
    (tmp_path / "in" / "agent_log.jsonl").write_bytes(verl[0] + b"".join(oai))  # and the reverse
    (tmp_path / "in" / "odd.jsonl").write_bytes(verl[0] + b'{"what": "no known shape"}\n')
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    fmts: dict[str, list[str]] = {}
    for r in rows:
        fmts.setdefault(r["source_path"], []).append(r["source_format"])
    assert sorted(fmts["rollout/5.jsonl"]) == ["openai_messages"] + ["verl_jsonl"] * 8
    assert sorted(fmts["agent_log.jsonl"]) == ["openai_messages"] * len(oai) + ["verl_jsonl"]
    assert fmts["odd.jsonl"] == ["verl_jsonl"]
    assert [(e["source_path"], e["line"]) for e in errs if "no known format" in e["reason"]] == [("odd.jsonl", 2)]


def test_list_whose_first_record_is_wrong_typed(tmp_path: Path, capfd: Any) -> None:
    """A JSON list of verl records whose first record lost ``output``: detection says verl-tool, the others are
    still read as verl records; a Parquet file's rows each under their own shape too."""
    verl = [json.loads(x) for x in V09.read_text().splitlines()]
    first = dict(verl[0])
    del first["output"]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "5.json").write_text(json.dumps([first, *verl[1:]]))
    pq.write_table(pa.Table.from_pylist(verl), tmp_path / "in" / "6.parquet")
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    assert sum(r["source_path"] == "5.json" for r in rows) == 7
    assert sum(r["source_path"] == "6.parquet" for r in rows) == 8
    assert [e["line"] for e in errs if e["source_path"] == "5.json"] == [1]


def test_clean_homogeneous_file_keeps_the_columnar_path_and_a_mixed_one_falls_back(tmp_path: Path, capfd: Any) -> None:
    (tmp_path / "in" / "rollout").mkdir(parents=True)
    (tmp_path / "in" / "rollout" / "5.jsonl").write_bytes(V09.read_bytes())
    (tmp_path / "in" / "rollout" / "6.jsonl").write_bytes(OAI.read_bytes().splitlines(keepends=True)[0]
                                                          + V09.read_bytes())
    rc, summary, _ = scan_json([tmp_path / "in", "-o", tmp_path / "out", "--engine", "columnar"], capfd)
    assert rc == 0 and summary is not None
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    engines = {f["path"]: f.get("engine") for f in manifest["inputs"]["files"]} if isinstance(
        manifest.get("inputs"), dict) and "files" in manifest["inputs"] else {}
    text = json.dumps(manifest)
    assert '"columnar"' in text and '"records"' in text, engines


def test_link_to_a_device_is_named(tmp_path: Path, capfd: Any) -> None:
    (tmp_path / "in" / "rollout").mkdir(parents=True)
    (tmp_path / "in" / "rollout" / "5.jsonl").write_bytes(V09.read_bytes())
    os.symlink("/dev/null", tmp_path / "in" / "rollout" / "6.jsonl")
    os.mkfifo(tmp_path / "in" / "rollout" / "7.jsonl")
    os.symlink("missing.jsonl", tmp_path / "in" / "rollout" / "8.jsonl")
    os.symlink("9.jsonl", tmp_path / "in" / "rollout" / "9.jsonl")
    _, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    why = {e["source_path"]: e["reason"] for e in errs}
    assert why["rollout/6.jsonl"] == "symbolic link to a character device, not a regular file; skipped"
    assert why["rollout/7.jsonl"] == "a named pipe (FIFO), not a regular file; skipped"
    assert why["rollout/8.jsonl"].startswith("broken symbolic link")
    assert why["rollout/9.jsonl"].startswith("symbolic link loop")


def test_verl_tool_record_heading_a_verl_jsonl_file(tmp_path: Path, capfd: Any) -> None:
    """Found by the fuzz run: a verl-tool record first made the whole JSON-lines file read as one JSON list."""
    tool = json.loads(TOOL.read_text())[0]
    (tmp_path / "in" / "validation").mkdir(parents=True)
    (tmp_path / "in" / "validation" / "10.jsonl").write_bytes(json.dumps(tool).encode() + b"\n" + V09.read_bytes())
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    assert sorted(r["source_format"] for r in rows) == ["verl_jsonl"] * 8 + ["verl_tool_json"]
    assert sorted(r["source_line"] for r in rows) == list(range(1, 10)) and not errs


# -- found by the long run (seed 3): a footer row count read on trust; records between two damaged ones -------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _with_row_count(data: bytes, meta: Any, rg: int, count: int) -> bytes:
    """``data`` (a Parquet file) with row group ``rg``'s ``num_rows`` in the footer set to ``count``: the thrift
    compact fields ``total_byte_size`` then ``num_rows`` (i64, zigzag varints) found by their values."""
    g = meta.row_group(rg)
    old = b"\x16" + _varint(g.total_byte_size * 2) + b"\x16" + _varint(g.num_rows * 2)
    at = len(data) - 8 - int.from_bytes(data[-8:-4], "little") - 1  # the footer's start, less one
    same = [k for k in range(rg) if (meta.row_group(k).total_byte_size, meta.row_group(k).num_rows)
            == (g.total_byte_size, g.num_rows)]
    for _ in range(len(same) + 1):  # row groups of the same sizes have the same bytes: take the rg-th of them
        at = data.index(old, at + 1)
    zz = count * 2 if count >= 0 else -count * 2 - 1
    return data[:at] + old[: -len(_varint(g.num_rows * 2))] + _varint(zz) + data[at + len(old):]


@pytest.mark.parametrize("count", [-63, 0, 1, 9])
def test_parquet_footer_row_count_is_not_trusted(tmp_path: Path, capfd: Any, count: int) -> None:
    """Tree 543: a flipped byte set a row group's footer ``num_rows`` to -63 and its rows went unnamed; a count
    too small makes pyarrow drop rows without a word. Every row is a row or an error naming it."""
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([good_record(6, i) for i in range(6)]), buf, row_group_size=3)
    data = _with_row_count(buf.getvalue(), pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata, 1, count)
    (tmp_path / "in" / "rollout").mkdir(parents=True)
    (tmp_path / "in" / "rollout" / "6.parquet").write_bytes(data)
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    read = sorted(r["source_line"] for r in rows)
    assert read[:3] == [1, 2, 3] and set(read) <= set(range(1, 7))
    named = {int(x) for e in errs for a, b in re.findall(r"\brows? (\d+)(?:-(\d+))?", e["reason"])
             for x in range(int(a), int(b or a) + 1)}
    assert set(range(1, 7)) <= set(read) | named, errs
    if count != 9:  # a count too large: pyarrow reads the rows there, nothing is lost
        assert errs and all("row group 1" in e["reason"] for e in errs)


@pytest.mark.parametrize("pretty", [True, False])
def test_records_between_two_damaged_list_records_are_each_accounted(tmp_path: Path, capfd: Any,
                                                                     pretty: bool) -> None:
    """Tree 2281: two records nested too deeply, one after the other, at the head of a verl-tool list; the
    resynchronisation jumped over the second without a word. Each damaged record has its error row, and a whole
    record between damaged ones that the resynchronisation does not recognise (no known shape) is read too."""
    recs: list[Any] = json.loads(TOOL.read_text())[:3]
    deep = '{"output": "x", "nest": ' + "[" * 1100 + "]" * 1100 + "}"
    odd = json.dumps({"what": "no known shape"})
    parts = [deep, "[" * 10_000 + "]" * 10_000, json.dumps(recs[0], indent=4 if pretty else None), deep, odd,
             *(json.dumps(r, indent=4 if pretty else None) for r in recs[1:])]
    rel = "verl_step_records/run1/fcl-step-1.json"
    p = tmp_path / "in" / rel
    p.parent.mkdir(parents=True)
    p.write_text("[" + (",\n" if pretty else ", ").join(parts) + "]")
    rows, errs = _scan(capfd, tmp_path / "in", tmp_path / "out")
    assert sorted(r["source_line"] for r in rows) == [3, 6, 7]
    why = {e["line"]: e["reason"] for e in errs}
    assert {1, 2, 4, 5} <= set(why) and all("nested too deeply" in why[k] for k in (1, 2, 4)), why
    assert "no known format" in why[5]

"""The columnar scan path writes exactly what the record loop writes, and hands over every range it cannot
vouch for.

``scan`` is run twice over the same inputs -- columnar path on (the default) and off
(``TRAJLAB_COLUMNAR=0``) -- and every table must be byte-identical: on the committed sample runs and on a
directory of verl dumps where clean files sit next to every kind of damage the record loop reports.
:func:`read_clean_segments` is checked case by case, and the column-wise turn split against
:func:`split_turns` on generated outputs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from verl_lines import (
    hermes_call,
    hermes_prompt,
    legacy_line,
    output_of,
    qwen35_prompt,
    v1_line,
    write_jsonl,
    xml_call,
)

from trajlab.ingest.fields import dumps_extra
from trajlab.ingest.turns import split_turns, split_turns_frame
from trajlab.ingest.verl_columnar import Segment, read_clean_segments
from trajlab.ingest.verl_jsonl import to_trajectory
from trajlab.scan import scan
from trajlab.scan.columnar import ENV_SWITCH
from trajlab.tables import SCAN_TABLES

ROOT = Path(__file__).resolve().parents[1]
GOOD = xml_call("search_web", queries=["japan gdp 2024"])
BAD = GOOD.replace("</parameter>", '</parameter v2="">')


def both_ways(paths: list[Path], tmp: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> dict[str, bytes]:
    """Scan with the columnar path on and off; assert identical table bytes; return the tables."""
    got = {}
    for switch in ("1", "0"):
        monkeypatch.setenv(ENV_SWITCH, switch)
        out = tmp / f"out{switch}"
        scan(paths, out, progress=False, jobs=1, incremental=False, **kw)
        got[switch] = {n: (out / f"{n}.parquet").read_bytes() for n in SCAN_TABLES}
    for name in SCAN_TABLES:
        assert got["1"][name] == got["0"][name], name
    return got["1"]


def test_sample_runs_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    both_ways([ROOT / "sample_data"], tmp_path, monkeypatch)


def row(step_no: int, i: int, **over: Any) -> dict[str, Any]:
    """A V1 dump line of step ``step_no`` (``over`` replaces or adds fields)."""
    out = output_of(["<think>\nlook it up\n</think>\n\n" + (BAD if i % 3 == 0 else GOOD), "Answer: 4."], ["r"])
    base = v1_line(step_no, qwen35_prompt(f"q{i}"), out, 1.0, uid=f"u{step_no}", session=i)
    return {**base, **over}


def make_messy(root: Path) -> Path:
    d = root / "rollout"
    write_jsonl(d / "1.jsonl", [row(1, i) for i in range(6)])
    write_jsonl(d / "2.jsonl", [row(2, i) for i in range(4)], tail=b'{"input": "sys", "outp')  # crashed writer
    (d / "3.jsonl").write_bytes(b"".join(json.dumps(row(3, i)).encode() + b"\n\n" for i in range(2)))  # blank lines
    write_jsonl(d / "4.jsonl", [row(4, 0), {**row(4, 1), "score": float("nan")}])  # NaN
    write_jsonl(d / "5.jsonl", [row(5, 0, gts="7"), row(5, 1, gts=7), row(5, 2, gts=[1, 2])])  # mixed types
    write_jsonl(d / "6.jsonl", [row(6, 0, acc=1.0), row(6, 1, acc=1), row(6, 2, acc=0.25)])  # int literal among floats
    write_jsonl(d / "7.jsonl", [row(7, 0, ok=True, n=3, f=1e-05, s='q"\\\n\x01ü'), row(7, 1, ok=False, n=-2, f=0.1,
                                                                                    s="")])  # every simple type
    write_jsonl(d / "8.jsonl", [row(8, 0, uid="a_١_2"), row(8, 1, uid="plain"), row(8, 2, uid="x_1_2")])  # odd uids
    (d / "9.jsonl").write_bytes(json.dumps(row(9, 0)).encode() + b"\r\n")  # CRLF
    write_jsonl(d / "10.jsonl", [row(10, 0, output=5), {k: v for k, v in row(10, 1).items() if k != "score"}])
    (d / "11.jsonl").write_bytes(json.dumps(row(11, 0)).encode()[:-1] + b', "z": "\\ud800"}\n')  # lone surrogate
    write_jsonl(d / "12.jsonl", [{k: v for k, v in row(0, i).items() if k != "step"} for i in range(3)])  # no step
    write_jsonl(d / "13.jsonl", [row(13, 0, uid="")])
    write_jsonl(d / "14.jsonl", [row(14, 0, score=None), row(14, 1, score=True)])
    write_jsonl(d / "15.jsonl", [row(15, 0, meta={"k": 1})])
    write_jsonl(root / "legacy" / "20.jsonl", [legacy_line(20, hermes_prompt("q"), output_of(
        [hermes_call("search_web", queries=["a"]), "done"], ["r"], "0.7"), 0.5, reward=1.0) for _ in range(3)])
    # an output whose tool block never reaches the next turn's header, and a prompt without any tool format
    write_jsonl(root / "odd" / "30.jsonl", [row(30, 0, output=GOOD + "\nuser\n<tool_response>\ncut off"),
                                            row(30, 1, input="system\nplain chat\nuser\nhi\nassistant\n",
                                                output=GOOD)])
    return root


def test_messy_dumps_identical_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_messy(tmp_path / "in")
    both_ways([root], tmp_path, monkeypatch)
    errs = pl.read_parquet(tmp_path / "out1" / "ingest_errors.parquet")
    reasons = " | ".join(errs["reason"])
    assert "truncated last line" in reasons and "blank line" in reasons and "not finite" in reasons
    assert "missing field 'score'" in reasons and "'output' is int" in reasons
    traj = pl.read_parquet(tmp_path / "out1" / "trajectories.parquet")
    extra = dict(zip(traj["source_line"].cast(str) + "@" + traj["source_path"], traj["extra"], strict=True))
    assert json.loads(extra["2@rollout/6.jsonl"])["acc"] == 1 and '"acc": 1,' in extra["2@rollout/6.jsonl"]
    assert json.loads(extra["1@rollout/7.jsonl"])["s"] == 'q"\\\n\x01ü'


def test_runs_of_several_roots_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several roots, sibling runs and a --run name: both paths fill ``run`` (and the prefixed paths) alike."""
    a, b = make_messy(tmp_path / "a" / "exp"), make_messy(tmp_path / "b" / "exp")
    got = both_ways([a, b], tmp_path, monkeypatch, runs={"named": tmp_path / "b" / "exp" / "rollout"})
    assert got["trajectories"]
    traj = pl.read_parquet(tmp_path / "out1" / "trajectories.parquet")
    assert {"a/exp", "a/exp/legacy", "b/exp/legacy", "named"} <= set(traj["run"])
    named = traj.filter(pl.col("run") == "named")["source_path"]
    assert named.len() and named.str.starts_with("b/exp/rollout/").all()
    assert traj["source_path"].str.starts_with("b/exp/rollout/").sum() == named.len()


def test_small_chunks_and_two_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of one file and units of several files give the same tables as one unit."""
    root = make_messy(tmp_path / "in")
    a = both_ways([root], tmp_path / "a", monkeypatch)
    monkeypatch.setenv(ENV_SWITCH, "1")
    scan([root], tmp_path / "b", progress=False, jobs=2, incremental=False, chunk_bytes=3000)
    for name in SCAN_TABLES:
        assert (tmp_path / "b" / f"{name}.parquet").read_bytes() == a[name], name


# -- read_clean_segments ---------------------------------------------------------------------------------


def seg(rows: list[Any], tail: bytes = b"") -> Segment:
    data = b"".join((r if isinstance(r, bytes) else json.dumps(r, ensure_ascii=False).encode()) + b"\n" for r in rows)
    return Segment(data + tail, None, None, 1)


@pytest.mark.parametrize(("rows", "tail", "why"), [
    ([row(1, 0)], b'{"inp', "read_ndjson"),
    ([row(1, 0), b""], b"", "blank"),
    ([row(1, 0), b"   "], b"", "blank"),
    ([row(1, 0, gts=1), row(1, 1, gts="1")], b"", "mixed"),
    ([row(1, 0, acc=0.5), row(1, 1, acc=2)], b"", "mixed"),
    ([row(1, 0, gts=[1])], b"", "nested"),
    ([row(1, 0), {k: v for k, v in row(1, 1).items() if k != "uid"}], b"", "null"),
    ([row(1, 0, output=None)], b"", "input/output"),
    ([row(1, 0, score="np.float32(0.5)")], b"", "score"),
    ([row(1, 0, step=1.5)], b"", "step"),
    ([row(1, 0, uid="")], b"", "empty uid"),
    ([row(1, 0, input="a\x00b")], b"", "NUL"),
])
def test_unclean_ranges_are_refused(rows: list[Any], tail: bytes, why: str) -> None:
    df, reason = read_clean_segments([seg(rows, tail)])
    assert df is None and why in reason


def check_against_record_reader(segments: list[Segment], objs: list[list[dict[str, Any]]]) -> None:
    df, why = read_clean_segments(segments)
    assert df is not None, why
    got = iter(df.to_dicts())
    for seg_i, (sg, rows) in enumerate(zip(segments, objs, strict=True)):
        for i, obj in enumerate(rows):
            g = next(got)
            rec, notes = to_trajectory(json.loads(json.dumps(obj)), source_path="x", line=sg.first_line + i,
                                       file_step=sg.file_step, file_split=sg.file_split)
            assert not notes and rec is not None
            assert (g["seg"], g["source_line"], g["split"], g["step"], g["group_id"], g["score"], g["input"],
                    g["output"], g["extra"]) == (seg_i, sg.first_line + i, rec.split, rec.step, rec.group_id,
                                                 rec.score, rec.input, rec.output, dumps_extra(rec.extra))
    assert next(got, None) is None


def test_clean_columns_match_the_record_reader() -> None:
    a = [row(4, 0, gts="a\tb", acc=1.0, n=7, ok=True, f=1e-05),
         row(4, 1, gts="中文\"q\"", acc=0.125, n=-1, ok=False, f=2.5e+20),
         row(4, 2, gts="", acc=0.0, n=0, ok=True, f=-0.5, uid="not_a_v1_uid")]
    b = [row(9, 5, gts="z", acc=0.5, n=1, ok=False, f=3.0, uid="g_١_0")]
    check_against_record_reader([seg(a), Segment(seg(b).data, 9, "val", 40)], [a, b])
    # legacy dumps: no uid (group from the prompt), no step field (the file name's), reward -> val
    legacy = [{k: v for k, v in legacy_line(0, hermes_prompt(f"q{i % 2}"), "hi", i, reward=0.0).items() if k != "step"}
              for i in range(4)]
    check_against_record_reader([Segment(seg(legacy).data, 12, None, 1)], [legacy])


# -- the turn split --------------------------------------------------------------------------------------


def test_turn_split_matches_split_turns() -> None:
    rnd = random.Random(7)
    toks = ["<|im_end|>", "<|im_start|>", "\n", "user\n", "<tool_response>", "</tool_response>", "assistant\n",
            "<think>\n\n</think>\n\n", "x", "é", "user\n<tool_response>", "\nuser\n<tool_response>\nR\n</tool_response>\n"
            "assistant\n", "</tool_response>\nassistant\n"]
    outs = ["".join(rnd.choice(toks) for _ in range(rnd.randint(0, 14))) for _ in range(4000)]
    outs += [output_of(["a", "b", ""], ["r1", "r2"], v) for v in ("0.7", "0.9")]
    frame = pl.DataFrame({"row": range(len(outs)), "output": outs}, schema={"row": pl.UInt32, "output": pl.String})
    turns, bad = split_turns_frame(frame)
    bad_set = set(bad.to_list())
    got: dict[int, list[tuple[Any, ...]]] = {}
    for r in turns.iter_rows(named=True):
        got.setdefault(r["row"], []).append((r["turn_index"], r["role"], r["text"], r["char_start"], r["char_end"]))
    checked = 0
    for i, o in enumerate(outs):
        if i in bad_set:
            assert i not in got
            continue
        assert got[i] == [(t.index, t.role, t.text, t.char_start, t.char_end) for t in split_turns(o)], o
        checked += 1
    assert checked > 2000 and len(outs) - 2 not in bad_set


def test_columnar_path_is_taken_on_clean_dumps() -> None:
    """The fast path must not silently fall back on clean dumps (it would still be correct, only slow)."""
    from trajlab.ingest import plan_tasks
    from trajlab.scan import ScanOptions
    from trajlab.scan.columnar import process_segments

    for run in ("qwen35_xml_run/rollout", "qwen3_hermes_run/rollout"):
        files = sorted((ROOT / "sample_data" / run).glob("*.jsonl"))[:6]
        items = [(plan_tasks(p, p.name, "verl_jsonl")[0], p.read_bytes(), "0" * 40) for p in files]
        got = process_segments(items, ScanOptions())
        assert got is not None and len(got) == len(files), run
        assert sum(t["trajectories"].num_rows for t in got) > 20 and all(t["calls"].num_rows for t in got)

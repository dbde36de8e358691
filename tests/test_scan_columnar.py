"""The columnar engine's parts against their references, and proof that it is taken on clean dumps.

:func:`read_clean_segments` is checked case by case against the record reader, and the column-wise turn split
against :func:`split_turns` on generated outputs. The whole-scan comparison of the engines, table by table and
byte for byte, is the differential harness in ``tests/test_scan_engines.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers.scan_inputs import row
from helpers.verl_lines import hermes_prompt, legacy_line, output_of

from trajlab.ingest.fields import dumps_extra
from trajlab.ingest.turns import split_turns, split_turns_frame
from trajlab.ingest.verl_columnar import Segment, read_clean_segments
from trajlab.ingest.verl_jsonl import to_trajectory

ROOT = Path(__file__).resolve().parents[1]


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
    from trajlab.scan.columnar import process_segments
    from trajlab.scan.options import WorkerOptions

    for run in ("qwen35_xml_run/rollout", "qwen3_hermes_run/rollout"):
        files = sorted((ROOT / "sample_data" / run).glob("*.jsonl"))[:6]
        items = [(plan_tasks(p, p.name, "verl_jsonl")[0], p.read_bytes(), "0" * 40) for p in files]
        got = process_segments(items, WorkerOptions())
        assert not isinstance(got, str) and len(got) == len(files), run
        assert sum(t["trajectories"].num_rows for t in got) > 20 and all(t["calls"].num_rows for t in got)

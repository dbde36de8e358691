"""Trajectory selection for rescoring: --where through DuckDB (with sub-queries over calls), --steps, seeded
--sample stratified by has-malformed, --limit; on scan-shaped Parquet written through trajlab.tables."""

from __future__ import annotations

import pytest

from trajlab.errors import TableError, TrajlabError
from trajlab.rescore.select import load_malformed_calls, load_texts, parse_steps, select_trajectories
from trajlab.tables import CALLS, TRAJECTORIES, TURNS, table_path, write_table


def _scan_dir(tmp_path, steps=(1, 2, 3), per_step=10, bad_every=3):
    """Scan-shaped tables: per step `per_step` trajectories, every `bad_every`-th with one malformed call."""
    trajs, turns, calls = [], [], []
    for step in steps:
        for i in range(per_step):
            tid = f"s{step}-t{i:02d}"
            bad = i % bad_every == 0
            out = "<tool_call>\n<function=search_web>\n</tool_call>" + ("\n\nchatter" if bad else "")
            trajs.append({
                "trajectory_id": tid, "source_path": f"rollout/{step}.jsonl", "source_line": i + 1,
                "source_format": "verl_jsonl", "run": "base" if i < per_step // 2 else "sft", "split": "train",
                "step": step, "group_id": "g", "score": 0.0 if bad else 1.0,
                "tool_format": "qwen3_coder", "n_turns": 1, "n_calls": 1, "n_malformed_calls": int(bad),
                "has_final_answer": False, "truncated": False, "schema_checked": False, "input": "user\nq\nassistant\n",
                "output": out, "tools": None, "extra": "{}",
            })  # fmt: skip
            turns.append({"trajectory_id": tid, "turn_index": 0, "role": "assistant", "text": out,
                          "char_start": 0, "char_end": len(out)})  # fmt: skip
            raw = out.split("\n\n")[0]
            calls.append({
                "call_id": f"{tid}:0:0", "trajectory_id": tid, "turn_index": 0, "call_index": 0, "step": step,
                "split": "train", "format": "qwen3_coder", "raw": raw, "char_start": 0, "char_end": len(raw),
                "function_name": "search_web", "matched_tool": None, "arguments": "{}",
                "status": "malformed" if bad else "ok", "categories": ["text_after_call"] if bad else [],
                "repaired": raw if bad else None, "repaired_arguments": None, "repair_note": None,
            })  # fmt: skip
    write_table(TRAJECTORIES, trajs, table_path(tmp_path, "trajectories"))
    write_table(TURNS, turns, table_path(tmp_path, "turns"))
    write_table(CALLS, calls, table_path(tmp_path, "calls"))
    return tmp_path


def test_parse_steps():
    assert parse_steps(None) is None
    assert parse_steps("60,120") == {60, 120}
    assert parse_steps("80-83, 90") == {80, 81, 82, 83, 90}
    assert parse_steps([1, 2]) == {1, 2}
    with pytest.raises(TrajlabError, match="steps: cannot read"):
        parse_steps("ten")
    with pytest.raises(TrajlabError):
        parse_steps("9-3")


def test_where_steps_limit(tmp_path):
    out = _scan_dir(tmp_path)
    assert len(select_trajectories(out)) == 30
    assert select_trajectories(out, steps={2}) == [f"s2-t{i:02d}" for i in range(10)]
    bad = select_trajectories(out, where="score = 0")
    assert len(bad) == 12 and all(int(t[-2:]) % 3 == 0 for t in bad)
    sub = select_trajectories(out, where="trajectory_id IN (SELECT trajectory_id FROM calls WHERE status = 'malformed')")
    assert sub == bad
    assert select_trajectories(out, steps={1, 3}, limit=4) == ["s1-t00", "s1-t01", "s1-t02", "s1-t03"]
    with pytest.raises(TrajlabError, match="where 'nonsense_col > 1'"):
        select_trajectories(out, where="nonsense_col > 1")
    sft = select_trajectories(out, where="run = 'sft'")  # runs are a column of trajectories
    assert len(sft) == 15 and all(int(t[-2:]) >= 5 for t in sft)
    assert select_trajectories(out, where="run = 'sft' AND score = 0", steps={2}) == ["s2-t06", "s2-t09"]


def test_sample_is_stratified_and_seeded(tmp_path):
    out = _scan_dir(tmp_path)
    a = select_trajectories(out, sample=4, seed=7)
    assert a == select_trajectories(out, sample=4, seed=7)
    assert a != select_trajectories(out, sample=4, seed=8)
    for step in (1, 2, 3):
        mine = [t for t in a if t.startswith(f"s{step}-")]
        assert len(mine) == 4
        assert sum(int(t[-2:]) % 3 == 0 for t in mine) == 2  # half malformed, half clean
    # 4 malformed per step only: asking for 10 takes all 4 and tops up with 6 clean ones
    b = select_trajectories(out, sample=10, steps={1})
    assert len(b) == 10 and sum(int(t[-2:]) % 3 == 0 for t in b) == 4
    with pytest.raises(TrajlabError):
        select_trajectories(out, sample=0)


def test_load_texts_and_malformed_calls(tmp_path):
    out = _scan_dir(tmp_path)
    ids = ["s3-t03", "s1-t01"]
    texts = load_texts(out, ids)
    assert [t.trajectory_id for t in texts] == ids  # in the order asked
    t = texts[0]
    assert t.turns == [(0, "assistant", 0, len(t.output))] and t.n_malformed_calls == 1 and t.step == 3
    assert t.call_ranges == [(0, len("<tool_call>\n<function=search_web>\n</tool_call>"))]
    mal = load_malformed_calls(out, ids)
    assert list(mal) == ["s3-t03"] and mal["s3-t03"][0]["categories"] == ["text_after_call"]


def test_missing_tables(tmp_path):
    with pytest.raises(TableError, match="trajectories.parquet"):
        select_trajectories(tmp_path)


def test_cli_help_is_complete(capsys):
    from trajlab.cli import main

    assert main(["rescore", "--help"]) == 0
    text = capsys.readouterr().out
    for opt in ("--ckpt", "--where", "--steps", "--sample", "--limit", "--device", "--dtype", "--tokenizer",
                "--chunk", "--max-batch-tokens", "--tokens", "--resume", "--fail-above", "--device-map"):  # fmt: skip
        assert opt in text
    assert "Example: trajlab rescore" in text

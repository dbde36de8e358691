"""Ingest: format detection, both verl dump variants and separators, verl-tool and OpenAI-messages
records, tool schemas from prompts (JSON lines and Qwen3-Coder XML) and every bad-input case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.verl_lines import (
    FETCH_WEB,
    SEARCH_WEB,
    hermes_call,
    hermes_prompt,
    legacy_line,
    output_of,
    qwen35_prompt,
    v1_line,
    write_jsonl,
    xml_call,
)

from trajlab.errors import InputError
from trajlab.ingest import FileTask, detect_format, discover, iter_records, plan_tasks, split_from_path
from trajlab.ingest.tool_schemas import load_tools_file, tools_from_prompt
from trajlab.ingest.turns import split_turns, tool_response_text
from trajlab.model import IngestError, RawTrajectory


def records(path: Path, rel: str | None = None):
    fmt, why = detect_format(path)
    assert fmt, why
    out = []
    for t in plan_tasks(path, rel or path.name, fmt):
        out.extend(iter_records(t))
    return [r for r in out if isinstance(r, RawTrajectory)], [r for r in out if isinstance(r, IngestError)]


@pytest.mark.parametrize("version,sep", [("0.9", "</tool_call>\nuser\n<tool_response>"), ("0.7", "</tool_call>user\n<tool_response>")])
def test_split_turns_both_separators(version, sep):
    a0 = "<think>\nneed data\n</think>\n\n" + xml_call("search_web", queries=["gdp japan"])
    a1 = xml_call("fetch_web", urls=["https://stat.go.jp"])
    a2 = "Japan's GDP is about 4.2 trillion USD."
    out = output_of([a0, a1, a2], ["1. Japan GDP 2024 ...", "GDP (nominal) 609.3 trillion yen"], version)
    assert sep in out
    turns = split_turns(out)
    assert [t.role for t in turns] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert "".join(t.text for t in turns) == out
    for t in turns:
        assert out[t.char_start : t.char_end] == t.text
    assert turns[0].text == a0 and turns[2].text == a1 and turns[4].text == a2
    assert tool_response_text(turns[1].text) == "1. Japan GDP 2024 ..."


def test_split_turns_multiple_responses_and_truncated_tool_block():
    out = "a" + "\nuser\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response>\nassistant\nb"
    turns = split_turns(out)
    assert [t.role for t in turns] == ["assistant", "tool", "assistant"]
    assert tool_response_text(turns[1].text) == "r1\nr2"
    cut = "x</tool_call>\nuser\n<tool_response>\npartial resp"
    turns = split_turns(cut)
    assert [t.role for t in turns] == ["assistant", "tool"] and turns[-1].char_end == len(cut)
    # generation prompt's empty think block belongs to the scaffold
    out = "a\nuser\n<tool_response>\nr\n</tool_response>\nassistant\n<think>\n\n</think>\n\nfinal"
    assert split_turns(out)[-1].text == "final"


def test_tools_from_prompt_json_lines_and_xml():
    tools, src = tools_from_prompt(qwen35_prompt("q"))
    assert src == "prompt_json" and [t["name"] for t in tools] == ["search_web", "fetch_web"]
    assert tools[0]["parameters"]["properties"]["queries"]["type"] == "array"
    xml = (
        "system\n<tools>\n<function>\n<name>str_replace_editor</name>\n<description>Edit files & view them; use <b>care</b></description>\n"
        "<parameters>\n<parameter>\n<name>command</name>\n<type>string</type>\n<description>The command</description>\n"
        '<enum>["view", "create"]</enum>\n</parameter>\n<parameter>\n<name>view_range</name>\n<type>array</type>\n</parameter>\n'
        '<required>["command"]</required>\n</parameters>\n</function>\n</tools>\nuser\nhi\nassistant\n'
    )
    tools, src = tools_from_prompt(xml)
    assert src == "prompt_xml"
    (t,) = tools
    assert t["name"] == "str_replace_editor"
    assert t["parameters"]["properties"]["command"]["enum"] == ["view", "create"]
    assert t["parameters"]["properties"]["view_range"]["type"] == "array"
    assert t["parameters"]["required"] == ["command"]
    assert tools_from_prompt("system\nno tools here\nuser\nq\nassistant\n") == (None, None)


def test_tools_file_json_and_verl_yaml(tmp_path):
    j = tmp_path / "tools.json"
    j.write_text(json.dumps([SEARCH_WEB, FETCH_WEB]))
    assert [t["name"] for t in load_tools_file(j)] == ["search_web", "fetch_web"]
    y = tmp_path / "tool_config.yaml"
    y.write_text(
        "tools:\n  - class_name: pkg.SearchTool\n    config: {type: native}\n    tool_schema:\n      type: function\n"
        "      function:\n        name: search\n        description: s\n        parameters:\n          type: object\n"
        "          properties:\n            query_list: {type: array, items: {type: string}}\n          required: [query_list]\n"
    )
    (t,) = load_tools_file(y)
    assert t["name"] == "search" and t["parameters"]["required"] == ["query_list"]
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(InputError, match="not valid JSON"):
        load_tools_file(bad)
    with pytest.raises(InputError, match="not found"):
        load_tools_file(tmp_path / "missing.json")


def test_v1_dump(tmp_path):
    inp = qwen35_prompt("What is Japan's GDP?")
    out = output_of([xml_call("search_web", queries=["japan gdp"]), "About 4.2T USD."], ["results"], "0.9")
    p = write_jsonl(tmp_path / "rollout" / "12.jsonl", [v1_line(12, inp, out, 1.0, uid="abc", session=s) for s in range(3)])
    recs, errs = records(p)
    assert not errs and len(recs) == 3
    r = recs[0]
    assert (r.step, r.split, r.group_id, r.uid, r.score) == (12, "train", "abc", "abc_0_0", 1.0)
    assert {x.group_id for x in recs} == {"abc"}
    assert r.extra["gts"] == "x" and r.extra["uid"] == "abc_0_0"
    assert [t.role for t in r.turns] == ["assistant", "tool", "assistant"]


def test_legacy_dump_groups_by_prompt_and_keeps_extra_keys(tmp_path):
    a, b = hermes_prompt("q1"), hermes_prompt("q2")
    out = output_of([hermes_call("search_web", queries=["x"]), "done"], ["r"], "0.7")
    rows = [legacy_line(3, a, out, 0.5, pred="done"), legacy_line(3, b, out, 0.0), legacy_line(3, a, out, 1.0)]
    p = write_jsonl(tmp_path / "3.jsonl", rows)
    recs, errs = records(p)
    assert not errs and len(recs) == 3
    assert recs[0].group_id == recs[2].group_id != recs[1].group_id
    assert recs[0].extra == {"gts": "x", "acc": 0.5, "pred": "done"}
    assert recs[0].uid is None and recs[0].split == "train"


def test_val_split_from_directory_and_reward_key(tmp_path):
    assert split_from_path("validation/10.jsonl") == "val"
    assert split_from_path("run/val_generations/10.jsonl") == "val"
    assert split_from_path("rollout/10.jsonl") is None
    assert split_from_path("verl_step_records/r/fcl-step-val-4.json") == "val"
    row = {**legacy_line(0, "p", "o", 1.0), "reward": 1.0}
    recs, _ = records(write_jsonl(tmp_path / "0.jsonl", [row]))
    assert recs[0].split == "val"


def test_bad_input_keeps_every_good_record(tmp_path):
    good = v1_line(7, qwen35_prompt("q"), "answer", 1.0)
    lines = [
        json.dumps(good).encode(),
        b"",  # blank
        b"{not json",
        json.dumps({**good, "score": float("nan")}).encode(),  # NaN written by json.dumps
        json.dumps({**good, "score": "np.float32(0.25)"}).encode(),  # default=str numpy scalar
        json.dumps({k: v for k, v in good.items() if k != "output"}).encode(),  # missing output
        json.dumps({k: v for k, v in good.items() if k != "step"}).encode(),  # missing step: from file name
        json.dumps({**good, "output": "caf\u00e9"}, ensure_ascii=False).encode().replace("é".encode(), b"\xe9"),  # bad UTF-8
        b"[1, 2]",
        json.dumps(good)[:40].encode(),  # truncated last line, no newline
    ]
    p = tmp_path / "7.jsonl"
    p.write_bytes(b"\n".join(lines))
    recs, errs = records(p)
    by_line = {e.line: e.reason for e in errs}
    assert [r.source_line for r in recs] == [1, 4, 5, 7, 8]
    assert by_line[2] == "blank line"
    assert by_line[3].startswith("invalid JSON")
    assert "not finite" in by_line[4] and recs[1].score is None
    assert recs[2].score == 0.25
    assert "missing field 'output'" in by_line[6]
    assert recs[3].step == 7
    assert "invalid UTF-8" in by_line[8] and recs[4].output == "caf\ufffd"
    assert "not a JSON object" in by_line[9]
    assert by_line[10].startswith("truncated last line")


def test_detect_format_unknown_and_empty(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    assert detect_format(tmp_path / "e.jsonl") == (None, "empty file")
    (tmp_path / "u.jsonl").write_text('{"foo": 1}\n')
    fmt, why = detect_format(tmp_path / "u.jsonl")
    assert fmt is None and "unknown format" in why
    (tmp_path / "t.jsonl").write_text("hello\n")
    assert detect_format(tmp_path / "t.jsonl")[0] is None


def test_discover_skips_hidden_and_missing(tmp_path):
    write_jsonl(tmp_path / "a" / "1.jsonl", [legacy_line(1, "p", "o", 1.0)])
    write_jsonl(tmp_path / "a" / ".hidden" / "2.jsonl", [legacy_line(2, "p", "o", 1.0)])
    (tmp_path / "a" / "notes.txt").write_text("x")
    files, errs = discover([tmp_path / "a", tmp_path / "nope"])
    assert [r for _, r in files] == ["1.jsonl"]
    assert errs[0].reason == "path does not exist"


def test_chunked_reading_gives_same_records_and_line_numbers(tmp_path):
    rows = [v1_line(5, qwen35_prompt(f"q{i}"), f"answer {i}", float(i % 2), uid=f"u{i}") for i in range(200)]
    p = write_jsonl(tmp_path / "5.jsonl", rows)
    tasks = plan_tasks(p, "5.jsonl", "verl_jsonl", chunk_bytes=4096)
    assert len(tasks) > 5
    recs = [r for t in tasks for r in iter_records(t)]
    assert all(isinstance(r, RawTrajectory) for r in recs)
    assert [r.source_line for r in recs] == list(range(1, 201))
    assert [r.output for r in recs] == [f"answer {i}" for i in range(200)]


def test_verl_tool_records(tmp_path):
    prompt = "<|im_start|>system\n" + hermes_prompt("q")[len("system\n") :].replace("\nuser\n", "<|im_end|>\n<|im_start|>user\n").replace("\nassistant\n", "<|im_end|>\n<|im_start|>assistant\n")
    resp = (hermes_call("search_web", queries=["a"]) + "<|im_end|>\n<|im_start|>user\n<tool_response>\nres\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\nfinal<|im_end|>")
    data = [{"id": i, "traj_ids": f"t{i // 2}_{i % 2}", "data_source": "fcl", "prompt": prompt, "response": resp,
             "ground_truth": "g", "score": 1.0, "num_turn": 2} for i in range(4)]
    p = tmp_path / "verl_step_records" / "run1" / "fcl-step-9.json"
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps(data, indent=4))
    fmt, _ = detect_format(p)
    assert fmt == "verl_tool_json"
    recs, errs = records(p, "verl_step_records/run1/fcl-step-9.json")
    assert not errs and len(recs) == 4
    r = recs[0]
    assert r.step == 9 and r.group_id == "t0" and recs[1].group_id == "t0" and recs[2].group_id == "t1"
    assert "<|im_start|>" not in r.input and r.input.startswith("system\n")
    assert [t.role for t in r.turns] == ["assistant", "tool", "assistant"]
    assert r.turns[-1].text == "final"
    assert r.extra["raw_response"] == resp
    # a list cut short keeps its complete records
    p2 = tmp_path / "fcl-step-10.json"
    text = json.dumps(data, indent=4)
    p2.write_text(text[: text.rfind('"score"')])
    recs, errs = records(p2)
    assert len(recs) == 3 and "kept the 3 complete records" in errs[-1].reason


def test_openai_messages_jsonl_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rec = {
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "GDP of Japan?"},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "search_web", "arguments": '{"queries": ["japan gdp"]}'}}]},
            {"role": "tool", "content": "4.2T USD"},
            {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "fetch_web", "arguments": '{"urls": ["x"'}}]},
            {"role": "tool", "content": "Invalid JSON"},
            {"role": "assistant", "content": "About 4.2 trillion USD."},
        ],
        "tools": [SEARCH_WEB, FETCH_WEB],
        "reward": 0.5,
    }
    p = write_jsonl(tmp_path / "log.jsonl", [rec])
    recs, errs = records(p)
    assert not errs
    r = recs[0]
    assert r.input == "system\nYou are helpful.\nuser\nGDP of Japan?\nassistant\n"
    assert [t.role for t in r.turns] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert json.loads(r.turns[0].text.split("\n")[1]) == {"name": "search_web", "arguments": {"queries": ["japan gdp"]}}
    assert '"arguments": {"urls": ["x"}' in r.turns[2].text
    assert r.score == 0.5 and [t["name"] for t in r.tools] == ["search_web", "fetch_web"]
    pq.write_table(pa.Table.from_pylist([{"messages": rec["messages"]}]), tmp_path / "sft.parquet")
    recs, errs = records(tmp_path / "sft.parquet")
    assert len(recs) == 1 and recs[0].output == r.output


def test_file_task_is_picklable():
    import pickle

    t = FileTask("a", "a", "verl_jsonl", None, 1, 0, 10, 1, 0)
    assert pickle.loads(pickle.dumps(t)) == t


def test_pretty_printed_json_object_is_reported_as_such(tmp_path):
    p = tmp_path / "dump_info.json"
    p.write_text(json.dumps({"steps": 3, "seed": 1}, indent=2))
    fmt, why = detect_format(p)
    assert fmt is None and "single JSON object (keys: steps, seed)" in why


def test_a_verl_dump_converted_to_parquet_reads_like_the_jsonl(tmp_path):
    """The same verl records as JSON lines and as Parquet (``polars.read_ndjson(...).write_parquet``, a common
    conversion) give the same rows in every table but for the file names in ids and paths."""
    import polars as pl

    from trajlab.scan import ScanOptions, scan

    src = Path(__file__).resolve().parents[1] / "sample_data" / "qwen35_xml_run" / "rollout"
    for kind in ("jsonl", "parquet"):
        d = tmp_path / kind / "rollout"
        d.mkdir(parents=True)
        for step in (90, 120):
            if kind == "jsonl":
                (d / f"{step}.jsonl").write_bytes((src / f"{step}.jsonl").read_bytes())
            else:
                pl.read_ndjson(src / f"{step}.jsonl").write_parquet(d / f"{step}.parquet")
        assert detect_format(next(d.iterdir()))[0] == "verl_jsonl"
        scan([tmp_path / kind], tmp_path / f"out_{kind}", ScanOptions(jobs=1), progress=False)
    drop = {"trajectories": ["trajectory_id", "source_path", "run"], "calls": ["call_id", "trajectory_id"],
            "findings": ["trajectory_id", "call_id"], "turns": ["trajectory_id"]}
    for table, cols in drop.items():
        a, b = (pl.read_parquet(tmp_path / f"out_{k}" / f"{table}.parquet").drop(cols) for k in ("jsonl", "parquet"))
        assert a.height > 0 and a.equals(b), table


def test_a_parquet_file_of_another_layout_names_both_it_accepts(tmp_path):
    import polars as pl

    p = tmp_path / "x.parquet"
    pl.DataFrame({"prompt": ["a"], "completion": ["b"]}).write_parquet(p)
    fmt, why = detect_format(p)
    assert fmt is None and "'messages'" in why and "'output'" in why

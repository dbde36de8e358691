"""The column-wise recogniser (``trajlab.toolcalls.vectorized``) agrees with the per-turn classifier.

For every turn it accepts, :func:`~trajlab.toolcalls.analyze_turn` must find no problem and exactly the same
calls (raw text, offsets, names, matched tool, arguments JSON as scan stores them). Turns come from generated
canonical turns, the same turns with random damage, free-form junk, every assistant turn of the sample runs
and the labelled corpus of real model outputs. A last group checks that it does accept canonical turns (so
it cannot silently turn into dead code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers.turns import TOOLS, mutated_turn, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajlab.ingest import discover, iter_records, plan_tasks
from trajlab.model import TurnContext
from trajlab.scan.records import json_or_none
from trajlab.toolcalls import analyze_turn
from trajlab.toolcalls.ruleset import get_ruleset
from trajlab.toolcalls.vectorized import available, classify_canonical
from trajlab.trajectory import prompt_facts

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "real_tool_calls.dev.jsonl"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(turns: list[tuple[str, str, list[dict[str, Any]] | None]], forbids: bool = False) -> tuple[int, int]:
    """Classify ``(text, format, tools)`` turns both ways; assert agreement. Returns (accepted, clean)."""
    tool_sets: list[list[dict[str, Any]]] = []
    ids: dict[int, int] = {}
    rows = []
    for k, (text, fmt, tools) in enumerate(turns):
        tid = None
        if tools is not None:
            tid = ids.setdefault(id(tools), len(tool_sets))
            if tid == len(tool_sets):
                tool_sets.append(tools)
        rows.append((k, text, fmt, tid))
    frame = pl.DataFrame(rows, schema={"tkey": pl.UInt32, "text": pl.String, "fmt": pl.String, "tools_id": pl.Int32},
                         orient="row")
    res = classify_canonical(frame, tool_sets, get_ruleset(()))
    accepted = set(res.accepted.to_list())
    calls: dict[int, list[tuple[Any, ...]]] = {}
    for c in res.calls.sort("tkey", "call_index").iter_rows(named=True):
        calls.setdefault(c["tkey"], []).append((c["call_index"], c["format"], c["raw"], c["start"], c["end"],
                                                c["function_name"], c["matched_tool"], c["arguments"]))
    clean = 0
    for k, (text, fmt, tools) in enumerate(turns):
        for last in (False, True):
            ctx = TurnContext(is_last_turn=last, forbids_suffix=forbids, schema_known=tools is not None)
            ta = analyze_turn(text, tool_format=fmt, tools=tools, context=ctx, spans=False)
            ok = not ta.findings and all(c.status == "ok" and not c.categories for c in ta.calls)
            clean += ok and not last
            if k in accepted:
                assert ok, (text, fmt, ta.findings)
                want = [(c.call_index, c.format, c.raw, c.start, c.end, c.function_name, c.matched_tool,
                         json_or_none(c.arguments)) for c in ta.calls]
                assert calls.get(k, []) == want, text
                # the columnar scan writes verl's reading of an accepted call as `as_intended`, no verl arguments
                assert all((c.verl_executes, c.verl_function_name, c.verl_arguments) == ("as_intended", None, None)
                           for c in ta.calls), text
    assert set(calls) <= accepted
    return len(accepted), clean


@pytest.mark.parametrize("fmt", ["qwen3_coder", "hermes"])
@SETTINGS
@given(data=st.data())
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_generated_turns(fmt: str, data: st.DataObject) -> None:
    good = data.draw(st.lists(turn(fmt, canonical=True), min_size=1, max_size=12))
    bad = data.draw(st.lists(turn(fmt, canonical=False), max_size=8))
    damaged = data.draw(st.lists(mutated_turn(fmt), max_size=8))
    check([(t, fmt, TOOLS) for t in good + bad + damaged])


@SETTINGS
@given(st.lists(st.lists(st.sampled_from([*"<>/=\n\"{}:_ab", "<tool_call>", "</tool_call>", "<think>", "</think>",
                                         "<function=search_web>", "<parameter=queries>", "</parameter>",
                                         "</function>", '"name"', "<search_web>"]), max_size=40).map("".join),
                max_size=20),
       st.sampled_from(["qwen3_coder", "hermes", "none"]), st.booleans())
def test_junk_turns(texts: list[str], fmt: str, with_tools: bool) -> None:
    check([(t, fmt, TOOLS if with_tools else None) for t in texts], forbids=True)


def test_typed_parameters_and_exact_arguments() -> None:
    """Values of every covered type, with their edge cases (``-0``, ``null``, escapes, enums, objects)."""
    tools = [{"name": "f", "description": "", "parameters": {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
        "l": {"type": "array"}, "e": {"type": "string", "enum": ["u", "v"]}, "o": {"type": "object"},
        "t": {"type": ["string", "null"]}, "u": {}}}}]
    values = {"a": ["plain", 'quo"te', "back\\slash", "tab\tand\x01ctl", "null", "NULL", "", "ünï", "x\ny"],
              "n": ["0", "-0", "12", "007", "1.0", "+3", "123456789012345678"], "x": ["3", "-0", "2.5", "1e3"],
              "b": ["true", "false", "True", "yes"], "l": ['["a", "b"]', "[]", '["a","b"]', '["a\\"b"]', "[1, 2]",
                                                           '[1.5]', '["<x>"]'],
              "e": ["u", "w"], "o": ['{"k": 1}'], "t": ["s"], "u": ["anything"]}
    turns = []
    for p, vs in values.items():
        for v in vs:
            params = [("a", "fixed"), (p, v)] if p != "a" else [("a", v)]
            body = "".join(f"<parameter={k}>\n{val}\n</parameter>\n" for k, val in params)
            turns.append((f"<tool_call>\n<function=f>\n{body}</function>\n</tool_call>", "qwen3_coder", tools))
            hv = {"a": '"fixed"', p: json.dumps(v) if p in "aet" else v} if p != "a" else {"a": json.dumps(v)}
            args = ", ".join(f'"{k}": {val}' for k, val in sorted(hv.items()))
            turns.append(('<tool_call>\n{"name": "f", "arguments": {' + args + "}}\n</tool_call>", "hermes", tools))
    accepted, _ = check(turns)
    assert accepted >= len(turns) // 3


def sample_turns() -> list[tuple[str, str, list[dict[str, Any]] | None]]:
    files, _ = discover([ROOT / "sample_data"])
    out = []
    for p, rel in files:
        if p.suffix != ".jsonl" or "openai" in rel:
            continue
        for task in plan_tasks(p, rel, "verl_jsonl"):
            for rec in iter_records(task):
                if not hasattr(rec, "turns"):
                    continue
                facts = prompt_facts(rec.input)
                if facts.tool_format not in ("qwen3_coder", "hermes", "none"):
                    continue  # the other families' runs have no vectorised path: the per-turn classifier reads them
                tools = json.loads(facts.tools_json) if facts.tools_json else None
                out += [(t.text, facts.tool_format, tools) for t in rec.turns if t.role == "assistant"]
    return out


def test_sample_runs_agree_and_engage() -> None:
    turns = sample_turns()
    accepted, clean = check(turns)
    assert len(turns) > 3000
    assert accepted == clean  # every turn the classifier finds clean is recognised (on these runs)


@pytest.mark.skipif(not CORPUS.is_file(), reason="shared corpus not present")
def test_corpus_agrees() -> None:
    items = [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines() if x.strip()]
    turns = []
    for it in items:
        fmt = "hermes" if "hermes" in str(it.get("format", "")) or "json" in str(it.get("format", "")) else "qwen3_coder"
        turns.append((it["text"], fmt, it.get("tools")))
    check(turns)


def test_only_with_builtin_rules(tmp_path: Path) -> None:
    rs = get_ruleset(())
    assert available(rs, ())
    assert not available(rs, (str(tmp_path),))

"""The classifier on big turns: a turn of 1,600 calls and 1 MB turns without call markup come back complete and
exact. How long that takes is measured by ``benchmarks/bench_classify_scaling.py`` (linear in the number of
calls, ~1 µs for a turn without markup), not here: timings in a test fail on a busy machine."""

from __future__ import annotations

import json

import pytest

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn

TOOLS = [{"name": "search_web", "parameters": {"type": "object", "properties": {"queries": {"type": "array"}},
                                              "required": ["queries"]}}]
XML = '<tool_call>\n<function=search_web>\n<parameter=queries>\n["a b c"]\n</parameter>\n</function>\n</tool_call>\n'
HERMES = '<tool_call>\n{"name": "search_web", "arguments": {"queries": ["a b c"]}}\n</tool_call>\n'
BAD = '<tool_call>\n<function=search_web英文>\n<parameter=queries>\n["a"]\n</parameter v2="">\n</function>\n'
N = 1600


def _tiled(text: str, ta) -> None:
    pos = 0
    for s in ta.spans:
        assert s.start == pos and s.end > s.start
        pos = s.end
    assert pos == len(text)


@pytest.mark.parametrize("unit, fmt", [(XML, "qwen3_coder"), (HERMES, "hermes")])
def test_many_well_formed_calls(unit: str, fmt: str) -> None:
    text = unit * N
    ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
    assert len(ta.calls) == N
    assert [c.start for c in ta.calls] == [i * len(unit) for i in range(N)]
    assert all(c.status == "ok" and c.function_name == "search_web" for c in ta.calls)
    assert {json.dumps(c.arguments) for c in ta.calls} == {'{"queries": ["a b c"]}'}
    assert not ta.findings
    _tiled(text, ta)


def test_many_malformed_calls() -> None:
    text = BAD * N
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    assert len(ta.calls) == N and all(c.status == "malformed" for c in ta.calls)
    for c in ta.calls:
        assert c.raw == text[c.start:c.end]
        assert {"garbled_function_name", "stray_attribute"} <= set(c.categories)
    assert not [f for f in ta.findings if f.category == "internal_error"]
    _tiled(text, ta)


def test_big_turns_without_calls() -> None:
    plain = "The bridge was completed in 1887, according to the council report. " * 15000  # ~1 MB
    think = "<think>\n" + "compare a < b and b > c; " * 40000 + "\n</think>\nThe answer is 4."  # ~1 MB reasoning
    for text in (plain, think):
        ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
        assert ta.calls == [] and ta.findings == []
        _tiled(text, ta)


def test_non_string_input_does_not_raise() -> None:
    ta = analyze_turn(None, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())  # type: ignore[arg-type]
    assert ta.calls == [] and ta.spans == []
    ta = analyze_turn(XML, tool_format="glm", tools=[{"bad": 1}], context=None)  # type: ignore[arg-type]
    assert ta.calls and ta.calls[0].function_name == "search_web"

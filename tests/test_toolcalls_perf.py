"""The classifier's hot path scales linearly and a turn without call markup costs almost nothing.

Bounds are generous (the CI machine is shared); they catch quadratic behaviour and per-character loops, not
small regressions. `benchmarks/bench_classify.py` measures the real throughput.
"""

from __future__ import annotations

import time

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn

TOOLS = [{"name": "search_web", "parameters": {"type": "object", "properties": {"queries": {"type": "array"}},
                                              "required": ["queries"]}}]
XML = '<tool_call>\n<function=search_web>\n<parameter=queries>\n["a b c"]\n</parameter>\n</function>\n</tool_call>\n'
HERMES = '<tool_call>\n{"name": "search_web", "arguments": {"queries": ["a b c"]}}\n</tool_call>\n'
BAD = '<tool_call>\n<function=search_web英文>\n<parameter=queries>\n["a"]\n</parameter v2="">\n</function>\n'


def _time(text: str, fmt: str) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
        best = min(best, time.perf_counter() - t0)
    assert not [f for f in ta.findings if f.category == "internal_error"]
    return best


def test_turn_without_markup_is_fast() -> None:
    plain = "The bridge was completed in 1887, according to the council report. " * 15000  # ~1 MB
    assert _time(plain, "qwen3_coder") < 0.05
    think = "<think>\n" + "compare a < b and b > c; " * 40000 + "\n</think>\nThe answer is 4."  # ~1 MB reasoning
    assert _time(think, "qwen3_coder") < 0.5


def test_many_calls_scale_linearly() -> None:
    for unit, fmt in ((XML, "qwen3_coder"), (HERMES, "hermes"), (BAD, "qwen3_coder")):
        small = _time(unit * 400, fmt)
        large = _time(unit * 1600, fmt)
        assert large < 10 * max(small, 1e-3), (fmt, small, large)  # linear: ~4x; quadratic: ~16x
        assert large / 1600 < 0.005  # well under 5 ms per call even on a busy machine


def test_non_string_input_does_not_raise() -> None:
    ta = analyze_turn(None, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())  # type: ignore[arg-type]
    assert ta.calls == [] and ta.spans == []
    ta = analyze_turn(XML, tool_format="glm", tools=[{"bad": 1}], context=None)  # type: ignore[arg-type]
    assert ta.calls and ta.calls[0].function_name == "search_web"

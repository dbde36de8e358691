"""The classifier's fast path (``trajlab.toolcalls.fastpath``) gives exactly what the full pipeline gives.

Every turn is classified twice, with the fast path on and off, and the results (calls, findings, spans) must be
equal: on generated well-formed turns of both formats (with and without a schema, odd but legal whitespace,
think blocks, preambles), on the same turns after random mutations (so the fast path must notice every
deviation and fall back), and on every assistant turn of the committed sample runs. A last group checks that
the fast path does engage on canonical turns, so it cannot silently turn into dead code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from helpers.turns import FRAGMENTS, TOOLS, mutated_turn, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajlab.ingest import detect_format, discover, iter_records, plan_tasks
from trajlab.model import RawTrajectory, TurnAnalysis, TurnContext
from trajlab.toolcalls import analyze as analyze_mod
from trajlab.toolcalls import analyze_turn, fastpath
from trajlab.toolcalls.fastpath import fast_calls
from trajlab.toolcalls.formats.qwen3_coder.lexer import TAG_RE
from trajlab.toolcalls.ruleset import get_ruleset
from trajlab.toolcalls.schema import tool_index
from trajlab.toolcalls.think import think_regions, turn_segments
from trajlab.trajectory import analyze_trajectory

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])



# -- helpers -------------------------------------------------------------------------------------------------


@contextmanager
def full_pipeline() -> Iterator[None]:
    """Switch the fast path off (the full pipeline classifies every turn)."""
    saved = analyze_mod.FAST_PATH
    analyze_mod.FAST_PATH = False
    try:
        yield
    finally:
        analyze_mod.FAST_PATH = saved


def as_data(ta: TurnAnalysis) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    return [asdict(c) for c in ta.calls], [asdict(f) for f in ta.findings], [asdict(s) for s in ta.spans]


def both(text: str, fmt: str, tools: list[dict[str, Any]] | None, spans: bool = True,
         ctx: TurnContext | None = None) -> tuple[Any, Any]:
    ctx = ctx or TurnContext()
    fast = analyze_turn(text, tool_format=fmt, tools=tools, context=ctx, spans=spans)
    with full_pipeline():
        full = analyze_turn(text, tool_format=fmt, tools=tools, context=ctx, spans=spans)
    return as_data(fast), as_data(full)


def assert_same(text: str, fmt: str, tools: list[dict[str, Any]] | None) -> None:
    for spans in (True, False):
        fast, full = both(text, fmt, tools, spans)
        assert fast == full, (text, fmt, spans)


def engages(text: str, fmt: str, tools: list[dict[str, Any]] | None) -> bool:
    """Whether the fast path answers for ``text`` by itself (the way :func:`analyze._analyze` calls it)."""
    think = think_regions(text) if "think>" in text else []
    segments = turn_segments(len(text), think)
    return fast_calls(text, fmt, tool_index(tools), segments, get_ruleset(()), True) is not None


FMTS = st.sampled_from(["qwen3_coder", "hermes"])
SCHEMAS = st.sampled_from([TOOLS, None])


@SETTINGS
@given(st.data(), FMTS, SCHEMAS)
def test_same_on_canonical_turns(data: Any, fmt: str, tools: list[dict[str, Any]] | None) -> None:
    assert_same(data.draw(turn(fmt, canonical=True)), fmt, tools)


@SETTINGS
@given(st.data(), FMTS, SCHEMAS, st.sampled_from(["qwen3_coder", "hermes", "none"]))
def test_same_on_irregular_turns(data: Any, fmt: str, tools: list[dict[str, Any]] | None, as_fmt: str) -> None:
    assert_same(data.draw(turn(fmt, canonical=False)), as_fmt, tools)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), FMTS, SCHEMAS)
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_same_on_mutated_turns(data: Any, fmt: str, tools: list[dict[str, Any]] | None) -> None:
    assert_same(data.draw(mutated_turn(fmt)), fmt, tools)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS + ["search_web", "queries", "abc", "[1]"]), max_size=30).map("".join),
       FMTS, SCHEMAS)
def test_same_on_markup_soup(text: str, fmt: str, tools: list[dict[str, Any]] | None) -> None:
    assert_same(text, fmt, tools)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS + ["function", "parameter", "tool_call", "/", "\t", "x"]), max_size=30)
       .map("".join))
def test_tag_grammar_agrees_with_the_lexer(text: str) -> None:
    """The fast path finds a tag exactly where the qwen3_coder lexer's regex starts a match."""
    lexer = [m.start() for m in TAG_RE.finditer(text)]
    fast = [m.start() for m in fastpath._NEXT_MARKUP.finditer(text) if text[m.start()] == "<"]
    assert lexer == fast


def test_same_with_context_flags() -> None:
    text = "<tool_call>\n<function=search_web>\n<parameter=queries>\n[\"a\"]\n</parameter>\n</function>\n</tool_call>"
    for ctx in (TurnContext(is_last_turn=True, output_truncated=True, forbids_suffix=True), TurnContext()):
        for tail in ("", "\ntext after"):
            fast, full = both(text + tail, "qwen3_coder", TOOLS, ctx=ctx)
            assert fast == full


# -- the fast path engages -------------------------------------------------------------------------------------


CANONICAL = [
    ("qwen3_coder", TOOLS, "<tool_call>\n<function=search_web>\n<parameter=queries>\n[\"GDP\"]\n</parameter>\n"
                           "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>"),
    ("qwen3_coder", TOOLS, "<think>\nI should search.\n</think>\n\nLet me search.\n\n<tool_call>\n<function=fetch_web>\n"
                           "<parameter=urls>\n[\"https://a.b\"]\n</parameter>\n</function>\n</tool_call>\n"
                           "<tool_call>\n<function=search_web>\n<parameter=queries>\n[]\n</parameter>\n</function>\n"
                           "</tool_call>\n"),
    ("qwen3_coder", None, "<tool_call>\n<function=anything>\n<parameter=q>\nnull\n</parameter>\n</function>\n</tool_call>"),
    ("hermes", TOOLS, '<think>\nok\n</think>\n\n<tool_call>\n{"name": "search_web", "arguments": {"queries": ["GDP"], '
                      '"limit": 3}}\n</tool_call>'),
    ("hermes", None, '<tool_call>\n{"name": "anything", "arguments": {}}\n</tool_call>'),
]


@pytest.mark.parametrize(("fmt", "tools", "text"), CANONICAL)
def test_engages_on_canonical_turns(fmt: str, tools: list[dict[str, Any]] | None, text: str) -> None:
    assert engages(text, fmt, tools)
    fast, full = both(text, fmt, tools)
    assert fast == full
    assert fast[0] and all(c["status"] == "ok" for c in fast[0]) and not fast[1]


@SETTINGS
@given(st.data(), FMTS)
def test_engages_on_generated_canonical_turns(data: Any, fmt: str) -> None:
    text = data.draw(turn(fmt, canonical=True))
    for tools in (TOOLS, None):
        fast, full = both(text, fmt, tools)
        assert fast == full
        assert not fast[1], fast[1]  # valid by construction: no finding at all ...
        assert engages(text, fmt, tools), text  # ... so the fast path answers


@pytest.mark.parametrize(("fmt", "text"), [
    ("qwen3_coder", "<tool_call>\n<function=search_web>\n<parameter=queries>\n[\"a\"]\n</parameter>\n</function>\n"
                    "</tool_call>\ntrailing text"),
    ("qwen3_coder", "<think>\n<tool_call>\n</think>\n<tool_call>\n<function=search_web>\n<parameter=queries>\n[]\n"
                    "</parameter>\n</function>\n</tool_call>"),
    ("qwen3_coder", "<tool_call>\n<function=search_web>\n<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>"),
    ("hermes", '<tool_call>\n{"name": "search_web", "arguments": {"queries": [], "queries": []}}\n</tool_call>'),
])
def test_falls_back_when_not_certain(fmt: str, text: str) -> None:
    assert not engages(text, fmt, TOOLS)
    fast, full = both(text, fmt, TOOLS)
    assert fast == full and fast[1]


# -- the sample runs ----------------------------------------------------------------------------------------


def _records(root: Path) -> Iterator[RawTrajectory]:
    files, _ = discover([root])
    for path, rel in files:
        fmt, _why = detect_format(path)
        if fmt is None:
            continue
        for task in plan_tasks(path, rel, fmt):
            for rec in iter_records(task):
                if isinstance(rec, RawTrajectory):
                    yield rec


@pytest.mark.parametrize("run", ["qwen35_xml_run", "qwen3_hermes_run", "qwen35_xml_run_v07", "verl_tool_run",
                                 "openai_messages"])
def test_same_on_every_sample_turn(run: str) -> None:
    n_turns = n_fast = 0
    for rec in _records(SAMPLE / run):
        fast = analyze_trajectory(rec, with_spans=True)
        with full_pipeline():
            full = analyze_trajectory(rec, with_spans=True)
        assert (fast.n_calls, fast.n_malformed, fast.truncated) == (full.n_calls, full.n_malformed, full.truncated)
        for (turn_, a), (_, b) in zip(fast.turns, full.turns, strict=True):
            if a is None:
                continue
            n_turns += 1
            assert as_data(a) == as_data(b), (rec.source_path, rec.source_line, turn_.index)
            if a.calls and engages(turn_.text, fast.tool_format, fast.tools):
                n_fast += 1
    assert n_turns > 0
    if run in ("qwen35_xml_run", "qwen3_hermes_run"):
        assert n_fast > n_turns // 4, (n_fast, n_turns)


def test_a_reopened_think_block_goes_to_the_full_pipeline() -> None:
    """``<think><think>…</think>`` before a canonical call: the fast path must not answer (found by the
    mutated-turns property: it returned the call without the ``unbalanced_think/reopened`` finding)."""
    text = ('<think><think>\nreasoning\n</think>\n\n<tool_call>\n<function=fetch_web>\n<parameter=urls>\n'
            '["https://a.b"]\n</parameter>\n</function>\n</tool_call>')
    tools = [{"name": "fetch_web", "description": "", "parameters": {"type": "object", "properties": {
        "urls": {"type": "array"}}, "required": ["urls"]}}]
    assert_same(text, "qwen3_coder", tools)
    fast, _full = both(text, "qwen3_coder", tools, False)
    assert any(f["rule_id"] == "qwen3_coder/unbalanced_think/reopened" for f in fast[1])

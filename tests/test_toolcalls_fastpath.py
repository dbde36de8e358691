"""The classifier's fast path (``trajlab.toolcalls.fastpath``) gives exactly what the full pipeline gives.

Every turn is classified twice, with the fast path on and off, and the results (calls, findings, spans) must be
equal: on generated well-formed turns of both formats (with and without a schema, odd but legal whitespace,
think blocks, preambles), on the same turns after random mutations (so the fast path must notice every
deviation and fall back), and on every assistant turn of the committed sample runs. A last group checks that
the fast path does engage on canonical turns, so it cannot silently turn into dead code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutations import mutate

from trajlab.analyze import analyze_trajectory
from trajlab.ingest import detect_format, discover, iter_records, plan_tasks
from trajlab.model import RawTrajectory, TurnAnalysis, TurnContext
from trajlab.toolcalls import analyze as analyze_mod
from trajlab.toolcalls import analyze_turn, fastpath
from trajlab.toolcalls.fastpath import fast_calls
from trajlab.toolcalls.format_qwen3_coder import TAG_RE
from trajlab.toolcalls.ruleset import get_ruleset
from trajlab.toolcalls.schema import tool_index

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOOLS: list[dict[str, Any]] = [
    {"name": "search_web", "description": "", "parameters": {"type": "object", "properties": {
        "queries": {"type": "array", "items": {"type": "string"}}, "limit": {"type": "integer"},
        "lang": {"type": "string", "enum": ["en", "de"]}, "safe": {"type": "boolean"},
        "score": {"type": "number"}, "opts": {"type": "object"}, "note": {"type": "string"},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "mode": {"$ref": "#/$defs/Mode"}},
        "required": ["queries"], "$defs": {"Mode": {"type": "string", "enum": ["a", "b"]}}}},
    {"name": "fetch_web", "description": "", "parameters": {"type": "object", "properties": {
        "urls": {"type": "array"}, "raw": {}}, "required": ["urls"]}},
    {"name": "open_tool", "description": "", "parameters": {"type": "object", "properties": {"x": {"type": "string"}},
                                                            "additionalProperties": True}},
]
NAMES = ["search_web", "fetch_web", "open_tool", "search_webs", "", " ", "fetch web", "x" * 300, "search_web英文"]
PARAMS = ["queries", "limit", "lang", "safe", "score", "opts", "note", "urls", "raw", "x", "zzz", "", "a b", "maybe",
          "mode"]
VALUES = ['["GDP 2020", "GDP 2021"]', "[]", "12", "-3", "abc", "en", "fr", "true", "False", "null", "NULL", "1.5",
          "2.0", '{"a": 1}', "{'a': 1}", "[true, null]", "", "line one\nline two", "a < b", "<div>x</div>",
          '{"name": "search_web", "arguments": {}}', "\n", "x\n", "\nx", "<tool_call>", "</parameter", "<function=f>",
          "< tool_call>", "</ parameter>", "中文", "\\n", "[1, 2", "“q”", "9007199254740993", "a", "b"]
JSON_VALUES: list[Any] = [["GDP"], [], 12, -3, 1.5, 2.0, "abc", "en", "fr", True, False, None, {"a": 1}, [True, None],
                          "", "a < b", "<tool_call>", "</tool_call>", "中文", "line\nline"]
SEPS = ["\n", "\n", "\n", "", " ", "\n\n", "\r\n", "\t", "\u2028", "x"]
# well-formed parameters of each tool, and values that fit each parameter's type (XML text / JSON value)
TOOL_PARAMS = {"search_web": ["queries", "limit", "lang", "safe", "score", "opts", "note", "maybe", "mode"],
               "fetch_web": ["urls", "raw"],
               "open_tool": ["x", "extra"]}
REQUIRED = {"search_web": ["queries"], "fetch_web": ["urls"], "open_tool": []}
XML_OK = {"queries": ['["GDP 2020", "GDP 2021"]', "[]", '["a < b"]'], "limit": ["12", "-3"], "lang": ["en", "de"],
          "safe": ["true", "False"], "score": ["1.5", "-3"], "opts": ['{"a": 1}', "{}"], "maybe": ["null"],
          "mode": ["a"],
          "note": ["abc", "line one\nline two", "a < b", "<div>x</div>", "", "\n", "x\n", "中文",
                   '{"name": "search_web", "arguments": {}}'],
          "urls": ['["https://a.b"]'], "raw": ["abc", "[1, 2]"], "x": ["abc"], "extra": ["anything"]}
JSON_OK: dict[str, list[Any]] = {
    "queries": [["GDP"], []], "limit": [12, -3], "lang": ["en"], "safe": [True, False], "score": [1.5, 2],
    "opts": [{"a": 1}, {}], "note": ["abc", "a < b", "中文", "line\nline", ""], "urls": [["https://a.b"]],
    "raw": ["x", 1, None], "x": ["abc"], "extra": [1, "y"], "maybe": [3, None], "mode": ["b"]}
FILLER = ["", "I'll search for it.", "Let me check.\n", "See <b>bold</b>.", 'He said "name" twice.',
          "call <tool_call> later", "<|im_end|>", "{\"name\": \"fetch_web\", \"arguments\": {\"urls\": []}}", "a > b",
          "<function_calls>", "<search_web>q</search_web>", "</think>", "<think>", "\u00a0"]
FRAGMENTS = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", ">", "<", "=",
             "\n", " ", '"', "{", "}", ",", ":", '"name"', "<think>", "</think>", ' v2=""', "/>", "null", "英文", "\\",
             "</parameter1>", "<parameter=a=b", "<tool_call>>", "</ tool_call>", "<|tool_call>", "[TOOL_CALLS]"]


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
    think = analyze_mod._think_regions(text) if "think>" in text else []
    segments = analyze_mod._segments(len(text), think)
    return fast_calls(text, fmt, tool_index(tools), segments, get_ruleset(()), True) is not None


# -- generated turns -----------------------------------------------------------------------------------------


@st.composite
def well_formed_params(draw: Any, name: str) -> list[str]:
    optional = [p for p in TOOL_PARAMS[name] if p not in REQUIRED[name]]
    return REQUIRED[name] + draw(st.lists(st.sampled_from(optional), max_size=3, unique=True))


@st.composite
def xml_call(draw: Any, canonical: bool) -> str:
    if canonical:  # valid by construction: declared name and parameters, required ones present, values fit
        name = draw(st.sampled_from(NAMES[:3]))
        params = [(p, draw(st.sampled_from(XML_OK[p]))) for p in draw(well_formed_params(name))]
        params = draw(st.permutations(params))
    else:
        name = draw(st.sampled_from(NAMES))
        params = [(p, draw(st.sampled_from(VALUES))) for p in draw(st.lists(st.sampled_from(PARAMS), max_size=4))]
    sep = (lambda: draw(st.sampled_from(["\n", "\n", "\n", " \n", ""]))) if canonical else (
        lambda: draw(st.sampled_from(SEPS)))
    parts = [f"<tool_call>{sep()}<function={name}>{sep()}"]
    for p, v in params:
        inline = canonical and "\n" not in v and v and draw(st.booleans())
        nl = "\n" if canonical else sep()  # inside the value, extra whitespace would be part of it
        parts.append(f"<parameter={p}>{v}</parameter>{sep()}" if inline else
                     f"<parameter={p}>{nl}{v}{nl}</parameter>{sep()}")
    parts.append(f"</function>{sep()}</tool_call>")
    return "".join(parts)


@st.composite
def hermes_call(draw: Any, canonical: bool) -> str:
    if canonical:
        name = draw(st.sampled_from(NAMES[:3]))
        args = {p: draw(st.sampled_from(JSON_OK[p])) for p in draw(well_formed_params(name))}
    else:
        name = draw(st.sampled_from(NAMES))
        args = {k: draw(st.sampled_from(JSON_VALUES)) for k in draw(st.lists(st.sampled_from(PARAMS), max_size=4))}
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([None, (",", ":")])))
    if not canonical:
        body = draw(st.sampled_from([body, body.replace('"arguments": {', '"arguments": {"queries": [], ', 1),
                                     body.replace('"name"', '"name": "x", "name"', 1), body + "}", "{" + body,
                                     body.replace('"arguments"', '"parameters"', 1), body[:-1],
                                     json.dumps({"name": name, "arguments": json.dumps(args)})]))
    nl = draw(st.sampled_from(["\n", "", " \n"] if canonical else SEPS))
    return f"<tool_call>{nl}{body}{nl}</tool_call>"


@st.composite
def turn(draw: Any, fmt: str, canonical: bool) -> str:
    make = xml_call if fmt == "qwen3_coder" else hermes_call
    calls = draw(st.lists(make(canonical), min_size=1, max_size=3))
    think = draw(st.sampled_from(["", "<think>\nreasoning\n</think>\n\n", "reasoning started in the prompt\n</think>\n\n",
                                  "<think>\nI will use <b>html</b> and \"quotes\".\n</think>\n"]))
    pre = draw(st.sampled_from(FILLER[:4] if canonical else FILLER))
    between = draw(st.sampled_from(["\n", "\n\n"] if canonical else ["\n", "\n\n", " then ", "\n<think>x</think>\n"]))
    after = draw(st.sampled_from(["", "\n", "  \n"] if canonical else ["", "\n", "done", "<|im_end|>", ">", "\n<think>y"]))
    return think + pre + between.join(calls) + after


@st.composite
def mutated_turn(draw: Any, fmt: str) -> str:
    return mutate(draw, draw(turn(fmt, canonical=True)), st.sampled_from(FRAGMENTS))


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

"""Property tests (hypothesis): the classifier never raises, spans tile the text, offsets stay in bounds, and
well-formed calls built from the grammar give no error/warning and parse exactly like verl.

The reference parsers (``tests/helpers/verl_reference.py``) are written independently of trajlab from the description of verl 0.9.1's
``qwen3_coder`` and ``hermes`` parsers in shared/spec/parsers.md §A.6 and verl-formats.md §2.3.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.mutations import mutate
from helpers.verl_reference import ref_hermes, ref_qwen3_coder
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn, load_taxonomy

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAXONOMY = set(load_taxonomy())
SEVERITIES = {"error", "warning", "info"}
KINDS = {"structural", "function_name", "param_name", "param_value", "text", "think"}

# -- well-formed calls from the grammar ----------------------------------------------------------------

MARKERS = ("<tool_call", "</tool_call", "<function", "</function", "<parameter", "</parameter", "<think", "</think",
           '"name"', '"function"', "<|", "[TOOL_CALLS]", "to=functions", "<｜", "<minimax", "<seed")
ALPHABET = st.sampled_from(list("abcxyzXYZ019 _-.,:;!?/\\'\"(){}[]<>=\n\t#@$%&*+~|") + ["é", "中", "🙂", "\u2028"])
free_text = st.text(ALPHABET, max_size=40).filter(lambda s: not any(m in s for m in MARKERS))
idents = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)


def _no_markers(s: str) -> bool:
    return not any(m in s for m in MARKERS)


@st.composite
def typed_param(draw: Any) -> tuple[str, Any, str]:
    """(schema type, python value, raw XML text as a chat template would render it)."""
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "array", "object"]))
    if kind == "string":
        v = draw(free_text)
        return kind, v, v
    if kind == "integer":
        v = draw(st.integers(-10**6, 10**6))
        return kind, v, str(v)
    if kind == "number":
        v = draw(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))
        return kind, v, repr(v)
    if kind == "boolean":
        v = draw(st.booleans())
        return kind, v, draw(st.sampled_from([str(v), str(v).lower()]))
    scalars = st.one_of(st.integers(-99, 99), free_text.filter(lambda s: "\\" not in s), st.booleans(), st.none())
    if kind == "array":
        v = draw(st.lists(scalars, max_size=4))
        return kind, v, json.dumps(v, ensure_ascii=False)
    v = draw(st.dictionaries(idents, scalars, max_size=3))
    return kind, v, json.dumps(v, ensure_ascii=False)


@st.composite
def xml_turn(draw: Any) -> tuple[str, list[dict[str, Any]], bool]:
    """A well-formed qwen3_coder turn: optional think block and preamble, one or two calls, its tool schemas."""
    tools: list[dict[str, Any]] = []
    calls = []
    for _ in range(draw(st.integers(1, 2))):
        name = draw(idents.filter(lambda n: all(n != t["name"] for t in tools)))
        pnames = draw(st.lists(idents, max_size=4, unique=True))
        props, parts = {}, []
        inline = draw(st.booleans())
        for pn in pnames:
            kind, _v, raw = draw(typed_param())
            props[pn] = {"type": kind}
            if inline and "\n" not in raw and raw:
                parts.append(f"<parameter={pn}>{raw}</parameter>\n")
            else:
                parts.append(f"<parameter={pn}>\n{raw}\n</parameter>\n")
        required = draw(st.lists(st.sampled_from(pnames), unique=True)) if pnames else []
        tools.append({"name": name, "description": "", "parameters": {"type": "object", "properties": props,
                                                                       "required": required}})
        calls.append(f"<tool_call>\n<function={name}>\n{''.join(parts)}</function>\n</tool_call>")
    pre = draw(free_text)
    think = draw(st.one_of(st.just(""), free_text.map(lambda t: f"<think>\n{t}\n</think>\n\n")))
    sep = draw(st.sampled_from(["\n", "\n\n"]))
    text = think + (pre + "\n\n" if pre.strip() else "") + sep.join(calls)
    return text, tools, bool(pre.strip())


@st.composite
def hermes_turn(draw: Any) -> tuple[str, list[dict[str, Any]]]:
    name = draw(idents)
    pnames = draw(st.lists(idents, max_size=4, unique=True))
    props, args = {}, {}
    for pn in pnames:
        kind, v, _raw = draw(typed_param())
        props[pn] = {"type": kind}
        args[pn] = v
    tools = [{"name": name, "description": "", "parameters": {"type": "object", "properties": props}}]
    compact = draw(st.booleans())
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=draw(st.booleans()),
                      separators=(",", ":") if compact else None)
    assume(_no_markers(body.replace('"name"', "")))
    nl = draw(st.sampled_from(["\n", ""]))
    think = draw(st.one_of(st.just(""), free_text.map(lambda t: f"<think>\n{t}\n</think>\n\n")))
    return f"{think}<tool_call>{nl}{body}{nl}</tool_call>", tools


def check_invariants(text: str, ta: Any) -> None:
    n = len(text)
    pos = 0
    for s in ta.spans:
        assert s.kind in KINDS
        assert s.start == pos and s.end > s.start, (s, pos)
        pos = s.end
    assert pos == n
    for f in ta.findings:
        assert f.category in TAXONOMY
        assert f.category != "internal_error", f.message
        assert f.severity in SEVERITIES
        assert 0 <= f.start <= f.end <= n
        assert f.message
        assert f.call_index is None or 0 <= f.call_index < len(ta.calls)
    for i, c in enumerate(ta.calls):
        assert c.call_index == i
        assert 0 <= c.start <= c.end <= n and c.raw == text[c.start:c.end]
        sevs = {f.severity for f in ta.findings if f.call_index == i}  # error: malformed; warnings only: warning
        assert c.status == ("malformed" if "error" in sevs else "warning" if "warning" in sevs else "ok"), (
            c.status, sevs, c.categories)
        bad = {f.category for f in ta.findings if f.call_index == i and f.severity in ("error", "warning")}
        assert set(c.categories) == bad


# -- properties ----------------------------------------------------------------------------------------


@SETTINGS
@given(xml_turn(), st.booleans())
def test_well_formed_xml_matches_verl(turn: tuple[str, list[dict[str, Any]], bool], forbid: bool) -> None:
    text, tools, _ = turn
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=tools, context=TurnContext(forbids_suffix=forbid))
    check_invariants(text, ta)
    assert not [f for f in ta.findings if f.severity in ("error", "warning")], ta.findings
    # what verl executes: the intended arguments, or -- where its conversion diverges (JSON `true`/`null`
    # inside an array that literal_eval cannot read, `null` as a string's text) -- its own reading, said so
    executed = [(c.function_name, c.verl_arguments if c.verl_executes == "differently" else c.arguments)
                for c in ta.calls]
    assert executed == ref_qwen3_coder(text, tools)
    for c in ta.calls:
        diverges = {f.category for f in ta.findings if f.call_index == c.call_index} >= {"verl_conversion_divergence"}
        assert c.verl_executes == "as_intended" or (c.verl_executes == "differently" and diverges), c
    assert all(c.status == "ok" and c.matched_tool == c.function_name for c in ta.calls)


@SETTINGS
@given(xml_turn())
def test_well_formed_xml_without_schema(turn: tuple[str, list[dict[str, Any]], bool]) -> None:
    text, tools, _ = turn
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=None, context=TurnContext())
    check_invariants(text, ta)
    assert not [f for f in ta.findings if f.severity in ("error", "warning")]
    assert [(c.function_name, c.arguments) for c in ta.calls] == ref_qwen3_coder(text, [])


@SETTINGS
@given(hermes_turn())
def test_well_formed_hermes_matches_verl(turn: tuple[str, list[dict[str, Any]]]) -> None:
    text, tools = turn
    ta = analyze_turn(text, tool_format="hermes", tools=tools, context=TurnContext())
    check_invariants(text, ta)
    assert not [f for f in ta.findings if f.severity in ("error", "warning")], ta.findings
    assert [(c.function_name, c.arguments) for c in ta.calls] == ref_hermes(text)


FRAGMENTS = st.sampled_from([
    "<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", ">", "<", "=",
    "\n", "search_web", "q", '"', "{", "}", "[", "]", ":", ",", '"name"', '"arguments"', "<think>", "</think>",
    ' v2=""', "/>", "1", "null", "true", "英文", "<function_calls>", '<invoke name="x">', "<|tool_call>",
    "</parameter v2=\"\">", "<name>", "</name>", "user", "{{", "}}", "“", "'", "\\", "<terminal_command>",
    "</terminal_command>", "<parameter=a=b", "</parameter1>", "<tool_call>>", "to=functions.x",
])
TOOLS = [{"name": "search_web", "parameters": {"type": "object", "properties": {
    "q": {"type": "array"}, "n": {"type": "integer"}, "b": {"type": "boolean"}}, "required": ["q"]}}]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=40).map("".join),
       st.sampled_from(["qwen3_coder", "hermes", "none"]), st.booleans())
def test_never_raises_on_markup_soup(text: str, fmt: str, with_tools: bool) -> None:
    ta = analyze_turn(text, tool_format=fmt, tools=TOOLS if with_tools else None, context=TurnContext())
    check_invariants(text, ta)
    for c in ta.calls:
        if c.repaired is not None:  # a repair is only offered when it classifies clean
            again = analyze_turn(c.repaired, tool_format=fmt if fmt != "none" else c.format,
                                 tools=TOOLS if with_tools else None, context=TurnContext())
            assert len(again.calls) == 1
            assert not [f for f in again.findings if f.severity in ("error", "warning")]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["qwen3_coder", "hermes", "none"]))
def test_never_raises_on_arbitrary_text(text: str, fmt: str) -> None:
    ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
    check_invariants(text, ta)


@st.composite
def mutated(draw: Any) -> tuple[str, str, list[dict[str, Any]]]:
    if draw(st.booleans()):
        text, tools, _ = draw(xml_turn())
        fmt = "qwen3_coder"
    else:
        text, tools = draw(hermes_turn())
        fmt = "hermes"
    return mutate(draw, text, FRAGMENTS), fmt, tools


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
@settings(max_examples=300, deadline=None)
@given(mutated())
def test_never_raises_on_mutated_calls(case: tuple[str, str, list[dict[str, Any]]]) -> None:
    text, fmt, tools = case
    ta = analyze_turn(text, tool_format=fmt, tools=tools, context=TurnContext(forbids_suffix=True))
    check_invariants(text, ta)
    for c in ta.calls:
        if c.repaired is not None:
            again = analyze_turn(c.repaired, tool_format=fmt, tools=tools, context=TurnContext())
            assert len(again.calls) == 1
            assert not [f for f in again.findings if f.severity in ("error", "warning")]
            assert again.calls[0].arguments == c.repaired_arguments

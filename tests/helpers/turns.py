"""Hypothesis strategies for generated assistant turns in both call formats (Qwen3-coder XML and Hermes JSON):
canonical turns that are valid by construction, loose ones, and mutated ones; with the tool schema they are
checked against. Shared by the fast-path and vectorized-scan differential tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from helpers.mutations import mutate

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

"""The Llama-3 JSON call format (``llama3_json``: Llama 3.1-3.3, Llama 4): correct calls give no finding, with or
without ``<|python_tag|>`` and ``"type": "function"``, one or several (``;``-separated or back to back); detected
from the Llama templates' tool block and from the markup without taking Hermes calls; broken calls named."""

from __future__ import annotations

import json

import pytest

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn
from trajlab.toolcalls.detect import detect_tool_format
from trajlab.toolcalls.verl_parser import verl_calls

TOOLS = [
    {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "search", "description": "Search.", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}, "required": ["query"]}},
]
G = '{"name": "get_weather", "parameters": {"city": "Beijing", "days": 3}}'
S = '{"name": "search", "parameters": {"query": "Beijing warnings"}}'
LLAMA31_PROMPT = ("user\n\nGiven the following functions, please respond with a JSON for a function call with its "
                  "proper arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function "
                  "name, \"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
                  + json.dumps({"type": "function", "function": TOOLS[0]}, indent=4) + "\n\nWeather?assistant\n\n")


def _run(text: str, fmt: str = "none"):
    return analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())


GOOD = {
    "plain": (G, 1),
    "with_type": ('{"type": "function", "name": "get_weather", "parameters": {"city": "Beijing", "days": 3}}', 1),
    "python_tag": ("<|python_tag|>" + G, 1),
    "semicolons": (G + "; " + S, 2),
    "back_to_back": (G + S, 2),
    "newline_separated": (G + "\n" + S, 2),
    "pretty_printed": (json.dumps(json.loads(G), indent=2), 1),
}


@pytest.mark.parametrize("kind", GOOD)
@pytest.mark.parametrize("fmt", ["none", "llama3_json"])
def test_correct_calls_give_no_finding(kind, fmt):
    text, n = GOOD[kind]
    ta = _run(text, fmt)
    assert [c.format for c in ta.calls] == ["llama3_json"] * n
    assert all(c.status == "ok" for c in ta.calls)
    assert ta.findings == [], [f.rule_id for f in ta.findings]
    assert ta.calls[0].arguments == {"city": "Beijing", "days": 3}


def test_the_shape_with_type_reads_like_the_one_without():
    a = _run(GOOD["plain"][0])
    b = _run(GOOD["with_type"][0])
    assert [(c.function_name, c.arguments, c.status) for c in a.calls] == [
        (c.function_name, c.arguments, c.status) for c in b.calls]


BROKEN = {
    "invalid_json": (G.replace('"days": 3', '"days": ,3'), "llama3_json/invalid_json/"),
    "truncated": (G[:40], "llama3_json/truncated_call/inside_json"),
    "garbled_name": (G.replace("get_weather", "get_weather英文"), "llama3_json/garbled_function_name/"),
    "undeclared": (G.replace("get_weather", "get_forecast"), "llama3_json/unknown_function/undeclared"),
    "parameters_string": ('{"name": "get_weather", "parameters": "{\\"city\\": \\"Beijing\\"}"}',
                          "llama3_json/invalid_arguments/arguments_string"),
    "parameters_not_object": ('{"name": "get_weather", "parameters": ["Beijing"]}',
                              "llama3_json/invalid_arguments/arguments_not_object"),
}


@pytest.mark.parametrize("kind", BROKEN)
def test_broken_calls_are_named_on_their_span(kind):
    text, rule = BROKEN[kind]
    ta = _run(text, "llama3_json")
    hit = [f for f in ta.findings if f.rule_id.startswith(rule)]
    assert hit, [f.rule_id for f in ta.findings]
    assert hit[0].severity == "error" and 0 <= hit[0].start < hit[0].end <= len(text)
    assert ta.calls and ta.calls[0].status == "malformed"


def test_arguments_key_is_read_and_noted():
    ta = _run('{"name": "get_weather", "arguments": {"city": "Beijing"}}', "llama3_json")
    assert ta.calls[0].status == "ok" and ta.calls[0].arguments == {"city": "Beijing"}
    assert [(f.rule_id, f.severity) for f in ta.findings] == [("llama3_json/invalid_arguments/llama_arguments_key",
                                                                "info")]


def test_detection_from_the_prompt_and_the_markup_without_confusing_hermes():
    assert detect_tool_format(LLAMA31_PROMPT) == "llama3_json"
    assert detect_tool_format("", G) == "llama3_json"
    assert detect_tool_format("", "<|python_tag|>" + G) == "llama3_json"
    assert detect_tool_format("", '<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>') == "hermes"
    hermes_prompt = ('You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n</tools>\n'
                     'For each function call, return a json object with function name and arguments within '
                     '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
                     '<args-json-object>}\n</tool_call>')
    assert detect_tool_format(hermes_prompt, G) == "hermes"
    # in a Hermes run a bare JSON object is still a Hermes call without its <tool_call> (what verl's parser needs)
    ta = _run('{"name": "get_weather", "arguments": {"city": "Beijing"}}', "hermes")
    assert [f.rule_id for f in ta.findings] == ["hermes/missing_call_open/bare_json"]


def test_verl_has_no_llama_parser():
    assert verl_calls(G, "llama3_json", None) is None


def test_tool_turns_are_split_stripped_and_kept():
    from trajlab.ingest.turns import split_turns

    stripped = G + 'ipython\n\n{"temp": 20}assistant\n\nIt is sunny.'
    kept4 = (G + '<|eot|><|header_start|>ipython<|header_end|>\n\n{"temp": 20}<|eot|><|header_start|>assistant'
             '<|header_end|>\n\nIt is sunny.')
    for out in (stripped, kept4):
        turns = split_turns(out)
        assert [t.role for t in turns] == ["assistant", "tool", "assistant"]
        assert turns[0].text == G and turns[2].text == "It is sunny."

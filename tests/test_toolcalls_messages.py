"""Messages say what is in the text and what the parsers do with it: no message restates the rule it says was
broken as if it were the observation, names declared tools when no schema is known, or says the trajectory ends
when another call of the turn still runs. Cases follow shapes from other projects' parser test suites (vLLM,
SGLang), written anew here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn

WEATHER = [{"name": "get_current_weather", "description": "",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "state": {"type": "string"}},
                           "required": ["city"]}}]


def findings(text: str, fmt: str, tools: list[dict[str, Any]] | None) -> list[tuple[str, str, str]]:
    ta = analyze_turn(text, tool_format=fmt, tools=tools, context=TurnContext(schema_known=tools is not None),
                      spans=False)
    return [(f.category, f.severity, f.message) for f in ta.findings]


@pytest.mark.parametrize("fmt, text, says", [
    # indented argument tags (the layout a lenient parser accepts): the message names the indentation
    ("glm45", "<tool_call>get_current_weather\n    <arg_key>city</arg_key>\n    <arg_value>Dallas</arg_value>\n"
              "    </tool_call>", "a newline and 4 spaces after the name, where the template writes a newline"),
    ("glm47", "<tool_call>get_current_weather\n<arg_key>city</arg_key><arg_value>Dallas</arg_value></tool_call>",
     "a newline after the name, where the template writes nothing"),
    ("glm45", "<tool_call>  get_current_weather<arg_key>city</arg_key>\n<arg_value>Dallas</arg_value>\n"
              "</tool_call>", "2 spaces before the name; nothing after the name, where the template writes a newline"),
])
def test_glm_layout_says_what_differs(fmt: str, text: str, says: str) -> None:
    (got,) = [f for f in findings(text, fmt, WEATHER) if f[0] == "malformed_tag"]
    assert got[1] == "warning" and says in got[2]
    assert "the name is followed by a newline" not in got[2] and "nothing separates" not in got[2]


@pytest.mark.parametrize("fmt", ["glm45", "glm47"])
def test_glm_template_layout_has_no_layout_finding(fmt: str) -> None:
    sep = "\n" if fmt == "glm45" else ""
    text = f"<tool_call>get_current_weather{sep}<arg_key>city</arg_key>{sep}<arg_value>Dallas</arg_value>{sep}</tool_call>"
    assert [f for f in findings(text, fmt, WEATHER) if f[0] == "malformed_tag"] == []


def test_kimi_id_messages_do_not_restate_the_broken_rule() -> None:
    text = ('<|tool_calls_section_begin|><|tool_call_begin|>0<|tool_call_argument_begin|>'
            '{"city": "Tokyo", "state": "x"}<|tool_call_end|><|tool_calls_section_end|>')
    got = findings(text, "kimi_k2", WEATHER)
    tags = [m for c, _s, m in got if c == "malformed_tag"]
    assert len(tags) == 2 and "the id starts with" not in tags[0] and "the id ends with" not in tags[1]
    assert "the template writes `functions.NAME:IDX`" in tags[0]
    (unknown,) = [m for c, _s, m in got if c == "unknown_function"]
    # verl's kimi parser maps the name onto a declared tool: no 'Unknown function' answer is promised
    assert "Unknown function" not in unknown and "maps it to a declared tool" in unknown


def test_garbled_name_without_schema_names_no_declared_tool() -> None:
    text = "<tool_call>\n<function={{ tc.name }}>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
    (got,) = findings(text, "qwen3_coder", None)
    assert got[0] == "garbled_function_name" and "declared tool" not in got[2]
    assert "reads as the tool name `tc.name`" in got[2] and "No tool schema is known" in got[2]
    (bare,) = findings(text.replace("{{ tc.name }}", "{{ }}"), "qwen3_coder", None)
    assert "no clean tool name can be read" in bare[2] and "clean part is taken" not in bare[2]


def test_a_dropped_block_next_to_a_real_call_does_not_end_the_trajectory() -> None:
    tools = [{"name": "f", "description": "", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}},
                                                              "required": ["a"]}}]
    text = ("I'll show the syntax: <tool_call>example</tool_call>. Now the real one:\n"
            "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>")
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=tools, context=TurnContext(schema_known=True),
                      spans=False)
    assert [c.status for c in ta.calls] == ["malformed", "ok"]
    (empty,) = [f for f in ta.findings if f.category == "empty_call"]
    assert "with no other call in the turn, the trajectory ends" in empty.message
    assert "drop it and the trajectory ends" not in empty.message


def test_kimi_calls_begun_inside_reasoning_without_a_section_are_reported() -> None:
    """Kimi-K2-Thinking writes calls inside its reasoning; begun with the special token but without the section
    opener, verl drops them. Each is a call with missing_call_open, and no message says verl executes it."""
    tools = [{"name": "special_function", "description": "", "parameters": {"type": "object", "properties": {
        "arg1": {"type": "integer"}}}}, {"name": "python", "description": "", "parameters": {
            "type": "object", "properties": {"code": {"type": "string"}}}}]
    text = ("<think>I need to call.<|tool_call_begin|>functions.special_function:0<|tool_call_argument_begin|>"
            '{"arg1": 1}<|tool_call_begin|>functions.python:1<|tool_call_argument_begin|>{"code": "x"}')
    ta = analyze_turn(text, tool_format="kimi_k2", tools=tools, context=TurnContext(schema_known=True), spans=False)
    assert [c.function_name for c in ta.calls] == ["special_function", "python"]
    assert all(c.status == "malformed" and "call_inside_think" in c.categories for c in ta.calls)
    assert all("missing_call_open" in c.categories for c in ta.calls)  # verl drops the whole unopened section
    think = [f.message for f in ta.findings if f.category == "call_inside_think"]
    assert len(think) == 2 and all("does not execute it" in m for m in think)
    # no section was opened, so none is said to lack its end marker
    assert not [f for f in ta.findings if f.rule_id.endswith("missing_call_close/section_end")]


def test_a_tool_call_token_followed_by_prose_is_no_cut_off_json() -> None:
    """`<tool_call>` followed by prose (SGLang's 'opener inside content' case): the block holds no JSON; it is not
    reported as a JSON the text ends inside."""
    for text in ("The literal tag <tool_call> is mentioned here.", "<tool_call>no-newline"):
        got = findings(text, "hermes", None)
        cats = {c for c, _s, _m in got}
        assert "truncated_call" not in cats and {"empty_call", "missing_call_close"} <= cats, got
    cut = findings('<tool_call>\n{"name": "f", "argu', "hermes", None)
    assert "truncated_call" in {c for c, _s, _m in cut}


@pytest.mark.parametrize("text, verl_reads", [
    # a stray `</arg_key>`: verl's lazy pair regex runs the key on to the next value (vLLM PR 54971's shape)
    ("<tool_call>list_dir<arg_key>path</arg_key></arg_key><arg_value>/tmp/p</arg_value></tool_call>",
     '`{"path</arg_key>": "/tmp/p"}`'),
    # a doubled `<arg_key>`: the key starts at the first one
    ("<tool_call>list_dir<arg_key><arg_key>path</arg_key><arg_value>/tmp/x</arg_value></tool_call>",
     '`{"<arg_key>path": "/tmp/x"}`'),
    ("<tool_call>list_dir<arg_key>path</arg_key></tool_call>", "`{}`"),  # a key with no value at all: dropped
])
def test_glm_pairing_messages_say_what_verl_runs(text: str, verl_reads: str) -> None:
    from trajlab.toolcalls.formats.glm import verl_glm_arguments

    tools = [{"name": "list_dir", "description": "", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}}, "required": ["path"]}}]
    got = [m for c, _s, m in findings(text, "glm47", tools) if c == "malformed_tag" and "pairs keys" in m]
    assert got and all(f"runs the call with the arguments {verl_reads}" in m for m in got)
    assert not any("silently dropped" in m or "the value is lost" in m for m in got)
    body = text[len("<tool_call>"):-len("</tool_call>")]
    assert f"`{json.dumps(verl_glm_arguments(body), ensure_ascii=False)}`" == verl_reads


def test_json_shape_details_are_the_familys_own() -> None:
    """A JSON-encoded arguments string: hermes says what verl's hermes parser does; Kimi says what verl's kimi
    parser does (it replaces the arguments by {}), not the hermes sentence."""
    tools = [{"name": "todo", "description": "", "parameters": {"type": "object", "properties": {
        "items": {"type": "array"}}}}]
    kimi = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.todo:0<|tool_call_argument_begin|>'
            '"{\\"items\\": []}"<|tool_call_end|><|tool_calls_section_end|>')
    (k,) = [m for c, _s, m in findings(kimi, "kimi_k2", tools) if c == "invalid_arguments"]
    assert "double-encodes" not in k and "with `{}`" in k
    hermes = '<tool_call>\n{"name": "todo", "arguments": "{\\"items\\": []}"}\n</tool_call>'
    (h,) = [m for c, _s, m in findings(hermes, "hermes", tools) if c == "invalid_arguments"]
    assert "verl double-encodes the string" in h


def test_the_name_of_a_body_that_does_not_decode_is_the_first_one() -> None:
    """``"name": "selectFunctions\\ "arguments": {"function": {"name": "index"}}`` (a bug report's broken JSON):
    the call's name is the outer one, not a name further inside the arguments."""
    text = ('<tool_call>\n{"name": "selectFunctions\\ "arguments": {"function":{"name":"index","arguments":{}}}}\n'
            "</tool_call>")
    ta = analyze_turn(text, tool_format="hermes", tools=None, context=TurnContext(), spans=False)
    assert [(c.status, c.function_name) for c in ta.calls] == [("malformed", "selectFunctions")]

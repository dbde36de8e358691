"""Tag text inside parameter values: two readings per call.

Every place a tag string can appear inside a value (each of the six qwen3_coder tags, hermes frames inside a JSON
string, complete and incomplete literal blocks; at the start, middle and end of a value; inside a line or on a
line of its own) is checked for both readings: ``arguments`` (the call as the model wrote it, no phantom call
or parameter) and ``verl_executes`` / ``verl_arguments`` against an independent re-implementation of verl
0.9.1's parsers (``ref_qwen3_coder`` / ``ref_hermes`` in ``tests/helpers/verl_reference.py``). An error finding
appears exactly when verl's reading differs from the intended one. Property tests do the same for random tag
text in well-formed calls.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.verl_reference import ref_hermes, ref_qwen3_coder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn, check_text

TOOLS = [
    {"name": "write_file", "description": "Write a file.", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"]}},
    {"name": "run", "description": "Run.", "parameters": {
        "type": "object", "properties": {"cmd": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["cmd"]}},
]

XML_TAGS = ["<tool_call>", "</tool_call>", "<function=f>", "</function>", "<parameter=path>", "</parameter>"]
BAD = ("error", "warning")


def xml_call(params: list[tuple[str, str]], name: str = "write_file") -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def hermes_call(args: dict[str, Any], name: str = "write_file") -> str:
    return '<tool_call>\n{"name": ' + json.dumps(name) + ', "arguments": ' + json.dumps(args, ensure_ascii=False) \
        + "}\n</tool_call>"


def placements(tag: str) -> list[str]:
    """A value holding ``tag``: at its start, middle and end, inside a line and on a line of its own."""
    return [
        f'{tag} = 1',  # start, inside a line
        f'x = "{tag}"\ny = 2',  # middle, quoted
        f'print("{tag}")',  # quoted
        f'a\n{tag}\nb',  # own line, middle
        f'{tag}\nrest',  # own line, start
        f'head\n{tag}',  # own line, end
        f'see `{tag}`',  # end, inside a line
    ]


def _verl_xml(text: str) -> list[tuple[str, dict[str, Any]]]:
    return ref_qwen3_coder(text, [{"name": t["name"], "parameters": t["parameters"]} for t in TOOLS])


def _check_both_readings(text: str, fmt: str, intended: dict[str, Any], name: str = "write_file") -> Any:
    ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
    assert len(ta.calls) == 1, [c.raw for c in ta.calls]  # no phantom call from the tag text
    (call,) = ta.calls
    assert (call.function_name, call.arguments) == (name, intended)  # no phantom parameter, nothing cut
    verl = _verl_xml(text) if fmt == "qwen3_coder" else ref_hermes(text)
    errors = [f for f in ta.findings if f.severity == "error"]
    if verl == [(name, intended)]:
        assert call.verl_executes == "as_intended"
        assert call.verl_arguments is None
        assert not [f for f in ta.findings if f.severity in BAD], ta.findings
        assert call.status == "ok"
    else:
        assert call.verl_executes == ("dropped" if not verl else "differently")
        if verl:
            assert (call.verl_function_name, call.verl_arguments) == verl[0]
        assert errors, ta.findings
        # the message says what verl does
        assert any("verl 0.9.1" in f.message for f in errors), [f.message for f in errors]
    return ta


@pytest.mark.parametrize("tag", XML_TAGS)
def test_each_qwen3_coder_tag_in_a_value_both_readings(tag: str) -> None:
    for value in placements(tag):
        text = xml_call([("path", "a.py"), ("content", value)])
        _check_both_readings(text, "qwen3_coder", {"path": "a.py", "content": value})


@pytest.mark.parametrize("tag", XML_TAGS)
def test_tag_in_the_first_parameter(tag: str) -> None:
    """The literal tag sits in the first value; the next parameter must stay a parameter of its own."""
    for value in placements(tag):
        text = xml_call([("content", value), ("path", "a.py")])
        _check_both_readings(text, "qwen3_coder", {"content": value, "path": "a.py"})


def test_issue_example_executes_as_intended_with_info_only() -> None:
    text = xml_call([("path", "a.py"), ("content", 'x = "<tool_call>"')])
    ta = _check_both_readings(text, "qwen3_coder", {"path": "a.py", "content": 'x = "<tool_call>"'})
    (f,) = ta.findings
    assert (f.category, f.severity, text[f.start:f.end]) == ("literal_tag_text", "info", "<tool_call>")
    assert "executes it as written" in f.message


@pytest.mark.parametrize("value,verl_content", [
    ('x = "</parameter>"', 'x = "'),
    ('a\n</parameter>\nb', "a"),
])
def test_literal_parameter_close_is_cut_by_verl(value: str, verl_content: str) -> None:
    text = xml_call([("path", "a.py"), ("content", value)])
    ta = _check_both_readings(text, "qwen3_coder", {"path": "a.py", "content": value})
    (call,) = ta.calls
    assert call.verl_arguments == {"path": "a.py", "content": verl_content}
    # no duplicate_parameter, no re-set `path`: the literal text is not structure
    assert {f.category for f in ta.findings} == {"literal_tag_text"}
    assert call.repaired is None and call.repair_note.startswith("no repair")


COMPLETE_BLOCK = "<tool_call>\n<function=run>\n<parameter=cmd>\nls\n</parameter>\n</function>\n</tool_call>"
INCOMPLETE_BLOCKS = [
    "<tool_call>\n<function=NAME>",
    "<tool_call>",
    "<function=NAME>",
    "</function>\n</tool_call>",
    "Use <function=NAME> with <parameter=ARG>...</parameter>",
]


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_complete_literal_block_in_a_value(where: str) -> None:
    value = {"start": f"{COMPLETE_BLOCK}\ndone", "middle": f"Example:\n{COMPLETE_BLOCK}\ndone",
             "end": f"Example:\n{COMPLETE_BLOCK}"}[where]
    text = xml_call([("path", "a.md"), ("content", value)])
    ta = _check_both_readings(text, "qwen3_coder", {"path": "a.md", "content": value})
    assert "nested_call" in {f.category for f in ta.findings}


@pytest.mark.parametrize("block", INCOMPLETE_BLOCKS)
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_incomplete_literal_block_in_a_value(block: str, where: str) -> None:
    value = {"start": f"{block}\ndone", "middle": f"Format:\n{block}\ndone", "end": f"Format:\n{block}"}[where]
    text = xml_call([("path", "a.md"), ("content", value)])
    _check_both_readings(text, "qwen3_coder", {"path": "a.md", "content": value})


@pytest.mark.parametrize("tag", ["<tool_call>", "</tool_call>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>"])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_hermes_frame_inside_a_json_string(tag: str, where: str) -> None:
    value = {"start": f"{tag} x", "middle": f"a {tag} b", "end": f"x = {tag}"}[where]
    args = {"path": "a.py", "content": value}
    text = hermes_call(args)
    ta = _check_both_readings(text, "hermes", args)
    (call,) = ta.calls
    if "</tool_call>" in tag:  # verl's regex ends the block inside the string: the call is dropped
        assert call.verl_executes == "dropped"
        # the repair spells `</` as `<\/` (JSON), which verl's regex does not see: it re-classifies clean
        assert call.repaired is not None and "<\\/tool_call>" in call.repaired
        again = analyze_turn(call.repaired, tool_format="hermes", tools=TOOLS, context=TurnContext())
        assert not [f for f in again.findings if f.severity in BAD]
        assert again.calls[0].arguments == args == call.repaired_arguments
        assert again.calls[0].verl_executes == "as_intended"
    else:
        assert call.verl_executes == "as_intended"


def test_new_parameter_on_its_own_line_is_structure() -> None:
    """`<parameter=NEW>` on a line of its own inside a value reads as the next parameter (the value was not
    closed), as every parser with a lookahead reads it; verl 0.9.1 has none and swallows it."""
    text = xml_call([("cmd", "ls\n<parameter=n>\n3")], name="run")
    ta = check_text(text, tools=TOOLS, tool_format="qwen3_coder")
    (call,) = ta.calls
    assert call.arguments == {"cmd": "ls", "n": 3}
    assert call.verl_executes == "differently" and call.verl_arguments == {"cmd": "ls\n<parameter=n>\n3"}
    assert any(f.category == "unclosed_tag" and f.severity == "error" for f in ta.findings)


def test_two_calls_with_tag_text_stay_two_calls() -> None:
    a = xml_call([("path", "a.py"), ("content", 'x = "<tool_call>"')])
    b = xml_call([("path", "b.py"), ("content", 's = "</function>"\n')])
    ta = analyze_turn(a + "\n" + b, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    assert [c.arguments for c in ta.calls] == [{"path": "a.py", "content": 'x = "<tool_call>"'},
                                                {"path": "b.py", "content": 's = "</function>"\n'}]
    assert ta.calls[0].verl_executes == "as_intended"
    assert ta.calls[1].verl_executes == "differently"


def test_structural_malformations_keep_their_reading() -> None:
    """A missing `</parameter>` on its own line, and a fresh call after a cut one, are still structure."""
    text = "<tool_call>\n<function=run>\n<parameter=cmd>\nls\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"
    ta = check_text(text, tools=TOOLS, tool_format="qwen3_coder")
    assert ta.calls[0].arguments == {"cmd": "ls", "n": 3}
    assert "unclosed_tag" in ta.calls[0].categories
    assert ta.calls[0].verl_executes == "differently"
    assert ta.calls[0].verl_arguments == {"cmd": "ls\n<parameter=n>\n3"}
    cut = "<tool_call>\n<function=run>\n<parameter=cmd>\nls -"
    ta = check_text(cut + "\n" + COMPLETE_BLOCK, tools=TOOLS, tool_format="qwen3_coder")
    assert len(ta.calls) == 2 and ta.calls[1].arguments == {"cmd": "ls"}


def test_function_open_without_gt_message_says_what_verl_runs() -> None:
    text = "<tool_call>\n<function=run\n<parameter=cmd>\nls\n</parameter>\n</function>\n</tool_call>"
    ta = check_text(text, tools=TOOLS, tool_format="qwen3_coder")
    (call,) = ta.calls
    assert call.verl_executes == "differently"
    assert (call.verl_function_name, call.verl_arguments) == ("run\n<parameter=cmd", {})
    assert any("run\\n<parameter=cmd({})" in f.message for f in ta.findings if f.severity == "error")


def test_repair_keeps_literal_tag_text() -> None:
    """A garbled name is repaired; the literal tag text in the value survives and the repair re-classifies clean."""
    value = 'x = "<tool_call>"'
    text = xml_call([("path", "a.py"), ("content", value)], name="write_file_v2")
    ta = check_text(text, tools=TOOLS, tool_format="qwen3_coder")
    (call,) = ta.calls
    assert call.repaired is not None, call.repair_note
    assert value in call.repaired
    again = check_text(call.repaired, tools=TOOLS, tool_format="qwen3_coder")
    assert not [f for f in again.findings if f.severity in BAD]
    assert again.calls[0].arguments == {"path": "a.py", "content": value} == call.repaired_arguments
    assert again.calls[0].verl_executes == "as_intended"


# -- property tests ------------------------------------------------------------------------------------------

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_piece = st.sampled_from(XML_TAGS + ["<tool_call>\n", "\n</parameter>", "<function=run>\n", "x", " ", "\n", '"',
                                     "=", "ok", "<", ">", "/"])
tag_text = st.lists(_piece, min_size=1, max_size=8).map("".join).filter(lambda s: s.strip() != "")


@SETTINGS
@given(before=st.sampled_from(["", "a = ", "line\n", "s = '"]), tags=tag_text,
       after=st.sampled_from(["", "'", "\nmore", " # c"]), first=st.booleans())
def test_property_qwen3_coder_no_error_when_verl_reads_as_intended(before: str, tags: str, after: str,
                                                                   first: bool) -> None:
    value = before + tags + after
    params = [("content", value), ("path", "a.py")] if first else [("path", "a.py"), ("content", value)]
    text = xml_call(params)
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    errors = [f for f in ta.findings if f.severity == "error"]
    if _verl_xml(text) == [("write_file", dict(params))]:  # verl executes the call as written
        assert not errors, ta.findings
        assert [(c.function_name, c.arguments, c.verl_executes) for c in ta.calls] == [
            ("write_file", dict(params), "as_intended")]
    elif [(c.function_name, c.arguments) for c in ta.calls] == _verl_xml(text):
        # the tags form whole structure (a second `<function=` after `</function>`): trajlab reads the calls as
        # verl does -- the ambiguity of a complete call inside a value -- and still flags the turn
        assert [f for f in ta.findings if f.severity in ("error", "warning")], ta.findings
    else:  # verl cuts, merges or drops it: the turn says so with an error
        assert errors, ta.findings
    for c in ta.calls:  # per call: an error exactly when verl does not execute it as read (or it is malformed)
        if c.verl_executes != "as_intended":
            assert any(f.call_index == c.call_index and f.severity == "error" for f in ta.findings), ta.findings


_json_piece = st.sampled_from(["<tool_call>", "</tool_call>", "<tool_call>\n", '{"name": "f"}', "x", " ", "\n",
                               '"', "\\", "<", "/"])


@SETTINGS
@given(tags=st.lists(_json_piece, min_size=1, max_size=8).map("".join))
def test_property_hermes_no_error_when_verl_reads_as_intended(tags: str) -> None:
    args = {"path": "a.py", "content": tags}
    text = hermes_call(args)
    ta = analyze_turn(text, tool_format="hermes", tools=TOOLS, context=TurnContext())
    assert len(ta.calls) == 1
    (call,) = ta.calls
    assert call.arguments == args
    verl = ref_hermes(text)
    assert (call.verl_executes == "as_intended") == (verl == [("write_file", args)])
    errors = [f for f in ta.findings if f.severity == "error"]
    assert bool(errors) == (call.verl_executes != "as_intended"), ta.findings

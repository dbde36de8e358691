"""Schema types beyond a plain ``type``: anyOf / oneOf / type lists / nullable, ``$ref`` into ``$defs``, and the
places where verl's conversion changes a valid value (conversion divergence, info); plus verl's reading in the
``calls`` table written by a real scan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers.verl_lines import output_of, qwen35_prompt, v1_line, write_jsonl

from trajlab.scan import scan
from trajlab.toolcalls import check_text
from trajlab.toolcalls.schema import resolve_refs, tool_index
from trajlab.toolcalls.type_checks import intended_value
from trajlab.toolcalls.verl_parser import verl_calls

PARAMS: dict[str, Any] = {
    "type": "object",
    "$defs": {"Mode": {"type": "string", "enum": ["fast", "deep"]}, "Count": {"type": "integer"},
              "Loop": {"anyOf": [{"$ref": "#/$defs/Loop"}, {"type": "null"}]}},
    "properties": {
        "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},  # pydantic Optional[int]
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "tl": {"type": ["integer", "null"]},
        "s": {"type": "string", "nullable": True},
        "mode": {"$ref": "#/$defs/Mode"},
        "count": {"$ref": "#/$defs/Count"},
        "loop": {"$ref": "#/$defs/Loop"},
        "big": {"type": "number"},
        "nested": {"anyOf": [{"anyOf": [{"type": "boolean"}]}, {"type": "array"}]},
        "arr": {"type": "array"},
        "obj": {"type": "object"},
        "q": {"type": "string"},
    },
}
TOOLS = [{"name": "f", "description": "", "parameters": PARAMS}]


def xml(**params: str) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function=f>\n{body}</function>\n</tool_call>"


def one(text: str, fmt: str = "qwen3_coder") -> tuple[Any, list[tuple[str, str, str]]]:
    ta = check_text(text, tools=TOOLS, tool_format=fmt)
    (call,) = ta.calls
    return call, [(f.category, f.severity, f.rule_id.rsplit("/", 1)[-1]) for f in ta.findings]


@pytest.mark.parametrize("param,raw,intended,verl,findings", [
    # anyOf [integer, null]: verl 0.9.1 reads only `type`, so the value stays a string there (divergence, info)
    ("n", "5", 5, "5", [("verl_conversion_divergence", "info", "untyped_branch")]),
    ("n", "null", None, None, []),
    # `None` is how the Qwen3-Coder template renders a null argument (`| string`): null where a branch allows it
    ("n", "None", None, "None", [("verl_conversion_divergence", "info", "untyped_branch")]),
    ("tl", "None", None, None, []),  # verl's literal_eval of a type list reads it as None too
    ("s", "None", None, "None", [("verl_conversion_divergence", "info", "untyped_branch")]),
    ("count", "None", "None", "None", [("type_mismatch", "warning", "integer")]),  # not nullable: a mismatch
    ("n", "abc", "abc", "abc", [("type_mismatch", "warning", "any_of")]),
    # oneOf: the first branch that fits wins (string before integer)
    ("either", "5", "5", "5", []),
    # a type list: verl reads it as an unknown type (ast.literal_eval), which agrees here
    ("tl", "7", 7, 7, []),
    ("tl", "x", "x", "x", [("type_mismatch", "warning", "any_of")]),
    # nullable string
    ("s", "null", None, None, []),
    ("s", "x", "x", "x", []),
    # $ref resolved: the enum is checked, the integer converted (verl: no type, a string)
    ("mode", "deep", "deep", "deep", []),
    ("mode", "slow", "slow", "slow", [("type_mismatch", "warning", "enum")]),
    ("count", "3", 3, "3", [("verl_conversion_divergence", "info", "untyped_branch")]),
    ("loop", "x", "x", "x", []),  # a cyclic $ref: no type (any value), never a crash
    # number: exact where float() is not
    ("big", "9007199254740993", 9007199254740993, 9007199254740992,
     [("verl_conversion_divergence", "info", "float_precision")]),
    ("big", "2.0", 2.0, 2, [("verl_conversion_divergence", "info", "integral_float")]),
    ("big", "12", 12, 12, []),
    ("nested", "true", True, "true", [("verl_conversion_divergence", "info", "untyped_branch")]),
    ("nested", "[1]", [1], "[1]", [("verl_conversion_divergence", "info", "untyped_branch")]),
    # a plain array written as JSON with true/false/null: literal_eval cannot read it, so verl passes the text;
    # the call means the array (vLLM's and SGLang's parsers json.loads it)
    ("arr", '["a", "b", 1, true]', ["a", "b", 1, True], '["a", "b", 1, true]',
     [("verl_conversion_divergence", "info", "literal_eval")]),
    ("arr", "[null]", [None], "[null]", [("verl_conversion_divergence", "info", "literal_eval")]),
    ("arr", '["a", 1]', ["a", 1], ["a", 1], []),  # Python and JSON agree: no divergence
    ("obj", '{"a": null, "b": true}', {"a": None, "b": True}, {"a": None, "b": True}, []),  # verl json.loads
    # `null` as a plain string's text is the string; verl passes None
    ("q", "null", "null", None, [("verl_conversion_divergence", "info", "null_string")]),
    ("q", "Null", "Null", None, [("verl_conversion_divergence", "info", "null_string")]),
])
def test_branches_refs_and_numbers(param: str, raw: str, intended: Any, verl: Any,
                                   findings: list[tuple[str, str, str]]) -> None:
    call, got = one(xml(**{param: raw}))
    assert call.arguments == {param: intended}
    assert json.dumps(call.arguments) == json.dumps({param: intended})  # 2.0 stays a float, 5 an int
    assert got == findings
    if json.dumps(verl) == json.dumps(intended):
        assert call.verl_executes == "as_intended" and call.verl_arguments is None
    else:
        assert call.verl_executes == "differently"
        assert json.dumps(call.verl_arguments) == json.dumps({param: verl})
    # a divergence is info: the call itself is fine
    sevs = {s for _c, s, _v in findings}  # malformed: an error; warning: warnings only (the call runs)
    assert call.status == ("malformed" if "error" in sevs else "warning" if "warning" in sevs else "ok")


def test_hermes_values_checked_against_branches() -> None:
    def h(args: dict[str, Any]) -> str:
        return '<tool_call>\n{"name": "f", "arguments": ' + json.dumps(args) + "}\n</tool_call>"

    assert one(h({"n": 5}), "hermes")[1] == []
    assert one(h({"n": None}), "hermes")[1] == []
    assert one(h({"n": "5"}), "hermes")[1] == [("type_mismatch", "warning", "json_type")]
    assert one(h({"count": 3}), "hermes")[1] == []
    assert one(h({"count": "3"}), "hermes")[1] == [("type_mismatch", "warning", "json_type")]
    assert one(h({"mode": "slow"}), "hermes")[1] == [("type_mismatch", "warning", "enum")]


def test_resolve_refs_and_intended_value() -> None:
    r = resolve_refs(PARAMS["properties"], PARAMS)
    assert r["mode"] == {"type": "string", "enum": ["fast", "deep"]}
    assert r["count"] == {"type": "integer"}
    assert intended_value("5", "n", r) == 5 and intended_value("5", "undeclared", r) == "5"
    assert intended_value("NULL", "n", r) is None
    idx = tool_index(TOOLS)
    assert idx is not None and idx.tools["f"].intended["count"] == {"type": "integer"}
    assert idx.tools["f"].properties["count"] == {"$ref": "#/$defs/Count"}  # verl's view stays as declared


def test_verl_parser_reads_like_verl() -> None:
    idx = tool_index(TOOLS)
    text = ("<tool_call>\n<function=f>\n<parameter=count>\n3\n</parameter>\n<parameter=big>\n1.5\n</parameter>\n"
            "</function>\n</tool_call>")
    (vc,) = verl_calls(text, "qwen3_coder", idx) or []
    assert (vc.name, vc.arguments) == ("f", {"count": "3", "big": 1.5})
    assert verl_calls(text.replace("<tool_call>\n", ""), "qwen3_coder", idx) == []  # needs <tool_call>
    # no lookahead: the next parameter is merged into the value
    merged = "<tool_call>\n<function=f>\n<parameter=s>\na\n<parameter=mode>\nfast\n</parameter>\n</function>\n</tool_call>"
    assert [(v.name, v.arguments) for v in verl_calls(merged, "qwen3_coder", idx) or []] == [
        ("f", {"s": "a\n<parameter=mode>\nfast"})]
    # hermes: an unclosed block is dropped, a broken one too, a good one next to it kept
    good = '<tool_call>\n{"name": "f", "arguments": {"n": 1}}\n</tool_call>'
    assert [v.name for v in verl_calls(good + '\n<tool_call>\n{"name": "f"', "hermes", idx) or []] == ["f"]
    assert [v.arguments for v in verl_calls('<tool_call>{bad}</tool_call>' + good, "hermes", idx) or []] == [{"n": 1}]
    assert verl_calls("x", "none", idx) is None


def test_scan_writes_verl_reading(tmp_path: Path) -> None:
    """A real verl dump through `scan`: the calls table carries both readings."""
    as_written = ('<tool_call>\n<function=search_web>\n<parameter=queries>\n["say <tool_call> twice"]\n'
                  "</parameter>\n</function>\n</tool_call>")
    cut = ('<tool_call>\n<function=search_web>\n<parameter=queries>\n["x = </parameter>"]\n'
           "</parameter>\n</function>\n</tool_call>")
    rows = [v1_line(1, qwen35_prompt("q1"), output_of([as_written, "Done."], ["r1"]), 1.0),
            v1_line(1, qwen35_prompt("q2"), output_of([cut, "Done."], ["r2"]), 0.0)]
    write_jsonl(tmp_path / "run" / "rollout" / "1.jsonl", rows)
    out = tmp_path / "out"
    scan([tmp_path / "run"], out)
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    by_raw = {c["raw"]: c for c in calls}
    a, b = by_raw[as_written], by_raw[cut]
    assert (a["status"], a["verl_executes"], a["verl_arguments"]) == ("ok", "as_intended", None)
    assert json.loads(a["arguments"]) == {"queries": ["say <tool_call> twice"]}
    assert (b["status"], b["verl_executes"], b["verl_function_name"]) == ("malformed", "differently", "search_web")
    assert json.loads(b["arguments"]) == {"queries": ["x = </parameter>"]}
    assert json.loads(b["verl_arguments"]) == {"queries": '["x = '}
    assert b["categories"] == ["literal_tag_text"]
    meta = pq.read_schema(out / "calls.parquet").metadata
    assert meta[b"trajlab.schema_version"] >= b"1.1"  # verl_* columns since 1.1


@pytest.mark.parametrize("fmt", ["glm45", "glm47"])
@pytest.mark.parametrize("param,written,intended,variant", [
    ("code", "    indented code    ", "    indented code    ", "glm_string_stripped"),  # verl strips: code loses
    ("code", "def f():\n    return 1\n", "def f():\n    return 1\n", "glm_string_stripped"),  # its last newline
    ("code", "123", "123", "glm_string_decoded"),  # verl's json.loads makes it an int
    ("code", "plain text", "plain text", None),
    ("n", " 5 ", 5, None),  # a declared integer: json.loads of the stripped text, as verl
    ("opt", "null", None, None),  # a nullable string's null is null (the template's tojson of None)
    ("opt", "text ", "text ", "glm_string_stripped"),
])
def test_glm_string_values_are_the_text_as_written(fmt: str, param: str, written: str, intended: Any,
                                                   variant: str | None) -> None:
    """GLM's template writes a string value raw, so the intended value is the text between the tags (vLLM's and
    SGLang's glm parsers keep it); where verl's glm parser strips or decodes it, an info divergence says so."""
    tools = [{"name": "w", "description": "", "parameters": {"type": "object", "properties": {
        "code": {"type": "string"}, "n": {"type": "integer"}, "opt": {"type": ["string", "null"]}}}}]
    sep = "\n" if fmt == "glm45" else ""
    text = f"<tool_call>w{sep}<arg_key>{param}</arg_key>{sep}<arg_value>{written}</arg_value>{sep}</tool_call>"
    ta = check_text(text, tools=tools, tool_format=fmt)
    (call,) = ta.calls
    assert call.status == "ok" and call.arguments == {param: intended}
    assert [f.rule_id.rsplit("/", 1)[-1] for f in ta.findings] == ([variant] if variant else [])
    assert all(f.severity == "info" for f in ta.findings)


def test_model_text_never_makes_python_print_a_warning() -> None:
    """verl's conversion runs ast.literal_eval on model text; an invalid escape in it (``'a\\ b'``) must not make
    the compiler warn on stderr (SyntaxWarning on Python 3.12+, DeprecationWarning before)."""
    import warnings

    value = "['C:\\ drive', '\\d+']"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call, _ = one(xml(nested=value))
        ta = check_text('<tool_call>\n{"name": "f", "arguments": {\'n\': \'\\ x\'}}\n</tool_call>', tools=TOOLS,
                        tool_format="hermes")
    assert call.arguments == {"nested": ["C:\\ drive", "\\d+"]} and ta.calls
    assert [str(w.message) for w in caught] == []


def test_parameters_that_are_a_top_level_ref() -> None:
    """pydantic v2 writes a self-referencing model's schema as ``{"$defs": {...}, "$ref": "#/$defs/Model"}``: the
    parameters are those of the model (a well-formed call is ok), and verl, which reads ``parameters.properties``
    only, passes every value as its text (an info divergence where that changes a value)."""
    params = {"$defs": {"P": {"type": "object", "required": ["query_list"], "properties": {
        "query_list": {"type": "array", "items": {"type": "string"}}, "k": {"type": "integer"},
        "child": {"$ref": "#/$defs/P"}}}}, "$ref": "#/$defs/P"}
    tools = [{"name": "search", "description": "", "parameters": params}]
    ta = check_text('<tool_call>\n{"name": "search", "arguments": {"query_list": ["a"], "k": 3}}\n</tool_call>',
                    tools=tools, tool_format="hermes")
    assert [(c.status, c.arguments) for c in ta.calls] == [("ok", {"query_list": ["a"], "k": 3})]
    assert ta.findings == []
    xml_call = ("<tool_call>\n<function=search>\n<parameter=query_list>\n[\"a\"]\n</parameter>\n<parameter=k>\n3\n"
                "</parameter>\n</function>\n</tool_call>")
    (call,) = check_text(xml_call, tools=tools, tool_format="qwen3_coder").calls
    assert call.status == "ok" and call.arguments == {"query_list": ["a"], "k": 3}
    assert call.verl_executes == "differently" and call.verl_arguments == {"query_list": '["a"]', "k": "3"}
    # a parameter the model does not declare is still unknown; the required one is still required
    (bad,) = check_text(xml_call.replace("query_list", "q"), tools=tools, tool_format="qwen3_coder").calls
    assert set(bad.categories) == {"unknown_parameter", "missing_required_parameter"}

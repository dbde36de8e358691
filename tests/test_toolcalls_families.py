"""The four added call-format families (glm45/glm47, kimi_k2, deepseek_v31, gpt_oss): every taxonomy category that
applies to a family, each checked for category, rule variant, exact span, severity and repair; plus detection, the
family's parser notes in messages, and calls written in another family's markup."""

from __future__ import annotations

import json

import pytest
from helpers.cases import Case

from trajlab.toolcalls import check_text, detect_tool_format, render_call

TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                         "metric": {"type": "boolean"}},
        "required": ["city"]}},
    {"name": "search", "description": "Search.", "parameters": {
        "type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}}},
        "required": ["queries"]}},
]

# -- call builders (independent of trajlab's renderers) ----------------------------------------------------------


def glm(name: str, pairs: list[tuple[str, str]], sep: str = "\n", *, close: str = "</tool_call>") -> str:
    body = "".join(f"<arg_key>{k}</arg_key>{sep}<arg_value>{v}</arg_value>{sep}" for k, v in pairs)
    return f"<tool_call>{name}{sep}{body}{close}"


KB, KE, CB, CA, CE = ("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                      "<|tool_call_argument_begin|>", "<|tool_call_end|>")


def kimi(calls: list[tuple[str, str]]) -> str:
    return KB + "".join(f"{CB}{i}{CA}{a}{CE}" for i, a in calls) + KE


DB, DE, DCB, DS, DCE = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                        "<｜tool▁call▁end｜>")


def ds(calls: list[tuple[str, str]]) -> str:
    return DB + "".join(f"{DCB}{n}{DS}{a}{DCE}" for n, a in calls) + DE


def harmony(name: str, args: str, *, header: str | None = None, end: str = "<|call|>") -> str:
    h = header if header is not None else (f"<|start|>assistant<|channel|>commentary to=functions.{name} "
                                            "<|constrain|>json<|message|>")
    return f"{h}{args}{end}"


W = '{"city": "Beijing", "days": 3}'
GOOD = {
    "glm45": glm("get_weather", [("city", "Beijing"), ("days", "3")]),
    "glm47": glm("get_weather", [("city", "Beijing"), ("days", "3")], ""),
    "kimi_k2": kimi([("functions.get_weather:0", W)]),
    "deepseek_v31": ds([("get_weather", W)]),
    "gpt_oss": "<|channel|>analysis<|message|>Need the weather.<|end|>" + harmony("get_weather", W),
}




G45 = "glm45"
CASES = [
    # ---- GLM ---------------------------------------------------------------------------------------------------
    Case("glm_garbled", glm("get_weather英文", [("city", "Beijing")]), G45, "garbled_function_name", "mixed_script",
         "get_weather英文", "error", True),
    Case("glm_unknown", glm("translate", [("text", "hi")]), G45, "unknown_function", "undeclared", "translate",
         "error", False),
    Case("glm_stray_attr", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value v2=\"\">\n"
         "</tool_call>", G45, "stray_attribute", "glm_tag", '</arg_value v2="">', "error", True),
    Case("glm_close_variant", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value1>\n"
         "</tool_call>", G45, "malformed_tag", "close_variant", "</arg_value1>", "error", True),
    Case("glm_missing_gt", "<tool_call>get_weather\n<arg_key>city</arg_key\n<arg_value>Beijing</arg_value>\n"
         "</tool_call>", G45, "malformed_tag", "glm_missing_gt", "</arg_key", "error", True),
    Case("glm_value_unclosed_before_key", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing\n"
         "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>", G45, "unclosed_tag", "glm_arg_value",
         "<arg_value>", "error", True),
    Case("glm_value_unclosed_at_close", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing\n"
         "</tool_call>", G45, "unclosed_tag", "glm_arg_value_at_close", "<arg_value>", "error", True),
    Case("glm_key_unclosed", "<tool_call>get_weather\n<arg_key>city\n<arg_value>Beijing</arg_value>\n</tool_call>",
         G45, "unclosed_tag", "glm_arg_key", "<arg_key>", "error", True),
    Case("glm_key_without_value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_key>days</arg_key>\n"
         "<arg_value>3</arg_value>\n</tool_call>", G45, "malformed_tag", "glm_key_without_value", None, "error", False),
    Case("glm_missing_close_end", glm("get_weather", [("city", "Beijing")], close=""), G45, "missing_call_close",
         "at_end", "<tool_call>", "error", True),
    Case("glm_missing_close_next", glm("get_weather", [("city", "Beijing")], close="") + "\n" +
         glm("get_weather", [("city", "Paris")]), G45, "missing_call_close", "before_next_call", "<tool_call>",
         "error", True),
    Case("glm_truncated_value", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beij", G45,
         "truncated_call", "inside_glm_value", None, "error", False),
    Case("glm_truncated_key", "<tool_call>get_weather\n<arg_key>ci", G45, "truncated_call", "inside_glm_key", None,
         "error", False),
    Case("glm_junk_between_key_value", "<tool_call>get_weather\n<arg_key>city</arg_key>\nis\n<arg_value>Beijing"
         "</arg_value>\n</tool_call>", G45, "junk_in_call", "glm_between_key_value", "is", "error", False),
    Case("glm_junk_between_args", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
         "and then\n</tool_call>", G45, "junk_in_call", "between_tags", "and then", "warning", None),
    Case("glm45_layout_no_newline", glm("get_weather", [("city", "Beijing")], ""), G45, "malformed_tag", "glm_layout",
         None, "warning", True),
    Case("glm47_layout_newline", glm("get_weather", [("city", "Beijing")]), "glm47", "malformed_tag", "glm_layout",
         None, "warning", True),
    Case("glm_ik_llama_spacing", "<tool_call>get_weather <arg_key>city</arg_key> <arg_value>Beijing</arg_value> "
         "</tool_call>", G45, "malformed_tag", "glm_layout", None, "warning", True),
    Case("glm53_call_open_as_key", "<tool_call>get_weather<tool_call>city</arg_key><arg_value>Beijing</arg_value>"
         "</tool_call>", "glm47", "malformed_tag", "glm_call_open_as_key", "<tool_call>", "error", True),
    Case("glm_json_inside", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>', G45,
         "format_mismatch", "json_in_glm", None, "error", True),
    Case("glm_xml_inside", "<tool_call>\n<function=get_weather>\n<parameter=city>\nBeijing\n</parameter>\n</function>"
         "\n</tool_call>", G45, "format_mismatch", "xml_in_glm", None, "error", True),
    Case("glm_type_mismatch", glm("get_weather", [("city", "Beijing"), ("days", "three")]), G45, "type_mismatch",
         "json_type", "three", "warning", False),
    Case("glm_string_decoded", glm("get_weather", [("city", "123")]), G45, "verl_conversion_divergence",
         "glm_string_decoded", "123", "info", None),
    Case("glm_string_quoted", glm("get_weather", [("city", '"Beijing"')]), G45, "verl_conversion_divergence",
         "glm_string_quoted", '"Beijing"', "info", None),
    Case("glm_missing_required", glm("get_weather", [("days", "3")]), G45, "missing_required_parameter", "missing",
         "get_weather", "warning", False),
    Case("glm_duplicate", glm("get_weather", [("city", "Beijing"), ("city", "Beijing")]), G45, "duplicate_parameter",
         "same_value", "city", "warning", True),
    Case("glm_unknown_param", glm("get_weather", [("city", "Beijing"), ("cty", "x")]), G45, "unknown_parameter",
         "undeclared", "cty", "warning", False),
    Case("glm_empty", "<tool_call></tool_call>", G45, "empty_call", "empty", None, "error", False),
    Case("glm_orphan", "Done.</arg_value> It is sunny.", G45, "malformed_tag", "orphan_close", "</arg_value>",
         "warning", None),
    Case("glm_text_after", glm("get_weather", [("city", "Beijing")]) + "\nI will wait for it.", G45,
         "text_after_call", "allowed", "I will wait for it.", "info", None),
    Case("glm_in_think", "<think>" + glm("get_weather", [("city", "Paris")]) + "</think>\n" +
         glm("get_weather", [("city", "Beijing")]), G45, "call_inside_think", "preempts", None, "error", True),
    Case("glm_foreign_kimi", "Sure. " + kimi([("functions.get_weather:0", W)]), G45, "foreign_format", "markup", None,
         "error", False),
    # ---- Kimi-K2 -----------------------------------------------------------------------------------------------
    Case("kimi_garbled", kimi([("functions.get_weather_v2:0", W)]), "kimi_k2", "garbled_function_name", "junk_suffix",
         "get_weather_v2", "error", True),
    Case("kimi_unknown", kimi([("functions.translate:0", '{"text": "hi"}')]), "kimi_k2", "unknown_function",
         "undeclared", "translate", "error", False),
    Case("kimi_no_namespace", kimi([("get_weather:0", W)]), "kimi_k2", "malformed_tag", "kimi_id_namespace",
         "get_weather:0", "warning", True),
    Case("kimi_no_index", kimi([("functions.get_weather", W)]), "kimi_k2", "malformed_tag", "kimi_id_index",
         "functions.get_weather", "warning", True),
    Case("kimi_openai_id", kimi([("call_59adf5614cfe4f4b8a71be54", W)]), "kimi_k2", "malformed_tag",
         "kimi_foreign_id", "call_59adf5614cfe4f4b8a71be54", "error", False),
    Case("kimi_bad_json", kimi([("functions.get_weather:0", '{"city": "Beijing", "days": 3,}')]), "kimi_k2",
         "invalid_json", "trailing_comma", ",", "error", True),
    Case("kimi_syntax", kimi([("functions.get_weather:0", '{"city": "Beijing", "days": }')]), "kimi_k2",
         "invalid_json", "syntax", None, "error", False),
    Case("kimi_not_object", kimi([("functions.get_weather:0", '"Beijing"')]), "kimi_k2", "invalid_arguments",
         "arguments_not_object", '"Beijing"', "error", False),
    Case("kimi_missing_sep", KB + CB + "functions.get_weather:0" + W + CE + KE, "kimi_k2", "malformed_tag",
         "missing_separator", None, "error", True),
    Case("kimi_unclosed_before_next", KB + CB + "functions.get_weather:0" + CA + W + CB + "functions.search:1" + CA +
         '{"queries": ["a"]}' + CE + KE, "kimi_k2", "unclosed_tag", "call_before_next", CB, "error", True),
    Case("kimi_unclosed_at_section_end", KB + CB + "functions.get_weather:0" + CA + W + KE, "kimi_k2", "unclosed_tag",
         "call_at_section_end", CB, "error", True),
    Case("kimi_no_section_begin", CB + "functions.get_weather:0" + CA + W + CE + KE, "kimi_k2", "missing_call_open",
         "section_begin", CB, "error", True),
    Case("kimi_no_section_end", KB + CB + "functions.get_weather:0" + CA + W + CE, "kimi_k2", "missing_call_close",
         "section_end", None, "info", None),
    Case("kimi_truncated", KB + CB + "functions.get_weather:0" + CA + '{"city": "Beij', "kimi_k2", "truncated_call",
         "inside_json", None, "error", False),
    Case("kimi_empty", KB + KE, "kimi_k2", "empty_call", "empty", None, "error", False),
    Case("kimi_junk_between", KB + CB + "functions.get_weather:0" + CA + W + CE + " and " + CB +
         "functions.search:1" + CA + '{"queries": ["a"]}' + CE + KE, "kimi_k2", "junk_in_call", "between_calls", "and",
         "warning", None),
    Case("kimi_stripped_bad_json", '<think>ok</think>functions.get_weather:0{"city": "Beijing",}', "kimi_k2",
         "invalid_json", "trailing_comma", ",", "error", True),
    Case("kimi_type_mismatch", kimi([("functions.get_weather:0", '{"city": "Beijing", "days": "three"}')]), "kimi_k2",
         "type_mismatch", "json_type", None, "warning", False),
    Case("kimi_hermes_inside", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>',
         "kimi_k2", "format_mismatch", "other_family_call", None, "error", True),
    Case("kimi_foreign_deepseek", ds([("get_weather", W)]), "kimi_k2", "foreign_format", "markup", None, "error",
         None),
    # ---- DeepSeek-V3.1 -----------------------------------------------------------------------------------------
    Case("ds_garbled", ds([("get_weatherrr", W)]), "deepseek_v31", "garbled_function_name", "junk_suffix",
         "get_weatherrr", "error", True),
    Case("ds_unknown", ds([("translate", '{"text": "hi"}')]), "deepseek_v31", "unknown_function", "undeclared",
         "translate", "error", False),
    Case("ds_bad_json", ds([("get_weather", '{"city": "Beijing", "days": 3,}')]), "deepseek_v31", "invalid_json",
         "trailing_comma", ",", "error", True),
    Case("ds_single_quotes", ds([("get_weather", "{'city': 'Beijing'}")]), "deepseek_v31", "invalid_json",
         "single_quotes", None, "error", True),
    Case("ds_not_object", ds([("get_weather", "[1, 2]")]), "deepseek_v31", "invalid_arguments",
         "arguments_not_object", "[1, 2]", "error", False),
    Case("ds_double_encoded", ds([("get_weather", json.dumps(W))]), "deepseek_v31", "invalid_arguments",
         "arguments_string", None, "error", True),
    Case("ds_unclosed_before_next", DB + DCB + "get_weather" + DS + W + DCB + "search" + DS + '{"queries": ["a"]}' +
         DCE + DE, "deepseek_v31", "unclosed_tag", "call_before_next", DCB, "error", True),
    Case("ds_no_section_begin", DCB + "get_weather" + DS + W + DCE + DE, "deepseek_v31", "missing_call_open",
         "section_begin", DCB, "error", True),
    Case("ds_no_section_end", DB + DCB + "get_weather" + DS + W + DCE, "deepseek_v31", "missing_call_close",
         "section_end", None, "info", None),
    Case("ds_lookalike", "<|tool▁calls▁begin|>" + DCB + "get_weather" + DS + W + DCE + DE, "deepseek_v31",
         "malformed_tag", "lookalike_token", "<|tool▁calls▁begin|>", "error", True),
    Case("ds_missing_sep", DB + DCB + "get_weather" + W + DCE + DE, "deepseek_v31", "malformed_tag",
         "missing_separator", None, "error", True),
    Case("ds_truncated", DB + DCB + "get_weather" + DS + '{"city": "Bei', "deepseek_v31", "truncated_call",
         "inside_json", None, "error", False),
    Case("ds_v3_layout", DB + DCB + "function" + DS + "get_weather\n```json\n" + W + "\n```" + DCE + DE,
         "deepseek_v31", "format_mismatch", "deepseek_v3_call", None, "error", True),
    Case("ds_missing_required", ds([("get_weather", '{"days": 3}')]), "deepseek_v31", "missing_required_parameter",
         "missing", "get_weather", "warning", False),
    Case("ds_duplicate_key", ds([("get_weather", '{"city": "Beijing", "city": "Paris"}')]), "deepseek_v31",
         "duplicate_parameter", "different_values", "city", "error", False),
    Case("ds_text_after", ds([("get_weather", W)]) + "Checking now.", "deepseek_v31", "text_after_call", "allowed",
         "Checking now.", "info", None),
    Case("ds_empty", DB + DE, "deepseek_v31", "empty_call", "empty", None, "error", False),
    Case("ds_orphan", "It is sunny." + DCE, "deepseek_v31", "malformed_tag", "orphan_close", DCE, "warning", None),
    Case("ds_foreign_dsml", '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n</｜DSML｜invoke>\n'
         "</｜DSML｜function_calls>", "deepseek_v31", "foreign_format", "markup", None, "error", None),
    # ---- gpt-oss (harmony) -------------------------------------------------------------------------------------
    Case("oss_garbled", harmony("get_weather英文", W), "gpt_oss", "garbled_function_name", "mixed_script",
         "get_weather英文", "error", True),
    Case("oss_unknown", harmony("translate", '{"text": "hi"}'), "gpt_oss", "unknown_function", "undeclared",
         "translate", "error", False),
    Case("oss_recipient_in_role", harmony("get_weather", W, header="<|start|>assistant to=functions.get_weather"
                                          "<|channel|>commentary json<|message|>"), "gpt_oss", "malformed_tag",
         "harmony_recipient_in_role", "<|start|>assistant to=functions.get_weather<|channel|>commentary json", "error",
         True),
    Case("oss_missing_constrain", harmony("get_weather", W, header="<|start|>assistant<|channel|>commentary "
                                          "to=functions.get_weather json<|message|>"), "gpt_oss", "malformed_tag",
         "harmony_missing_constrain", None, "error", True),
    Case("oss_constrain_space", harmony("get_weather", W, header="<|start|>assistant<|channel|>commentary "
                                        "to=functions.get_weather<|constrain|>json<|message|>"), "gpt_oss",
         "malformed_tag", "harmony_constrain_space", None, "error", True),
    Case("oss_no_namespace", harmony("get_weather", W, header="<|start|>assistant<|channel|>commentary "
                                     "to=get_weather <|constrain|>json<|message|>"), "gpt_oss", "malformed_tag",
         "harmony_missing_namespace", None, "error", True),
    Case("oss_analysis_channel", harmony("get_weather", W, header="<|start|>assistant<|channel|>analysis "
                                         "to=functions.get_weather <|constrain|>json<|message|>"), "gpt_oss",
         "malformed_tag", "harmony_wrong_channel", None, "error", True),
    Case("oss_wrong_end", harmony("get_weather", W, end="<|end|>"), "gpt_oss", "malformed_tag", "harmony_wrong_end",
         "<|end|>", "error", True),
    Case("oss_no_call_token", harmony("get_weather", W, end=""), "gpt_oss", "missing_call_close",
         "harmony_no_call_token", None, "error", True),
    Case("oss_truncated", harmony("get_weather", '{"city": "Bei', end=""), "gpt_oss", "truncated_call", "inside_json",
         None, "error", False),
    Case("oss_bad_json", harmony("get_weather", '{"city": "Beijing", "days": 3'), "gpt_oss", "invalid_json", None,
         None, "error", None),
    Case("oss_double_encoded", harmony("get_weather", json.dumps(W)), "gpt_oss", "invalid_arguments",
         "arguments_string", None, "error", True),
    Case("oss_header_junk", harmony("get_weather", W, header="<|start|>assistant<|channel|>commentary "
                                    "to=functions.get_weather code <|constrain|>json<|message|>"), "gpt_oss",
         "stray_attribute", "harmony_header_junk", "code", "error", True),
    Case("oss_type_mismatch", harmony("get_weather", '{"city": "Beijing", "metric": "yes"}'), "gpt_oss",
         "type_mismatch", "json_type", None, "warning", False),
    Case("oss_stripped_garbled", "analysisNeed it.assistantcommentary to=functions.get_weathr json" + W, "gpt_oss",
         "garbled_function_name", "edit_distance", "get_weathr", "error", True),
    Case("oss_hermes_inside", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>',
         "gpt_oss", "format_mismatch", "other_family_call", None, "error", True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    tools = TOOLS if case.tools == "default" else case.tools
    ta = check_text(case.text, tools=tools, tool_format=case.fmt)
    hits = [f for f in ta.findings if f.category == case.category
            and (case.variant is None or f.rule_id.endswith("/" + case.variant))]
    assert hits, (case.category, case.variant, [(f.category, f.rule_id) for f in ta.findings])
    f = hits[0]
    assert f.severity == case.severity, f
    if case.span is not None:
        assert case.text[f.start:f.end] == case.span, (case.text[f.start:f.end], case.span)
    assert f.message and "{" not in f.message.replace("{}", "").replace('{"', ""), f.message
    if case.repaired is None:
        return
    target = [c for c in ta.calls if c.call_index == f.call_index] if f.call_index is not None else ta.calls
    assert target, "the finding belongs to no call"
    call = target[0]
    if case.repaired:
        assert call.repaired, call.repair_note
        again = check_text(call.repaired, tools=tools, tool_format=case.fmt)
        assert len(again.calls) == 1
        assert [g for g in again.findings if g.severity in ("error", "warning")] == [], again.findings
        assert again.calls[0].arguments == call.repaired_arguments
    else:
        assert call.repaired is None and call.repair_note and call.repair_note.startswith("no repair"), call


@pytest.mark.parametrize("fmt", sorted(GOOD))
def test_well_formed_has_no_findings_and_reads_the_call(fmt: str) -> None:
    ta = check_text(GOOD[fmt], tools=TOOLS, tool_format=fmt)
    assert ta.findings == []
    assert [(c.function_name, c.arguments, c.status) for c in ta.calls] == [
        ("get_weather", {"city": "Beijing", "days": 3}, "ok")]
    # spans tile the text, the name and values are located
    assert ta.spans[0].start == 0 and ta.spans[-1].end == len(GOOD[fmt])
    kinds = {GOOD[fmt][s.start:s.end]: s.kind for s in ta.spans}
    assert kinds.get("get_weather") == "function_name" and kinds.get("Beijing") == "param_value"


@pytest.mark.parametrize("fmt", sorted(GOOD))
def test_output_detection(fmt: str) -> None:
    assert detect_tool_format("", GOOD[fmt]) == fmt


@pytest.mark.parametrize("fmt", sorted(GOOD))
def test_render_is_well_formed_in_its_own_format(fmt: str) -> None:
    text = render_call("get_weather", {"city": "Beijing", "days": 3, "metric": True}, fmt)
    ta = check_text(text, tools=TOOLS, tool_format=fmt)
    assert ta.findings == [] and ta.calls[0].arguments == {"city": "Beijing", "days": 3, "metric": True}


def test_a_call_in_another_family_is_foreign_or_mismatch_in_every_family() -> None:
    for fmt in GOOD:
        for other, text in GOOD.items():
            if other == fmt or {fmt, other} <= {"glm45", "glm47"}:
                continue
            ta = check_text(text, tools=TOOLS, tool_format=fmt)
            cats = {f.category for f in ta.findings}
            assert cats & {"foreign_format", "format_mismatch"}, (fmt, other, cats)
            assert [c.status for c in ta.calls] == ["malformed"], (fmt, other)


def test_prompt_detection_and_family_schemas() -> None:
    from trajlab.trajectory import prompt_facts

    kimi_prompt = ('<|im_system|>tool_declare<|im_middle|>[{"type": "function", "function": {"name": "get_weather", '
                   '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]<|im_end|>')
    glm_prompt = ("[gMASK]<sop><|system|>\n# Tools\n\n<tools>\n" + json.dumps({"type": "function", "function": TOOLS[0]})
                  + "\n</tools>\n\nFor each function call, output the function name and arguments within the following "
                  "XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}"
                  "</arg_value>\n...\n</tool_call>")
    oss_prompt = ("<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// Weather.\n"
                  "type get_weather = (_: {\ncity: string,\ndays?: number,\n}) => any;\n\n} // namespace functions<|end|>")
    ds_prompt = ("## Tools\nYou have access to the following tools:\n\n### get_weather\nDescription: Weather.\n\n"
                 "Parameters: " + json.dumps(TOOLS[0]["parameters"]) + "\n\nIMPORTANT: ALWAYS adhere to this exact "
                 "format for tool use:\n" + DB + DCB + "tool_call_name" + DS + "tool_call_arguments" + DCE +
                 "{{additional_tool_calls}}" + DE)
    for prompt, fmt in ((kimi_prompt, "kimi_k2"), (glm_prompt, "glm45"), (oss_prompt, "gpt_oss"),
                        (ds_prompt, "deepseek_v31")):
        facts = prompt_facts(prompt)
        assert facts.tool_format == fmt
        tools = json.loads(facts.tools_json)
        assert [t["name"] for t in tools] == ["get_weather"]
    oss = json.loads(prompt_facts(oss_prompt).tools_json)[0]["parameters"]
    assert oss["required"] == ["city"] and oss["properties"]["days"] == {"type": "number"}


def test_parser_notes_name_the_family_parsers() -> None:
    ta = check_text(kimi([("functions.get_weather:0", '{"city": "Beijing", "days": }')]), tools=TOOLS,
                    tool_format="kimi_k2")
    msg = next(f.message for f in ta.findings if f.category == "invalid_json")
    assert "verl's kimi parser" in msg and "`{}`" in msg
    ta = check_text(harmony("get_weather", W, end="<|end|>"), tools=TOOLS, tool_format="gpt_oss")
    assert "verl" in ta.findings[0].message


def test_rules_list_shows_every_format() -> None:
    from trajlab.toolcalls import KNOWN_FORMATS, list_rules

    shown = {it["id"] for it in list_rules() if it["kind"] == "format"}
    assert shown == set(KNOWN_FORMATS) >= {"glm45", "glm47", "kimi_k2", "deepseek_v31", "gpt_oss"}

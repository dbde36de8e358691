"""Synthetic cases, built from the two call grammars, for every taxonomy category (including those with no
public example yet), each checked for category, rule variant, exact span, severity and repair."""

from __future__ import annotations

import json

import pytest
from helpers.cases import Case

from trajlab.model import TurnContext
from trajlab.toolcalls import (
    analyze_turn,
    check_text,
    detect_tool_format,
    explain,
    load_taxonomy,
    parse_call,
    prompt_forbids_suffix,
    render_call,
)

TOOLS = [
    {"name": "search_web", "description": "Search the web.", "parameters": {
        "type": "object",
        "properties": {"queries": {"type": "array", "items": {"type": "string"}}, "limit": {"type": "integer"},
                       "safe": {"type": "boolean"}, "mode": {"type": "string", "enum": ["fast", "deep"]},
                       "ratio": {"type": "number"}, "filters": {"type": "object"}},
        "required": ["queries"]}},
    {"name": "fetch_web", "description": "Fetch pages.", "parameters": {
        "type": "object", "properties": {"urls": {"type": "array"}}, "required": ["urls"]}},
    {"name": "bash", "description": "Run a command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        "required": ["command"]}},
]


def xml(name: str, params: list[tuple[str, str]], *, call_open: str = "<tool_call>", call_close: str = "</tool_call>",
        fn_close: str = "</function>", p_close: str = "</parameter>") -> str:
    """A qwen3_coder call as the chat template renders it, with optional misspelt tags."""
    body = "".join(f"<parameter={k}>\n{v}\n{p_close}\n" for k, v in params)
    parts = [call_open, f"<function={name}>\n{body}{fn_close}", call_close]
    return "\n".join(p for p in parts if p)


def hermes(name: str, args: object) -> str:
    return '<tool_call>\n{"name": ' + json.dumps(name) + ', "arguments": ' + json.dumps(args) + "}\n</tool_call>"


GOOD_XML = xml("search_web", [("queries", '["a", "b"]')])
GOOD_HERMES = hermes("search_web", {"queries": ["a", "b"]})




CASES = [
    Case("unknown_function", xml("translate", [("text", "hi")]), "qwen3_coder", "unknown_function", "undeclared",
         "translate", "error", False),
    Case("unknown_function_hermes", hermes("create", {"title": "x"}), "hermes", "unknown_function", "undeclared",
         "create", "error", False),
    Case("garbled_suffix_cjk", xml("search_web英文明确", [("queries", '["a"]')]), "qwen3_coder",
         "garbled_function_name", "mixed_script", "search_web英文明确", "error", True),
    Case("garbled_suffix_version", xml("fetch_web_v2", [("urls", '["u"]')]), "qwen3_coder",
         "garbled_function_name", "junk_suffix", "fetch_web_v2", "error", True),
    Case("garbled_prefix", xml("._bash", [("command", "ls")]), "qwen3_coder", "garbled_function_name",
         "junk_prefix", "._bash", "error", True),
    Case("garbled_edit", hermes("serch_web", {"queries": ["a"]}), "hermes", "garbled_function_name",
         "edit_distance", "serch_web", "error", True),
    Case("garbled_case", xml("Search_Web", [("queries", '["a"]')]), "qwen3_coder", "garbled_function_name",
         "normalisation", "Search_Web", "error", True),
    Case("garbled_no_schema", xml("search_web英文", [("queries", '["a"]')]), "qwen3_coder",
         "garbled_function_name", "invalid_chars", "search_web英文", "error", True, tools=None),
    Case("stray_attr_param_close", xml("search_web", [("queries", '["a"]')], p_close='</parameter v2="">'),
         "qwen3_coder", "stray_attribute", "close_parameter", '</parameter v2="">', "error", True),
    Case("stray_attr_function_close", xml("search_web", [("queries", '["a"]')], fn_close='</function v2="">'),
         "qwen3_coder", "stray_attribute", "close_function", '</function v2="">', "warning", True),
    Case("stray_attr_call_open", xml("search_web", [("queries", '["a"]')], call_open='<tool_call id="1">'),
         "qwen3_coder", "stray_attribute", "open_tool_call", '<tool_call id="1">', "error", True),
    Case("stray_attr_function_open", "<tool_call>\n<function=search_web v2=\"\">\n<parameter=queries>\n[\"a\"]\n"
         "</parameter>\n</function>\n</tool_call>", "qwen3_coder", "stray_attribute", "open_function",
         '<function=search_web v2="">', "error", True),
    Case("malformed_fused_param", "<tool_call>\n<function=bash>\n<parameter=command=ls -la</parameter>\n</function>\n"
         "</tool_call>", "qwen3_coder", "malformed_tag", "fused_parameter_open", "<parameter=command=", "error", True),
    Case("malformed_close_slash", xml("search_web", [("queries", '["a"]')], p_close="</parameter/>"),
         "qwen3_coder", "malformed_tag", "close_variant", "</parameter/>", "error", True),
    Case("malformed_close_number", xml("search_web", [("queries", '["a"]')], p_close="</parameter1>"),
         "qwen3_coder", "malformed_tag", "close_variant", "</parameter1>", "error", True),
    Case("malformed_close_suffix", xml("search_web", [("queries", '["a"]')], p_close="</parameter_function>"),
         "qwen3_coder", "malformed_tag", "close_variant", "</parameter_function>", "error", True),
    Case("malformed_name_tag", "<tool_call>\n<function=bash>\n<name>bash</name>\n<parameter=command>\nls\n"
         "</parameter>\n</function>\n</tool_call>", "qwen3_coder", "malformed_tag", "description_tag",
         "<name>bash</name>", "warning", True),
    Case("malformed_open_no_gt", "<tool_call>\n<function=bash\n<parameter=command>\nls\n</parameter>\n</function>\n"
         "</tool_call>", "qwen3_coder", "malformed_tag", "open_missing_gt", "<function=bash", "error", True),
    Case("malformed_attr_syntax", "<tool_call>\n<function name=\"bash\">\n<parameter=command>\nls\n</parameter>\n"
         "</function>\n</tool_call>", "qwen3_coder", "malformed_tag", "attribute_syntax", '<function name="bash">',
         "error", True),
    Case("malformed_doubled_opener_hermes", "<tool_call><tool_call>\n" + GOOD_HERMES[len("<tool_call>\n"):],
         "hermes", "malformed_tag", "doubled_opener", None, "error", True),
    Case("malformed_stray_gt", GOOD_XML + ">", "qwen3_coder", "malformed_tag", "stray_gt", ">", "warning", True),
    Case("malformed_orphan_close", "Done.\n</parameter>\nThe answer is 4.", "qwen3_coder", "malformed_tag",
         "orphan_close", "</parameter>", "warning", None),
    Case("unclosed_param_before_param", "<tool_call>\n<function=bash>\n<parameter=command>\nls\n<parameter=timeout>\n5\n"
         "</parameter>\n</function>\n</tool_call>", "qwen3_coder", "unclosed_tag", "parameter_before_parameter",
         "<parameter=command>", "error", True),
    Case("unclosed_param_before_function_close", "<tool_call>\n<function=bash>\n<parameter=command>\nls\n"
         "</function>\n</tool_call>", "qwen3_coder", "unclosed_tag", "parameter_before_function_close",
         "<parameter=command>", "warning", True),
    Case("unclosed_function", "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</tool_call>",
         "qwen3_coder", "unclosed_tag", "function_at_call_close", "<function=bash>", "warning", True),
    Case("missing_call_close_end_xml", xml("bash", [("command", "ls")], call_close=""), "qwen3_coder",
         "missing_call_close", "at_end", "<tool_call>", "warning", True),
    Case("missing_call_close_end_hermes", GOOD_HERMES[: -len("\n</tool_call>")], "hermes", "missing_call_close",
         "at_end", "<tool_call>", "error", True),
    Case("missing_call_close_next_call", xml("bash", [("command", "ls")], call_close="") + "\n" + GOOD_XML,
         "qwen3_coder", "missing_call_close", "before_next_call", "<tool_call>", "error", True),
    Case("missing_call_open_bare_function", "Let me list.\n\n" + xml("bash", [("command", "ls")], call_open=""),
         "qwen3_coder", "missing_call_open", "bare_function", "<function=bash>", "error", True),
    Case("missing_call_open_bare_json", 'I will search.\n{"name": "search_web", "arguments": {"queries": ["a"]}}',
         "hermes", "missing_call_open", "bare_json", '{"name": "search_web", "arguments": {"queries": ["a"]}}',
         "error", True),
    Case("truncated_in_value", '<tool_call>\n<function=search_web>\n<parameter=queries>\n["Japan GDP',
         "qwen3_coder", "truncated_call", "inside_value", None, "error", False),
    Case("truncated_after_function", "<tool_call>\n<function=bash>\n<", "qwen3_coder", "truncated_call",
         "inside_function", None, "error", False),
    Case("truncated_after_open", "Let me search.\n<tool_call>\n", "qwen3_coder", "truncated_call", "after_open",
         None, "error", False),
    Case("truncated_hermes", '<tool_call>\n{"name": "search_web", "arguments": {"queries": ["Jap', "hermes",
         "truncated_call", "inside_json", None, "error", False),
    Case("nested_call", "<tool_call>\n<function=bash>\n<parameter=command>\n" + xml("fetch_web", [("urls", '["u"]')])
         + "\n</parameter>\n</function>\n</tool_call>", "qwen3_coder", "nested_call", "in_value", None, "error", False),
    Case("literal_tag_as_intended", xml("bash", [("command", 'echo "<tool_call>" > t.txt')]), "qwen3_coder",
         "literal_tag_text", "as_intended", "<tool_call>", "info", None),
    Case("literal_tag_mangled", xml("bash", [("command", 'echo "</parameter>" > t.txt')]), "qwen3_coder",
         "literal_tag_text", "mangled", "</parameter>", "error", False),
    Case("literal_tag_dropped_hermes", hermes("bash", {"command": 'echo "</tool_call>"'}), "hermes",
         "literal_tag_text", "dropped", "</tool_call>", "error", True),
    Case("format_json_in_xml", GOOD_HERMES, "qwen3_coder", "format_mismatch", "json_in_xml_call",
         '{"name": "search_web", "arguments": {"queries": ["a", "b"]}}', "error", True),
    Case("format_json_in_function", '<tool_call>\n<function=search_web>\n{"queries": ["a"]}\n</function>\n</tool_call>',
         "qwen3_coder", "format_mismatch", "json_in_function", '{"queries": ["a"]}', "error", True),
    Case("format_xml_in_hermes", GOOD_XML, "hermes", "format_mismatch", "xml_in_json", None, "error", True),
    Case("format_hybrid_function_eq", '<tool_call>\n{"function=fetch_web","arguments":{"urls":["u"]}}\n</tool_call>',
         "hermes", "format_mismatch", "hybrid_name_eq", '"function=fetch_web"', "error", True),
    Case("format_hybrid_name_eq", '<tool_call>\n{"name="fetch_web", "arguments": {"urls": ["u"]}}\n</tool_call>',
         "hermes", "format_mismatch", "hybrid_name_eq", '"name="', "error", True),
    Case("format_key_eq_value", '<tool_call>\n{"name": "bash", "arguments": {"command=ls", "timeout=5"}}\n'
         "</tool_call>", "hermes", "format_mismatch", "key_eq_value", '"command=ls"', "error", True),
    Case("invalid_json_doubled_braces", '<tool_call>\n{{"name": "bash", "arguments": {"command": "ls"}}}\n</tool_call>',
         "hermes", "invalid_json", "doubled_braces", "{{", "error", True),
    Case("invalid_json_trailing_comma", '<tool_call>\n{"name": "bash", "arguments": {"command": "ls",}}\n</tool_call>',
         "hermes", "invalid_json", "trailing_comma", ",", "error", True),
    Case("invalid_json_single_quotes", "<tool_call>\n{'name': 'bash', 'arguments': {'command': 'ls'}}\n</tool_call>",
         "hermes", "invalid_json", "single_quotes", None, "error", True),
    Case("invalid_json_curly_quotes", "<tool_call>\n{“name”: “bash”, “arguments”: {“command”: “ls”}}\n</tool_call>",
         "hermes", "invalid_json", "curly_quotes", "“", "error", True),
    Case("invalid_json_leading_junk", '<tool_call>\nuser{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>',
         "hermes", "invalid_json", "leading_junk", "user", "error", True),
    Case("invalid_json_trailing_junk", '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}})\n</tool_call>',
         "hermes", "invalid_json", "trailing_junk", ")", "error", True),
    Case("invalid_json_concatenated", '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n'
         '{"name": "bash", "arguments": {"command": "pwd"}}\n</tool_call>', "hermes", "invalid_json",
         "concatenated_objects", None, "error", False),
    Case("invalid_json_hopeless", '<tool_call>\n{"name": "bash", "arguments": {"command": ls -la}}\n</tool_call>',
         "hermes", "invalid_json", "syntax", None, "error", False),
    Case("invalid_arguments_parameters", '<tool_call>\n{"name": "bash", "parameters": {"command": "ls"}}\n</tool_call>',
         "hermes", "invalid_arguments", "parameters_key", None, "error", True),
    Case("invalid_arguments_missing_name", '<tool_call>\n{"arguments": {"command": "ls"}}\n</tool_call>', "hermes",
         "invalid_arguments", "missing_name", None, "error", False),
    Case("invalid_arguments_flattened", '<tool_call>\n{"name": "bash", "command": "ls"}\n</tool_call>', "hermes",
         "invalid_arguments", "flattened", None, "error", True),
    Case("invalid_arguments_string", '<tool_call>\n{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}\n'
         "</tool_call>", "hermes", "invalid_arguments", "arguments_string", None, "error", True),
    Case("invalid_arguments_list", '<tool_call>\n[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "bash", '
         '"arguments": {"command": "pwd"}}]\n</tool_call>', "hermes", "invalid_arguments", "call_not_object", None,
         "error", False),
    Case("invalid_arguments_not_object", '<tool_call>\n{"name": "bash", "arguments": ["ls"]}\n</tool_call>', "hermes",
         "invalid_arguments", "arguments_not_object", None, "error", False),
    Case("unknown_parameter", xml("bash", [("command", "ls"), ("verbose", "true")]), "qwen3_coder",
         "unknown_parameter", "undeclared", "verbose", "warning", False),
    Case("unknown_parameter_garbled", xml("search_web", [("querie", '["a"]')]), "qwen3_coder", "unknown_parameter",
         "garbled", "querie", "warning", True),
    Case("missing_required", xml("bash", [("timeout", "5")]), "qwen3_coder", "missing_required_parameter", "missing",
         "bash", "warning", False),
    Case("missing_required_hermes", hermes("fetch_web", {}), "hermes", "missing_required_parameter", "missing",
         "fetch_web", "warning", False),
    Case("duplicate_same", xml("bash", [("command", "ls"), ("command", "ls")]), "qwen3_coder", "duplicate_parameter",
         "same_value", "command", "warning", True),
    Case("duplicate_different", xml("bash", [("command", "ls"), ("command", "pwd")]), "qwen3_coder",
         "duplicate_parameter", "different_values", "command", "error", False),
    Case("type_integer", xml("search_web", [("queries", '["a"]'), ("limit", "abc")]), "qwen3_coder", "type_mismatch",
         "integer", "abc", "warning", False),
    Case("type_number", xml("search_web", [("queries", '["a"]'), ("ratio", "half")]), "qwen3_coder", "type_mismatch",
         "number", "half", "warning", False),
    Case("type_boolean", xml("search_web", [("queries", '["a"]'), ("safe", "yes")]), "qwen3_coder", "type_mismatch",
         "boolean", "yes", "error", False),
    Case("type_array", xml("search_web", [("queries", "Japan GDP")]), "qwen3_coder", "type_mismatch", "array",
         "Japan GDP", "warning", False),
    Case("type_object", xml("search_web", [("queries", '["a"]'), ("filters", "[1, 2]")]), "qwen3_coder",
         "type_mismatch", "object", "[1, 2]", "warning", False),
    Case("type_enum", xml("search_web", [("queries", '["a"]'), ("mode", "slow")]), "qwen3_coder", "type_mismatch",
         "enum", "slow", "warning", False),
    Case("type_json", hermes("search_web", {"queries": "Japan GDP"}), "hermes", "type_mismatch", "json_type",
         '"Japan GDP"', "warning", False),
    Case("text_after_call_forbidden", GOOD_XML + "\n\nI will wait for the results.", "qwen3_coder", "text_after_call",
         "forbidden", "I will wait for the results.", "warning", True, forbids_suffix=True),
    Case("text_after_call_allowed", GOOD_HERMES + "\nLet me know!", "hermes", "text_after_call", "allowed",
         "Let me know!", "info", None),
    Case("fabricated_role_marker", GOOD_XML + "<|im_end|>\n<|im_start|>user\n<tool_response>\nmade up\n</tool_response>",
         "qwen3_coder", "fabricated_tool_response", "role_marker", None, "error", True, forbids_suffix=True),
    Case("fabricated_response_tag", GOOD_HERMES + "\n<tool_response>\n{\"results\": []}\n</tool_response>\nNo results.",
         "hermes", "fabricated_tool_response", "response_tag", None, "error", True),
    Case("call_inside_think_drafted", "<think>\nMaybe " + GOOD_XML + "\n</think>\n\nI need more context first.",
         "qwen3_coder", "call_inside_think", "drafted", GOOD_XML, "warning", True),
    Case("call_inside_think_preempts", "<think>\n" + GOOD_XML + "\n</think>\n" + GOOD_XML, "qwen3_coder",
         "call_inside_think", "preempts", GOOD_XML, "error", True),
    Case("empty_call", "Searching.\n<tool_call>\n</tool_call>", "qwen3_coder", "empty_call", "empty",
         "<tool_call>\n</tool_call>", "error", False),
    Case("empty_call_junk", "<tool_call>\nsearch the web please\n</tool_call>", "qwen3_coder", "empty_call",
         "no_function", "search the web please", "error", False),
    Case("foreign_invoke", '<function_calls>\n<invoke name="bash">\n<parameter name="command">ls</parameter>\n'
         "</invoke>\n</function_calls>", "qwen3_coder", "foreign_format", "markup", None, "error", True),
    Case("foreign_gemma", "<|tool_call>call:bash{command:<|\"|>ls<|\"|>}<tool_call|>", "hermes", "foreign_format",
         "markup", None, "error", False),
    Case("foreign_glm_body", "<tool_call>bash<arg_key>command</arg_key><arg_value>ls</arg_value></tool_call>",
         "qwen3_coder", "foreign_format", "body", None, "error", False),
    Case("foreign_python_body", '<tool_call>\nbash(command="ls")\n</tool_call>', "hermes", "foreign_format", "body",
         None, "error", False),
    Case("multiple_functions", "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n"
         "<function=bash>\n<parameter=command>\npwd\n</parameter>\n</function>\n</tool_call>", "qwen3_coder",
         "multiple_functions_in_call", "several", None, "warning", True),
    Case("junk_in_call", "<tool_call>\n<function=bash>\nplease run\n<parameter=command>\nls\n</parameter>\n"
         "</function>\n</tool_call>", "qwen3_coder", "junk_in_call", "between_tags", "please run", "warning", False),
    Case("invented_tag", "<terminal_command>\nls -la\n</terminal_command>", "qwen3_coder", "invented_tag", "element",
         None, "info", None),
    Case("invented_tag_tool_named", "<fetch_web>\nhttps://x.org\n</fetch_web>", "qwen3_coder", "invented_tag",
         "tool_named", None, "error", None),
    Case("divergence_array_literals", xml("search_web", [("queries", '["a", true, null]')]), "qwen3_coder",
         "verl_conversion_divergence", "literal_eval", '["a", true, null]', "info", None),
    Case("divergence_null_string", xml("bash", [("command", "null")]), "qwen3_coder", "verl_conversion_divergence",
         "null_string", "null", "info", None),
    Case("unclosed_think", "<think>\nI should search for", "qwen3_coder", "unclosed_think", "at_end", "<think>",
         "info", None),
    Case("unbalanced_think_unclosed", "<think>\nA square.\n<answer>\n<svg/>\n</answer>", "none", "unbalanced_think",
         "unclosed", "<think>", "warning", None),
    Case("unbalanced_think_reopened", "<think>\nA<think>\nB</think>\n<answer>4</answer>", "none", "unbalanced_think",
         "reopened", "<think>", "warning", None),
    # ReAct text (format react)
    Case("react_missing_input", "Thought: search it\nAction: bash\n", "react", "missing_action_input", "missing",
         "Action: bash", "error", False),
    Case("react_empty_input", "Action: bash\nAction Input:   \n", "react", "missing_action_input", "empty",
         "Action Input:   ", "warning", False),
    Case("react_multiple", "Action: bash\nAction Input: ls\nAction: bash\nAction Input: pwd", "react",
         "multiple_actions", "several", "Action: bash\nAction Input: ls", "error", False),
    Case("react_after_final", "Final Answer: 42\nAction: bash\nAction Input: ls", "react",
         "action_after_final_answer", "after", "Final Answer: ", "error", False),
    Case("react_observation", "Action: bash\nAction Input: ls\nObservation: a.txt", "react",
         "model_written_observation", "after_action", "Observation: a.txt", "error", False),
    Case("react_observation_alone", "Thought: done\nObservation: a.txt", "react", "model_written_observation",
         "without_action", "Observation: a.txt", "warning", None),
    Case("react_orphan_input", "Thought: Search\nAction Input: NBA", "react", "missing_call_open", "action_line",
         "Action Input: NBA", "error", None),
    Case("react_text_after", "Action: bash\nAction Input: ls\nThought: then I wait", "react", "text_after_call",
         "into_input", "Thought: then I wait", "warning", True),
    Case("react_unknown_param", 'Action: bash\nAction Input: {"comand": "ls"}', "react", "unknown_parameter",
         "garbled", "comand", "warning", True),
]


def run(case: Case):
    tools = TOOLS if case.tools == "default" else case.tools
    ctx = TurnContext(forbids_suffix=case.forbids_suffix, schema_known=tools is not None)
    return analyze_turn(case.text, tool_format=case.fmt, tools=tools, context=ctx)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    ta = run(case)
    assert not [f for f in ta.findings if f.category == "internal_error"]
    hits = [f for f in ta.findings if f.category == case.category and f.rule_id.endswith("/" + case.variant)]
    assert hits, [(f.category, f.rule_id) for f in ta.findings]
    f = hits[0]
    assert f.severity == case.severity
    assert f.message and "{" not in f.message.replace("{{", "").split("`")[0]
    if case.span is not None:
        assert case.text[f.start:f.end] == case.span
    if f.call_index is not None:
        call = ta.calls[f.call_index]
        assert call.raw == case.text[call.start:call.end]
        if f.severity in ("error", "warning"):
            # an error makes the call malformed; warnings alone leave it running, with status warning
            want = "malformed" if any(x.severity == "error" and x.call_index == f.call_index
                                      for x in ta.findings) else "warning"
            assert call.status == want and case.category in call.categories
        if case.repaired is True:
            assert call.repaired is not None, call.repair_note
            again = analyze_turn(call.repaired, tool_format=case.fmt, tools=TOOLS if case.tools == "default"
                                 else case.tools, context=TurnContext())
            assert len(again.calls) == 1
            assert not [g for g in again.findings if g.severity in ("error", "warning")], again.findings
            assert again.calls[0].arguments == call.repaired_arguments
            assert call.repair_note.startswith("repaired")
        elif case.repaired is False:
            assert call.repaired is None
            assert call.repair_note and call.repair_note.startswith("no repair")


def test_every_category_has_a_synthetic_case() -> None:
    covered = {c.category for c in CASES}
    # internal_error and verl_mismatch name gaps in trajlab itself (a crash; a call verl reads differently for a
    # reason no other category names): no text is known to produce them
    missing = set(load_taxonomy()) - covered - {"internal_error", "verl_mismatch"}
    assert not missing, sorted(missing)


@pytest.mark.parametrize("text,fmt", [(GOOD_XML, "qwen3_coder"), (GOOD_HERMES, "hermes")])
def test_well_formed_has_no_findings(text: str, fmt: str) -> None:
    ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext(forbids_suffix=True))
    assert ta.findings == []
    (call,) = ta.calls
    assert (call.status, call.categories, call.function_name, call.matched_tool) == ("ok", [], "search_web", "search_web")
    assert call.arguments == {"queries": ["a", "b"]}
    assert call.repaired is None and call.repair_note is None


def test_no_markup_fast_path_is_one_text_span() -> None:
    text = "The answer is 42, see the table <b>above</b>."
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    assert ta.calls == [] and ta.findings == []
    assert [(s.kind, s.start, s.end) for s in ta.spans] == [("text", 0, len(text))]
    assert analyze_turn("", tool_format="hermes", tools=None, context=TurnContext()).spans == []


def test_spans_of_a_call_with_think_and_preamble() -> None:
    text = "<think>\nplan\n</think>\n\nSearching.\n" + GOOD_XML
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    kinds = [(s.kind, text[s.start:s.end]) for s in ta.spans]
    assert kinds[:3] == [("structural", "<think>"), ("think", "\nplan\n"), ("structural", "</think>")]
    assert ("function_name", "search_web") in kinds
    assert ("param_name", "queries") in kinds
    assert ("param_value", '["a", "b"]') in kinds
    assert ("text", "\n\nSearching.\n") in kinds
    assert all(s.call_index == 0 for s in ta.spans if s.kind in ("function_name", "param_name", "param_value"))


def test_hermes_spans_locate_name_keys_and_values() -> None:
    ta = analyze_turn(GOOD_HERMES, tool_format="hermes", tools=TOOLS, context=TurnContext())
    got = [(s.kind, GOOD_HERMES[s.start:s.end]) for s in ta.spans if s.kind != "structural"]
    assert got == [("function_name", "search_web"), ("param_name", "queries"), ("param_value", '["a", "b"]')]


def test_turn_starting_inside_think() -> None:
    """Qwen3.5 thinking: the generation prompt opened <think>, the turn only closes it."""
    text = "I will draft " + GOOD_XML + "\n</think>\n\n" + GOOD_XML
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    assert ta.spans[0].kind == "think"
    assert [c.status for c in ta.calls] == ["malformed", "ok"]
    assert ta.calls[0].categories == ["call_inside_think"]


def test_two_calls_and_call_indices() -> None:
    text = GOOD_XML + "\n" + xml("fetch_web", [("urls", '["https://x.org"]')])
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext(forbids_suffix=True))
    assert [c.function_name for c in ta.calls] == ["search_web", "fetch_web"]
    assert [c.call_index for c in ta.calls] == [0, 1]
    assert ta.findings == []
    assert ta.calls[1].arguments == {"urls": ["https://x.org"]}


def test_value_conversion_follows_verl() -> None:
    text = xml("search_web", [("queries", "['a', 'b']"), ("limit", "7"), ("safe", "True"), ("ratio", "2.0"),
                              ("filters", '{"lang": "en"}')])
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    assert ta.calls[0].arguments == {"queries": ["a", "b"], "limit": 7, "safe": True, "ratio": 2,
                                     "filters": {"lang": "en"}}
    assert not [f for f in ta.findings if f.severity != "info"]
    # without a schema every value stays a string (verl: tool not declared), except "null"
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=None, context=TurnContext())
    assert ta.calls[0].arguments["limit"] == "7"
    assert ta.findings == []


def test_inline_values_are_well_formed() -> None:
    text = "<tool_call>\n<function=bash>\n<parameter=command>ls -la</parameter>\n</function>\n</tool_call>"
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext())
    assert ta.findings == [] and ta.calls[0].arguments == {"command": "ls -la"}


def test_format_dependent_severity() -> None:
    xml_open = analyze_turn(xml("bash", [("command", "ls")], call_close=""), tool_format="qwen3_coder",
                            tools=TOOLS, context=TurnContext())
    js_open = analyze_turn(GOOD_HERMES[: -len("</tool_call>")], tool_format="hermes", tools=TOOLS,
                           context=TurnContext())
    sev = {f.rule_id: f.severity for f in xml_open.findings + js_open.findings}
    assert sev["qwen3_coder/missing_call_close/at_end"] == "warning"
    assert sev["hermes/missing_call_close/at_end"] == "error"


def test_fused_parameter_repair_splits_the_tag() -> None:
    text = "<tool_call>\n<function=bash>\n<parameter=command=ls -la</parameter>\n</function>\n</tool_call>"
    call = analyze_turn(text, tool_format="qwen3_coder", tools=TOOLS, context=TurnContext()).calls[0]
    assert call.repaired == "<tool_call>\n<function=bash>\n<parameter=command>ls -la</parameter>\n</function>\n</tool_call>"
    assert call.repaired_arguments == {"command": "ls -la"}


def test_garbled_ambiguous_gets_no_repair() -> None:
    tools = [{"name": n, "parameters": {"type": "object", "properties": {}}} for n in ("get_user", "get_used")]
    ta = check_text(xml("get_usex", []), tools=tools, tool_format="qwen3_coder")
    f = next(f for f in ta.findings if f.category == "garbled_function_name")
    assert f.rule_id.endswith("/ambiguous") and "get_used" in f.message and "get_user" in f.message
    assert ta.calls[0].repaired is None and "equally near" in ta.calls[0].repair_note


def test_repair_keeps_raw_text_up_to_the_malformation() -> None:
    text = xml("search_web", [("queries", '["a"]'), ("limit", "3")], p_close='</parameter v2="">')
    call = check_text(text, tools=TOOLS, tool_format="qwen3_coder").calls[0]
    first = next(i for i, (a, b) in enumerate(zip(call.raw, call.repaired, strict=False)) if a != b)
    assert call.raw[:first].endswith("</parameter")


def test_detect_tool_format_from_prompt_and_output() -> None:
    qwen35 = ("system\n# Tools\n\n<tools>\n{\"name\": \"bash\"}\n</tools>\n\nIf you choose to call a function ONLY reply "
              "in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n"
              "<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call>\nuser\nhi\nassistant\n")
    hermes_p = ("system\n# Tools\n\n<tools>\n{}\n</tools>\n\nFor each function call, return a json object with function "
                "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>\nuser\nhi\nassistant\n")
    assert detect_tool_format(qwen35) == "qwen3_coder"
    assert detect_tool_format(hermes_p, GOOD_XML) == "hermes"  # the prompt decides first
    assert detect_tool_format("user\nhi\nassistant\n", GOOD_XML) == "qwen3_coder"
    assert detect_tool_format("user\nhi\nassistant\n", GOOD_HERMES) == "hermes"
    assert detect_tool_format("user\nhi\nassistant\n", "The answer is 4.") == "none"
    assert detect_tool_format("<tools>\n<function>\n<name>x</name>", "", tools_source="prompt_xml") == "qwen3_coder"
    assert prompt_forbids_suffix(qwen35)
    assert not prompt_forbids_suffix(hermes_p)


def test_render_call_and_parse_call_round_trip() -> None:
    args = {"queries": ["a", "b"], "limit": 3, "safe": True, "mode": "fast", "filters": {"lang": "en"}}
    for fmt in ("qwen3_coder", "hermes"):
        text = render_call("search_web", args, fmt)
        ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext(forbids_suffix=True))
        assert ta.findings == [], (fmt, ta.findings)
        assert parse_call(text, fmt, TOOLS) == ("search_web", args)
    assert render_call("bash", {"command": "ls"}, "qwen3_coder") == (
        "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>")
    assert render_call("bash", {"command": "ls"}, "hermes") == (
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>')
    assert parse_call("no call here", "hermes") is None


def test_explain_fills_templates_and_falls_back() -> None:
    msg = explain("garbled_function_name", name="search_web英文", nearest="search_web", how="with junk")
    assert "search_web英文" in msg and "`search_web`" in msg
    assert explain("garbled_function_name") == load_taxonomy()["garbled_function_name"]["generic"]
    detail = explain("unclosed_tag", variant="parameter_before_parameter", tag="<parameter=a>", closer="</parameter>")
    assert "<parameter=a>" in detail and "lookahead" in detail
    assert explain("no_such_category") == "no_such_category"


def test_bare_fragments_inside_think_are_not_calls() -> None:
    text = ('<think>\nI could call {"name": "search_web", "arguments": {"queries": ["a"]}} or write\n'
            '<function=search_web> ... but let me answer directly.\n</think>\n\nThe answer is 4.')
    for fmt in ("hermes", "qwen3_coder"):
        ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
        assert ta.calls == [] and not [f for f in ta.findings if f.severity != "info"], ta.findings

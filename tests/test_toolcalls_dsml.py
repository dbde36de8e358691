"""The DeepSeek DSML call formats (V3.2 ``deepseek_v32``, V4 ``deepseek_v4``): detected without being told, good calls
clean, every broken kind a named finding on a located span, repairs that re-classify clean, and verl 0.9.1's
``deepseek_v4`` reading as reproduced (the reproduction is checked against verl's own parser in
tests/test_verl_dsml_in_verl.py)."""

from __future__ import annotations

import pytest
from helpers.dsml_cases import TOOLS, cases

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn
from trajlab.toolcalls.detect import detect_tool_format
from trajlab.toolcalls.formats.dsml.verl_reading import verl_dsml_calls, verl_dsml_content
from trajlab.toolcalls.verl_parser import verl_calls

VERSIONS = ("deepseek_v32", "deepseek_v4")
KINDS = tuple(cases("deepseek_v4"))


def _run(text: str, fmt: str = "none"):
    return analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_read_and_named(version, kind):
    text, rule = cases(version)[kind]
    # not told the format: detected from the markup (an invoke without any block says no version: the prompt's
    # tool block decides, see test_detection_from_the_prompt_and_the_markup)
    ta = _run(text, version if kind == "bare_invoke" else "none")
    assert ta.calls, kind
    assert {c.format for c in ta.calls} == {version}, (kind, [c.format for c in ta.calls])
    errors = [f for f in ta.findings if f.severity in ("error", "warning")]
    if not rule:
        assert not errors, [f.rule_id for f in errors]
        assert all(c.status == "ok" for c in ta.calls)
        return
    hit = [f for f in ta.findings if f.rule_id == f"{version}/{rule}"]
    assert hit, (kind, [f.rule_id for f in ta.findings])
    f = hit[0]
    assert f.severity in ("error", "warning") and 0 <= f.start < f.end <= len(text), f
    assert any(c.status == "malformed" for c in ta.calls)
    # the span covers the markup the finding is about (a tag, a name, a value), not the whole turn
    assert f.end - f.start < len(text)


def test_good_calls_read_the_arguments_and_verl_agrees():
    text, _ = cases("deepseek_v4")["good_two_calls"]
    ta = _run(text)
    assert [(c.function_name, c.arguments) for c in ta.calls] == [
        ("get_weather", {"city": "Beijing", "days": 3}), ("search", {"query": "Beijing"})]
    assert [(v.name, v.arguments) for v in verl_calls(text, "deepseek_v4", None)] == [
        ("get_weather", {"city": "Beijing", "days": 3}), ("search", {"query": "Beijing"})]
    assert verl_dsml_content(text) == "I will look it up."


@pytest.mark.parametrize("kind", ["doubled_bars", "bare_invoke", "corrupted_invoke_closer", "other_version_closer",
                                  "unclosed_block", "unclosed_parameter", "stray_attribute", "string_flag_missing",
                                  "no_prefix_invoke", "closer_with_attribute"])
def test_broken_markup_is_repaired_by_re_rendering(kind):
    text, _ = cases("deepseek_v4")[kind]
    ta = _run(text, "deepseek_v4")
    c = ta.calls[0]
    assert c.repaired is not None, (kind, c.repair_note)
    again = _run(c.repaired, "deepseek_v4")
    assert [x.status for x in again.calls] == ["ok"] and again.calls[0].arguments == {"city": "Beijing", "days": 3}
    assert [(v[0], v[1]) for v in verl_dsml_calls(c.repaired)] == [
        ("get_weather", {"city": "Beijing", "days": 3})]


def test_verl_reading_of_the_broken_kinds():
    """What verl 0.9.1's deepseek_v4 parser executes (call-formats.md §6), as reproduced."""
    c = cases("deepseek_v4")
    got = {k: [(v[0], v[1]) for v in verl_dsml_calls(t)] for k, (t, _) in c.items()}
    for kind in ("doubled_bars", "bare_invoke", "corrupted_invoke_closer", "other_version_closer", "unclosed_block",
                 "truncated", "no_prefix_invoke"):
        assert got[kind] == [], kind  # no call at all: the trajectory ends
    # a stray attribute runs the parameter pattern on into the next one: a parameter named by the markup
    (name, args), = got["stray_attribute"]
    assert name == "get_weather" and "city" not in args and any("v2" in k for k in args)
    # an unclosed parameter swallows the next one
    assert got["unclosed_parameter"] == [("get_weather", {"city": 'Beijing\n<｜DSML｜parameter name="days" '
                                                                  'string="false">3'})]
    assert got["string_false_not_json"] == [("get_weather", {"city": "Beijing", "days": "three days"})]
    assert got["garbled_name"][0][0] == "get_weather英文"  # executed as written


def test_detection_from_the_prompt_and_the_markup():
    for version, blk in (("deepseek_v32", "function_calls"), ("deepseek_v4", "tool_calls")):
        prompt = f'You can invoke functions by writing a "<｜DSML｜{blk}>" block like the following'
        assert detect_tool_format(prompt) == version
        assert detect_tool_format("", cases(version)["good"][0]) == version
    # V4's block closed with V3.2's closer is still V4 (the opener decides); a bare invoke is V4's
    assert detect_tool_format("", cases("deepseek_v4")["other_version_closer"][0]) == "deepseek_v4"
    assert detect_tool_format("", cases("deepseek_v4")["bare_invoke"][0]) == "deepseek_v4"
    # Hermes and the other families are not taken for DSML
    assert detect_tool_format("", '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>') == "hermes"


def test_eos_inside_the_text_is_removed_like_verl_does():
    text, _ = cases("deepseek_v4")["good"]
    with_eos = text + "<｜end▁of▁sentence｜>"
    (name, args, anchor, end), = verl_dsml_calls(with_eos)
    assert (name, args) == ("get_weather", {"city": "Beijing", "days": 3})
    assert with_eos[anchor:].startswith("<｜DSML｜invoke") and with_eos[end - len("</｜DSML｜invoke>"):end] == \
        "</｜DSML｜invoke>"

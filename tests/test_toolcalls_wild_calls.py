"""Calls of the wild that used to go unseen or be read in the wrong format (issue 29, items 4 and 5).

* gpt-oss (harmony): a ``commentary`` message with JSON arguments and no recipient (no ``to=functions.NAME``),
  markers kept or stripped by the decode, is a broken call (``malformed_tag/harmony_missing_recipient``), found
  without being told the format; a commentary preamble to the user and JSON in the analysis channel are not calls.
* GLM: a call with no arguments (``<tool_call>NAME</tool_call>`` for 4.7, ``<tool_call>NAME\\n</tool_call>`` for
  4.5/4.6) is detected as GLM from its markup alone, and from the sentence of GLM's tool block in the prompt; a
  Hermes call or a Hermes prompt stays Hermes.
"""

from __future__ import annotations

import json

import pytest

from trajlab.toolcalls import check_text, detect_tool_format

TOOLS = [
    {"name": "list_mailboxes", "description": "List the mailboxes.", "parameters": {"type": "object", "properties": {}}},
    {"name": "get_weather", "description": "Weather for a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
]
ARGS = '{"city": "Paris"}'


@pytest.mark.parametrize(("text", "span"), [
    (f"<|start|>assistant<|channel|>commentary json<|message|>{ARGS}<|call|>",
     "<|start|>assistant<|channel|>commentary json"),
    (f"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
     f"<|constrain|>json<|message|>{ARGS}<|call|>", "<|start|>assistant<|channel|>commentary <|constrain|>json"),
    (f"<|channel|>commentary<|message|>{ARGS}<|call|>", "<|channel|>commentary"),
    (f"analysisNeed the weather.assistantcommentary json{ARGS}", "commentary json"),
    (f"analysisNeed the weather.assistantcommentary{ARGS}", "commentary"),
], ids=["kept", "kept_constrain", "kept_no_start", "stripped", "stripped_no_type"])
def test_harmony_call_without_recipient_is_a_named_broken_call(text: str, span: str) -> None:
    assert detect_tool_format("", text) == "gpt_oss"
    ta = check_text(text, tools=TOOLS)
    assert [(c.format, c.function_name, c.status) for c in ta.calls] == [("gpt_oss", None, "malformed")]
    assert ta.calls[0].arguments == {"city": "Paris"}
    hit = [f for f in ta.findings if f.rule_id == "gpt_oss/malformed_tag/harmony_missing_recipient"]
    assert hit and hit[0].severity == "error", [f.rule_id for f in ta.findings]
    assert text[hit[0].start:hit[0].end] == span
    assert "no recipient" in hit[0].message and "to=functions.NAME" in hit[0].message
    # which tool was meant is not written: no repair is offered
    assert ta.calls[0].repaired is None and (ta.calls[0].repair_note or "").startswith("no repair")


def test_harmony_recipient_call_and_text_messages_are_unchanged() -> None:
    good = (f"<|channel|>analysis<|message|>Need {ARGS}.<|end|><|start|>assistant<|channel|>commentary "
            f"to=functions.get_weather <|constrain|>json<|message|>{ARGS}<|call|>")
    ta = check_text(good, tools=TOOLS, tool_format="gpt_oss")
    assert ta.findings == [] and [c.function_name for c in ta.calls] == ["get_weather"]
    # a commentary preamble to the user (plain text, ended by <|end|>) and JSON thought on the analysis channel
    prose = ("<|channel|>commentary<|message|>Let me look that up for you.<|end|>"
             f"<|start|>assistant<|channel|>analysis<|message|>{ARGS}<|end|>"
             "<|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>")
    ta = check_text(prose, tools=TOOLS, tool_format="gpt_oss")
    assert ta.calls == [] and not [f for f in ta.findings if f.severity == "error"], ta.findings
    stripped = "analysisThe commentary says sunny.assistantfinalIt is sunny."
    assert check_text(stripped, tools=TOOLS, tool_format="gpt_oss").calls == []


@pytest.mark.parametrize(("text", "fmt"), [
    ("<tool_call>list_mailboxes</tool_call>", "glm47"),
    ("I'll list them.<tool_call>list_mailboxes</tool_call>", "glm47"),
    ("<tool_call>list_mailboxes\n</tool_call>", "glm45"),
    ("\n<think>List them.</think>\n<tool_call>list_mailboxes\n</tool_call>", "glm45"),
])
def test_glm_zero_argument_call_is_detected_as_glm(text: str, fmt: str) -> None:
    assert detect_tool_format("", text) == fmt
    ta = check_text(text, tools=TOOLS)
    assert [(c.format, c.function_name, c.status) for c in ta.calls] == [(fmt, "list_mailboxes", "ok")]
    assert [f for f in ta.findings if f.severity in ("error", "warning")] == []


def test_glm_prompt_sentence_decides_and_hermes_stays_hermes() -> None:
    tools = "<tools>\n" + "\n".join(json.dumps({"type": "function", "function": t}) for t in TOOLS) + "\n</tools>"
    sentence = "For each function call, output the function name and arguments within the following XML format:"
    # a GLM tool block whose example line is not the template's verbatim: its sentence still names the family
    glm_prompt = f"<|system|>\n# Tools\n\n{tools}\n\n{sentence}\n<tool_call>NAME\n<arg_key>K</arg_key>..."
    assert detect_tool_format(glm_prompt, "") == "glm45"
    glm47_prompt = (f"{tools}\n\n{sentence}\n<tool_call>{{function-name}}<arg_key>{{arg-key-1}}</arg_key>"
                    "<arg_value>{arg-value-1}</arg_value>...</tool_call>")
    assert detect_tool_format(glm47_prompt, "<tool_call>list_mailboxes</tool_call>") == "glm47"
    hermes_prompt = (f"# Tools\n\n{tools}\n\nFor each function call, return a json object with function name and "
                     "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                     '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
    # under a Hermes prompt a bare name is Hermes' broken call, not GLM's
    assert detect_tool_format(hermes_prompt, "<tool_call>list_mailboxes</tool_call>") == "hermes"
    hermes = '<tool_call>\n{"name": "list_mailboxes", "arguments": {}}\n</tool_call>'
    assert detect_tool_format("", hermes) == "hermes"
    assert detect_tool_format("", "<tool_call>\nlist_mailboxes\n</tool_call>") == "hermes"

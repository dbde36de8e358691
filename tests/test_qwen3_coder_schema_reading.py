"""Schema-guided reading of ``<parameter=X>`` inside a qwen3_coder value (issue 22): where the tool does not declare
X, the tag is text of the value (as vLLM reads "parameter-like lines inside write_file content"); a declared X
still starts a new parameter; without a schema nothing changes. verl's own reading stays what ``verl_executes``
reports, so a divergence is flagged."""

from __future__ import annotations

import pytest

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn

WRITE_FILE = [{"type": "function", "function": {"name": "write_file", "description": "Write a file.", "parameters": {
    "type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["file_path", "content"]}}}]


def _call(body: str) -> str:
    return f"<tool_call>\n<function=write_file>\n{body}</function>\n</tool_call>"


def _one(text: str, tools=WRITE_FILE):
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=tools, context=TurnContext(is_last_turn=True))
    assert len(ta.calls) == 1
    return ta.calls[0], ta.findings


# the content documents an edit call: parameter-like lines with their own closing tags
DOC = ("Use the edit tool like this:\n<parameter=old_string>\nfoo\n</parameter>\n<parameter=new_string>\nbar\n"
       "</parameter>\nThen save.")
LINES = "Example:\n<parameter=new_string>\nreplacement text"


def test_undeclared_parameter_lines_are_text_of_the_content():
    text = _call(f"<parameter=file_path>\n/tmp/notes.md\n</parameter>\n<parameter=content>\n{DOC}\n</parameter>\n")
    call, findings = _one(text)
    assert call.arguments == {"file_path": "/tmp/notes.md", "content": DOC}
    assert [f.category for f in findings if f.severity in ("error", "warning")] == ["literal_tag_text"]
    # verl 0.9.1 cuts the content at the first `</parameter>` and executes old/new_string as parameters: flagged
    assert call.verl_executes == "differently"
    assert call.verl_arguments == {"file_path": "/tmp/notes.md",
                                   "content": "Use the edit tool like this:\n<parameter=old_string>\nfoo",
                                   "new_string": "bar"}


def test_parameter_like_lines_without_their_own_closer():
    text = _call(f"<parameter=file_path>\n/tmp/a.md\n</parameter>\n<parameter=content>\n{LINES}\n</parameter>\n")
    call, findings = _one(text)
    assert call.status == "ok" and call.arguments == {"file_path": "/tmp/a.md", "content": LINES}
    assert call.verl_executes == "as_intended"  # verl reads the value up to the first `</parameter>` too
    assert [f.category for f in findings] == ["literal_tag_text"] and findings[0].severity == "info"


def test_a_declared_parameter_still_starts_a_new_parameter():
    text = _call("<parameter=content>\nExample:\n<parameter=file_path>\n/tmp/a.md\n</parameter>\n")
    call, findings = _one(text)
    assert call.arguments == {"content": "Example:", "file_path": "/tmp/a.md"}
    assert "unclosed_tag" in call.categories


def test_without_a_schema_nothing_changes():
    text = _call(f"<parameter=file_path>\n/tmp/notes.md\n</parameter>\n<parameter=content>\n{DOC}\n</parameter>\n")
    call, _findings = _one(text, tools=None)
    assert call.arguments["content"] == "Use the edit tool like this:"
    assert call.arguments["old_string"] == "foo"


@pytest.mark.parametrize("extra", ["<parameter=mode>\nfast\n</parameter>\n", "<parameter=overwrite>\ntrue\n</parameter>\n"])
def test_an_undeclared_parameter_after_a_closed_value_stays_a_parameter(extra):
    text = _call(f"<parameter=file_path>\n/tmp/a.md\n</parameter>\n<parameter=content>\nhi\n</parameter>\n{extra}")
    call, _findings = _one(text)
    assert call.arguments["content"] == "hi" and "unknown_parameter" in call.categories

"""Rule packs as data: the taxonomy, user packs (--rules DIR), their validation, and the `trajlab rules` CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trajlab.cli import app
from trajlab.errors import TrajlabError
from trajlab.model import TurnContext
from trajlab.rulepacks import builtin_rules_dir
from trajlab.toolcalls import analyze_turn, check_text, list_rules, load_taxonomy

REQUIRED = [
    "unknown_function", "garbled_function_name", "stray_attribute", "malformed_tag", "unclosed_tag",
    "missing_call_close", "missing_call_open", "truncated_call", "nested_call", "format_mismatch", "invalid_json",
    "invalid_arguments", "unknown_parameter", "missing_required_parameter", "duplicate_parameter", "type_mismatch",
    "text_after_call", "call_inside_think", "empty_call", "foreign_format",
]
EXAMPLE_PACK = builtin_rules_dir() / "user_rules_example"
BASH_CALL = "<tool_call>\n<function=bash>\n<parameter=command>\n{cmd}\n</parameter>\n</function>\n</tool_call>"


def test_taxonomy_has_every_required_category() -> None:
    tax = load_taxonomy()
    for cid in REQUIRED:
        assert cid in tax, cid
        c = tax[cid]
        assert c["severity"] in ("error", "warning", "info")
        assert c["description"] and c["explanation"] and c["generic"]
        assert c["variants"], cid
        assert c["source"] == "builtin"


def test_list_rules_builtin_and_with_user_pack() -> None:
    builtin = list_rules()
    assert {r["id"] for r in builtin if r["kind"] == "category"} >= set(REQUIRED)
    assert not [r for r in builtin if r["kind"] == "regex"]
    with_pack = list_rules((str(EXAMPLE_PACK),))
    regex = [r for r in with_pack if r["kind"] == "regex"]
    assert {r["id"] for r in regex} >= {"team.sudo", "team.rm_rf_root", "team.placeholder"}
    assert all(r["source"] == str(EXAMPLE_PACK) for r in regex)
    added = {r["id"]: r for r in with_pack if r["kind"] == "category" and r["source"] != "builtin"}
    assert set(added) == {"dangerous_command", "placeholder_value", "role_word_leak"}


def test_example_pack_rules_fire_on_param_values() -> None:
    text = BASH_CALL.format(cmd="sudo rm -rf /")
    ta = check_text(text, rules_dirs=(str(EXAMPLE_PACK),))
    got = {(f.rule_id, text[f.start:f.end], f.severity) for f in ta.findings}
    assert ("user/team.sudo", "sudo rm", "warning") in got
    assert ("user/team.rm_rf_root", "rm -rf /", "error") in got
    assert ta.calls[0].status == "malformed" and "dangerous_command" in ta.calls[0].categories
    # without the pack the same call is well-formed
    assert analyze_turn(text, tool_format="qwen3_coder", tools=None, context=TurnContext()).findings == []
    # params filter: the same text in another parameter does not fire
    other = "<tool_call>\n<function=note>\n<parameter=text>\nsudo rm -rf /\n</parameter>\n</function>\n</tool_call>"
    assert not [f for f in check_text(other, rules_dirs=(str(EXAMPLE_PACK),)).findings if f.rule_id.startswith("user/")]


def _pack(tmp_path: Path, name: str, taxonomy: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "taxonomy.yaml").write_text(taxonomy, encoding="utf-8")
    return d


def test_user_pack_overrides_severity_and_adds_rules(tmp_path: Path) -> None:
    pack = _pack(tmp_path, "team", """
categories:
  text_after_call:
    variants:
      allowed: {severity: warning}
  leaked_secret:
    severity: error
    description: An API key in an argument.
    explanation: "`{match}` looks like a secret."
rules:
  - id: secret
    category: leaked_secret
    applies_to: [param_value, text]
    pattern: 'sk-[A-Za-z0-9]{8,}'
""")
    text = BASH_CALL.format(cmd="curl -H 'Authorization: sk-ABCDEFGH1234' x") + "\nDone."
    ta = analyze_turn(text, tool_format="qwen3_coder", tools=None, context=TurnContext(), rules_dirs=(str(pack),))
    sev = {f.category: f.severity for f in ta.findings}
    assert sev["text_after_call"] == "warning"  # was info in the built-in pack
    secret = next(f for f in ta.findings if f.category == "leaked_secret")
    assert text[secret.start:secret.end] == "sk-ABCDEFGH1234" and "looks like a secret" in secret.message
    assert ta.calls[0].categories == ["leaked_secret", "text_after_call"]


def test_user_pack_extends_format_hints(tmp_path: Path) -> None:
    pack = tmp_path / "hints"
    (pack / "formats").mkdir(parents=True)
    (pack / "formats" / "qwen3_coder.yaml").write_text("close_tail_variants: ['_end_of_value']\n", encoding="utf-8")
    text = BASH_CALL.format(cmd="ls").replace("</parameter>", "</parameter_end_of_value>")
    ta = check_text(text, tool_format="qwen3_coder", rules_dirs=(str(pack),))
    assert any(f.rule_id == "qwen3_coder/malformed_tag/close_variant" for f in ta.findings)
    assert ta.calls[0].repaired == BASH_CALL.format(cmd="ls")


@pytest.mark.parametrize("content,needle", [
    ("categories: [1, 2\n", "not valid YAML"),
    ("rules:\n  - {id: r, category: nope, pattern: x}\n", "unknown category 'nope'"),
    ("rules:\n  - {id: r, category: empty_call, pattern: '('}\n", "invalid regex"),
    ("rules:\n  - {id: r, category: empty_call, pattern: x, applies_to: nowhere}\n", "applies_to 'nowhere'"),
    ("categories:\n  x: {severity: fatal, description: d, explanation: e}\n", "severity must be one of"),
    ("categories:\n  x: {severity: info, description: d}\n", "missing 'explanation'"),
    ("rules:\n  - {id: r, category: empty_call, pattern: x}\n  - {id: r, category: empty_call, pattern: y}\n",
     "duplicate rule id"),
])
def test_invalid_packs_fail_with_a_clear_message(tmp_path: Path, content: str, needle: str) -> None:
    pack = _pack(tmp_path, "bad", content)
    with pytest.raises(TrajlabError) as ei:
        load_taxonomy((str(pack),))
    assert needle in str(ei.value)
    # analyze_turn never raises: it falls back to the built-in rules and reports the problem
    ta = analyze_turn(BASH_CALL.format(cmd="ls"), tool_format="qwen3_coder", tools=None, context=TurnContext(),
                      rules_dirs=(str(pack),))
    assert ta.calls and ta.findings[-1].category == "internal_error"


def test_missing_pack_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TrajlabError, match="rule pack directory not found"):
        list_rules((str(tmp_path / "nope"),))


# -- CLI -------------------------------------------------------------------------------------------------

runner = CliRunner()


def test_cli_rules_list() -> None:
    res = runner.invoke(app, ["rules", "list", "--json"])
    assert res.exit_code == 0
    ids = {r["id"] for r in json.loads(res.stdout)}
    assert set(REQUIRED) <= ids
    res = runner.invoke(app, ["rules", "list", "--rules", str(EXAMPLE_PACK)])
    assert res.exit_code == 0 and "team.sudo" in res.stdout and "garbled_function_name" in res.stdout


def test_cli_rules_check_escaped_text_with_tools(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "search_web", "parameters": {
        "type": "object", "properties": {"queries": {"type": "array"}}, "required": ["queries"]}}}]))
    snippet = ('<tool_call>\\n<function=search_web英文明确>\\n<parameter=queries>\\n[\\"a\\"]\\n</parameter>\\n'
               '</function>\\n</tool_call>')
    res = runner.invoke(app, ["rules", "check", snippet, "--tools", str(tools), "--json"])
    assert res.exit_code == 1  # an error finding
    data = json.loads(res.stdout)
    assert data["tool_format"] == "qwen3_coder" and data["schema_checked"] is True
    assert {f["category"] for f in data["findings"]} == {"garbled_function_name", "unknown_function"}
    assert data["calls"][0]["repaired_arguments"] == {"queries": ["a"]}
    res = runner.invoke(app, ["rules", "check", snippet, "--tools", str(tools)])
    assert "garbled_function_name" in res.stdout and "repaired call 0" in res.stdout


def test_cli_rules_check_file_stdin_and_clean_exit(tmp_path: Path) -> None:
    f = tmp_path / "call.txt"
    f.write_text(BASH_CALL.format(cmd="ls"), encoding="utf-8")
    res = runner.invoke(app, ["rules", "check", str(f)])
    assert res.exit_code == 0, res.stdout
    assert "schema checks skipped" in res.stdout and "bash" in res.stdout
    res = runner.invoke(app, ["rules", "check", "-", "--json"], input=BASH_CALL.format(cmd="ls") + "\nbye")
    data = json.loads(res.stdout)
    assert res.exit_code == 0 and data["findings"][0]["category"] == "text_after_call"
    res = runner.invoke(app, ["rules", "check", "-", "--json", "--no-suffix"], input=BASH_CALL.format(cmd="ls") + "\nbye")
    assert json.loads(res.stdout)["findings"][0]["severity"] == "warning"


def test_cli_rules_check_bad_options() -> None:
    res = runner.invoke(app, ["rules", "check", "x", "--tool-format", "glm"])
    assert res.exit_code != 0
    assert "unknown tool format 'glm'" in str(res.exception or res.stdout)
    res = runner.invoke(app, ["rules", "check", "x", "--tools", "/nonexistent/tools.json"])
    assert res.exit_code != 0


def test_user_pack_can_switch_repairs_off(tmp_path: Path) -> None:
    pack = _pack(tmp_path, "norepair", "categories:\n  stray_attribute:\n    repairable: false\n")
    text = BASH_CALL.format(cmd="ls").replace("</parameter>", '</parameter v2="">')
    on = check_text(text, tool_format="qwen3_coder").calls[0]
    off = check_text(text, tool_format="qwen3_coder", rules_dirs=(str(pack),)).calls[0]
    assert on.repaired is not None
    assert off.repaired is None and "not repairable" in off.repair_note


def test_cli_rules_check_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    res = runner.invoke(app, ["rules", "check", str(tmp_path / "nope.txt")])
    assert res.exit_code != 0
    assert "no such file" in str(res.exception)

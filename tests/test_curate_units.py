"""Unit tests of the SFT-pool building blocks: prompt/turn reconstruction, ratio parsing, mixing, templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from trajlab.commands.options import flag_for
from trajlab.curate.conversation import (
    EMPTY_THINK,
    build_conversation,
    split_prompt,
    split_think,
    tool_messages,
    trained_text,
)
from trajlab.curate.hints import fill, load_hint_rules, with_hint
from trajlab.curate.mix import allocate, exact_ratio_size, largest_remainder, split_prompts
from trajlab.curate.ood import locate_tool_block, rename_tools
from trajlab.curate.options import PoolOptions, parse_min_score, parse_ratio
from trajlab.errors import TrajlabError


def test_split_prompt_plain_chatml():
    p = split_prompt("system\nYou are helpful.\nuser\nWhat is 2+2?\nassistant\n")
    assert [(m.role, m.content) for m in p.messages] == [("system", "You are helpful."), ("user", "What is 2+2?")]
    assert p.generation_suffix == "" and p.parsed


def test_split_prompt_multiline_and_suffixes():
    inp = "system\nline1\n\nline2\nuser\nQ with\nnewlines\nassistant\n<think>\n"
    p = split_prompt(inp)
    assert [m.content for m in p.messages] == ["line1\n\nline2", "Q with\nnewlines"]
    assert p.generation_suffix == "<think>\n"
    p2 = split_prompt("user\nhi\nassistant\n" + EMPTY_THINK)
    assert p2.generation_suffix == EMPTY_THINK


def test_split_prompt_special_tokens_kept():
    inp = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    p = split_prompt(inp)
    assert [(m.role, m.content) for m in p.messages] == [("system", "S"), ("user", "U")]


def test_split_prompt_without_headers_is_one_user_message():
    p = split_prompt("just a question")
    assert not p.parsed and [(m.role, m.content) for m in p.messages] == [("user", "just a question")]


@pytest.mark.parametrize("lead", ["", "\n"])
def test_tool_messages_both_separators_and_multiple_responses(lead):
    text = f"{lead}user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB\nline\n</tool_response>\nassistant\n"
    msgs, suffix = tool_messages(text, 1)
    assert [(m.role, m.content) for m in msgs] == [("tool", "A"), ("tool", "B\nline")]
    assert suffix == ""
    msgs, suffix = tool_messages(text + EMPTY_THINK, 1)
    assert suffix == EMPTY_THINK


def test_tool_message_content_with_trailing_newline_round_trips():
    msgs, _ = tool_messages("\nuser\n<tool_response>\nX\n\n</tool_response>\nassistant\n")
    assert msgs[0].content == "X\n"


def test_build_conversation_exact_text_and_open_think_prefix():
    inp = "system\nS\nuser\nQ\nassistant\n<think>\n"
    turns = [
        (0, "assistant", "plan\n</think>\n\n<tool_call>x</tool_call>", 0),
        (1, "tool", "\nuser\n<tool_response>\nR\n</tool_response>\nassistant\n", 40),
        (2, "assistant", "<think>\nok\n</think>\n\nAnswer", 90),
    ]
    conv = build_conversation(inp, turns)
    roles = [m.role for m in conv.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert conv.messages[2].content == "<think>\nplan\n</think>\n\n<tool_call>x</tool_call>"
    assert conv.messages[4].content == turns[2][2]
    assert conv.enable_thinking is True
    ctx = build_conversation(inp, turns, upto_turn=2)
    assert [m.role for m in ctx.messages] == ["system", "user", "assistant", "tool"]


def test_enable_thinking_false_when_prompt_closes_think():
    conv = build_conversation("user\nQ\nassistant\n" + EMPTY_THINK, [(0, "assistant", "A", 0)])
    assert conv.enable_thinking is False and conv.messages[-1].content == "A"


def test_split_think_matches_qwen_template_rules():
    assert split_think("<think>\nr\n</think>\n\nC") == ("r", "C")
    assert split_think("no think") == (None, "no think")
    assert trained_text("<think>\nr\n</think>\n\n<tool_call>") == "<tool_call>"


@pytest.mark.parametrize(
    "text,expected",
    [("5:3:2", (5.0, 3.0, 2.0)), ("1:0:0", (1.0, 0.0, 0.0)), (" 0.5 : 0.3 : 0.2 ", (0.5, 0.3, 0.2)), ("5,3,2", (5.0, 3.0, 2.0))],
)
def test_parse_ratio_ok(text, expected):
    assert parse_ratio(text) == expected


@pytest.mark.parametrize(
    "text,fragment",
    [("5:3", "expected 3 parts"), ("a:b:c", "is not a number"), ("5:-1:2", ">= 0"), ("0:0:0", "at least one"),
     ("", "expected 3 parts"), ("5:3:2:1", "expected 3 parts"), ("5:nan:2", "finite")],
)
def test_parse_ratio_errors_are_clear(text, fragment):
    with pytest.raises(TrajlabError) as e:
        parse_ratio(text)
    assert fragment in str(e.value) and str(e.value).startswith("ratio ") and e.value.param == "ratio"
    assert e.value.hint and "ratio='5:3:2'" in e.value.hint
    assert e.value.render(flag_for).startswith("--ratio ") and "e.g. --ratio 5:3:2 " in e.value.render(flag_for)


def test_min_score_rules():
    assert parse_min_score(None).mode == "group"
    assert parse_min_score("any").mode == "any"
    r = parse_min_score("0.5")
    assert (r.mode, r.threshold) == ("threshold", 0.5)
    with pytest.raises(TrajlabError, match="min_score"):
        parse_min_score("high")


def test_option_errors():
    with pytest.raises(TrajlabError, match="max_tokens needs tokenizer") as e:
        PoolOptions(max_tokens=100)
    assert e.value.param == "max_tokens" and "tokenizer='/path/to/Qwen3-8B' max_tokens=8192" in str(e.value)
    assert e.value.render(flag_for).startswith("--max-tokens needs --tokenizer (")
    assert "hint: e.g. --tokenizer /path/to/Qwen3-8B --max-tokens 8192" in e.value.render(flag_for)
    with pytest.raises(TrajlabError, match="style 'chatml'"):
        PoolOptions(style="chatml")
    with pytest.raises(TrajlabError, match="ood_eval needs held-back prompts, but val_fraction is 0"):
        PoolOptions(ood_eval=True, val_fraction=0)
    with pytest.raises(TrajlabError, match="val_fraction 1.5"):
        PoolOptions(val_fraction=1.5)


def test_pool_options_parse_once():
    o = PoolOptions(ratio="5, 0, 2", min_score="1.5", rules_dirs=[Path("rules/x")], runs=["b", "a", "b"],
                    source_splits=[], ood_format="auto", per_group=3)
    assert o.ratio_parts == (5.0, 0.0, 2.0) and o.ratio_text == "5:0:2" and o.ratio == "5, 0, 2"
    assert (o.score_rule.mode, o.score_rule.threshold) == ("threshold", 1.5)
    assert o.rules_dirs == ("rules/x",) and o.runs == ("b", "a") and o.source_splits == ("train",)
    assert o.ood_format is None and PoolOptions(ratio=[1, 0, 0]).ratio_text == "1:0:0"
    assert PoolOptions().score_rule.mode == "group"
    with pytest.raises(AttributeError):
        o.seed = 1  # type: ignore[misc]


def test_largest_remainder_and_exact_ratio():
    assert largest_remainder(10, [5, 3, 2]) == [5, 3, 2]
    assert sum(largest_remainder(7, [5, 3, 2])) == 7
    assert exact_ratio_size([100, 30, 100], [5, 3, 2]) == 100
    assert exact_ratio_size([100, 0, 100], [1, 0, 1]) == 200


def test_allocate_exact_ratio_by_default():
    assert allocate([100, 30, 100], [5, 3, 2], None) == [50, 30, 20]
    assert allocate([7, 7, 7], [1, 0, 0], None) == [7, 0, 0]


def test_allocate_fills_shortfall_when_max_samples_given():
    alloc = allocate([100, 10, 100], [5, 3, 2], 100)
    assert alloc[1] == 10 and sum(alloc) == 100 and alloc[0] > 50 and alloc[2] > 20
    assert allocate([5, 5, 5], [1, 1, 1], 100) == [5, 5, 5]


def test_split_prompts_is_seeded_and_disjoint():
    keys = [f"p{i}" for i in range(40)]
    v1 = split_prompts(keys, 0.25, seed=0)
    assert len(v1) == 10 and v1 == split_prompts(reversed(keys), 0.25, seed=0)
    assert v1 != split_prompts(keys, 0.25, seed=1)
    assert split_prompts(["only"], 0.5, seed=0) == set()
    assert len(split_prompts(keys[:3], 0.01, seed=0)) == 1


def test_fill_keeps_json_braces():
    tpl = '{"name": "{name}", "arguments": {"{param}": {value}}} {unknown}'
    assert fill(tpl, {"name": "f", "param": "p", "value": "VALUE"}) == '{"name": "f", "arguments": {"p": VALUE}} {unknown}'


def test_builtin_hint_rules_load_and_render():
    rules = load_hint_rules()
    tools = [{"name": "search_web", "parameters": {"type": "object", "properties": {"queries": {}}, "required": ["queries"]}}]
    xml = rules.call_template("qwen3_coder", tools)
    assert "<function=search_web>" in xml and "<parameter=queries>" in xml
    js = rules.call_template("hermes", tools, "search_web")
    assert '"name": "search_web"' in js and '"queries"' in js
    text = rules.hint_text("garbled_function_name", {"tool_names": "search_web", "call_template": xml})
    assert "search_web" in text and "<function=search_web>" in text
    assert "{tool_names}" not in text and "{call_template}" not in text
    assert rules.feedback_role in ("user", "tool")


def test_user_pack_overrides_hints(tmp_path):
    (tmp_path / "hints.yaml").write_text("hints:\n  low_score: 'Think first. Tools: {tool_names}'\n", encoding="utf-8")
    rules = load_hint_rules((str(tmp_path),))
    assert rules.hint_text("low_score", {"tool_names": "a, b"}) == "Think first. Tools: a, b"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "hints.yaml").write_text("error_feedback:\n  role: assistant\n", encoding="utf-8")
    with pytest.raises(TrajlabError, match="must be 'user' or 'tool'"):
        load_hint_rules((str(tmp_path / "bad"),))


def test_with_hint_appends_to_system_or_creates_one():
    from trajlab.curate.conversation import Message

    msgs = [Message("system", "S"), Message("user", "U")]
    out = with_hint(msgs, "H", "\n\n")
    assert out[0].content == "S\n\nH" and msgs[0].content == "S"
    out2 = with_hint([Message("user", "U")], "H", "\n\n")
    assert [(m.role, m.content) for m in out2] == [("system", "H"), ("user", "U")]


def test_rename_tools_unique_and_new():
    m = rename_tools(["search_web", "fetch_web", "web_search", "calc"], {})
    assert m["search_web"] != "search_web" and len(set(m.values())) == 4
    assert not set(m.values()) & {"search_web", "fetch_web", "web_search", "calc"}
    assert rename_tools(["a_b"], {"a_b": "lookup"}) == {"a_b": "lookup"}


def test_locate_tool_block_qwen35_and_hermes():
    from helpers.verl_lines import hermes_prompt, qwen35_prompt

    for inp, own in ((qwen35_prompt("Q"), ""), (hermes_prompt("Q"), "You are a helpful assistant.")):
        system = split_prompt(inp).messages[0].content
        start, end = locate_tool_block(system)
        rest = (system[:start] + system[end:]).strip()
        assert rest == own
        assert "<tools>" in system[start:end] and system[start:end].rstrip().endswith(("</tool_call>", "</IMPORTANT>"))


def test_thinking_mode_of_a_whole_trajectory():
    from trajlab.curate.conversation import thinking_mode

    assert thinking_mode("user\nQ\nassistant\n", "<think>\nplan\n</think>\n\n<tool_call>") is True
    assert thinking_mode("user\nQ\nassistant\n<think>\n", "plan\n</think>\n\nA") is True
    assert thinking_mode("user\nQ\nassistant\n" + EMPTY_THINK, "A") is False
    assert thinking_mode("user\nQ\nassistant\n", "<think>\n\n</think>\n\nA") is False
    assert thinking_mode("user\nQ\nassistant\n", "plain answer") is False

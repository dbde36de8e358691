"""Control-token strings from rules/control_tokens.yaml resolved through the real Qwen3 and Qwen3.5 tokenizers;
user rule packs; thresholds from rules and the command line."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from helpers.rescore_fixtures import qwen3_tokenizer, qwen35_tokenizer  # noqa: E402

from trajlab.errors import TrajlabError  # noqa: E402
from trajlab.rescore.control_tokens import (  # noqa: E402
    load_control_rules,
    resolve_control_set,
    thresholds_from_rules,
)


def test_qwen3_control_set():
    tok = qwen3_tokenizer()
    cs = resolve_control_set(tok, load_control_rules())
    assert cs.family == "qwen"
    by_label = dict(zip(cs.labels, cs.ids, strict=True))
    # added tokens that are NOT special still resolve (they are not in all_special_ids)
    assert by_label["<tool_call>"] == 151657 and by_label["</tool_call>"] == 151658
    assert by_label["<think>"] == 151667 and by_label["<|im_end|>"] == 151645
    assert 151657 not in tok.all_special_ids
    # multi-token strings resolve to their first token: "</parameter>" -> "</", "<function=" -> "<"
    src = {lab: s for lab, s in zip(cs.labels, cs.sources, strict=True)}
    assert set(src["</"]) == {"</function>", "</parameter>"}
    assert set(src["<"]) == {"<function=", "<parameter="}
    xml = cs.ids_for("qwen3_coder")
    js = cs.ids_for("hermes")
    none = cs.ids_for("none")
    assert by_label["</"] in xml and by_label["</"] not in js
    assert by_label['{"'] in js and by_label['{"'] not in xml
    assert none == xml & js == {by_label[t] for t in ("<|im_end|>", "<|im_start|>", "<|endoftext|>", "<tool_call>",
                                                        "</tool_call>", "<tool_response>", "<think>", "</think>")}
    assert cs.ids_for("some_unknown_format") == none
    rows = cs.mask_rows()
    assert len(rows) == len(cs.format_masks) and all(len(r) == len(cs.ids) for r in rows)


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_qwen35_control_set_uses_its_own_ids():
    tok = qwen35_tokenizer()
    cs = resolve_control_set(tok, load_control_rules())
    by_label = dict(zip(cs.labels, cs.ids, strict=True))
    assert by_label["<tool_call>"] == 248058 and by_label["<|im_end|>"] == 248046 and by_label["<think>"] == 248068


def test_user_pack_adds_strings_and_exact_mode_skips(tmp_path):
    (tmp_path / "control_tokens.yaml").write_text(
        "thresholds: {intrusion: 0.3}\n"
        "families:\n  qwen_chatml:\n    formats:\n      qwen3_coder:\n"
        "        - '>'\n        - {text: '</parameter>', resolve: exact}\n",
        encoding="utf-8",
    )
    rules = load_control_rules([tmp_path])
    # the pack spells the family's set by its old name, qwen_chatml: merged into the qwen set, not a set of its own
    assert "qwen_chatml" not in rules["families"] and ">" in rules["families"]["qwen"]["formats"]["qwen3_coder"]
    cs = resolve_control_set(qwen3_tokenizer(), rules)
    assert cs.family == "qwen" and ">" in cs.labels
    assert any("</parameter>" in s and "not a single token" in s for s in cs.skipped)
    th = thresholds_from_rules(rules)
    assert th.intrusion == 0.3 and th.dropout == 0.9  # merged over the built-in file
    assert thresholds_from_rules(rules, intrusion=0.7, dropout=0.5).intrusion == 0.7


def test_bad_rules_are_one_line_errors(tmp_path):
    (tmp_path / "control_tokens.yaml").write_text("intrusion_regions: [nowhere]\n", encoding="utf-8")
    with pytest.raises(TrajlabError, match="unknown regions"):
        thresholds_from_rules(load_control_rules([tmp_path]))
    with pytest.raises(TrajlabError, match="between 0 and 1"):
        thresholds_from_rules(load_control_rules(), intrusion=1.5)

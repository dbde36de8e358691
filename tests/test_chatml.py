"""trajlab.families.chatml: the ChatML tokens, the stripping regex and the plain rendering every module shares."""

from __future__ import annotations

from trajlab.families import chatml


def test_render_is_plain_chatml() -> None:
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "<think>\n\n</think>\n\nhello"}]
    assert chatml.render(msgs) == (
        "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\nhello<|im_end|>\n"
    )
    assert chatml.render([]) == ""


def test_strip_specials_removes_only_the_three_chatml_tokens() -> None:
    kept = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<tool_call>x</tool_call><|im_end|><|endoftext|>"
    assert chatml.strip_specials(kept) == "user\nq\nassistant\n<tool_call>x</tool_call>"
    other = "<|im_system|>tool<|im_middle|>r<|eot_id|>"  # other families' tokens are not ChatML's
    assert chatml.strip_specials(other) == other


def test_roles_alternation_matches_each_header_role() -> None:
    import re

    header = re.compile(rf"^({chatml.ROLES})\n")
    assert [header.match(f"{r}\n").group(1) for r in ("system", "user", "assistant", "tool")] == [
        "system", "user", "assistant", "tool"]
    assert header.match("observation\n") is None

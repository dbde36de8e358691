"""Tokenizers for rescoring: load a checkpoint's own tokenizer and check it fits the model.

* :func:`load_tokenizer` loads the tokenizer shipped with a checkpoint (``huggingface/`` for verl actors), an
  explicit directory, or one of the built-in aliases ``qwen3`` / ``qwen3.5`` (= ``qwen3.6``), the real Qwen
  tokenizers of :mod:`trajlab.rescore.qwen_tokenizers`.
* :func:`check_tokenizer_matches` refuses a tokenizer whose vocabulary or special ids do not fit the model;
  :func:`tokenizer_fit_gap` measures how well it fits.

Heavy imports (``transformers``) happen inside the functions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import CheckpointError, MissingDependencyError, param
from trajlab.families import TOKENIZER_ALIASES
from trajlab.rescore.qwen_tokenizers import build_qwen35_tokenizer, qwen3_tokenizer_dir

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

#: Files whose presence marks a directory as holding a tokenizer.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")

#: the built-in real tokenizers the families' ``--tokenizer`` aliases name (:data:`trajlab.families.TOKENIZER_ALIASES`)
BUILT_IN_TOKENIZERS: dict[str, Callable[[], Path]] = {"qwen3": qwen3_tokenizer_dir, "qwen3_5": build_qwen35_tokenizer}


# ---------------------------------------------------------------------------------------------- loading
def has_tokenizer_files(d: Path) -> bool:
    """Whether ``d`` looks like it holds a tokenizer."""
    return d.is_dir() and any((d / f).is_file() for f in TOKENIZER_FILES)


def tokenizer_dir_for(ref_or_path: Any) -> Path:
    """The directory :func:`load_tokenizer` would load: an alias's built-in tokenizer, an explicit
    directory, or for a :class:`~trajlab.rescore.checkpoints.CheckpointRef` the first of its HF weights
    directory, its config directory (verl's ``huggingface/``) and its own path that holds tokenizer files."""
    if isinstance(ref_or_path, str | os.PathLike):
        s = os.fspath(ref_or_path)
        built_in = TOKENIZER_ALIASES.get(s.lower())
        if built_in is not None:
            return BUILT_IN_TOKENIZERS[built_in]()
        p = Path(s).expanduser()
        if not p.exists():
            raise CheckpointError(f"{p}: tokenizer directory not found",
                                  hint="pass a directory with tokenizer.json, or an alias: qwen3, qwen3.5")
        if p.is_file():
            p = p.parent
        if not has_tokenizer_files(p):
            raise CheckpointError(f"{p}: no tokenizer files ({', '.join(TOKENIZER_FILES)})")
        return p
    candidates = [getattr(ref_or_path, a, None) for a in ("hf_dir", "config_dir", "path")]
    for c in candidates:
        if c is not None and has_tokenizer_files(Path(c)):
            return Path(c)
    label = getattr(ref_or_path, "label", ref_or_path)
    where = ", ".join(str(c) for c in candidates if c is not None)
    raise CheckpointError(f"checkpoint {label}: no tokenizer files in {where}",
                          hint=f"pass {param('tokenizer', metavar='DIR')} (or {param('tokenizer', 'qwen3')} / qwen3.5)")


def load_tokenizer(ref_or_path: Any, *, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
    """Load a tokenizer from a :class:`~trajlab.rescore.checkpoints.CheckpointRef` (its own tokenizer), a
    directory, or an alias (``qwen3``; ``qwen3.5``/``qwen3.6``). Offline; no remote code unless asked.
    The one tokenizer loader: ``rescore --tokenizer`` and ``build-sft-pool --tokenizer`` both load through it."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise MissingDependencyError(
            "loading a tokenizer needs the `transformers` package",
            hint="pip install torch==2.13.0 'trajlab[rescore]' (pin torch, or pip pulls a CUDA build)",
        ) from None

    d = tokenizer_dir_for(ref_or_path)
    if not trust_remote_code:
        from trajlab.rescore.remote_code import refuse_auto_map

        refuse_auto_map(d / "tokenizer_config.json")
    try:
        return AutoTokenizer.from_pretrained(str(d), trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = f"pass {param('trust_remote_code')} if you trust this tokenizer's code" if "trust_remote_code" in str(
            exc) else None
        raise CheckpointError(f"{d}: cannot load the tokenizer: {msg}", hint=hint) from None


# --------------------------------------------------------------------------------------------- matching
def _as_id_list(v: Any) -> list[int]:
    if v is None:
        return []
    if isinstance(v, int):
        return [v]
    return [int(x) for x in v if x is not None]


def check_tokenizer_matches(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    """Raise :class:`CheckpointError` when ``tokenizer`` cannot be the model's tokenizer.

    Checks: every tokenizer id fits the model's embedding matrix; the model is not far larger than the
    tokenizer (Qwen pads 151,669 tokens to 151,936 rows; more than 10 % + 1,024 spare rows means another
    tokenizer); the model config's ``eos_token_id``/``pad_token_id`` (and the generation config's eos ids)
    name special or added tokens of the tokenizer.
    """
    emb = model.get_input_embeddings()
    weight: Any = emb.weight  # a Parameter (torch types a Module attribute as Tensor | Module)
    rows = int(getattr(emb, "num_embeddings", 0) or weight.shape[0])
    n = len(tokenizer)
    name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
    if n > rows:
        raise CheckpointError(
            f"tokenizer {name} has {n} tokens but the model only {rows} embedding rows: not this model's "
            "tokenizer", hint=f"pass {param('tokenizer')} with the checkpoint's own tokenizer")
    if rows > 1.1 * n + 1024:
        raise CheckpointError(
            f"the model has {rows} embedding rows but tokenizer {name} only {n} tokens: not this model's "
            "tokenizer", hint=f"pass {param('tokenizer')} with the checkpoint's own tokenizer")
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    named: dict[str, list[int]] = {}
    for c in (cfg, text_cfg, getattr(model, "generation_config", None)):
        if c is None:
            continue
        for attr in ("eos_token_id", "pad_token_id"):
            ids = _as_id_list(getattr(c, attr, None))
            if ids:
                named.setdefault(attr, [])
                named[attr] += [i for i in ids if i not in named[attr]]
    added = set(tokenizer.get_added_vocab())
    specials = set(tokenizer.all_special_tokens) | added
    for attr, ids in named.items():
        for i in ids:
            if not 0 <= i < n:
                raise CheckpointError(
                    f"the model's {attr} {i} is not a token of tokenizer {name} ({n} tokens): not this model's "
                    "tokenizer", hint=f"pass {param('tokenizer')} with the checkpoint's own tokenizer")
            tok = tokenizer.convert_ids_to_tokens(i)
            if tok not in specials:
                raise CheckpointError(
                    f"the model's {attr} {i} is {tok!r} in tokenizer {name}, not a special token: not this "
                    "model's tokenizer", hint=f"pass {param('tokenizer')} with the checkpoint's own tokenizer")


def token_ids(tokenizer: PreTrainedTokenizerBase, strings: Iterable[str]) -> dict[str, int]:
    """Resolve token strings (e.g. control tokens) to single ids; strings that are not one token are left out.

    Works for added tokens that are not in ``all_special_ids`` (``<tool_call>``, ``<think>``) and for plain
    vocabulary pieces given in the tokenizer's own spelling (e.g. ``"</"``)."""
    out: dict[str, int] = {}
    vocab = tokenizer.get_vocab()
    for s in strings:
        if s in vocab:
            out[s] = int(vocab[s])
            continue
        ids = tokenizer.encode(s, add_special_tokens=False)
        if len(ids) == 1:
            out[s] = int(ids[0])
    return out


#: a short text any chat model has seen the like of: a question, a tool call in Qwen's XML format, an answer
FIT_PROBE = (
    "user\nWhat is the capital of France? Please search the web before you answer.\nassistant\n<tool_call>\n"
    "<function=search_web>\n<parameter=queries>\n[\"capital of France\"]\n</parameter>\n</function>\n"
    "</tool_call>\nThe capital of France is Paris. It is known for the Eiffel Tower, for museums such as the "
    "Louvre, and for the river Seine that runs through the middle of the city."
)
#: the probe must score at least this much better per token than the same tokens shuffled (nats)
FIT_MARGIN = 0.25


def tokenizer_fit_gap(scorer: Any, tokenizer: PreTrainedTokenizerBase, text: str = FIT_PROBE) -> float | None:
    """How much better (mean log-prob per token, nats) the model scores ``text`` in order than the same
    tokens in a fixed shuffled order. A tokenizer that fits the model gives a clear gap (the model knows the
    language); a tokenizer with the same size but permuted ids, or a model that learned nothing, gives about
    none. Two short sequences through ``scorer`` (a :class:`~trajlab.rescore.scoring.ChunkedScorer`): cheap.
    Returns None when the text is too short in this tokenizer to tell."""
    import numpy as np

    from trajlab.rescore.scoring import ScoreRequest

    ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"][:256], dtype=np.int64)
    if ids.shape[0] < 16:
        return None
    shuffled = ids.copy()
    np.random.default_rng(0).shuffle(shuffled)
    pos = np.arange(1, ids.shape[0], dtype=np.int64)
    a, b = scorer.probe([ScoreRequest(ids, pos), ScoreRequest(shuffled, pos)])
    return float(np.mean(a.logprob) - np.mean(b.logprob))

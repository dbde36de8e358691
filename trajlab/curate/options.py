"""What ``build-sft-pool`` is asked to do: :class:`PoolOptions`, parsed and validated once when made (ratio, score
rule, style, limits), and the parsers of its ratio and score rule."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trajlab.errors import TrajlabError, param

STYLES = ("messages", "prompt-response", "openai")
DEFAULT_RATIO = "5:3:2"
DEFAULT_PER_GROUP = 2
DEFAULT_VAL_FRACTION = 0.05
DEFAULT_OOD_PROMPTS = 32


def parse_ratio(ratio: str | Sequence[float]) -> tuple[float, float, float]:
    """``"5:3:2"`` → ``(5.0, 3.0, 2.0)`` (positive : error demonstration : hint).

    Raises :class:`TrajlabError` with the reason when the text is not three non-negative numbers with a
    positive sum.
    """
    if isinstance(ratio, (tuple, list)):
        parts: list[Any] = list(ratio)
        shown = ":".join(str(p) for p in parts)
    else:
        shown = str(ratio)
        parts = [p.strip() for p in re.split(r"[:,/]", shown.strip())] if shown.strip() else []
    hint = (f"write three non-negative numbers positive:error:hint, e.g. {param('ratio', '5:3:2')} (or 1:0:0 for "
            "positives only)")
    if len(parts) != 3:
        raise TrajlabError(f"{param('ratio')} {shown!r}: expected 3 parts (positive:error:hint), got {len(parts)}", hint=hint)
    vals: list[float] = []
    for p in parts:
        try:
            v = float(p)
        except (TypeError, ValueError):
            raise TrajlabError(f"{param('ratio')} {shown!r}: {p!r} is not a number", hint=hint) from None
        if not math.isfinite(v) or v < 0:
            raise TrajlabError(f"{param('ratio')} {shown!r}: {p!r} must be a finite number >= 0", hint=hint)
        vals.append(v)
    if sum(vals) <= 0:
        raise TrajlabError(f"{param('ratio')} {shown!r}: at least one part must be > 0", hint=hint)
    return vals[0], vals[1], vals[2]


@dataclass(frozen=True)
class ScoreRule:
    """Which scores make a positive: ``group`` (default), ``any`` (no score check) or a fixed threshold."""

    mode: str  # group | any | threshold
    threshold: float | None = None

    def describe(self) -> str:
        if self.mode == "group":
            return "score > 0 and (above the group median or equal to the group's best)"
        if self.mode == "any":
            return "any score (not checked)"
        return f"score >= {self.threshold:g}"


def parse_min_score(min_score: float | int | str | None) -> ScoreRule:
    """``None``/``"group"`` → the group rule; ``"any"``/``"none"`` → no check; a number → ``score >= N``."""
    if min_score is None:
        return ScoreRule("group")
    if isinstance(min_score, (int, float)) and not isinstance(min_score, bool):
        if not math.isfinite(float(min_score)):
            raise TrajlabError(f"{param('min_score')} {min_score!r} must be a finite number")
        return ScoreRule("threshold", float(min_score))
    s = str(min_score).strip().lower()
    if s in ("group", "median", "default", ""):
        return ScoreRule("group")
    if s in ("any", "none", "off"):
        return ScoreRule("any")
    try:
        v = float(s)
    except ValueError:
        raise TrajlabError(
            f"{param('min_score')} {min_score!r}: expected a number, 'group' (default) or 'any'",
            hint=f"e.g. {param('min_score', 1.0)} keeps trajectories scoring at least 1.0",
        ) from None
    if not math.isfinite(v):
        raise TrajlabError(f"{param('min_score')} {min_score!r} must be a finite number")
    return ScoreRule("threshold", v)


@dataclass(frozen=True)
class PoolOptions:
    """The options of :func:`trajlab.curate.build_sft_pool` (frozen; every problem raises :class:`TrajlabError`
    naming the field as soon as the object is made).

    Example::

        PoolOptions(ratio="5:3:2", val_fraction=0.1, ood_eval=True)
    """

    #: ``positive:error_demo:hint`` sample counts: ``"5:3:2"`` or three numbers (parsed into :attr:`ratio_parts`)
    ratio: str | Sequence[float] = DEFAULT_RATIO
    #: score rule for positives: None / ``"group"`` (score > 0 and above the group median or the group's best),
    #: ``"any"``, or a number N (score >= N); parsed into :attr:`score_rule`
    min_score: float | str | None = None
    #: at most this many positives (and hints) per prompt group
    per_group: int = DEFAULT_PER_GROUP
    #: tokenizer directory or hub name: counts tokens for ``max_tokens`` and the ``n_tokens`` column
    tokenizer: str | None = None
    #: skip samples longer than this many tokens of ``tokenizer``
    max_tokens: int | None = None
    #: share of prompts held out for ``val`` (split by prompt, seeded), in [0, 1)
    val_fraction: float = DEFAULT_VAL_FRACTION
    #: pool size to aim at (None: the largest pool that meets the ratio exactly)
    max_samples: int | None = None
    #: one of :data:`STYLES`
    style: str = "messages"
    #: also write ``ood_eval.parquet`` (format-OOD prompts from validation prompts; needs ``val_fraction`` > 0)
    ood_eval: bool = False
    #: at most this many prompts in the OOD set (each gives three variants)
    ood_prompts: int = DEFAULT_OOD_PROMPTS
    #: seeds every choice: the same input and seed give byte-identical files
    seed: int = 0
    #: user rule packs (their ``hints.yaml`` / ``taxonomy.yaml`` override the built-ins; the classifier that
    #: verifies repair targets uses them too)
    rules_dirs: tuple[str, ...] = ()
    #: the splits samples come from (``train``: RL validation prompts stay out)
    source_splits: tuple[str, ...] = ("train",)
    #: only these runs' trajectories become samples (empty: every run)
    runs: tuple[str, ...] = ()
    #: the call format of ``reformatted`` OOD variants (None: the source format's ``other_format`` in hints.yaml)
    ood_format: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: verl's ``rollout.n`` (``--rollout-n``): records without a uid form groups of N consecutive records, and
    #: those groups are the prompts held out for validation (:mod:`trajlab.groups`)
    rollout_n: int | None = None
    #: the emergency hand-over's cut (``--split-step N``): positives only from steps before N (the run while it was
    #: healthy), error demonstrations and hints only from step N on (what broke); None: every step for every kind
    split_step: int | None = None
    #: ``ratio`` parsed: three non-negative numbers with a positive sum (derived)
    ratio_parts: tuple[float, float, float] = field(init=False)
    #: ``ratio`` as text, e.g. ``"5:3:2"`` (derived)
    ratio_text: str = field(init=False)
    #: ``min_score`` parsed (derived)
    score_rule: ScoreRule = field(init=False)

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        r = parse_ratio(self.ratio)
        put("ratio_parts", r)
        put("ratio_text", ":".join(f"{v:g}" for v in r))
        if self.style not in STYLES:
            raise TrajlabError(f"{param('style')} {self.style!r}: expected one of {', '.join(STYLES)}")
        if self.rollout_n is not None and (isinstance(self.rollout_n, bool) or not isinstance(self.rollout_n, int)
                                           or self.rollout_n < 1):
            raise TrajlabError(f"{param('rollout_n')} {self.rollout_n!r}: must be a whole number >= 1")
        if self.split_step is not None and (isinstance(self.split_step, bool) or not isinstance(self.split_step, int)
                                            or self.split_step < 1):
            raise TrajlabError(f"{param('split_step')} {self.split_step!r}: must be a whole step number >= 1")
        if self.per_group < 1:
            raise TrajlabError(f"{param('per_group')} {self.per_group}: must be >= 1")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise TrajlabError(f"{param('max_tokens')} {self.max_tokens}: must be >= 1")
        if self.max_tokens is not None and not self.tokenizer:
            raise TrajlabError(
                f"{param('max_tokens')} needs {param('tokenizer')} (a tokenizer directory, or an alias: qwen3, qwen3.5) to count tokens",
                hint=f"e.g. {param('tokenizer', '/path/to/Qwen3-8B')} {param('max_tokens', 8192)}",
            )
        if not (0.0 <= float(self.val_fraction) < 1.0):
            raise TrajlabError(f"{param('val_fraction')} {self.val_fraction}: must be in [0, 1)")
        if self.max_samples is not None and self.max_samples < 1:
            raise TrajlabError(f"{param('max_samples')} {self.max_samples}: must be >= 1")
        if self.ood_eval and float(self.val_fraction) <= 0:
            raise TrajlabError(
                f"{param('ood_eval')} needs held-back prompts, but {param('val_fraction')} is 0",
                hint=f"set {param('val_fraction')} > 0 (the OOD set is built from validation prompts only)",
            )
        if self.ood_prompts < 1:
            raise TrajlabError(f"{param('ood_prompts')} {self.ood_prompts}: must be >= 1")
        put("source_splits", tuple(self.source_splits) or ("train",))
        ood_format = None if self.ood_format in ("", "auto") else self.ood_format
        if ood_format is not None:
            from trajlab.toolcalls import KNOWN_FORMATS

            if ood_format not in KNOWN_FORMATS:
                raise TrajlabError(f"{param('ood_format')} {ood_format!r}: expected one of {', '.join(KNOWN_FORMATS)}")
        put("ood_format", ood_format)
        put("score_rule", parse_min_score(self.min_score))
        put("per_group", int(self.per_group))
        put("tokenizer", str(self.tokenizer) if self.tokenizer else None)
        put("val_fraction", float(self.val_fraction))
        put("ood_eval", bool(self.ood_eval))
        put("ood_prompts", int(self.ood_prompts))
        put("seed", int(self.seed))
        put("rules_dirs", tuple(str(d) for d in self.rules_dirs))
        put("runs", tuple(dict.fromkeys(self.runs)))

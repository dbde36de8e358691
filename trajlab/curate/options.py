"""Options of ``build-sft-pool``, parsed and validated once (ratio, score rule, style, limits)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from trajlab.errors import TrajlabError, param

STYLES = ("messages", "prompt-response", "openai")
DEFAULT_RATIO = "5:3:2"
DEFAULT_PER_GROUP = 2
DEFAULT_VAL_FRACTION = 0.05
DEFAULT_OOD_PROMPTS = 32


def parse_ratio(ratio: str | tuple[float, ...] | list[float]) -> tuple[float, float, float]:
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
    ratio: tuple[float, float, float]
    ratio_text: str
    score_rule: ScoreRule
    per_group: int
    tokenizer: str | None
    max_tokens: int | None
    val_fraction: float
    max_samples: int | None
    style: str
    ood_eval: bool
    ood_prompts: int
    seed: int
    rules_dirs: tuple[str, ...]
    source_splits: tuple[str, ...] = ("train",)
    runs: tuple[str, ...] = ()  # only these runs' trajectories (empty: every run)
    extra: dict[str, Any] = field(default_factory=dict)
    ood_format: str | None = None  # the call format of `reformatted` OOD variants (None: hints.yaml other_format)


def make_options(
    *,
    ratio: str | tuple[float, ...] | list[float] = DEFAULT_RATIO,
    min_score: float | str | None = None,
    per_group: int = DEFAULT_PER_GROUP,
    tokenizer: str | None = None,
    max_tokens: int | None = None,
    val_fraction: float = DEFAULT_VAL_FRACTION,
    max_samples: int | None = None,
    style: str = "messages",
    ood_eval: bool = False,
    ood_prompts: int = DEFAULT_OOD_PROMPTS,
    seed: int = 0,
    rules_dirs: tuple[str, ...] | list[str] = (),
    source_splits: tuple[str, ...] | list[str] = ("train",),
    ood_format: str | None = None,
    runs: tuple[str, ...] | list[str] = (),
) -> PoolOptions:
    """Validate every option; each problem is a :class:`TrajlabError` naming the option."""
    r = parse_ratio(ratio)
    ratio_text = ":".join(f"{v:g}" for v in r)
    if style not in STYLES:
        raise TrajlabError(f"{param('style')} {style!r}: expected one of {', '.join(STYLES)}")
    if per_group < 1:
        raise TrajlabError(f"{param('per_group')} {per_group}: must be >= 1")
    if max_tokens is not None and max_tokens < 1:
        raise TrajlabError(f"{param('max_tokens')} {max_tokens}: must be >= 1")
    if max_tokens is not None and not tokenizer:
        raise TrajlabError(
            f"{param('max_tokens')} needs {param('tokenizer')} (a tokenizer directory or hub name) to count tokens",
            hint=f"e.g. {param('tokenizer', '/path/to/Qwen3-8B')} {param('max_tokens', 8192)}",
        )
    if not (0.0 <= float(val_fraction) < 1.0):
        raise TrajlabError(f"{param('val_fraction')} {val_fraction}: must be in [0, 1)")
    if max_samples is not None and max_samples < 1:
        raise TrajlabError(f"{param('max_samples')} {max_samples}: must be >= 1")
    if ood_eval and float(val_fraction) <= 0:
        raise TrajlabError(
            f"{param('ood_eval')} needs held-back prompts, but {param('val_fraction')} is 0",
            hint=f"set {param('val_fraction')} > 0 (the OOD set is built from validation prompts only)",
        )
    if ood_prompts < 1:
        raise TrajlabError(f"{param('ood_prompts')} {ood_prompts}: must be >= 1")
    splits = tuple(source_splits) or ("train",)
    if ood_format in ("", "auto"):
        ood_format = None
    if ood_format is not None:
        from trajlab.toolcalls import KNOWN_FORMATS

        if ood_format not in KNOWN_FORMATS:
            raise TrajlabError(f"{param('ood_format')} {ood_format!r}: expected one of {', '.join(KNOWN_FORMATS)}")
    return PoolOptions(
        ratio=r,
        ratio_text=ratio_text,
        score_rule=parse_min_score(min_score),
        per_group=int(per_group),
        tokenizer=str(tokenizer) if tokenizer else None,
        max_tokens=max_tokens,
        val_fraction=float(val_fraction),
        max_samples=max_samples,
        style=style,
        ood_eval=bool(ood_eval),
        ood_prompts=int(ood_prompts),
        seed=int(seed),
        rules_dirs=tuple(str(d) for d in rules_dirs),
        source_splits=splits,
        ood_format=ood_format,
        runs=tuple(dict.fromkeys(runs)),
    )

"""What a rescore is asked to do: :class:`RescoreOptions`, every option of :func:`trajlab.rescore.rescore`,
validated once when the object is made."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from trajlab.errors import TrajlabError, param

#: what ``tokens.parquet`` holds: every scored token, only those inside tool calls, or none
TOKENS_MODES = ("all", "calls", "none")


@dataclass(frozen=True)
class RescoreOptions:
    """The options of :func:`trajlab.rescore.rescore` (frozen; a bad value raises :class:`TrajlabError` naming
    the field as soon as the object is made).

    Example::

        RescoreOptions(steps="140-150", sample=1, progress=False)
    """

    # -- which trajectories
    #: SQL predicate over the ``trajectories`` table, e.g. ``"split = 'train' AND score = 0"``
    where: str | None = None
    #: rollout steps to rescore: a set of ints, or text like ``"60,120"`` / ``"80-130"`` (kept as a frozenset)
    steps: frozenset[int] | Iterable[int] | str | None = None
    #: N trajectories per step, half with malformed calls, half without (seeded by ``seed``)
    sample: int | None = None
    #: seed of ``sample``
    seed: int = 0
    #: at most this many trajectories (after ``sample``)
    limit: int | None = None
    # -- which checkpoints, and how they are loaded
    #: ``global_step_N`` to take from a checkpoints root (same forms as ``steps``; default: all)
    ckpt_steps: frozenset[int] | Iterable[int] | str | None = None
    #: ``auto`` | ``cuda`` | ``cuda:N`` | ``cpu``
    device: str = "auto"
    #: ``auto`` (bf16 on GPU, fp32 on CPU) | ``float32`` | ``bfloat16`` | ``float16``
    dtype: str = "auto"
    #: tokenizer directory or alias (``qwen3``, ``qwen3.5``); None: each checkpoint's own
    tokenizer: str | None = None
    #: allow a checkpoint's own model code
    trust_remote_code: bool = False
    #: load FSDP shards with full pickle (only for shards you trust)
    allow_unsafe_pickle: bool = False
    #: keep merged FSDP weights as safetensors next to the shards
    cache_merged: bool = False
    #: ``"auto"`` spreads a model too big for one GPU over several (needs accelerate)
    device_map: str | None = None
    # -- how scoring runs
    #: LM-head rows per chunk (None: 2048 on GPU, 256 on CPU)
    chunk: int | None = None
    #: padded tokens per forward batch
    max_batch_tokens: int = 16384
    #: trajectories scored (and written as one part) at a time
    block_size: int = 64
    #: resume an interrupted run: keep what it already scored, score the rest
    resume: bool = False
    #: draw a progress bar on stderr
    progress: bool = True
    # -- what is written and measured
    #: rows in ``tokens.parquet``: one of :data:`TOKENS_MODES`
    tokens: str = "all"
    #: intrusion: control mass >= TAU at a content position (None: ``rules/control_tokens.yaml``)
    tau_intrusion: float | None = None
    #: dropout: a logged control token gets probability <= 1 - TAU (None: ``rules/control_tokens.yaml``)
    tau_dropout: float | None = None
    #: extra rule-pack directories (their ``control_tokens.yaml``; their call rules find the malformed spans)
    rules_dirs: tuple[str, ...] = ()
    #: checkpoint the others are measured against: a label, or ``first`` (the first in step order)
    reference: str | None = "first"
    #: quantile of the reference's own control-token probabilities that sets each token x region threshold
    calibration_quantile: float = 0.999
    #: :attr:`RescoreSummary.exceeded` turns true when a checkpoint's calibrated spike rate is above this rate
    fail_above: float | None = None

    def __post_init__(self) -> None:
        from trajlab.rescore.select import parse_steps

        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("steps", "ckpt_steps"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, frozenset):
                parsed = v if isinstance(v, set) else parse_steps(v)  # text or ints; "" means every step
                put(name, None if parsed is None else frozenset(parsed))
        put("rules_dirs", tuple(str(Path(d)) for d in self.rules_dirs))
        if self.tokenizer is not None:
            put("tokenizer", str(self.tokenizer))
        if self.tokens not in TOKENS_MODES:
            raise TrajlabError(f"{param('tokens')} {self.tokens!r}: expected one of {', '.join(TOKENS_MODES)}")
        if self.fail_above is not None and not (math.isfinite(self.fail_above) and 0.0 <= self.fail_above <= 1.0):
            raise TrajlabError(f"{param('fail_above')} {self.fail_above}: expected a rate between 0 and 1")
        if not 0.5 <= self.calibration_quantile < 1.0:
            raise TrajlabError(f"{param('calibration_quantile')} {self.calibration_quantile}: expected a value in "
                               "[0.5, 1), e.g. 0.999")
        if self.max_batch_tokens < 1:
            raise TrajlabError(f"{param('max_batch_tokens')} must be at least 1")
        if self.chunk is not None and self.chunk < 1:
            raise TrajlabError(f"{param('chunk')} must be at least 1")
        if self.sample is not None and self.sample < 1:
            raise TrajlabError(f"{param('sample')} must be at least 1")
        if self.limit is not None and self.limit < 0:
            raise TrajlabError(f"{param('limit')} must not be negative")
        if self.block_size < 1:
            put("block_size", 1)

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (steps as sorted lists), for logs and JSON."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in ("steps", "ckpt_steps"):
            if d[k] is not None:
                d[k] = sorted(d[k])
        return d

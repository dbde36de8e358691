"""Exact tokens for the verl reward: the payload trajlab's agent loops attach, and what the reward reads from it.

verl's reward path gets the response ids but not the response mask (which tokens the model generated, which the
environment wrote) nor the sampler's log-probs (``verl-inloop-and-peers.md`` §1.2). trajlab's agent loops
(:mod:`trajlab.verl.agent_loop`) put both into ``AgentLoopOutput.extra_fields[PAYLOAD_KEY]``, which verl hands the
reward worker as ``non_tensor_batch["tool_extra_fields"]``; :func:`make_payload` / :func:`read_payload` are the
two ends (the mask run-length encoded, the log-probs as the rollout computed them, the step).

From the payload the reward decides exactly, with no extra forward pass:

* **who wrote each turn** (:func:`exact_turns`): a run of generated tokens is the model's, a run of the others the
  environment's; a generated environment token (``<|im_start|>``, ``<tool_response>`` ... : the family's
  ``environment`` tokens in ``rules/control_tokens.yaml``) starts a tool turn the model fabricated;
* **control-token statistics** (:func:`control_stats`): over the emitted control tokens (their kinds from
  :mod:`trajlab.rescore.control_tokens`), the mean and minimum sampled log-prob and the share below the
  probability ``control_prob``, overall and per kind (:data:`EXACT_KEYS`, floats). These are the *sampled-token*
  log-probs (vLLM ``logprobs=0``, after temperature / top-p): they show how sure the policy was of the control
  tokens it wrote, never the probability of a control token where it wrote something else.

Nothing here imports verl, torch or polars.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab.model import Turn
from trajlab.rescore.control_tokens import KINDS
from trajlab.verl.options import CONTROL_PROB

#: the agent-loop registry file this package ships (``actor_rollout_ref.rollout.agent.agent_loop_config_path``)
AGENT_LOOPS_YAML = str(Path(__file__).with_name("agent_loops.yaml"))
#: the same loops registered under verl's own names (``tool_agent``, ``single_turn_agent``): no dataset change
AGENT_LOOPS_AS_VERL_NAMES_YAML = str(Path(__file__).with_name("agent_loops_as_verl_names.yaml"))
#: the key of ``AgentLoopOutput.extra_fields`` (and so of ``tool_extra_fields``) that holds the payload
PAYLOAD_KEY = "trajlab_exact"
#: payload layout version
PAYLOAD_VERSION = 1
#: per-kind statistics, one set of keys per kind of control token
_KIND_KEYS = tuple(f"{k}_{s}" for k in KINDS for s in ("tokens", "logprob_mean", "logprob_min", "low_prob_share"))
#: the keys the reward-loop manager adds to every sample's reward_extra_info (all floats; 0.0 when not known:
#: ``exact_tokens`` says whether the sample was judged from exact tokens, ``*_tokens`` how many tokens a
#: statistic is over, so a 0.0 mean over 0 tokens reads as "none")
EXACT_KEYS: tuple[str, ...] = (
    "exact_tokens", "exact_logprobs", "generated_tokens", "fabricated_turns",
    "control_tokens", "control_logprob_mean", "control_logprob_min", "control_low_prob_share",
    *_KIND_KEYS,
)


@dataclass(frozen=True)
class Payload:
    """What one sample's agent loop handed over: the response mask, the sampled log-probs (None when the rollout
    did not compute them) and the training step (None when not known)."""

    mask: list[int]
    logprobs: list[float] | None
    step: int | None


def encode_mask(mask: Sequence[int]) -> list[int]:
    """A 0/1 mask run-length encoded: ``[first value, run, run, ...]`` (``[]`` for an empty mask)."""
    if not len(mask):
        return []
    out = [1 if mask[0] else 0]
    run, cur = 0, bool(mask[0])
    for m in mask:
        if bool(m) == cur:
            run += 1
        else:
            out.append(run)
            run, cur = 1, bool(m)
    out.append(run)
    return out


def decode_mask(rle: Sequence[int]) -> list[int]:
    """The mask :func:`encode_mask` encoded."""
    if not len(rle):
        return []
    out: list[int] = []
    v = 1 if rle[0] else 0
    for run in rle[1:]:
        out.extend([v] * int(run))
        v = 1 - v
    return out


def _int_or_none(x: Any) -> int | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        return int(x)
    except (TypeError, ValueError, OverflowError):
        return None


def make_payload(response_mask: Sequence[int], response_logprobs: Sequence[float] | None,
                 step: Any = None) -> dict[str, Any]:
    """The payload for ``extra_fields[PAYLOAD_KEY]`` (plain JSON-able values)."""
    lp = None if not response_logprobs else [float(x) for x in response_logprobs]
    return {"v": PAYLOAD_VERSION, "mask": encode_mask([int(m) for m in response_mask]), "logprobs": lp,
            "step": _int_or_none(step)}


def read_payload(extra: Any, n_tokens: int) -> Payload | None:
    """The payload in one sample's ``tool_extra_fields`` when present and consistent with its ``n_tokens``
    response tokens (the mask and log-probs cut to them), else None."""
    if not isinstance(extra, Mapping):
        return None
    p = extra.get(PAYLOAD_KEY)
    if not isinstance(p, Mapping) or p.get("v") != PAYLOAD_VERSION:
        return None
    try:
        mask = decode_mask(list(p.get("mask") or []))
        lp_raw = p.get("logprobs")
        lp = None if lp_raw is None else [float(x) for x in lp_raw]
    except (TypeError, ValueError):
        return None
    if len(mask) < n_tokens or (lp is not None and len(lp) < n_tokens):
        return None
    return Payload(mask[:n_tokens], None if lp is None else lp[:n_tokens], _int_or_none(p.get("step")))


@dataclass(frozen=True)
class ExactTurns:
    """One response cut into turns by its mask: the text (decoded with special tokens kept, turns tiling it), the
    turns, and per fabricated tool turn (model-written) its turn index, the environment token and its position."""

    text: str
    turns: list[Turn]
    fabricated: list[tuple[int, str, int]]


def exact_turns(ids: Sequence[int], mask: Sequence[int], env_ids: frozenset[int],
                decode_many: Callable[[list[list[int]]], list[str]]) -> ExactTurns:
    """Turns of one response from its mask: each run of generated tokens is an ``assistant`` turn, each run of
    environment tokens a ``tool`` turn; a generated environment token cuts its run, and the rest of that run is a
    ``tool`` turn the model wrote (listed in :attr:`ExactTurns.fabricated`). ``decode_many``: lists of ids -> their
    texts, special tokens kept (one call: a tokenizer's ``batch_decode``)."""
    pieces: list[tuple[str, int, int, int | None]] = []  # (role, start, end, env token position)
    n = len(ids)
    i = 0
    while i < n:
        gen = bool(mask[i])
        j = i
        while j < n and bool(mask[j]) == gen:
            j += 1
        if gen:
            run = ids[i:j]
            cut = (next(k for k in range(i, j) if ids[k] in env_ids)
                   if not env_ids.isdisjoint(run) else None)
            if cut is None:
                pieces.append(("assistant", i, j, None))
            else:
                pieces.append(("assistant", i, cut, None))  # (possibly empty: the finding needs its turn)
                pieces.append(("tool", cut, j, cut))
        else:
            pieces.append(("tool", i, j, None))
        i = j
    env_at = [e for *_, e in pieces if e is not None]
    texts = decode_many([list(ids[a:b]) for _, a, b, _ in pieces] + [[int(ids[e])] for e in env_at]) if pieces else []
    markers = iter(texts[len(pieces):])
    turns: list[Turn] = []
    fabricated: list[tuple[int, str, int]] = []
    pos = 0
    for (role, _a, _b, env), text in zip(pieces, texts, strict=False):
        t = Turn(len(turns), role, text, pos, pos + len(text))  # type: ignore[arg-type]
        if env is not None:
            fabricated.append((t.index, next(markers), env))
        turns.append(t)
        pos += len(text)
    return ExactTurns("".join(t.text for t in turns), turns, fabricated)


def _stats(values: list[float], low: float) -> tuple[float, float, float, float]:
    """(count, mean, min, share below ``low``) of log-probs; zeros when there are none."""
    if not values:
        return 0.0, 0.0, 0.0, 0.0
    n = len(values)
    return float(n), math.fsum(values) / n, min(values), sum(1 for v in values if v < low) / n


def control_stats(ids: Sequence[int], mask: Sequence[int], logprobs: Sequence[float] | None,
                  kinds: Mapping[int, str], control_prob: float = CONTROL_PROB) -> dict[str, float]:
    """The control-token keys of :data:`EXACT_KEYS` (all but ``exact_tokens``, ``generated_tokens`` and
    ``fabricated_turns``) over the generated positions whose token is a control token (``kinds``: id -> kind).
    Without log-probs every statistic is 0.0 and ``exact_logprobs`` is 0.0. Non-finite log-probs are skipped."""
    out = dict.fromkeys(EXACT_KEYS[4:], 0.0)
    out["exact_logprobs"] = 0.0
    if logprobs is None:
        return out
    out["exact_logprobs"] = 1.0
    low = math.log(control_prob) if control_prob > 0 else -math.inf
    per: dict[str, list[float]] = {k: [] for k in KINDS}
    for tid, m, lp in zip(ids, mask, logprobs, strict=False):
        if not m:
            continue
        kind = kinds.get(int(tid))
        if kind is None or not math.isfinite(lp):
            continue
        per[kind].append(float(lp))
    every = [v for k in KINDS for v in per[k]]
    out["control_tokens"], out["control_logprob_mean"], out["control_logprob_min"], out["control_low_prob_share"] = (
        _stats(every, low))
    for k in KINDS:
        (out[f"{k}_tokens"], out[f"{k}_logprob_mean"], out[f"{k}_logprob_min"],
         out[f"{k}_low_prob_share"]) = _stats(per[k], low)
    return out


def empty_exact() -> dict[str, float]:
    """The :data:`EXACT_KEYS` of a sample judged from text (no payload): all 0.0."""
    return dict.fromkeys(EXACT_KEYS, 0.0)


@dataclass(frozen=True)
class TokenizerMarks:
    """A tokenizer's control-token set (with kinds, per format) and its environment ids."""

    control: Any  # trajlab.rescore.control_tokens.ControlSet
    env_ids: frozenset[int]


_MARKS: dict[tuple[int, tuple[str, ...]], tuple[Any, TokenizerMarks]] = {}


def tokenizer_marks(tokenizer: Any, rules_dirs: tuple[str, ...] = ()) -> TokenizerMarks:
    """:class:`TokenizerMarks` of ``tokenizer`` under ``rules_dirs`` (resolved once per tokenizer object)."""
    key = (id(tokenizer), tuple(rules_dirs))
    hit = _MARKS.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    from trajlab.rescore.control_tokens import environment_ids, load_control_rules, resolve_control_set

    rules = load_control_rules(rules_dirs)
    cs = resolve_control_set(tokenizer, rules)
    marks = TokenizerMarks(cs, environment_ids(tokenizer, rules, cs.family))
    if len(_MARKS) > 16:
        _MARKS.clear()
    _MARKS[key] = (tokenizer, marks)
    return marks


@dataclass(frozen=True)
class ExactSample:
    """One sample's exact tokens as the reward reads them: its turns (:func:`exact_turns`), the response ids, the
    mask, the sampled log-probs (or None), the tokenizer's marks and the low-probability threshold."""

    turns: ExactTurns
    ids: list[int]
    mask: list[int]
    logprobs: list[float] | None
    marks: TokenizerMarks
    control_prob: float = CONTROL_PROB
    step: int | None = None


def exact_sample(ids: Sequence[int], payload: Payload, tokenizer: Any, *, rules_dirs: tuple[str, ...] = (),
                 control_prob: float = CONTROL_PROB) -> ExactSample:
    """:class:`ExactSample` of one response (``ids``: its valid response ids) from its payload."""
    marks = tokenizer_marks(tokenizer, rules_dirs)
    ids = [int(i) for i in ids]

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and not getattr(tokenizer, "clean_up_tokenization_spaces", False):
        def decode_many(x: list[list[int]]) -> list[str]:  # the Rust tokenizer itself: what decode() ends in
            return [str(t) for t in backend.decode_batch(x, skip_special_tokens=False)]
    else:
        def decode_many(x: list[list[int]]) -> list[str]:
            return [str(t) for t in tokenizer.batch_decode(x, skip_special_tokens=False)]

    turns = exact_turns(ids, payload.mask, marks.env_ids, decode_many)
    return ExactSample(turns, ids, list(payload.mask), payload.logprobs, marks, control_prob, payload.step)


def exact_figures(sample: ExactSample, tool_format: str | None) -> dict[str, float]:
    """The :data:`EXACT_KEYS` of one sample (control-token kinds of its call format ``tool_format``)."""
    out = empty_exact()
    out["exact_tokens"] = 1.0
    out["generated_tokens"] = float(sum(1 for m in sample.mask if m))
    out["fabricated_turns"] = float(len(sample.turns.fabricated))
    out.update(control_stats(sample.ids, sample.mask, sample.logprobs, sample.marks.control.kinds_for(tool_format),
                             sample.control_prob))
    return out

"""A TRL reward function: the format reward of trajlab's verl plugin, for ``GRPOTrainer(reward_funcs=[...])``.

TRL calls every reward function as ``reward_func(prompts=..., completions=..., completion_ids=..., **kwargs)``
(``trl/trainer/grpo_trainer.py``, ``_calculate_rewards``: ``kwargs`` holds every dataset column, ``trainer_state``,
``log_extra(column, values)`` and ``log_metric(name, value)``) and sums their outputs with ``reward_weights``; so
this one returns the **format reward** alone (the task reward is the user's own function beside it)::

    from trajlab.trl.reward import make_reward
    fmt = make_reward(tokenizer=tokenizer)                # judge the ids with special tokens kept
    trainer = GRPOTrainer(model, reward_funcs=[accuracy, fmt], ...)

Each completion is classified with the classifier ``trajlab scan`` uses and scored by the verl plugin's policy
(``rules/reward_policy.yaml``: +0.1 a valid call, the largest penalty among a malformed call's findings, capped),
through the same judge (:meth:`trajlab.verl.reward.Scorer.judge_response`). TRL decodes ``completions`` with
special tokens skipped and, with tools, parses the calls out of them; with a ``tokenizer``, the ``completion_ids``
are decoded here with special tokens kept, so the markup the model wrote is what is judged. Per batch it logs
``trajlab/malformed_rate``, ``trajlab/tool_calls`` and one ``trajlab/<group>`` share per policy group through
``log_metric``, and per completion ``trajlab/malformed_calls`` and ``trajlab/broken`` (the groups that fired)
through ``log_extra`` (the completions table). Model text never makes it raise: a completion that cannot be judged
scores 0.0 and is counted in ``trajlab/unjudged``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trajlab.verl.options import RewardOptions
from trajlab.verl.policy import load_policy
from trajlab.verl.reward import Scorer, log_once

#: the prefix of every metric and completions-table column this function logs
PREFIX = "trajlab/"


@dataclass(frozen=True)
class TrlRewardOptions:
    """What :func:`make_reward` is asked to do.

    Attributes:
        tokenizer: the policy's tokenizer (an object with ``decode``): when given, ``completion_ids`` are decoded
            with special tokens kept and judged; otherwise the ``completions`` text is.
        tools: a tools file (JSON list of OpenAI tool schemas, or verl's tool-config YAML), or the schemas
            themselves; otherwise a ``tools`` dataset column, else the prompt's tool block.
        tool_format: the call format; ``None``: detected per completion.
        policy: a YAML file merged over the built-in reward policy; ``policy_overrides``: settings given directly.
        rules_dirs: user rule packs.
        max_chars: characters of one completion that are classified.
        name: the function's ``__name__`` (TRL names the reward column and metrics after it).
    """

    tokenizer: Any = None
    tools: str | Sequence[Mapping[str, Any]] | None = None
    tool_format: str | None = None
    policy: str | None = None
    policy_overrides: Mapping[str, Any] = field(default_factory=dict)
    rules_dirs: tuple[str, ...] = ()
    max_chars: int | None = None
    name: str = "trajlab_format"


class TrlReward:
    """The reward function TRL calls (one float per completion). Made by :func:`make_reward`."""

    def __init__(self, options: TrlRewardOptions) -> None:
        import json

        self.options = options
        self.__name__ = options.name
        tools_file = options.tools if isinstance(options.tools, str) else None
        kw: dict[str, Any] = {"tools": tools_file, "tool_format": options.tool_format, "task_fn": "none",
                              "policy": options.policy, "rules_dirs": tuple(options.rules_dirs),
                              "policy_overrides": json.dumps(dict(options.policy_overrides), sort_keys=True)}
        if options.max_chars is not None:
            kw["max_chars"] = options.max_chars
        ropts = RewardOptions(**kw)
        tools: list[dict[str, Any]] | None = None
        if tools_file:
            from trajlab.ingest.tool_schemas import load_tools_file

            tools = load_tools_file(tools_file)
        elif options.tools is not None:
            from trajlab.ingest.tool_schemas import normalise_tools

            tools = normalise_tools([dict(t) for t in options.tools if isinstance(t, Mapping)])
        policy = load_policy(ropts.rules_dirs, ropts.policy, dict(options.policy_overrides))
        self.scorer = Scorer(ropts, tools, None, "none (TRL sums this with the task's own reward function)", policy)

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float]:
        comps = list(completions) if completions is not None else []
        n = len(comps) if comps else len(completion_ids or [])
        prm = _column(prompts, n)
        ids = _column(completion_ids, n)
        tools_col = _column(kwargs.get("tools"), n)
        rewards: list[float] = []
        malformed: list[int] = []
        broken: list[str] = []
        calls = bad = unjudged = 0
        group_hits = dict.fromkeys(self.scorer.policy.group_keys, 0)
        for i in range(n):
            try:
                text = self._text(comps[i] if i < len(comps) else None, ids[i])
                info = {"tools": tools_col[i]} if tools_col[i] is not None else None
                verdict, _whole = self.scorer.judge_response(text, prompt=_prompt_text(prm[i]), extra_info=info)
            except Exception as e:  # the classifier never raises by contract; never let it reach the trainer
                log_once(f"trl:{type(e).__name__}", f"internal error while classifying (please report): "
                                                    f"{type(e).__name__}: {e}")
                verdict = None
            if verdict is None:
                unjudged += 1
                rewards.append(0.0)
                malformed.append(0)
                broken.append("")
                continue
            fr = verdict.format_reward
            rewards.append(fr if math.isfinite(fr) else 0.0)
            calls += verdict.tool_calls
            bad += verdict.malformed_calls
            malformed.append(verdict.malformed_calls)
            fired = [g for g, v in verdict.groups.items() if v]
            for g in fired:
                group_hits[g] += 1
            broken.append(", ".join(fired))
        self._log(kwargs, n, calls, bad, unjudged, group_hits, malformed, broken)
        return rewards

    def _text(self, completion: Any, ids: Any) -> str:
        tok = self.options.tokenizer
        if tok is not None and isinstance(ids, Sequence) and not isinstance(ids, (str, bytes)):
            seq = [int(x) for x in ids]
            return str(tok.decode(seq, skip_special_tokens=False))
        if tok is not None and hasattr(ids, "tolist"):
            return str(tok.decode([int(x) for x in ids.tolist()], skip_special_tokens=False))
        return _completion_text(completion)

    def _log(self, kwargs: Mapping[str, Any], n: int, calls: int, bad: int, unjudged: int,
             group_hits: dict[str, int], malformed: list[int], broken: list[str]) -> None:
        log_metric: Callable[[str, float], Any] | None = kwargs.get("log_metric")
        log_extra: Callable[[str, list[Any]], Any] | None = kwargs.get("log_extra")
        try:
            if callable(log_metric) and n:
                log_metric(PREFIX + "malformed_rate", bad / calls if calls else 0.0)
                log_metric(PREFIX + "tool_calls", calls / n)
                log_metric(PREFIX + "unjudged", unjudged / n)
                for g, hits in group_hits.items():
                    log_metric(PREFIX + g, hits / n)
            if callable(log_extra) and n:
                log_extra(PREFIX + "malformed_calls", malformed)
                log_extra(PREFIX + "broken", broken)
        except Exception as e:  # a logging hook that fails must not cost the batch its rewards
            log_once(f"trl-log:{type(e).__name__}", f"TRL's logging hook failed: {type(e).__name__}: {e}")


def make_reward(options: TrlRewardOptions | None = None, **kwargs: Any) -> TrlReward:
    """A TRL reward function; ``options`` or the fields of :class:`TrlRewardOptions` as keywords. A wrong value
    (an unknown format, a missing file) raises :class:`~trajlab.errors.TrajlabError` here, before training."""
    if options is not None and kwargs:
        raise TypeError("give either options or keyword arguments, not both")
    return TrlReward(options or TrlRewardOptions(**kwargs))


def _column(x: Any, n: int) -> list[Any]:
    if x is None or isinstance(x, (str, bytes, Mapping)):
        return [x if isinstance(x, (str, bytes, Mapping)) else None] * n
    try:
        out = list(x)
    except TypeError:
        return [None] * n
    return (out + [None] * n)[:n]


def _completion_text(c: Any) -> str:
    """A completion as text: a string, or the contents of a conversational completion's messages (TRL has parsed
    the calls out of them by then; pass ``tokenizer`` to judge what the model wrote)."""
    if isinstance(c, str):
        return c
    if isinstance(c, Sequence) and not isinstance(c, (bytes, bytearray)):
        return "\n".join(m["content"] for m in c if isinstance(m, Mapping) and m.get("role", "assistant") == "assistant"
                         and isinstance(m.get("content"), str))
    return "" if c is None else str(c)


def _prompt_text(p: Any) -> str | None:
    if isinstance(p, str):
        return p
    if isinstance(p, Sequence) and not isinstance(p, (bytes, bytearray)):
        parts = [f"{m.get('role', '')}\n{m['content']}\n" for m in p
                 if isinstance(m, Mapping) and isinstance(m.get("content"), str)]
        return "".join(parts) or None
    return None

"""A verl reward-loop manager that judges what the model emitted: token ids decoded with special tokens kept.

verl's own managers decode the response with ``skip_special_tokens=True``, so call formats whose markers are
special tokens (gpt-oss ``<|call|>``, Kimi-K2 ``<|tool_call_begin|>``, GLM's ``<|observation|>`` ...) reach a
reward function damaged. :class:`TrajlabRewardManager` decodes ``responses`` (and the prompt, for the tool
schemas and the format) itself with special tokens kept, classifies that text, and hands the task function the
same stripped ``solution_str`` verl's naive manager would. Load it with::

    reward.reward_manager.source=importlib
    reward.reward_manager.name=TrajlabRewardManager
    reward.reward_manager.module.path=pkg://trajlab.verl.manager

When the sample's agent loop is one of trajlab's (:mod:`trajlab.verl.agent_loop`), its ``tool_extra_fields`` hold
the response mask and the sampled log-probs: the turns are then cut by the mask (a tool turn the model generated
is decided exactly) and the control-token statistics of :data:`trajlab.verl.exact.EXACT_KEYS` are added (every
sample carries those keys; 0.0 with ``exact_tokens`` 0.0 when judged from text). With ``reward_kwargs
record_dir=DIR`` every sample is also appended to this process's record file (:mod:`trajlab.verl.records`).

This module and :mod:`trajlab.verl.agent_loop` are the trajlab modules that import verl (at import time: verl
loads them only when configured).
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from verl import DataProto  # type: ignore[import-not-found]
from verl.experimental.reward_loop.reward_manager.base import (  # type: ignore[import-not-found]
    RewardManagerBase,
)

from trajlab.verl.exact import PAYLOAD_KEY, exact_sample, read_payload
from trajlab.verl.records import record_log, record_row
from trajlab.verl.reward import log_once, scorer_for
from trajlab.verl.task import is_verl_default


def _reward_kwargs(config: Any) -> dict[str, Any]:
    """``reward.custom_reward_function.reward_kwargs`` (or the pre-0.7.1 top-level spelling) as a dict."""
    for get in (lambda c: c.reward.custom_reward_function, lambda c: c.custom_reward_function):
        try:
            section = get(config)
        except Exception:
            continue
        if section is not None:
            try:
                kw = section.get("reward_kwargs")
            except Exception:
                kw = None
            if kw:
                return {str(k): v for k, v in dict(kw).items()}
    return {}


class TrajlabRewardManager(RewardManagerBase):  # type: ignore[misc]
    """verl's reward-loop manager interface (``run_single``) over trajlab's scorer.

    The task function is ``reward_kwargs task_fn`` when given, else the ``compute_score`` verl hands the
    manager (the configured custom function, or verl's default); when that is trajlab's own ``compute_score``
    the task function is verl's default.
    """

    def __init__(self, config: Any, tokenizer: Any, compute_score: Any = None, reward_router_address: Any = None,
                 reward_model_tokenizer: Any = None) -> None:
        super().__init__(config, tokenizer, compute_score)
        kwargs = _reward_kwargs(config)
        override = None
        if compute_score is not None and "task_fn" not in kwargs:
            inner = getattr(compute_score, "func", compute_score)  # verl wraps a custom fn in functools.partial
            args = getattr(compute_score, "args", ())
            if args and callable(args[0]):
                inner = args[0]
            if not getattr(inner, "__trajlab_reward__", False) and not is_verl_default(inner):
                override = compute_score  # (verl's own default is taken from the scorer: it refuses unknown sources)
        self.scorer, self.task_kwargs = scorer_for(kwargs)  # a wrong reward_kwargs value fails here, at start-up
        self.is_async_task = inspect.iscoroutinefunction(override)
        if override is not None and not self.is_async_task:
            self.scorer = replace(self.scorer, task_fn=override, task_desc=getattr(inner, "__name__", "compute_score"))
        self._async_task = override if self.is_async_task else None
        rd = self.scorer.options.record_dir
        self.records = record_log(rd) if rd else None  # an unwritable directory fails here, at start-up

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        item = data[-1:][0]
        prompt_ids = item.batch["prompts"]
        response_ids = item.batch["responses"]
        mask = item.batch["attention_mask"]
        n_prompt = prompt_ids.shape[-1]
        n_resp = int(mask[n_prompt:].sum())
        n_prompt_valid = int(mask[:n_prompt].sum())
        ids = response_ids[:n_resp]
        p_ids = prompt_ids[n_prompt - n_prompt_valid:] if n_prompt_valid else prompt_ids[:0]
        nt = item.non_tensor_batch
        data_source = nt.get("data_source")
        rm = nt.get("reward_model") or {}
        ground_truth = rm.get("ground_truth") if hasattr(rm, "get") else None
        extra_info = dict(nt.get("extra_info") or {})
        tool_extra = nt.get("tool_extra_fields")
        tool_extra = dict(tool_extra) if hasattr(tool_extra, "keys") else {}
        if PAYLOAD_KEY not in tool_extra and nt.get(PAYLOAD_KEY) is not None:
            # the batch path (a colocated reward model): verl made every extra_fields key a column of its own
            tool_extra[PAYLOAD_KEY] = nt.get(PAYLOAD_KEY)
        payload = read_payload(tool_extra, n_resp)
        if PAYLOAD_KEY in tool_extra and payload is None:
            log_once("payload", f"tool_extra_fields[{PAYLOAD_KEY!r}] does not match the response (judged from text)")
        extra_info.update({k: v for k, v in tool_extra.items() if k != PAYLOAD_KEY})
        extra_info["num_turns"] = nt.get("__num_turns__")
        extra_info["rollout_reward_scores"] = nt.get("reward_scores", {})

        options = self.scorer.options

        def decode() -> tuple[str, str, str, Any]:
            tok = self.tokenizer
            exact = None
            if payload is not None:
                try:
                    exact = exact_sample(ids.tolist() if hasattr(ids, "tolist") else list(ids), payload, tok,
                                         rules_dirs=options.rules_dirs, control_prob=options.control_prob)
                except Exception as e:
                    log_once(f"exact:{type(e).__name__}", f"exact tokens not read ({type(e).__name__}: {e}); "
                                                          f"judged from text")
            return (tok.decode(ids, skip_special_tokens=True), tok.decode(ids, skip_special_tokens=False),
                    tok.decode(p_ids, skip_special_tokens=False), exact)

        stripped, kept, prompt, exact = await self.loop.run_in_executor(None, decode)
        task_kwargs = self.task_kwargs
        scorer = self.scorer
        if self._async_task is not None:  # awaited here, on verl's loop; the scorer then reads its result
            try:
                result = await self._async_task(data_source=data_source, solution_str=stripped,
                                                ground_truth=ground_truth, extra_info=extra_info)
            except Exception as e:
                log_once(f"task:{type(e).__name__}", f"task function raised {type(e).__name__}: {e}")
                result = None
            scorer = replace(scorer, task_fn=_constant(result))

        def score() -> dict[str, float]:
            out = scorer.score(data_source=data_source, solution_str=stripped, ground_truth=ground_truth,
                               extra_info=extra_info, task_kwargs=task_kwargs, judged_text=kept, prompt=prompt,
                               exact=exact, exact_keys=True)
            if self.records is not None:
                step = payload.step if payload is not None else None
                if step is None:
                    step = nt.get("global_steps", tool_extra.get("max_global_steps", tool_extra.get("global_steps")))
                try:
                    self.records.append([record_row(
                        out, step=step, uid=nt.get("uid"), session_id=nt.get("session_id"),
                        index=extra_info.get("index"), data_source=data_source, split=extra_info.get("split"),
                        stripped_text=stripped, response_tokens=n_resp)])
                except OSError as e:  # a full disk never stops the run: the reward is still returned
                    log_once("records", f"record not written to {self.records.path}: {e}")
            return out

        out = await self.loop.run_in_executor(None, score)
        return {"reward_score": out["score"], "reward_extra_info": out}


def _constant(result: Any) -> Any:
    def fn(**_: Any) -> Any:
        if result is None:
            raise RuntimeError("the task function failed (logged)")
        return result
    return fn

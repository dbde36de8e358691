"""verl reward functions: a format reward from trajlab's classifier, combined with the task's own reward.

Point verl at this file (or ``pkg://trajlab.verl.reward``)::

    reward.custom_reward_function.path=pkg://trajlab.verl.reward      # verl >= 0.7.1
    reward.custom_reward_function.name=compute_score                   # compute_score_batch for the batch manager

:func:`compute_score` takes what verl passes (``data_source, solution_str, ground_truth, extra_info`` and the
``reward_kwargs``), classifies every call of the response with the classifier ``trajlab scan`` uses
(:func:`trajlab.trajectory.analyze_trajectory`), scores it with the reward policy (:mod:`trajlab.verl.policy`), calls
the task function (:mod:`trajlab.verl.task`) and returns a dict of numbers with the same keys for every sample
(:func:`reward_keys`). Model text, ``extra_info`` and the task function never make it raise; a wrong
``reward_kwargs`` value raises :class:`~trajlab.errors.TrajlabError` on the first call.

This module imports neither verl, torch, transformers nor polars: it loads in any verl worker. verl may also load
it by file path without registering it in ``sys.modules`` (``load_module``): it therefore does not use
``from __future__ import annotations`` (``dataclasses`` would look the module up there). tests/test_verl_reward.py
loads it that way, and tests/test_verl_doc_configs.py loads every documented config (this file, ``pkg://`` and
``trajlab.verl.manager``) through verl 0.9.1's own loader.
"""

import logging
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from trajlab.errors import TrajlabError
from trajlab.model import RawTrajectory
from trajlab.trajectory import CALL_OPENER, TURN_CLASSIFY_CALLS, analyze_trajectory, turn_cut
from trajlab.verl.options import RewardOptions, check_passed_keys, options_from_kwargs, split_kwargs
from trajlab.verl.policy import RewardPolicy, judge, load_policy
from trajlab.verl.task import TaskFn, call_task_fn, load_task_fn

log = logging.getLogger("trajlab.verl")
_LOGGED: set[str] = set()
_LOCK = threading.Lock()


def log_once(kind: str, message: str) -> None:
    """Log ``message`` at WARNING the first time ``kind`` happens in this process (a reward runs per sample)."""
    with _LOCK:
        if kind in _LOGGED:
            return
        _LOGGED.add(kind)
    from trajlab.console import literal  # (rich: loaded only when something is logged)

    # a task function's exception may quote the model's text: it never drives the terminal verl logs to
    log.warning("trajlab reward: %s (logged once; counted per sample in the result's keys)", literal(message))


@dataclass(frozen=True)
class Scorer:
    """Resolved options: the tool schemas, the task function and the policy."""

    options: RewardOptions
    tools: list[dict[str, Any]] | None
    task_fn: TaskFn | None
    task_desc: str
    policy: RewardPolicy

    @property
    def keys(self) -> tuple[str, ...]:
        return self.policy.keys

    def score(self, *, data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any,
              task_kwargs: dict[str, Any] | None = None, judged_text: Any = None,
              prompt: str | None = None, exact: Any = None, exact_keys: bool = False) -> dict[str, float]:
        """The result dict of one sample. ``judged_text``: the text to classify when it differs from the one the
        task function sees (the reward-loop manager's decode with special tokens kept); ``prompt``: the prompt's
        text when the caller has it (tool schemas and the format come from it); ``exact``: the sample's exact
        tokens (:class:`trajlab.verl.exact.ExactSample`: turns from the response mask, control-token statistics
        from the sampler's log-probs); ``exact_keys``: add :data:`trajlab.verl.exact.EXACT_KEYS` (0.0 without
        ``exact``)."""
        out = dict.fromkeys(self.keys, 0.0)
        errors = 0
        text = _as_text(solution_str)
        judged = text if judged_text is None else _as_text(judged_text)
        info = extra_info if isinstance(extra_info, Mapping) else {}
        if extra_info is not None and not isinstance(extra_info, Mapping):
            log_once("extra_info", f"extra_info is {type(extra_info).__name__}, not a dict; ignored")
        task, why = call_task_fn(self.task_fn, data_source=data_source, solution_str=text, ground_truth=ground_truth,
                                 extra_info=extra_info, extra=task_kwargs or {})
        if why is not None:
            out["task_failed"] = 1.0
            log_once(f"task:{why.split(':')[0]}", f"task function {self.task_desc} {why}; task_score 0.0")
        out["task_score"] = task
        fmt = [None]
        try:
            verdict, classified = self._judge(judged, info, prompt, exact=exact, fmt_out=fmt)
        except Exception as e:  # the classifier never raises by contract; never let it reach verl if it does
            errors += 1
            log_once(f"classify:{type(e).__name__}", f"internal error while classifying (please report): "
                                                     f"{type(e).__name__}: {e}")
            verdict, classified = None, False
        fr = 0.0
        if verdict is not None:
            fr = verdict.format_reward
            out["format_reward"] = fr
            out["tool_calls"] = float(verdict.tool_calls)
            out["malformed_calls"] = float(verdict.malformed_calls)
            out["warned_calls"] = float(verdict.warned_calls)
            out["verl_dropped_calls"] = float(verdict.verl_dropped_calls)
            for k, v in verdict.groups.items():
                out[k] = float(v)
        out["classified"] = 1.0 if classified else 0.0
        pol = self.policy
        if pol.mode == "gate":
            passed = verdict is None or verdict.all_valid
            score = (task if passed else pol.gate_score) + (pol.format_weight * fr if pol.gate_adds_format else 0.0)
        else:
            score = task + pol.format_weight * fr
        out["score"] = score if math.isfinite(score) else 0.0
        if exact_keys:
            from trajlab.verl.exact import empty_exact, exact_figures

            figures = empty_exact()
            if exact is not None:
                try:
                    figures = exact_figures(exact, fmt[0])
                except Exception as e:  # the statistics never reach verl as an exception either
                    errors += 1
                    log_once(f"exact:{type(e).__name__}", f"internal error in the exact-token statistics (please "
                                                          f"report): {type(e).__name__}: {e}")
            out.update(figures)
        out["plugin_errors"] = float(errors)
        return out

    def judge_response(self, text: str, *, prompt: str | None = None,
                       extra_info: Mapping[str, Any] | None = None) -> tuple[Any, bool]:
        """The policy's :class:`~trajlab.verl.policy.Verdict` on one response text (``None`` when classifying
        failed) and whether all of it was classified; raises only on an internal error. The judge every
        trainer's reward function shares (verl's here, TRL's in :mod:`trajlab.trl.reward`)."""
        return self._judge(text, extra_info or {}, prompt)

    def _judge(self, text: str, info: Mapping[str, Any], prompt: str | None, exact: Any = None,
               fmt_out: list[Any] | None = None) -> tuple[Any, bool]:
        if exact is not None and len(exact.turns.text) <= self.options.max_chars:
            return self._judge_exact(exact, info, prompt, fmt_out)
        cut = turn_cut(text) if len(text) > 1024 else None
        if cut is None and len(text) > self.options.max_chars:
            cut = self.options.max_chars
        fcut = _function_cut(text) if len(text) > 1024 else None
        if fcut is not None:
            cut = fcut if cut is None else min(cut, fcut)
        if cut is not None:
            cut = min(cut, self.options.max_chars)
            log_once("cap", f"a response of {len(text):,} characters was classified up to character {cut:,} "
                            f"(per-response cap; 'classified' is 0 for such samples)")
            text = text[:cut]
        from trajlab.ingest.turns import split_turns
        from trajlab.provenance import env_turns_from_num_turns

        rec = RawTrajectory(source_path="", source_line=0, source_format="verl_reward", split="train", step=None,
                            group_id="", score=None, input=prompt if prompt is not None else _prompt_text(info),
                            output=text, turns=split_turns(text), tools=_info_tools(info), tools_source=None,
                            extra={}, env_turns=env_turns_from_num_turns(info.get("num_turns")))
        an = analyze_trajectory(rec, tool_format=self.options.tool_format, tools=self.tools,
                                rules_dirs=self.options.rules_dirs)
        if fmt_out is not None:
            fmt_out[0] = an.tool_format
        return judge(an, self.policy), cut is None and not an.notes

    def _judge_exact(self, exact: Any, info: Mapping[str, Any], prompt: str | None,
                     fmt_out: list[Any] | None) -> tuple[Any, bool]:
        """The judge on turns cut by the response mask: a tool turn inside a generation is the model's, decided
        exactly (no reading of the text's scaffold)."""
        from trajlab.provenance import ModelTurn, report_model_turns

        et = exact.turns
        rec = RawTrajectory(source_path="", source_line=0, source_format="verl_exact", split="train", step=None,
                            group_id="", score=None, input=prompt if prompt is not None else _prompt_text(info),
                            output=et.text, turns=list(et.turns), tools=_info_tools(info), tools_source=None,
                            extra={})
        an = analyze_trajectory(rec, tool_format=self.options.tool_format, tools=self.tools,
                                rules_dirs=self.options.rules_dirs)
        found = [ModelTurn(ti, "generated_tokens", "the model generated it (response mask 1)", marker, pos)
                 for ti, marker, pos in et.fabricated]
        report_model_turns(an.turns, found, an.tool_format, rules_dirs=self.options.rules_dirs)
        an.model_turns = found
        an.n_malformed = sum(1 for _t, ta in an.turns if ta is not None for c in ta.calls if c.status == "malformed")
        if fmt_out is not None:
            fmt_out[0] = an.tool_format
        return judge(an, self.policy), not an.notes


def _function_cut(text: str) -> int | None:
    """Where to cut a response with more than :data:`~trajlab.trajectory.TURN_CLASSIFY_CALLS` ``<function=`` openers
    (bare qwen3_coder calls have no ``<tool_call>`` for :func:`~trajlab.trajectory.turn_cut` to count: a 1 Mi flood
    of them took 10 s), before the first opener past the cap (and its ``<tool_call>``, when one opens it)."""
    if text.count(_FUNCTION_OPENER) <= TURN_CLASSIFY_CALLS:
        return None
    pos = -1
    for _ in range(TURN_CLASSIFY_CALLS + 1):
        pos = text.find(_FUNCTION_OPENER, pos + 1)
    tc = text.rfind(CALL_OPENER, max(0, pos - 64), pos)
    if tc >= 0 and not text[tc + len(CALL_OPENER):pos].strip():
        pos = tc
    return max(pos, 1)


_FUNCTION_OPENER = "<function="


def _as_text(x: Any) -> str:
    if isinstance(x, str):
        return x
    if x is None:
        return ""
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).decode("utf-8", errors="replace")
    try:
        return str(x)
    except Exception:
        return ""


def _prompt_text(info: Mapping[str, Any]) -> str:
    """The prompt as text, when ``extra_info`` carries it (verl 0.9's ``raw_prompt``: the initial messages)."""
    for key in ("raw_prompt", "prompt"):
        p = info.get(key)
        if isinstance(p, str):
            return p
        if p is None or isinstance(p, (bytes, Mapping)):
            continue
        try:
            msgs = list(p)
        except TypeError:
            continue
        from trajlab.ingest.fields import messages_text

        text = messages_text(msgs, 64)
        if text:
            return text
    return ""


def _info_tools(info: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    t = info.get("tools")
    if t is None or isinstance(t, (str, bytes, Mapping)):
        return None
    from trajlab.ingest.tool_schemas import normalise_tools

    try:
        return normalise_tools(list(t))
    except Exception:
        return None


_SCORERS: dict[tuple[Any, ...], Scorer] = {}


def scorer_from_options(options: RewardOptions) -> Scorer:
    """Resolve ``options`` (tools file, task function, policy) once; cached per distinct options."""
    key = (options,)
    hit = _SCORERS.get(key)
    if hit is not None:
        return hit
    from trajlab.errors import InputError

    tools = None
    if options.tools:
        from trajlab.ingest.tool_schemas import load_tools_file

        try:
            tools = load_tools_file(options.tools)
        except InputError as e:
            raise TrajlabError(f"reward_kwargs: {e}") from None
    policy = load_policy(options.rules_dirs, options.policy, options.overrides)  # (its values first, then the task)
    fn, desc = load_task_fn(options.task_fn)
    if fn is None:
        log_once("no-task", f"task function: {desc}")
    sc = Scorer(options, tools, fn, desc, policy)
    with _LOCK:
        if len(_SCORERS) > 32:
            _SCORERS.clear()
        _SCORERS[key] = sc
    return sc


_BY_KWARGS: dict[str, Scorer] = {}


def scorer_for(kwargs: Mapping[str, Any]) -> tuple[Scorer, dict[str, Any]]:
    """The scorer for these reward_kwargs and the keyword arguments left for the task function."""
    own, rest = split_kwargs(kwargs)
    try:
        key = repr((sorted((k, repr(v)) for k, v in own.items()), sorted(rest)))
    except Exception:
        key = ""
    sc = _BY_KWARGS.get(key) if key else None
    if sc is None:
        sc = scorer_from_options(options_from_kwargs(own))
        check_passed_keys(rest, sc.task_fn, sc.task_desc)  # a misspelt key fails here, on the first call
        if key:
            with _LOCK:
                if len(_BY_KWARGS) > 64:
                    _BY_KWARGS.clear()
                _BY_KWARGS[key] = sc
    return sc, rest


def reward_keys(**reward_kwargs: Any) -> tuple[str, ...]:
    """The keys every result carries for these reward_kwargs (the core keys, then one per policy group)."""
    return scorer_for(reward_kwargs)[0].keys


def compute_score(data_source: Any = None, solution_str: Any = "", ground_truth: Any = None, extra_info: Any = None,
                  **kwargs: Any) -> dict[str, float]:
    """verl's per-sample reward function.

    Returns ``{"score", "task_score", "format_reward", "tool_calls", "malformed_calls", "warned_calls", "verl_dropped_calls",
    "classified", "task_failed", "plugin_errors", <one 0/1 key per policy group>}``: floats, never NaN, the
    same keys for every sample. ``kwargs``: verl's ``reward_kwargs`` (see :class:`~trajlab.verl.options.
    RewardOptions`) and call-time extras; keys the plugin does not read are passed on to the task function.
    """
    sc, rest = scorer_for(kwargs)
    try:
        return sc.score(data_source=data_source, solution_str=solution_str, ground_truth=ground_truth,
                        extra_info=extra_info, task_kwargs=rest)
    except TrajlabError:  # a configuration error (a task nothing can score): stop the run, in one line
        raise
    except Exception as e:  # pragma: no cover - Scorer.score guards every step; this is the last net
        log_once(f"score:{type(e).__name__}", f"internal error (please report): {type(e).__name__}: {e}")
        out = dict.fromkeys(sc.keys, 0.0)
        out["plugin_errors"] = 1.0
        return out


compute_score.__trajlab_reward__ = True  # type: ignore[attr-defined]


def compute_score_batch(data_sources: Iterable[Any] = (), solution_strs: Iterable[Any] = (),
                        ground_truths: Iterable[Any] = (), extra_infos: Iterable[Any] | None = None,
                        **kwargs: Any) -> list[dict[str, float]]:
    """The batch form verl's ``batch`` reward manager calls: one result dict per solution string."""
    sc, rest = scorer_for(kwargs)
    sols = list(solution_strs) if solution_strs is not None else []
    srcs = _seq(data_sources, len(sols))
    gts = _seq(ground_truths, len(sols))
    infos = _seq(extra_infos, len(sols))
    out = []
    for ds, sol, gt, info in zip_longest(srcs[:len(sols)], sols, gts[:len(sols)], infos[:len(sols)]):
        try:
            out.append(sc.score(data_source=ds, solution_str=sol, ground_truth=gt, extra_info=info, task_kwargs=rest))
        except TrajlabError:
            raise
        except Exception as e:  # pragma: no cover - as in compute_score
            log_once(f"score:{type(e).__name__}", f"internal error (please report): {type(e).__name__}: {e}")
            out.append({**dict.fromkeys(sc.keys, 0.0), "plugin_errors": 1.0})
    return out


compute_score_batch.__trajlab_reward__ = True  # type: ignore[attr-defined]


def _seq(x: Any, n: int) -> Sequence[Any]:
    if x is None or isinstance(x, (str, bytes)):
        return [x] * n
    try:
        return list(x)
    except TypeError:
        return [x] * n


"""Who wrote each tool turn of a verl rollout's text: the environment, or the model that kept generating.

verl decodes a multi-turn response with ``skip_special_tokens=True``, so a tool turn the environment appended
(``user\\n<tool_response>...</tool_response>\\nassistant\\n``) and one the model typed itself after its call read
the same. What verl's tool agent loop does still rules most of them out (verl-formats.md §1.4, §2.2):

* it writes a tool turn only to answer a generation in which its parser found a call (no parsed call ends the
  rollout), with one ``<tool_response>`` per call it ran (at most ``max_parallel_calls``);
* it follows every tool turn with the generation prompt the rollout's prompt ends with (``assistant\\n``, plus
  ``<think>\\n\\n</think>\\n\\n`` when thinking is off): a tool turn closed by another header was typed;
* ``num_turns`` (user turns + assistant turns + 1, in the reward function's ``extra_info``) says how many
  environment turns there were: more tool turns in the text than that were written by the model (which ones
  cannot be told from text alone);
* decoded with special tokens kept (:mod:`trajlab.verl.manager`), a generation ends with ``<|im_end|>``, the
  stop token: a ChatML tool turn that does not follow one was generated.

An interaction agent (verl 0.7/0.8 ``interaction_config_path``) also appends real ``user`` turns, but only after a
generation without a call and without ``<tool_response>``: the split never reads those as tool turns, and a bare
role line written after a call (the environment answers a call with a tool turn, not a user turn) is the model's
(:mod:`trajlab.toolcalls.placement`). :func:`model_written_turns` is the one judge of a single rollout's tool turns;
scan (both engines) and the reward plugin call it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trajlab.families.chatml import IM_END, IM_START
from trajlab.model import Finding, Turn, TurnAnalysis

#: sources whose text is a verl agent loop's decoded response (the rules above hold for them)
VERL_TEXT_SOURCES = frozenset({"verl_jsonl", "verl_reward"})
#: the empty reasoning block a non-thinking generation prompt ends with
_EMPTY_THINK = "<think>\n\n</think>\n\n"
#: how a rollout's prompt ends when its generation prompt turns thinking off
THINKS_OFF_PROMPT_END = "assistant\n" + _EMPTY_THINK
_RESPONSE = "<tool_response>"
_HEADER_TAIL = re.compile(rf"(?:{re.escape(IM_END)})?\n(?:{re.escape(IM_START)})?assistant\n(?P<think>{_EMPTY_THINK})?\Z")


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """A tool turn the model wrote: its index, the variant of ``fabricated_tool_response`` and why."""

    turn_index: int
    variant: str
    reason: str
    marker: str = "user"  # what gave it away (exact tokens: the generated environment token)
    position: int | None = None  # exact tokens: the token's position in the response


def env_turns_from_num_turns(num_turns: object) -> int | None:
    """How many environment turns a rollout had, from verl's ``num_turns`` (= user turns + assistant turns + 1,
    every environment turn following a generation, so ``num_turns = 2 * env + 2``); None when not known."""
    if isinstance(num_turns, bool):
        return None
    try:
        n = int(num_turns)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return None
    if n < 2:
        return None
    return (n - 2) // 2


def generation_prompt_thinks_off(prompt: str) -> bool:
    """Whether the rollout's prompt ends with a generation prompt that closes an empty reasoning block."""
    return prompt.endswith(THINKS_OFF_PROMPT_END)


def model_written_turns(turns: Sequence[Turn], executed: Mapping[int, int], *, prompt: str = "",
                        env_turns: int | None = None) -> list[ModelTurn]:
    """The tool turns of ``turns`` (one rollout, split by :func:`trajlab.ingest.turns.split_turns`) that the
    environment cannot have written, each with its reason.

    ``executed``: per assistant turn index, the calls verl's parser runs in it (a call verl drops is not counted);
    ``prompt``: the rollout's prompt text; ``env_turns``: the environment turns the rollout had, when known
    (:func:`env_turns_from_num_turns`)."""
    thinks_off = generation_prompt_thinks_off(prompt)
    out: list[ModelTurn] = []
    kept: list[int] = []
    for k, t in enumerate(turns):
        if t.role != "tool" or _RESPONSE not in t.text:
            continue
        prev = turns[k - 1] if k else None
        ran = executed.get(prev.index, 0) if prev is not None and prev.role == "assistant" else 0
        n_resp = t.text.count(_RESPONSE)
        tail = _HEADER_TAIL.search(t.text)
        if ran == 0:
            out.append(ModelTurn(t.index, "no_call_answered",
                                 "no call verl's parser runs precedes it, and verl's tool agent loop writes a tool turn "
                                 "only to answer a parsed call (without one the rollout ends)"))
        elif n_resp > ran:
            out.append(ModelTurn(t.index, "extra_response",
                                 f"it holds {n_resp} tool responses for {ran} call(s) verl runs; the environment "
                                 f"writes one response per call it runs"))
        elif IM_START in t.text and not t.text.startswith(IM_END):
            out.append(ModelTurn(t.index, "no_end_of_turn",
                                 "it does not follow <|im_end|>: a generation ends with that stop token, so a role "
                                 "header without it was generated"))
        elif thinks_off and tail is not None and tail.group("think") is None:
            out.append(ModelTurn(t.index, "generation_prompt",
                                 "it closes with a bare 'assistant' header, where the environment writes the rollout's "
                                 "generation prompt (the prompt ends with an empty <think></think> block)"))
        else:
            kept.append(k)
    if env_turns is not None and len(kept) > env_turns:
        extra = len(kept) - env_turns
        for k in kept[:extra]:
            out.append(ModelTurn(turns[k].index, "turn_count",
                                 f"the rollout had {env_turns} environment turn(s) (num_turns) but its text holds "
                                 f"{len(kept)} tool turns; {extra} of them were written by the model (which ones "
                                 f"cannot be told from the text alone: the earliest are reported)"))
    return sorted(out, key=lambda m: m.turn_index)


def executed_calls(ta: TurnAnalysis) -> int:
    """Calls of one classified turn that verl's parser runs (as intended or differently; a format whose reading
    is not modelled counts its calls)."""
    return sum(1 for c in ta.calls if c.verl_executes != "dropped")


def mark_model_turns(analysed: Sequence[tuple[Turn, TurnAnalysis | None]], fmt: str, *, prompt: str = "",
                     env_turns: int | None = None, rules_dirs: tuple[str, ...] = ()) -> list[ModelTurn]:
    """Judge the tool turns of one classified rollout (:func:`model_written_turns`) and report each one the model
    wrote as ``fabricated_tool_response`` on the assistant turn before it (on that turn's last call, which becomes
    malformed; the finding's span is the tool turn). Returns the model-written turns."""
    turns = [t for t, _ in analysed]
    executed = {t.index: executed_calls(ta) for t, ta in analysed if ta is not None}
    found = model_written_turns(turns, executed, prompt=prompt, env_turns=env_turns)
    report_model_turns(analysed, found, fmt, rules_dirs=rules_dirs)
    return found


def report_model_turns(analysed: Sequence[tuple[Turn, TurnAnalysis | None]], found: Sequence[ModelTurn], fmt: str, *,
                       rules_dirs: tuple[str, ...] = ()) -> None:
    """Report each model-written tool turn of ``found`` as ``fabricated_tool_response`` on the assistant turn
    before it (see :func:`mark_model_turns`; exact tokens give ``found`` directly: :mod:`trajlab.verl.exact`)."""
    if not found:
        return
    from trajlab.toolcalls.draft import degenerate_loop, snip
    from trajlab.toolcalls.findings import worse_status
    from trajlab.toolcalls.ruleset import get_ruleset

    rs = get_ruleset(rules_dirs)
    by_index = {t.index: (t, ta) for t, ta in analysed}
    for m in found:
        tool = by_index[m.turn_index][0]
        prev, ta = by_index.get(m.turn_index - 1, (None, None))
        if prev is None or ta is None:
            continue
        last = ta.calls[-1] if ta.calls else None
        cat = "fabricated_tool_response"
        params = {"marker": m.marker, "text": snip(tool.text.strip(), 50), "position": m.position,
                  "reason": m.reason + degenerate_loop(tool.text + (by_index[m.turn_index + 1][0].text
                                                                   if m.turn_index + 1 in by_index else ""))}
        sev = rs.severity(cat, m.variant, fmt)
        ta.findings.append(Finding(cat, sev,  # type: ignore[arg-type]
                                   tool.char_start - prev.char_start, tool.char_end - prev.char_start,
                                   rs.message(cat, m.variant, params), f"{fmt}/{cat}/{m.variant}",
                                   last.call_index if last is not None else None))
        if last is not None:
            last.status = worse_status(last.status, sev)
            if cat not in last.categories:
                last.categories = sorted([*last.categories, cat])

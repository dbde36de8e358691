"""How a trajectory's output ends: inside a structure (truncated), with a final answer, or neither -- and why.

Both scan engines decide ``trajectories.truncated``, ``has_final_answer`` and ``end_reason`` with
:func:`output_ending`, from the facts of the output's last turn. An output is *truncated* only where it stops
inside a structure it opened *and* plausibly hit the length limit: with exact tokens, when its last generated
token is no end-of-turn token (:data:`STOP_TOKENS`); in text, when it is near its run's longest output
(:func:`near_length_limit`, settled once the run is merged: :mod:`trajlab.scan.length_limit`). Otherwise the
reason says where it stopped on its own (``stopped_in_call``, ...; :data:`STOPPED`). The structures: a tool call or one of its parameters (the classifier's ``truncated_call``, for
every call family), a ``<think>`` block with no answer after it, an ``<answer>`` never closed, or a tool
response block never closed. A ``<think>`` that is never closed (or opened twice) *before a complete answer* is
not truncation: the answer is there and counts (the classifier reports it as
``unbalanced_think``). :data:`END_REASONS` says, in words, what each reason means (``show`` prints
it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trajlab.toolcalls.think import ANSWER_TAGS, complete_answer, think_regions

#: ``end_reason`` values and what each means (null ``end_reason``: a final answer, not truncated)
END_REASONS: dict[str, str] = {
    "open_call": "truncated: the output ends inside a tool call (an open call or parameter)",
    "open_think": "truncated: the output ends inside the reasoning (a <think> block with no answer after it, or "
                  "gpt-oss's analysis channel with no final message)",
    "open_answer": "truncated: an answer block (<answer>) is opened and never closed",
    "open_tool_response": "truncated: the output ends inside a tool response block",
    "stopped_in_call": "no final answer: the output stopped on its own inside an open tool call (an end-of-sequence "
                       "token, or far below the run's length limit: not truncated)",
    "stopped_in_think": "no final answer: the output stopped on its own inside the reasoning (not truncated)",
    "stopped_in_answer": "no final answer: the output stopped on its own inside an open answer block (not truncated)",
    "stopped_in_tool_response": "no final answer: the output stopped on its own inside a tool response block "
                                "(not truncated)",
    "call_pending": "no final answer: the last assistant turn makes a tool call (the output stops before its result)",
    "after_tool_response": "no final answer: the output ends with a tool response, before the model answered it",
    "empty_answer": "no final answer: nothing but whitespace (or a closed <think> block) in the last turn",
    "no_assistant_turn": "no final answer: the output holds no model text",
}

_ANSWER_OPEN = re.compile(r"<(" + "|".join(ANSWER_TAGS) + r")>")
#: harmony (gpt-oss) channel headers, with special tokens kept (``<|channel|>analysis``) or stripped
#: (``assistantanalysis…``, or the channel name opening the turn)
_HARMONY = re.compile(r"<\|channel\|>(analysis|final)\b|(?:^|(?<=assistant))(analysis|final)(?=\S)")
#: what counts as blank (ASCII whitespace, so the columnar engine's polars test means the same)
BLANK = " \t\n\r\f\v"
#: the strings that send a last turn to :func:`output_ending`'s full reading (``needs_reading``)
MARKERS: tuple[str, ...] = ("think>", *(f"{t}>" for t in ANSWER_TAGS))


@dataclass(frozen=True, slots=True)
class Ending:
    """How an output ends: ``truncated``, ``has_final_answer`` and the ``reason`` (a key of
    :data:`END_REASONS`; None for a final answer)."""

    truncated: bool
    has_final_answer: bool
    reason: str | None


#: an open-structure reason (truncated) and the reason it becomes where the output did not hit the length limit
STOPPED = {"open_call": "stopped_in_call", "open_think": "stopped_in_think", "open_answer": "stopped_in_answer",
           "open_tool_response": "stopped_in_tool_response"}
#: the end-of-turn tokens generation stops at, per family (a last generated token among them: it stopped on its own)
STOP_TOKENS = frozenset({"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|return|>",
                         "<|call|>", "<｜end▁of▁sentence｜>", "<|user|>", "<|observation|>", "</s>"})
#: a text output that stops inside a structure hit the length limit only when it is at least this share of the
#: longest output of its run (the run's own maximum: outputs capped at ``response_length`` tokens are the longest)
NEAR_LIMIT = 0.8


def near_length_limit(chars: int, run_max_chars: int) -> bool:
    """Whether an output of ``chars`` characters plausibly hit its run's length limit (its longest output)."""
    return chars >= NEAR_LIMIT * run_max_chars


def stopped_at_stop_token(generated: list[bool], texts: list[str]) -> bool:
    """Whether the policy's last generated token of an exact-token sequence is an end-of-turn token
    (:data:`STOP_TOKENS`) with nothing but such tokens (padding) after it: generation stopped on its own, not at
    the length limit."""
    k = len(generated) - 1
    while k >= 0 and not generated[k]:
        if texts[k] not in STOP_TOKENS:  # the environment's tokens come last (a tool response)
            return False
        k -= 1
    return k >= 0 and texts[k] in STOP_TOKENS


def stopped(end: Ending) -> Ending:
    """``end`` for an output that did not hit the length limit: an open structure is where it stopped, not a
    truncation."""
    reason = STOPPED.get(end.reason or "")
    return end if reason is None else Ending(False, end.has_final_answer, reason)


def needs_reading(text: str) -> bool:
    """Whether the last turn's ending depends on its think/answer structure (else only on its calls)."""
    return any(m in text for m in MARKERS)


def prompt_opens_think(prompt: str) -> bool:
    """Whether the prompt ends inside an opened ``<think>`` (a thinking template's generation prompt), so the first
    assistant turn starts inside the reasoning block."""
    return prompt.rstrip().endswith("<think>")


def output_ending(last_text: str | None, *, n_calls: int, truncated_call: bool, final_role: str | None,
                  final_text: str = "", tool_format: str | None = None, starts_in_think: bool = False) -> Ending:
    """How an output ends.

    Args:
        last_text: the last assistant turn's text (None: the output has no assistant turn).
        n_calls: calls the classifier found in that turn.
        truncated_call: the classifier reported ``truncated_call`` in that turn (an open call or parameter).
        final_role: role of the output's final turn (``assistant`` | ``tool``; None: no turn at all).
        final_text: the final turn's text (read when it is a tool turn).
        tool_format: the call format; ``gpt_oss`` reads harmony channels (an output whose last channel is
            ``analysis`` stops in the reasoning).
        starts_in_think: the last assistant turn starts inside a ``<think>`` the prompt opened (the first turn
            after a thinking template's generation prompt): without ``</think>`` it never left the reasoning.
    """
    if final_role is None:
        return Ending(False, False, "no_assistant_turn")
    if final_role != "assistant":  # the output stops in or after a tool block
        if "</tool_response>" not in final_text:
            return Ending(True, False, "open_tool_response")
        return Ending(False, False, "after_tool_response")
    text = last_text or ""
    if truncated_call:
        return Ending(True, False, "open_call")
    tail_start = 0
    if starts_in_think and "</think>" not in text:  # the prompt opened <think> and the turn never closed it
        if n_calls:
            return Ending(False, False, "call_pending")
        m = complete_answer(text)
        if m is None:
            return Ending(True, False, "open_think")
        tail_start = m[0]
    elif "think>" in text:
        regions = think_regions(text)
        last = regions[-1] if regions else None
        if last is not None and last[4] < 0:  # the last block is never closed
            if n_calls:
                return Ending(False, False, "call_pending")
            if complete_answer(text, last[0]) is None:
                return Ending(True, False, "open_think")
            # a complete answer follows the unclosed <think>: read what comes after the reasoning from the answer on
            m = complete_answer(text, last[0])
            tail_start = m[0] if m is not None else len(text)
        elif last is not None:
            tail_start = last[5]
    tail = text[tail_start:]
    if tool_format == "gpt_oss" and not n_calls:
        channels = [m.group(1) or m.group(2) for m in _HARMONY.finditer(tail)]
        if channels and channels[-1] == "analysis":  # the last message is on the analysis channel: no final one
            return Ending(True, False, "open_think")
    if n_calls:
        return Ending(False, False, "call_pending")
    opened = [m.group(1) for m in _ANSWER_OPEN.finditer(tail)]
    if opened:
        tag = opened[-1]
        if tail.rfind(f"<{tag}>") > tail.rfind(f"</{tag}>"):
            return Ending(True, False, "open_answer")
    if not tail.strip(BLANK):
        return Ending(False, False, "empty_answer")
    return Ending(False, True, None)

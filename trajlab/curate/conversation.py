"""Rebuild chat messages from a scanned trajectory: the exact text the model saw and produced.

A verl dump decodes the ChatML stream with ``skip_special_tokens=True``, so the prompt is
``system\\n...\\nuser\\n...\\nassistant\\n`` and tool responses sit inside ``output`` as
``\\nuser\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n``. This module turns that back into
``{role, content}`` messages:

* the prompt (``trajectories.input``) is split at the decoded role headers (``system\\n``, ``user\\n``,
  ``assistant\\n`` at line starts; ``<|im_start|>role\\n`` when a source kept special tokens);
* assistant turns (``turns`` rows with role ``assistant``) become assistant messages with their exact text;
* tool turns become one ``tool`` message per ``<tool_response>`` block, holding only the response content
  (the chat scaffolding is dropped, the chat template renders it back).

The generation prompt after the last ``assistant\\n`` header decides two things: an open ``<think>\\n`` (thinking
mode of Qwen3.5-style templates) is kept at the start of the next assistant message, so its think block stays
well formed; an empty ``<think>\\n\\n</think>\\n\\n`` (thinking disabled) is scaffolding and is dropped, and it
sets ``enable_thinking`` to false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from trajlab.families.chatml import IM_START, ROLES, strip_specials

#: Roles of the decoded ChatML headers we split prompts at.
_ROLES = "system|user|assistant"
_HEADER_PLAIN = re.compile(rf"^({_ROLES})\n", re.MULTILINE)
_HEADER_SPECIAL = re.compile(rf"{re.escape(IM_START)}({ROLES})\n")
_TOOL_RESPONSE = re.compile(r"<tool_response>\n?(.*?)\n?</tool_response>", re.DOTALL)
_TOOL_RESPONSE_OPEN = re.compile(r"<tool_response>\n?(.*)$", re.DOTALL)
#: end-of-turn special tokens a model generated at the end of its turn, kept by sources decoded with them
_END_OF_TURN = re.compile(r"(?:<\|im_end\|>|<\|endoftext\|>)+\s*\Z")
_ASSISTANT_HEADER = re.compile(r"(?:^|\n)(?:<\|im_start\|>)?assistant\n")

EMPTY_THINK = "<think>\n\n</think>\n\n"


@dataclass(slots=True)
class ToolCallRef:
    """A structured tool call (used by the ``openai`` style): name and arguments as a JSON string."""

    name: str
    arguments: str


@dataclass(slots=True)
class Message:
    """One chat message. ``content`` is the exact text; ``text``/``tool_calls`` are the structured view.

    ``text`` (assistant messages only) is ``content`` with the tool-call spans cut out, and ``tool_calls``
    their parsed form; both are filled only where the calls are known, for the ``openai`` style.
    """

    role: str
    content: str
    text: str | None = None
    tool_calls: list[ToolCallRef] | None = None
    turn_index: int | None = None  # the source turn (assistant or tool), None for prompt messages
    cut_tail: int = 0  # characters of the turn's text dropped from the end (an end-of-turn token it generated)

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "content": self.content}


@dataclass(slots=True)
class Prompt:
    """The decoded prompt split into messages, plus the generation-prompt suffix after ``assistant\\n``."""

    messages: list[Message]
    generation_suffix: str  # text after the final assistant header: "", "<think>\n" or EMPTY_THINK
    parsed: bool = True  # False when no role header was found (the whole input became one user message)
    notes: list[str] = field(default_factory=list)


def split_prompt(input_text: str | None) -> Prompt:
    """Split a decoded prompt into ``system``/``user``/... messages and its generation suffix.

    A prompt with no recognisable header becomes a single ``user`` message (``parsed=False``). Parses are
    cached per distinct prompt (a GRPO group shares one); every call returns fresh ``Message`` objects.
    """
    roles, suffix, parsed, notes = _split_prompt_cached(input_text or "")
    return Prompt([Message(r, c) for r, c in roles], suffix, parsed=parsed, notes=list(notes))


@lru_cache(maxsize=4096)
def _split_prompt_cached(text: str) -> tuple[tuple[tuple[str, str], ...], str, bool, tuple[str, ...]]:
    p = _split_prompt(text)
    return tuple((m.role, m.content) for m in p.messages), p.generation_suffix, p.parsed, tuple(p.notes)


def _split_prompt(text: str) -> Prompt:
    special = IM_START in text
    headers = list((_HEADER_SPECIAL if special else _HEADER_PLAIN).finditer(text))
    if not headers:
        stripped = strip_specials(text)
        return Prompt([Message("user", stripped)], "", parsed=False, notes=["prompt has no role headers"])
    msgs: list[Message] = []
    notes: list[str] = []
    if headers[0].start() > 0 and text[: headers[0].start()].strip():
        notes.append("text before the first role header was dropped")
    suffix = ""
    for k, h in enumerate(headers):
        role = h.group(1)
        end = headers[k + 1].start() if k + 1 < len(headers) else len(text)
        body = text[h.end() : end]
        last = k + 1 == len(headers)
        if last and role == "assistant":
            suffix = strip_specials(body)
            break
        if special:
            body = re.sub(r"<\|im_end\|>\n?$", "", body)
            body = strip_specials(body)
        elif not last and body.endswith("\n"):
            body = body[:-1]  # the "\n" after <|im_end|> that separates it from the next header
        msgs.append(Message(role, body))
    if headers[-1].group(1) != "assistant":
        notes.append("prompt does not end with an assistant header")
    return Prompt(msgs, suffix, parsed=True, notes=notes)


def tool_messages(tool_turn_text: str, turn_index: int | None = None) -> tuple[list[Message], str]:
    """The ``tool`` messages of one tool turn, and the generation suffix after its ``assistant\\n`` header.

    A block with no ``<tool_response>`` (unexpected scaffolding) becomes one ``user`` message holding the text
    without its chat headers.
    """
    text = tool_turn_text
    last_close = text.rfind("</tool_response>")
    search_from = last_close if last_close >= 0 else 0
    m = _ASSISTANT_HEADER.search(text, search_from)
    suffix = ""
    body = text
    if m is not None:
        body = text[: m.start()]
        suffix = strip_specials(text[m.end() :])
    contents = _TOOL_RESPONSE.findall(body)
    if not contents:
        tail = _TOOL_RESPONSE_OPEN.search(body)
        if tail:
            contents = [tail.group(1)]
    if contents:
        return [Message("tool", c, turn_index=turn_index) for c in contents], suffix
    cleaned = strip_specials(body)
    cleaned = re.sub(r"^\n?(?:user|tool)\n", "", cleaned)
    return [Message("user", cleaned, turn_index=turn_index)], suffix


def split_think(content: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` the way Qwen chat templates split a message at its last ``</think>``.

    ``reasoning`` is None when the content has no ``</think>``.
    """
    if "</think>" not in content:
        return None, content
    head, _, tail = content.rpartition("</think>")
    reasoning = head.rstrip("\n").split("<think>")[-1].lstrip("\n")
    return reasoning, tail.lstrip("\n")


def trained_text(content: str) -> str:
    """What verl's MultiTurnSFTDataset trains of an assistant message with the Qwen3 template.

    verl renders every message alone; the template then drops a think block and the newlines after it, and
    the leading newlines of the content merge into the ``<|im_start|>assistant\\n`` header.
    """
    _, answer = split_think(content)
    return answer


def has_reasoning(content: str) -> bool:
    r, _ = split_think(content)
    return bool(r and r.strip())


@dataclass(slots=True)
class Conversation:
    """A whole trajectory as messages, with what the prompt's generation suffix says about thinking."""

    messages: list[Message]
    enable_thinking: bool
    notes: list[str] = field(default_factory=list)


def build_conversation(
    input_text: str | None,
    turns: list[tuple],
    *,
    upto_turn: int | None = None,
) -> Conversation:
    """Messages for a trajectory from its prompt and its ``(turn_index, role, text, ...)`` turns.

    ``upto_turn`` keeps only turns with ``turn_index < upto_turn`` (the context of an error demonstration).
    """
    prompt = split_prompt(input_text)
    msgs = list(prompt.messages)
    suffix = prompt.generation_suffix
    thinking_off = suffix == EMPTY_THINK
    thinking_on = suffix.startswith("<think>") and "</think>" not in suffix
    for turn in turns:
        idx, role, text = turn[0], turn[1], turn[2]
        if upto_turn is not None and idx >= upto_turn:
            break
        if role == "assistant":
            tail = _END_OF_TURN.search(text)  # sources decoded with special tokens (NeMo-RL ids): the chat
            cut = len(text) - tail.start() if tail else 0  # template writes its own end-of-turn token
            content = text[: len(text) - cut]
            if suffix.startswith("<think>") and "</think>" not in suffix and not text.startswith("<think>"):
                content = suffix + content
            msgs.append(Message("assistant", content, turn_index=idx, cut_tail=cut))
            suffix = ""
        else:
            tms, suffix = tool_messages(text, idx)
            msgs.extend(tms)
            if suffix == EMPTY_THINK:
                thinking_off = True
    if not thinking_off and any(m.role == "assistant" and has_reasoning(m.content) for m in msgs):
        thinking_on = True
    return Conversation(msgs, bool(thinking_on and not thinking_off), list(prompt.notes))


def thinking_mode(input_text: str | None, output_text: str | None) -> bool:
    """``enable_thinking`` for a whole trajectory, from its prompt's generation suffix and its output.

    False when the prompt (or a tool turn) closes an empty think block (thinking disabled); True when the
    prompt opens ``<think>`` or the output holds a non-empty think block; else False.
    """
    out = output_text or ""
    suffix = split_prompt(input_text).generation_suffix
    if suffix == EMPTY_THINK or ("assistant\n" + EMPTY_THINK) in out:
        return False
    if suffix.startswith("<think>") and "</think>" not in suffix:
        return True
    return any(part.split("<think>")[-1].strip() for part in out.split("</think>")[:-1])


def normalise_for_hash(text: str) -> str:
    """Whitespace-insensitive form of a text, for duplicate detection."""
    return " ".join(text.split())


@lru_cache(maxsize=1024)
def content_digest(text: str) -> bytes:
    """sha1 of the whitespace-normalised text (cached: prompts repeat across a group)."""
    import hashlib

    return hashlib.sha1(normalise_for_hash(text).encode("utf-8", "surrogatepass")).digest()


def attach_calls(
    messages: list[Message],
    turn_starts: dict[int, int],
    turn_texts: dict[int, str],
    calls: list[dict],
) -> None:
    """Fill ``text`` / ``tool_calls`` of assistant messages from ``calls`` rows (offsets into the output).

    ``text`` is the content with every call span cut out (trailing whitespace trimmed, never None), and each
    call becomes ``ToolCallRef(name, arguments JSON)``: the declared tool it resolves to, its parsed arguments.
    """
    by_turn: dict[int, list[dict]] = {}
    for c in calls:
        by_turn.setdefault(int(c["turn_index"]), []).append(c)
    for m in messages:
        if m.role != "assistant" or m.turn_index is None:
            continue
        cs = sorted(by_turn.get(m.turn_index, []), key=lambda c: c["char_start"])
        base = turn_starts.get(m.turn_index, 0)
        shift = len(m.content) + m.cut_tail - len(turn_texts.get(m.turn_index, m.content))
        pieces: list[str] = []
        pos = 0
        refs: list[ToolCallRef] = []
        for c in cs:
            s = int(c["char_start"]) - base + shift
            e = int(c["char_end"]) - base + shift
            if s < pos or e > len(m.content):
                continue
            pieces.append(m.content[pos:s])
            pos = e
            refs.append(ToolCallRef(c.get("matched_tool") or c.get("function_name") or "", c.get("arguments") or "{}"))
        pieces.append(m.content[pos:])
        m.text = "".join(pieces).rstrip() if refs else m.content
        m.tool_calls = refs or None

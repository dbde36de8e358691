"""Split a multi-turn ``output`` into assistant turns and tool-response blocks, with exact offsets.

verl decodes the whole response (model tokens and tool tokens) with ``skip_special_tokens=True``, so the
chat scaffolding around tool responses survives as plain text:

* verl 0.9.x: ``...</tool_call>`` + ``\\nuser\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n`` + next turn
* verl 0.7.x/0.8.x: the same without the ``\\n`` before ``user``
* sources decoded with special tokens kept (verl-tool): ``<|im_end|>\\n<|im_start|>user\\n<tool_response>...``

A tool block runs from its ``user`` header to the ``assistant\\n`` header of the next turn (inclusive; an empty
``<think>\\n\\n</think>\\n\\n`` that the generation prompt injects is counted as scaffold too), or to the end of the
output when the run stopped inside it. The returned turns tile the output exactly.
"""

from __future__ import annotations

import re

from trajlab.model import Turn

_ANCHOR = "user\n<tool_response>"
_END_TAIL = re.compile(r"(?:<\|im_end\|>)?\n(?:<\|im_start\|>)?assistant\n(?:<think>\n\n</think>\n\n)?")
_SPECIAL_TAIL = re.compile(r"(?:<\|im_end\|>|<\|endoftext\|>)+\s*$")


def _block_start(output: str, anchor: int) -> int:
    """Extend a ``user\\n<tool_response>`` anchor back over ``\\n``, ``<|im_start|>`` and ``<|im_end|>``."""
    i = anchor
    if output.startswith("<|im_start|>", i - 12):
        i -= 12
    if i > 0 and output[i - 1] == "\n":
        i -= 1
    if output.startswith("<|im_end|>", i - 10):
        i -= 10
    return i


def _block_end(output: str, pos: int) -> int | None:
    """End of the tool block that starts before ``pos``: after the next ``</tool_response>`` that is
    followed by the next turn's ``assistant\\n`` header."""
    while True:
        j = output.find("</tool_response>", pos)
        if j < 0:
            return None
        m = _END_TAIL.match(output, j + 16)
        if m:
            return m.end()
        pos = j + 16


def split_turns(output: str) -> list[Turn]:
    """Split ``output`` into alternating ``assistant`` / ``tool`` turns whose texts tile it exactly.

    An output with no tool response is a single assistant turn (possibly empty). Only ``str.find`` and
    anchored matches are used, so the cost is linear in the output length.
    """
    n = len(output)
    if "<tool_response>" not in output:
        return [Turn(0, "assistant", output, 0, n)]
    turns: list[Turn] = []
    pos = 0
    while True:
        a = output.find(_ANCHOR, pos)
        if a < 0:
            turns.append(Turn(len(turns), "assistant", output[pos:], pos, n))
            break
        a_end = max(_block_start(output, a), pos)
        turns.append(Turn(len(turns), "assistant", output[pos:a_end], pos, a_end))
        e = _block_end(output, a + len(_ANCHOR))
        t_end = n if e is None else e
        turns.append(Turn(len(turns), "tool", output[a_end:t_end], a_end, t_end))
        if e is None:
            break
        pos = t_end
        if pos == n:  # ended right after the assistant header: an empty final assistant turn
            turns.append(Turn(len(turns), "assistant", "", n, n))
            break
    return turns


def tool_response_text(tool_turn_text: str) -> str:
    """The content of the ``<tool_response>`` blocks of a tool turn, without the chat scaffolding."""
    parts = re.findall(r"<tool_response>\n?(.*?)\n?(?:</tool_response>|$)", tool_turn_text, flags=re.DOTALL)
    return "\n".join(parts)


def strip_special_tail(text: str) -> str:
    """Drop a trailing ``<|im_end|>`` / ``<|endoftext|>`` (present when a source kept special tokens)."""
    return _SPECIAL_TAIL.sub("", text)

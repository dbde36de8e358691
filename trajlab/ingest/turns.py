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

_IM_END = r"(?:<\|im_end\|>)?"
_IM_START = r"(?:<\|im_start\|>)?"
TOOL_BLOCK_START = re.compile(_IM_END + r"\n?" + _IM_START + r"user\n(?=<tool_response>)")
TOOL_BLOCK_END = re.compile(
    r"</tool_response>" + _IM_END + r"\n" + _IM_START + r"assistant\n(?:<think>\n\n</think>\n\n)?"
)
_SPECIAL_TAIL = re.compile(r"(?:<\|im_end\|>|<\|endoftext\|>)+\s*$")


def split_turns(output: str) -> list[Turn]:
    """Split ``output`` into alternating ``assistant`` / ``tool`` turns whose texts tile it exactly.

    An output with no tool response is a single assistant turn (possibly empty).
    """
    turns: list[Turn] = []
    pos = 0
    n = len(output)
    if "<tool_response>" not in output:
        return [Turn(0, "assistant", output, 0, n)]
    while pos <= n:
        m = TOOL_BLOCK_START.search(output, pos)
        if m is None:
            turns.append(Turn(len(turns), "assistant", output[pos:], pos, n))
            break
        a_end = m.start()
        turns.append(Turn(len(turns), "assistant", output[pos:a_end], pos, a_end))
        e = TOOL_BLOCK_END.search(output, m.end())
        t_end = e.end() if e else n
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

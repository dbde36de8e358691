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
from typing import TYPE_CHECKING

from trajlab.model import Turn

if TYPE_CHECKING:
    import polars as pl

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


# -- the same split over whole columns ---------------------------------------------------------------------

#: a whole tool block as :func:`split_turns` cuts it (the anchor extended back by :func:`_block_start`, up to
#: the first ``</tool_response>`` followed by the next turn's header), in Rust regex syntax for polars
TOOL_BLOCK_PATTERN = (
    r"(?:<\|im_end\|>)?\n?(?:<\|im_start\|>)?user\n<tool_response>(?s:.*?)</tool_response>"
    r"(?:<\|im_end\|>)?\n(?:<\|im_start\|>)?assistant\n(?:<think>\n\n</think>\n\n)?"
)


def split_turns_frame(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """:func:`split_turns` for every ``output`` of ``frame`` (columns ``row``, ``output``) at once.

    Returns the turns (``row``, ``turn_index``, ``role``, ``text``, ``char_start``, ``char_end``; offsets in
    characters, like Python's) and the ``row`` values the columnar split cannot vouch for -- an output with
    a tool block that never reaches the next turn's header, or with a NUL character (the cut marker) -- whose
    turns the caller gets from :func:`split_turns` instead. Those rows have no turns in the frame.
    """
    import polars as pl  # noqa: F811  (imported lazily: this module is on the CLI's start-up path)

    marked = frame.select(
        "row",
        pl.when(pl.col("output").str.contains("<tool_response>", literal=True))
        .then(pl.col("output").str.replace_all(TOOL_BLOCK_PATTERN, "\x00${0}\x00"))
        .otherwise(pl.col("output"))
        .alias("m"),
        pl.col("output").str.contains("\x00", literal=True).alias("nul"),
    )
    # one anchor per cut block and none outside: a leftover anchor starts a block split_turns runs to the end
    # (an anchor quoted inside a tool response also sends the output to split_turns, which is only slower)
    leftover = pl.concat([marked, frame.select("output")], how="horizontal").select(
        (pl.col("m").str.count_matches("\x00", literal=True)
         != 2 * pl.col("output").str.count_matches(_ANCHOR, literal=True)) | pl.col("nul")
    ).to_series()
    bad = marked.filter(leftover)["row"]
    pieces = (
        marked.filter(~leftover)
        .select("row", pl.col("m").str.split("\x00").alias("text"))
        .explode("text")
        .with_columns(
            pl.int_range(pl.len(), dtype=pl.Int32).over("row").alias("turn_index"),
            pl.col("text").str.len_chars().cast(pl.Int64).alias("n"),
        )
        .with_columns(
            pl.when(pl.col("turn_index") % 2 == 0).then(pl.lit("assistant")).otherwise(pl.lit("tool")).alias("role"),
            pl.col("n").cum_sum().over("row").alias("char_end"),
        )
        .select("row", "turn_index", "role", "text", (pl.col("char_end") - pl.col("n")).alias("char_start"),
                "char_end")
    )
    return pieces, bad

"""Split a multi-turn ``output`` into assistant turns and tool-response blocks, with exact offsets.

verl decodes the whole response (model tokens and tool tokens) with ``skip_special_tokens=True``, so the
chat scaffolding around tool responses survives as plain text:

* verl 0.9.x: ``...</tool_call>`` + ``\\nuser\\n<tool_response>\\n...\\n</tool_response>\\nassistant\\n`` + next turn
* verl 0.7.x/0.8.x: the same without the ``\\n`` before ``user``
* sources decoded with special tokens kept (verl-tool): ``<|im_end|>\\n<|im_start|>user\\n<tool_response>...``

A tool block runs from its ``user`` header to the ``assistant\\n`` header of the next turn (inclusive; an empty
``<think>\\n\\n</think>\\n\\n`` that the generation prompt injects is counted as scaffold too), or to the end of the
output when the run stopped inside it. The returned turns tile the output exactly.

Other model families wrap tool responses in their own scaffolding (each family's ``TOOL_BLOCKS`` in
:mod:`trajlab.families`, gathered in :data:`FAMILY_WRAPPERS`; call-formats.md), each
recognised with and without its special tokens kept by the decode:

* GLM-4.5+: ``<|observation|>`` (special, usually gone) + ``\n<tool_response>\n...\n</tool_response>`` per result,
  then ``<|assistant|>`` (special);
* Kimi-K2: ``<|im_system|>tool<|im_middle|>## Return of functions.NAME:IDX\n...<|im_end|>`` then
  ``<|im_assistant|>assistant<|im_middle|>``; stripped: ``tool## Return of ...assistant``;
* DeepSeek-V3.1: ``<｜tool▁output▁begin｜>...<｜tool▁output▁end｜>`` (ordinary tokens), no assistant header after it;
* gpt-oss (harmony): ``<|start|>functions.NAME to=assistant<|channel|>commentary<|message|>...<|end|>`` then
  ``<|start|>assistant``; stripped: ``functions.NAME to=assistantcommentary...assistant`` before the next channel;
* DeepSeek-V3.2 / V4 (DSML): ``\n\n<function_results>\n<result>...</result>\n</function_results>`` (ordinary text),
  then ``\n\n<think>`` or ``\n\n</think>`` from the template, no assistant header;
* Llama 3.1-3.3 / Llama 4: an ``ipython`` turn, ``<|start_header_id|>ipython<|end_header_id|>\n\n...<|eot_id|>`` then
  ``<|start_header_id|>assistant<|end_header_id|>\n\n`` (Llama 4: ``<|header_start|>``/``<|header_end|>``/``<|eot|>``);
  stripped: ``ipython\n\n...assistant\n\n``;
* Seed-OSS: ``<seed:bos>tool\n...<seed:eos>`` then ``<seed:bos>assistant\n`` (the ``<seed:eos>`` the model generates
  after its calls stays in its turn, as MiniMax's ``[e~[``); stripped:
  ``</function>\ntool\n...assistant\n``;
* MiniMax-M2: ``\n]~b]tool\n<response>...</response>[e~[\n`` then ``]~b]ai\n<think>\n``; stripped:
  ``\ntool\n<response>...</response>\nai\n<think>\n``;
* Gemma 4: ``<|tool_response>response:NAME{...}<tool_response|>`` inside the model turn (a stripped dump keeps the
  whole output as one turn);
* ReAct agents: the environment's ``Observation: ...`` as a user message (``user\nObservation: ...`` up to the
  next ``assistant`` header), or appended inline after the Action Input up to the model's next step (a line
  starting ``Thought:``, ``Action:`` or ``Final Answer:``). An ``Observation:`` with no model step after it is
  left in the model's turn, where the classifier reports it as written by the model (``model_written_observation``):
  an agent loop ends a rollout after a model turn, not after a tool result. Only outputs that hold ``Action Input``
  (or the paper's ``Action 1: Search[...]``) are split this way.

The family is recognised from the output itself (its wrapper's literal), so ingest needs no format; stripped
wrappers are delimited heuristically (by the next ``assistant`` header a turn can start with).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from trajlab.families import tool_blocks
from trajlab.families.chatml import IM_END, IM_START
from trajlab.model import Turn

if TYPE_CHECKING:
    import polars as pl

_ANCHOR = "user\n<tool_response>"
_OPT_START, _OPT_END = f"(?:{re.escape(IM_START)})?", f"(?:{re.escape(IM_END)})?"  # valid Python and Rust regex
_END_TAIL = re.compile(rf"{_OPT_END}\n{_OPT_START}assistant\n(?:<think>\n\n</think>\n\n)?")


def _block_start(output: str, anchor: int) -> int:
    """Extend a ``user\\n<tool_response>`` anchor back over ``\\n``, ``<|im_start|>`` and ``<|im_end|>``."""
    i = anchor
    if output.startswith(IM_START, i - len(IM_START)):
        i -= len(IM_START)
    if i > 0 and output[i - 1] == "\n":
        i -= 1
    if output.startswith(IM_END, i - len(IM_END)):
        i -= len(IM_END)
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


#: (family, literal every block contains, regex of one whole tool block, regex the output must also match or None),
#: in the order they are tried (:func:`trajlab.families.tool_blocks`); a block runs from the end of an assistant turn
#: to the start of the next one (the next turn's header included)
FAMILY_WRAPPERS: tuple[tuple[str, str, re.Pattern[str], re.Pattern[str] | None], ...] = tuple(
    (fam, b.literal, b.pattern, b.requires) for fam, b in tool_blocks() if b.pattern is not None)


def _split_family(output: str, block: re.Pattern[str]) -> list[Turn]:
    """Alternating assistant / tool turns around every match of a family's tool-block regex."""
    turns: list[Turn] = []
    pos, n = 0, len(output)
    for m in block.finditer(output):
        s, e = m.span()
        if e <= s:
            continue
        turns.append(Turn(len(turns), "assistant", output[pos:s], pos, s))
        turns.append(Turn(len(turns), "tool", output[s:e], s, e))
        pos = e
    if pos < n or not turns:
        turns.append(Turn(len(turns), "assistant", output[pos:], pos, n))
    return turns


def split_turns(output: str) -> list[Turn]:
    """Split ``output`` into alternating ``assistant`` / ``tool`` turns whose texts tile it exactly.

    An output with no tool response is a single assistant turn (possibly empty). Only ``str.find`` and
    anchored matches are used for the Qwen scaffolding, so the cost is linear in the output length; another
    family's wrapper (:data:`FAMILY_WRAPPERS`) is matched with one regex scan.
    """
    n = len(output)
    if "<tool_response>" not in output or _ANCHOR not in output:
        for _fam, lit, block, req in FAMILY_WRAPPERS:
            if lit in output and (req is None or req.search(output) is not None):
                return _split_family(output, block)
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


def turns_from_pieces(pieces: list[str], roles: list[str]) -> list[Turn]:
    """Turns from pieces of text whose roles the source states (consecutive pieces of one role merged), tiling
    their concatenation; an output ending in a tool block gets an empty last assistant turn, as with
    :func:`split_turns`.

    Used where turn boundaries are explicit (OpenAI messages, ChatML role headers kept in the text): an
    assistant message that itself carries a tool-response block (the model wrote the tool's reply) stays one
    assistant turn, where splitting the text would read that block as the environment's."""
    turns: list[Turn] = []
    pos = 0
    for text, role in zip(pieces, roles, strict=True):
        if turns and turns[-1].role == role:
            last = turns[-1]
            last.text += text
            last.char_end += len(text)
        else:
            turns.append(Turn(len(turns), role, text, pos, pos + len(text)))  # type: ignore[arg-type]
        pos += len(text)
    if not turns or turns[-1].role == "tool":
        turns.append(Turn(len(turns), "assistant", "", pos, pos))
    return turns


def tool_response_text(tool_turn_text: str) -> str:
    """The content of the ``<tool_response>`` blocks of a tool turn, without the chat scaffolding."""
    parts = re.findall(r"<tool_response>\n?(.*?)\n?(?:</tool_response>|$)", tool_turn_text, flags=re.DOTALL)
    return "\n".join(parts)


# -- the same split over whole columns ---------------------------------------------------------------------

#: a whole tool block as :func:`split_turns` cuts it (the anchor extended back by :func:`_block_start`, up to
#: the first ``</tool_response>`` followed by the next turn's header), in Rust regex syntax for polars
TOOL_BLOCK_PATTERN = (
    rf"{_OPT_END}\n?{_OPT_START}user\n<tool_response>(?s:.*?)</tool_response>"
    rf"{_OPT_END}\n{_OPT_START}assistant\n(?:<think>\n\n</think>\n\n)?"
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
    # other families' tool wrappers are split by split_turns (one regex per family), not here
    family = pl.lit(False)
    for _fam, lit, _block, _req in FAMILY_WRAPPERS:
        family = family | pl.col("output").str.contains(lit, literal=True)
    leftover = leftover | frame.select(family & ~pl.col("output").str.contains(_ANCHOR, literal=True)).to_series()
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


#: a ChatML environment block with its role header, as sources that keep special tokens write it (verl-tool)
CHATML_ENV_BLOCK = re.compile(
    rf"(?:{re.escape(IM_END)})?\n?{re.escape(IM_START)}(?:user|tool)\n.*?"
    rf"(?:{re.escape(IM_START)}assistant\n(?:<think>\n\n</think>\n\n)?|\Z)", re.DOTALL)


def chatml_pieces(raw: str) -> tuple[list[str], list[str]] | None:
    """``raw`` (decoded with ChatML special tokens kept) cut at its role headers: (pieces, roles), where only
    a block opened by ``<|im_start|>user`` / ``<|im_start|>tool`` is the environment's; None when ``raw``
    holds no ChatML special token (it was decoded without them: the boundaries are not explicit)."""
    if IM_START not in raw and IM_END not in raw:
        return None
    pieces: list[str] = []
    roles: list[str] = []
    pos = 0
    for m in CHATML_ENV_BLOCK.finditer(raw):
        if m.start() > pos:
            pieces.append(raw[pos:m.start()])
            roles.append("assistant")
        pieces.append(m.group())
        roles.append("tool")
        pos = m.end()
    if pos < len(raw) or not pieces:
        pieces.append(raw[pos:])
        roles.append("assistant")
    return pieces, roles

r"""What verl's tool parser executes for a turn: its reading, reproduced, and how it compares with the intended one.

trajlab's scanners read the call the model *meant* (``ParsedCall.arguments``): tag text inside a value is
kept as text when the closing structure says it is text. verl's agent loop reads the same text with plain
regexes and executes what they yield. This module reproduces that reading for five formats, as verl
**0.9.1** does it (``verl/experimental/agent_loop/tool_parser.py``; the regexes and conversions are listed in
``shared/spec/verl-formats.md`` §2.3 and ``parsers.md`` §A.6), with our own code:

qwen3_coder (``Qwen3XMLToolParser``)
    nothing unless the text holds ``<tool_call>``; blocks ``<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$``;
    in each block ``<function=(.*?)</function>|<function=(.*)$``; the name is the text up to the first ``>``
    (verbatim; a function without ``>`` is skipped); parameters ``<parameter=(.*?)</parameter>|<parameter=(.*?)$``
    (no lookahead to the next ``<parameter=``), name up to the first ``>`` (a parameter without one is skipped),
    the value without one leading and one trailing newline, converted by :func:`~.verl_conversion.verl_convert`
    with the properties of the tool of that exact name (none for an unknown name); a repeated parameter keeps the
    last value. All regexes are DOTALL.
hermes (``HermesToolParser``)
    nothing unless the text holds both ``<tool_call>`` and ``</tool_call>``; blocks ``<tool_call>(.*?)</tool_call>``;
    each is ``json.loads``-ed and must give ``obj["name"]`` and ``obj["arguments"]``; a block that fails is dropped
    (logged only). Arguments are passed through unconverted.
seed (``SeedToolParser``)
    nothing unless the text holds both ``<seed:tool_call>`` and ``</seed:tool_call>``; in each lazy wrapper block
    only the *first* ``<function=([^>\n]+)>\s*(.*?)</function>`` (name stripped, attributes kept in it), its
    parameters ``<parameter=([^>\n]+)>(.*?)</parameter>`` (keys stripped), values ``json.loads`` of the stripped
    text, else the stripped text.
minimax (``MiniMaxToolParser``)
    nothing unless the text holds both ``<minimax:tool_call>`` and ``</minimax:tool_call>``; in each lazy wrapper
    block every ``<invoke name="([^"]+)">\s*(.*?)</invoke>``, parameters ``<parameter name="([^"]+)">(.*?)
    </parameter>``, values as for seed.
gemma4 (``Gemma4ToolParser``)
    nothing unless the text holds ``<|tool_call>``; calls ``<\|tool_call>call:(\w+)\{(.*?)\}<tool_call\|>``
    (DOTALL); arguments by ``(\w+):(?:<\|"\|>(.*?)<\|"\|>|([^,}]*))`` (not DOTALL): a delimited string as it is,
    a bare value stripped and read as ``true`` / ``false`` / ``null`` (any case), ``int``, ``float``, else the text.

:func:`verl_calls` returns verl's calls with where they come from; the classifier lines them up with the
calls trajlab found (:func:`same_value` compares arguments): each of ours is executed ``as_intended``,
``differently`` (another name or other arguments: a cut value, a merged parameter, a converted number) or
``dropped`` (verl executes no call for it).

deepseek_v4 (``DeepSeekV4ToolParser``)
    reproduced in :mod:`.verl_dsml`. verl has no parser for the other families trajlab reads beyond these (DSML
    V3.2, Llama-3 JSON, DeepSeek-V3.1): ``None``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_conversion import verl_convert
from trajlab.toolcalls.verl_dsml import verl_dsml_calls

#: the verl release whose parsers are reproduced here (messages name it)
VERL_VERSION = "0.9.1"

_XML_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=(.*?)</function>|<function=(.*)$", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=(.*?)</parameter>|<parameter=(.*?)$", re.DOTALL)
_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_SEED_BLOCK = re.compile(r"<seed:tool_call>(.*?)</seed:tool_call>", re.DOTALL)
_SEED_FUNCTION = re.compile(r"<function=([^>\n]+)>\s*(.*?)</function>", re.DOTALL)
_SEED_PARAMETER = re.compile(r"<parameter=([^>\n]+)>(.*?)</parameter>", re.DOTALL)
_MINIMAX_BLOCK = re.compile(r"<minimax:tool_call>(.*?)</minimax:tool_call>", re.DOTALL)
_MINIMAX_INVOKE = re.compile(r'<invoke name="([^"]+)">\s*(.*?)</invoke>', re.DOTALL)
_MINIMAX_PARAMETER = re.compile(r'<parameter name="([^"]+)">(.*?)</parameter>', re.DOTALL)
_GEMMA_CALL = re.compile(r"<\|tool_call>call:(\w+)\{(.*?)\}<tool_call\|>", re.DOTALL)
_GEMMA_ARG = re.compile(r'(\w+):(?:<\|"\|>(.*?)<\|"\|>|([^,}]*))')

AS_INTENDED, DIFFERENTLY, DROPPED = "as_intended", "differently", "dropped"
NO_PROPS: dict[str, Any] = {}


@dataclass(slots=True)
class VerlCall:
    """One call verl's parser executes: name and arguments as the tool receives them, and where it was read.

    ``anchor`` is the offset of the text the call was read from (``<function=`` for qwen3_coder, the block's
    ``<tool_call>`` for hermes); ``end`` where that text ends."""

    name: str
    arguments: Any
    anchor: int
    end: int


#: the special-token markers of a family whose verl parser reads markup made of special tokens: a turn that shows
#: none of them was decoded with ``skip_special_tokens=True`` (a plain verl dump), so verl read token ids this text
#: no longer shows, and its reading is not reproduced (None). (Seed and MiniMax generate their end-of-turn token
#: after every call, Gemma its `<tool_call|>` stop token: a kept turn shows one.)
KEPT_MARKERS: dict[str, tuple[str, ...]] = {
    "seed": ("<seed:", "</seed:"),
    "minimax": ("<minimax:", "</minimax:", "[e~[", "]~b]"),
    "gemma4": ("<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>", "<turn|>", "<|turn>"),
}


def markers_kept(fmt: str, text: str) -> bool:
    """Whether ``text`` (one turn) was decoded with the special tokens of ``fmt``'s family kept."""
    return any(m in text for m in KEPT_MARKERS.get(fmt, ()))


def verl_calls(text: str, fmt: str, index: ToolIndex | None) -> list[VerlCall] | None:
    """The calls verl's parser for ``fmt`` executes for ``text`` (one generation); None: a format not modelled, or
    a turn whose special tokens the decode dropped (:func:`markers_kept`)."""
    if fmt in KEPT_MARKERS and not markers_kept(fmt, text):
        return None
    if fmt == "qwen3_coder":
        return _qwen3_coder(text, index)
    if fmt == "hermes":
        return _hermes(text)
    if fmt == "deepseek_v4":
        return [VerlCall(*c) for c in verl_dsml_calls(text)]
    if fmt == "seed":
        return _seed(text)
    if fmt == "minimax":
        return _minimax(text)
    if fmt == "gemma4":
        return _gemma4(text)
    return None


def _qwen3_coder(text: str, index: ToolIndex | None) -> list[VerlCall]:
    out: list[VerlCall] = []
    if "<tool_call>" not in text:
        return out
    for bm in _XML_BLOCK.finditer(text):
        g = 1 if bm.group(1) is not None else 2
        bs = bm.start(g)
        block = bm.group(g)
        for fm in _XML_FUNCTION.finditer(block):
            fg = 1 if fm.group(1) is not None else 2
            body = fm.group(fg)
            gt = body.find(">")
            if gt < 0:  # 0.9.1: "function without `>`", skipped with a warning
                continue
            name = body[:gt]
            tool = index.tools.get(name) if index is not None else None
            props = tool.properties if tool is not None else NO_PROPS
            args: dict[str, Any] = {}
            for pm in _XML_PARAMETER.finditer(body, gt + 1):
                ptext = pm.group(1) if pm.group(1) else (pm.group(2) or "")
                pgt = ptext.find(">")
                if pgt < 0:  # 0.9.1: skipped with a warning
                    continue
                pname = ptext[:pgt]
                value = ptext[pgt + 1:]
                if value.startswith("\n"):
                    value = value[1:]
                if value.endswith("\n"):
                    value = value[:-1]
                args[pname] = verl_convert(value, pname, props)
            out.append(VerlCall(name, args, bs + fm.start(), bs + fm.end()))
    return out


def _hermes(text: str) -> list[VerlCall]:
    out: list[VerlCall] = []
    if "<tool_call>" not in text or "</tool_call>" not in text:
        return out
    for bm in _HERMES_BLOCK.finditer(text):
        try:
            obj = json.loads(bm.group(1))
            name, args = obj["name"], obj["arguments"]
            if not isinstance(name, str):  # FunctionCall(name: str) rejects it: the block is dropped
                continue
            # verl re-dumps the arguments; json.loads of that text is what the tool receives
            args = json.loads(json.dumps(args, ensure_ascii=False))
        except Exception:  # verl logs "Failed to decode tool call" and drops the block
            continue
        out.append(VerlCall(name, args, bm.start(), bm.end()))
    return out


def _json_value(raw: str) -> Any:
    """verl's seed / minimax value conversion: ``json.loads`` of the stripped text, else the stripped text."""
    v = raw.strip()
    try:
        return json.loads(v)
    except (ValueError, RecursionError):
        return v


def _received(args: dict[str, Any]) -> Any:
    """What the tool receives: verl dumps the arguments to JSON, the agent loop loads them back."""
    return json.loads(json.dumps(args, ensure_ascii=False))


def _seed(text: str) -> list[VerlCall]:
    out: list[VerlCall] = []
    if "<seed:tool_call>" not in text or "</seed:tool_call>" not in text:
        return out
    for bm in _SEED_BLOCK.finditer(text):
        fm = _SEED_FUNCTION.search(text, bm.start(1), bm.end(1))
        if fm is None:
            continue
        args = {k.strip(): _json_value(v) for k, v in _SEED_PARAMETER.findall(fm.group(2))}
        try:
            out.append(VerlCall(fm.group(1).strip(), _received(args), fm.start(), fm.end()))
        except (ValueError, RecursionError):  # verl logs "Failed to decode Seed tool call"
            continue
    return out


def _minimax(text: str) -> list[VerlCall]:
    out: list[VerlCall] = []
    if "<minimax:tool_call>" not in text or "</minimax:tool_call>" not in text:
        return out
    for bm in _MINIMAX_BLOCK.finditer(text):
        found: list[VerlCall] = []
        try:
            for im in _MINIMAX_INVOKE.finditer(text, bm.start(1), bm.end(1)):
                args = {k.strip(): _json_value(v) for k, v in _MINIMAX_PARAMETER.findall(im.group(2))}
                found.append(VerlCall(im.group(1).strip(), _received(args), im.start(), im.end()))
        except (ValueError, RecursionError):  # verl logs "Failed to decode MiniMax tool call": the block is lost
            continue
        out += found
    return out


def _gemma_bare(v: str) -> Any:
    v = v.strip()
    low = v.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low == "null":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _gemma4(text: str) -> list[VerlCall]:
    out: list[VerlCall] = []
    if "<|tool_call>" not in text:
        return out
    for m in _GEMMA_CALL.finditer(text):
        args: dict[str, Any] = {}
        for am in _GEMMA_ARG.finditer(m.group(2)):
            sv, bv = am.group(2), am.group(3)
            if sv is not None:
                args[am.group(1)] = sv
            elif bv is not None:
                args[am.group(1)] = _gemma_bare(bv)
        try:
            out.append(VerlCall(m.group(1), _received(args), m.start(), m.end()))
        except (ValueError, RecursionError):  # verl logs "Failed to parse Gemma4 tool call"
            continue
    return out


def same_value(a: Any, b: Any) -> bool:
    """Whether two argument values are the same JSON (``1`` and ``1.0`` and ``True`` differ)."""
    if a is b:
        return True
    try:
        return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)
    except (ValueError, TypeError, RecursionError):
        return False


def describe(vc: VerlCall, limit: int = 120) -> str:
    """``name({...})`` of a verl call, shortened to ``limit`` characters, on one line."""
    try:
        args = json.dumps(vc.arguments, ensure_ascii=False, default=repr)
    except (ValueError, TypeError, RecursionError):
        args = repr(vc.arguments)
    s = f"{vc.name}({args})".replace("\n", "\\n")
    return s if len(s) <= limit else s[: limit - 1] + "…"

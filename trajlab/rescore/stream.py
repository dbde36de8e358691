"""Rebuild the token stream a checkpoint saw from a dump's decoded text, and mark what to score.

verl decodes prompts and responses with ``skip_special_tokens=True``, so a Qwen (ChatML) prompt
``<|im_start|>system\\n...<|im_end|>\\n<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n`` is dumped as
``system\\n...\\nuser\\n...\\nassistant\\n`` and every ``<|im_end|>`` the model generated is gone. This module puts
the special tokens back:

* ``input``: a role header (``system|user|assistant|tool`` + ``\\n``) at the start opens the first message with
  ``<|im_start|>``; every later ``\\n<role>\\n`` closes the previous message with ``<|im_end|>`` and opens the next.
* each assistant turn of ``output`` is tokenized on its own (generation starts fresh after ``assistant\\n``) and
  followed by the ``<|im_end|>`` the model generated, except after the last turn of a truncated output;
* each tool turn (``[\\n]user\\n<tool_response>...</tool_response>\\nassistant\\n[...]``) becomes
  ``[\\n]<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n[...]``.

Sources that kept special tokens in the text (``<|im_start|>`` present) are tokenized as they are. The rebuilt
ids are decoded again (``skip_special_tokens=True``, or ``False`` for such sources) and compared with
``input + output``; a mismatch (e.g. text that is not NFC, which Qwen's normalizer changes) is recorded, not fatal.

Other model families (:data:`FAMILY_LAYOUTS`, each family's ``LAYOUT`` in :mod:`trajlab.families`, chosen by the trajectory's call format when the tokenizer has the
family's tokens and no ChatML): DeepSeek-V3.1 gets its ``<｜begin▁of▁sentence｜>`` back before the input and the
``<｜end▁of▁sentence｜>`` it generated after every assistant turn; GLM-4.5+ the ``<|assistant|>`` generation prompt
after the input and after every tool block, and the ``<|observation|>`` it generated to stop for a tool call
(the dump keeps GLM's call markup and ``<tool_response>`` blocks, which are ordinary tokens). A source that kept
the family's special tokens in the text (Kimi-K2 decoded with ``skip_special_tokens=False``) is tokenized as it
is. A gpt-oss dump decoded without its harmony markers is tokenized as plain text (the headers are not rebuilt;
its ``note`` says so).

Only assistant-generated tokens are scored: the tokens of assistant turns and their ``<|im_end|>``. Each scored
token carries its char offsets into ``output`` (the synthetic ``<|im_end|>`` has an empty range at the end of
its turn) and its region, taken from the classifier's spans of the turn.

The module is longer than ~400 lines because it is one rebuild: the ChatML layout and the other families'
layouts (the section at the end) produce the same pieces (``_Piece``) for the same tokenizing and region
marking in :func:`build_streams`, which picks the layout per trajectory; a family's layout is a few lines of
data plus its turn walk, and changes together with the pieces it emits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trajlab.families import FAMILY_OF_FORMAT, TokenLayout
from trajlab.families.chatml import ENDOFTEXT, IM_END, IM_START, ROLES
from trajlab.rescore.control_tokens import REGIONS

REGION_CODE: dict[str, int] = {r: i for i, r in enumerate(REGIONS)}
TEXT_CODE = REGION_CODE["text"]
STRUCTURAL_CODE = REGION_CODE["structural"]

_ROLE_START = re.compile(rf"(?:{ROLES})\n")
_ROLE_BOUND = re.compile(rf"\n(?=(?:{ROLES})\n)")
_TOOL_HEAD = re.compile(r"^(<\|im_end\|>)?(\n)?(?:user|tool)\n")
_TOOL_TAIL = re.compile(r"\nassistant\n")


@dataclass
class LoggedTokens:
    """The exact token sequence a source logged (``rollout_tokens`` of a NeMo-RL scan): rescoring uses these
    ids as they are (no rebuild, no re-tokenisation) and scores the generated positions."""

    ids: list[int]
    generated: list[bool]
    turn: list[int]  # turns.turn_index per position (-1: the prompt)
    logprob: list[float | None]  # the inference engine's log-prob of each generated token, as logged


@dataclass
class TrajectoryText:
    """What the stream builder needs from one trajectory (rows of the scan tables)."""

    trajectory_id: str
    input: str
    output: str
    turns: list[tuple[int, str, int, int]]  # (turn_index, role, char_start, char_end), tiling output
    tool_format: str | None = None
    truncated: bool = False
    tools: list[dict[str, Any]] | None = None
    step: int | None = None
    split: str | None = None
    score: float | None = None
    n_calls: int = 0
    n_malformed_calls: int = 0
    call_ranges: list[tuple[int, int]] = field(default_factory=list)  # char ranges of calls in output
    exact: LoggedTokens | None = None  # the logged token ids, for sources that log them


@dataclass
class TokenStream:
    """The rebuilt token ids of one trajectory and the positions to score."""

    trajectory_id: str
    ids: np.ndarray  # int64 [T]
    positions: np.ndarray  # int64 [N] indices into ids of scored (assistant) tokens, all >= 1
    turn_index: np.ndarray  # int32 [N]
    char_start: np.ndarray  # int64 [N] offsets into output
    char_end: np.ndarray  # int64 [N]
    region: np.ndarray  # int8 [N] index into REGIONS
    roundtrip_ok: bool
    note: str | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.ids.shape[0])

    @property
    def n_scored(self) -> int:
        return int(self.positions.shape[0])


@dataclass
class _Piece:
    text: str | None  # None: a special token
    special_id: int = -1
    scored: bool = False
    out_offset: int | None = None  # offset of text[0] in output (None for input pieces)
    turn_index: int = -1


@dataclass
class ChatSpecials:
    """Ids of the ChatML special tokens of a tokenizer (``None`` when it has no ChatML)."""

    im_start: int
    im_end: int
    pad_ids: frozenset[int]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> ChatSpecials | None:
        ids = []
        for s in (IM_START, IM_END):
            enc = tokenizer.encode(s, add_special_tokens=False)
            if len(enc) != 1:
                return None
            ids.append(int(enc[0]))
        pads = {i for i in (tokenizer.pad_token_id,) if isinstance(i, int)}
        eot = tokenizer.encode(ENDOFTEXT, add_special_tokens=False)
        if len(eot) == 1:
            pads.add(int(eot[0]))
        pads.discard(ids[1])
        return cls(ids[0], ids[1], frozenset(pads))


def _chatml_pieces(text: str, sp: ChatSpecials) -> list[_Piece]:
    """Pieces of a run of ChatML messages whose special tokens were stripped (the dump's ``input``)."""
    pieces: list[_Piece] = []
    if _ROLE_START.match(text):
        pieces.append(_Piece(None, sp.im_start))
    pos = 0
    for m in _ROLE_BOUND.finditer(text):
        pieces += [_Piece(text[pos : m.start()]), _Piece(None, sp.im_end), _Piece("\n"), _Piece(None, sp.im_start)]
        pos = m.start() + 1
    pieces.append(_Piece(text[pos:]))
    return [p for p in pieces if p.text is None or p.text]


def _tool_pieces(text: str, offset: int, turn_index: int, prev_assistant: int | None, sp: ChatSpecials):
    """Pieces of a tool turn. A literal ``<|im_end|>`` at its start (a source that kept special tokens) is the
    previous assistant turn's: it is scored and belongs to that turn."""
    pieces: list[_Piece] = []
    if IM_START in text:  # the source kept its special tokens: tokenize as is
        pos = 0
        if text.startswith(IM_END) and prev_assistant is not None:
            pieces.append(_Piece(IM_END, scored=True, out_offset=offset, turn_index=prev_assistant))
            pos = len(IM_END)
        pieces.append(_Piece(text[pos:], out_offset=offset + pos, turn_index=turn_index))
        return [p for p in pieces if p.text]
    pos = 0
    m = _TOOL_HEAD.match(text)
    if m:
        if m.group(1):
            if prev_assistant is not None:
                pieces.append(_Piece(IM_END, scored=True, out_offset=offset, turn_index=prev_assistant))
            else:
                pieces.append(_Piece(IM_END, out_offset=offset, turn_index=turn_index))
            pos = m.end(1)
        if m.group(2):
            pieces.append(_Piece("\n", out_offset=offset + pos, turn_index=turn_index))
            pos += 1
        pieces.append(_Piece(None, sp.im_start, turn_index=turn_index))
    tail = None
    for t in _TOOL_TAIL.finditer(text, pos):
        tail = t
    if tail is not None:
        pieces.append(_Piece(text[pos : tail.start()], out_offset=offset + pos, turn_index=turn_index))
        pieces += [
            _Piece(None, sp.im_end, turn_index=turn_index),
            _Piece("\n", out_offset=offset + tail.start(), turn_index=turn_index),
            _Piece(None, sp.im_start, turn_index=turn_index),
        ]
        pos = tail.start() + 1
    pieces.append(_Piece(text[pos:], out_offset=offset + pos, turn_index=turn_index))
    return [p for p in pieces if p.text is None or p.text]


def build_pieces(tr: TrajectoryText, sp: ChatSpecials | None,
                 fam: FamilySpecials | None = None) -> tuple[list[_Piece], str | None]:
    """The trajectory as text pieces and special tokens, in order; plus a note when the layout was unexpected."""
    note = None
    if sp is None and fam is not None:
        return _family_pieces(tr, fam)
    if sp is None:  # no ChatML in this tokenizer: plain text, nothing re-inserted
        pieces = [_Piece(tr.input)] if tr.input else []
        for ti, role, cs, ce in tr.turns:
            pieces.append(_Piece(tr.output[cs:ce], scored=role == "assistant", out_offset=cs, turn_index=ti))
        return [p for p in pieces if p.text is None or p.text], "tokenizer has no ChatML tokens"
    keeps_specials = IM_START in tr.input
    if keeps_specials:
        pieces = [_Piece(tr.input)] if tr.input else []
    else:
        if tr.input and _ROLE_START.match(tr.input) is None:
            note = "input does not start with a role header"
        pieces = _chatml_pieces(tr.input, sp)
    turns = list(tr.turns)
    for k, (ti, role, cs, ce) in enumerate(turns):
        text = tr.output[cs:ce]
        if role == "assistant":
            if text:
                pieces.append(_Piece(text, scored=True, out_offset=cs, turn_index=ti))
            nxt = turns[k + 1] if k + 1 < len(turns) else None
            is_last = nxt is None
            ends_literal = IM_END in text  # the source kept special tokens: the model's <|im_end|> is in the text
            if is_last:
                # an empty last turn: the run stopped at the generation prompt, the model wrote nothing
                if text and not tr.truncated and not ends_literal:
                    pieces.append(_Piece(None, sp.im_end, scored=True, out_offset=ce, turn_index=ti))
            elif nxt[1] == "tool":
                nxt_text = tr.output[nxt[2] : nxt[3]]
                if not nxt_text.startswith(IM_END) and not ends_literal:
                    pieces.append(_Piece(None, sp.im_end, scored=True, out_offset=ce, turn_index=ti))
        else:
            prev = turns[k - 1][0] if k > 0 and turns[k - 1][1] == "assistant" else None
            tp = _tool_pieces(text, cs, ti, prev, sp)
            if _TOOL_HEAD.match(text) is None and IM_START not in text:
                note = note or f"tool turn {ti} has no user/tool header"
            pieces += tp
    return pieces, note


def _regions_for_turn(text_len: int, spans: Sequence[Any]) -> np.ndarray:
    """Per-char region codes of a turn: ``text`` by default, think spans first, then the other spans."""
    arr = np.full(text_len, TEXT_CODE, dtype=np.int8)
    ordered = sorted(spans, key=lambda s: (s.kind != "think", s.start))
    for s in ordered:
        code = REGION_CODE.get(s.kind)
        if code is None:
            continue
        a, b = max(0, int(s.start)), min(text_len, int(s.end))
        if b > a:
            arr[a:b] = code
    return arr


def token_regions(char_regions: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Region of each token: the region covering most of its chars (ties: the first in ``REGIONS`` order).

    ``starts``/``ends`` are offsets into the turn. Empty ranges (a synthetic ``<|im_end|>``) are structural.
    """
    n = starts.shape[0]
    out = np.full(n, STRUCTURAL_CODE, dtype=np.int8)
    L = char_regions.shape[0]
    if L == 0 or n == 0:
        return out
    onehot = np.zeros((len(REGIONS), L + 1), dtype=np.int64)
    onehot[char_regions, np.arange(1, L + 1)] = 1
    cum = np.cumsum(onehot, axis=1)
    s = np.clip(starts, 0, L)
    e = np.clip(ends, 0, L)
    counts = cum[:, e] - cum[:, s]  # [R, n]
    nonempty = e > s
    out[nonempty] = np.argmax(counts[:, nonempty], axis=0).astype(np.int8)
    return out


def build_streams(
    trajectories: Sequence[TrajectoryText],
    tokenizer: Any,
    spans_for: Any,
    *,
    check_roundtrip: bool = True,
) -> list[TokenStream]:
    """Tokenize a block of trajectories into :class:`TokenStream` (batched through the fast tokenizer); a
    trajectory with logged ids (:class:`LoggedTokens`) keeps them (:func:`exact_stream`).

    ``spans_for(trajectory, turn_index, turn_text)`` returns the classifier's spans of an assistant turn.
    """
    if all(tr.exact is None for tr in trajectories):
        return _text_streams(trajectories, tokenizer, spans_for, check_roundtrip=check_roundtrip)
    rest = [i for i, tr in enumerate(trajectories) if tr.exact is None]
    out: list[TokenStream | None] = [None] * len(trajectories)
    for i, st in zip(rest, _text_streams([trajectories[i] for i in rest], tokenizer, spans_for,
                                         check_roundtrip=check_roundtrip), strict=True):
        out[i] = st
    for i, tr in enumerate(trajectories):
        if tr.exact is not None:
            out[i] = exact_stream(tr, tokenizer, spans_for, check_roundtrip=check_roundtrip)
    return [st for st in out if st is not None]


def exact_stream(tr: TrajectoryText, tokenizer: Any, spans_for: Any, *, check_roundtrip: bool = True) -> TokenStream:
    """The stream of a trajectory whose source logged its ids: those ids, scored at the generated positions.

    Char offsets into ``output`` come from re-encoding each assistant turn with offsets when that gives the
    logged ids, else from the lengths of the tokens decoded one by one (regions are then approximate)."""
    assert tr.exact is not None
    ex = tr.exact
    ids = np.asarray(ex.ids, dtype=np.int64)
    pos = np.asarray([k for k, g in enumerate(ex.generated) if g and k >= 1], dtype=np.int64)
    tix = np.asarray([ex.turn[k] for k in pos.tolist()], dtype=np.int32)
    cs = np.zeros(pos.shape[0], dtype=np.int64)
    ce = np.zeros(pos.shape[0], dtype=np.int64)
    region = np.full(pos.shape[0], TEXT_CODE, dtype=np.int8)
    note = None
    for ti, role, tcs, tce in tr.turns:
        sel = np.nonzero(tix == ti)[0]
        if role != "assistant" or sel.size == 0:
            continue
        text = tr.output[tcs:tce]
        turn_ids = ids[pos[sel]].tolist()
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if list(enc["input_ids"]) == turn_ids:
            offs = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        else:
            lens = np.asarray([len(t) for t in tokenizer.batch_decode([[i] for i in turn_ids])], dtype=np.int64)
            ends = np.minimum(np.cumsum(lens), len(text))
            offs = np.stack([np.concatenate([[0], ends[:-1]]), ends], axis=1)
            note = note or f"turn {ti}: re-encoding its text does not give the logged ids; char offsets approximate"
        cs[sel], ce[sel] = tcs + offs[:, 0], tcs + offs[:, 1]
        region[sel] = token_regions(_regions_for_turn(len(text), spans_for(tr, ti, text)), offs[:, 0], offs[:, 1])
    ok = True
    if check_roundtrip:
        decoded = tokenizer.decode(ex.ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        ok = decoded == tr.input + tr.output
        if not ok:
            note = note or _first_difference(decoded, tr.input + tr.output)
    return TokenStream(tr.trajectory_id, ids, pos, tix, cs, ce, region, ok, note)


def _text_streams(
    trajectories: Sequence[TrajectoryText],
    tokenizer: Any,
    spans_for: Any,
    *,
    check_roundtrip: bool = True,
) -> list[TokenStream]:
    """:func:`build_streams` for trajectories known only as text: rebuild and tokenize them (batched)."""
    sp = ChatSpecials.from_tokenizer(tokenizer)
    all_pieces: list[list[_Piece]] = []
    notes: list[str | None] = []
    texts: list[str] = []
    fams: dict[str | None, FamilySpecials | None] = {}
    for tr in trajectories:
        if sp is None and tr.tool_format not in fams:
            fams[tr.tool_format] = FamilySpecials.from_tokenizer(tokenizer, tr.tool_format)
        pieces, note = build_pieces(tr, sp, fams.get(tr.tool_format) if sp is None else None)
        all_pieces.append(pieces)
        notes.append(note)
        texts += [p.text for p in pieces if p.text is not None]
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True) if texts else None
    streams = []
    k = 0
    pad_ids = sp.pad_ids if sp else frozenset()
    for tr, pieces, note in zip(trajectories, all_pieces, notes, strict=True):
        ids: list[int] = []
        pos: list[int] = []
        tix: list[int] = []
        cs: list[int] = []
        ce: list[int] = []
        for p in pieces:
            if p.text is None:
                if p.scored:
                    pos.append(len(ids))
                    tix.append(p.turn_index)
                    cs.append(p.out_offset)
                    ce.append(p.out_offset)
                ids.append(p.special_id)
                continue
            pid = enc["input_ids"][k]
            offs = enc["offset_mapping"][k]
            k += 1
            if p.scored:
                base = p.out_offset
                n0 = len(ids)
                seen_end = False
                for j, (tid, (a, b)) in enumerate(zip(pid, offs, strict=True)):
                    if seen_end and tid in pad_ids:
                        continue  # <|endoftext|> padding kept in the text after a literal <|im_end|>
                    seen_end = seen_end or (sp is not None and tid == sp.im_end)
                    pos.append(n0 + j)
                    tix.append(p.turn_index)
                    cs.append(base + a)
                    ce.append(base + b)
            ids.extend(pid)
        ids_a = np.asarray(ids, dtype=np.int64)
        pos_a = np.asarray(pos, dtype=np.int64)
        keep = pos_a >= 1  # the very first token has no context
        tix_a = np.asarray(tix, dtype=np.int32)[keep]
        cs_a = np.asarray(cs, dtype=np.int64)[keep]
        ce_a = np.asarray(ce, dtype=np.int64)[keep]
        pos_a = pos_a[keep]
        region = np.full(pos_a.shape[0], TEXT_CODE, dtype=np.int8)
        for ti, role, tcs, tce in tr.turns:
            if role != "assistant":
                continue
            sel = np.nonzero(tix_a == ti)[0]
            if sel.size == 0:
                continue
            text = tr.output[tcs:tce]
            chars = _regions_for_turn(len(text), spans_for(tr, ti, text))
            region[sel] = token_regions(chars, cs_a[sel] - tcs, ce_a[sel] - tcs)
        ok = True
        if check_roundtrip:
            fam = fams.get(tr.tool_format) if sp is None else None
            skip = IM_START not in tr.input and not (fam is not None and fam.kept(tr))
            decoded = tokenizer.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False)
            ok = decoded == tr.input + tr.output
            if not ok:
                note = note or _first_difference(decoded, tr.input + tr.output)
        streams.append(TokenStream(tr.trajectory_id, ids_a, pos_a, tix_a, cs_a, ce_a, region, ok, note))
    return streams


def _first_difference(a: str, b: str) -> str:
    i = len(os.path.commonprefix([a, b]))
    return f"round trip differs at char {i}: {a[i : i + 12]!r} vs {b[i : i + 12]!r}"


# -- other model families -----------------------------------------------------------------------------------


#: call format -> the layout of its family's chat template (:mod:`trajlab.families`, ``LAYOUT``), for the families
#: whose tokens are put back or whose text is kept as it is (``rebuild`` ``tokens`` / ``none``); the ChatML
#: families' layout is the rebuild above
FAMILY_LAYOUTS: dict[str, TokenLayout] = {
    fmt: fam.layout for fmt, fam in FAMILY_OF_FORMAT.items() if fam.layout.rebuild != "chatml"}


@dataclass(frozen=True)
class FamilySpecials:
    """A family's :class:`~trajlab.families.base.TokenLayout` with its tokens resolved to ids of one tokenizer (``-1``: not a single token)."""

    layout: TokenLayout
    ids: dict[str, int]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, tool_format: str | None) -> FamilySpecials | None:
        layout = FAMILY_LAYOUTS.get(tool_format or "")
        if layout is None:
            return None
        ids: dict[str, int] = {}
        for tok in (layout.bos, layout.prompt_end, layout.turn_end_call, layout.turn_end_final):
            if tok:
                enc = tokenizer.encode(tok, add_special_tokens=False)
                ids[tok] = int(enc[0]) if len(enc) == 1 else -1
        return cls(layout, ids)

    def kept(self, tr: TrajectoryText) -> bool:
        return any(m in tr.input or m in tr.output for m in self.layout.kept_markers)

    def piece(self, tok: str | None, **kw: Any) -> _Piece | None:
        tid = self.ids.get(tok or "", -1)
        return _Piece(None, tid, **kw) if tid >= 0 else None


def _family_pieces(tr: TrajectoryText, fam: FamilySpecials) -> tuple[list[_Piece], str | None]:
    """:func:`build_pieces` for a family of :data:`FAMILY_LAYOUTS`."""
    lay = fam.layout
    pieces: list[_Piece | None] = []
    if fam.kept(tr) or lay.rebuild == "none":
        pieces = [_Piece(tr.input)] if tr.input else []
        for ti, role, cs, ce in tr.turns:
            pieces.append(_Piece(tr.output[cs:ce], scored=role == "assistant", out_offset=cs, turn_index=ti))
        note = None if fam.kept(tr) else "the family's special tokens are not rebuilt from this dump (plain text)"
        return [p for p in pieces if p is not None and p.text], note
    pieces.append(fam.piece(lay.bos))
    if tr.input:
        pieces.append(_Piece(tr.input))
    pieces.append(fam.piece(lay.prompt_end))
    turns = list(tr.turns)
    for k, (ti, role, cs, ce) in enumerate(turns):
        text = tr.output[cs:ce]
        if role == "assistant":
            if text:
                pieces.append(_Piece(text, scored=True, out_offset=cs, turn_index=ti))
            is_last = k + 1 >= len(turns)
            if is_last and text and not tr.truncated:
                pieces.append(fam.piece(lay.turn_end_final, scored=True, out_offset=ce, turn_index=ti))
            elif not is_last:
                pieces.append(fam.piece(lay.turn_end_call, scored=True, out_offset=ce, turn_index=ti))
        else:
            pieces.append(_Piece(text, out_offset=cs, turn_index=ti))
            pieces.append(fam.piece(lay.prompt_end, turn_index=ti))
    missing = [t for t, i in fam.ids.items() if i < 0]
    note = f"not single tokens of this tokenizer: {', '.join(missing)}" if missing else None
    return [p for p in pieces if p is not None and (p.text is None or p.text)], note

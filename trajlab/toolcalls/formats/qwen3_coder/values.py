"""Tag text inside qwen3_coder parameter values: call structure or text the value holds.

A model may write tag text inside a value (a file that holds an example call, ``x = "<tool_call>"``).
:func:`literal_tags` splits the tokens into call structure and such literal tags, by the closing structure that
follows (:func:`standalone`: is a tag on a line of its own); :func:`attach_literals` records them on their
calls. :func:`closed_reading` is the other reading of the same text: verl's regexes over closed calls, which
keep tag text inside values; the turn pipeline weighs the two.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from trajlab.toolcalls.draft import CallDraft, ParamDraft
from trajlab.toolcalls.formats.qwen3_coder.lexer import CC, CO, FC, FO, PC, PO, TAG_AT, TAG_RE, Tok


def standalone(text: str, start: int, end: int) -> bool:
    """Whether the tag ``text[start:end]`` stands where the chat template writes the tags of a call: at the start
    of its line (only spaces or tabs before it) and followed by the end of the line or by another tag. Tag text a
    model writes *inside* a value (``x = "<tool_call>"``, ``<parameter=path> = 1``) has other text beside it."""
    p = start
    while p > 0 and text[p - 1] in " \t":
        p -= 1
    if p > 0 and text[p - 1] not in "\n\r":
        return False
    q, n = end, len(text)
    while q < n and text[q] in " \t":
        q += 1
    return q >= n or text[q] in "\n\r<"


def _closes_value(text: str, toks: list[Tok], i: int) -> bool:
    """Whether the ``</parameter>`` token ``toks[i]`` can end a value: only whitespace lies between it and the
    next tag, which opens a parameter, closes the function or the call, or opens the next call on a line of its
    own (or it is the last tag)."""
    if i + 1 >= len(toks):
        return True
    u = toks[i + 1]
    gap = text[toks[i].end:u.start]
    return (u.kind in (PO, FC, CC) or u.kind == CO and standalone(text, u.start, u.end)) and (
        not gap or gap.isspace())


def literal_tags(text: str, toks: list[Tok]) -> tuple[list[Tok], list[Tok]]:
    """Split the tokens into the call structure and the tag text that belongs to a parameter value.

    The intended reading of a value is the one the closing structure supports: inside an open value a tag is
    text when a ``</parameter>`` that can end the value (:func:`_closes_value`) still follows before the next
    call begins, and

    * it is a ``</parameter>`` that cannot end the value (text follows it on the line), or one followed by
      another ``</parameter>`` before the next opening tag that starts structure (the last of them ends the
      value);
    * it is written inside a line, with other text beside it -- ``x = "<tool_call>"``, ``doc = "<parameter=path>"``,
      ``s = "</function>"`` (a ``<parameter=`` right after a letter or digit is where a compact call that forgot
      ``</parameter>`` puts the next parameter: structure);
    * it opens a complete ``<tool_call>`` / ``<function=`` / ``<parameter=`` block on lines of its own (an example
      call in a file or prompt the model writes) and the value goes on after it: the whole block is text;
    * it opens a ``<tool_call>`` / ``<function=`` block on a line of its own that is not a complete call (a
      format description: ``<tool_call>\\n<function=NAME>``), or it is a closing tag on a line of its own;
    * it opens, on a line of its own, a parameter the call gives elsewhere (a repeated parameter is the worse
      reading).

    A complete, well-formed call that starts inside an unclosed value is a real call (the value was cut).

    Anything else keeps its structural meaning, so malformed calls (a missing ``</parameter>`` before the next
    ``<parameter=`` on its own line, a call cut short) read as before. Returns (structure, literal tags).
    """
    n = len(toks)
    # how often each parameter name opens on a line of its own in each call (a call starts at a `<tool_call>` on
    # its own line followed by `<function=`): a second `<parameter=NAME>` inside a value is text rather than a repeated parameter
    region = [0] * n
    alone = [False] * n
    opened: dict[tuple[int, str | None], int] = {}
    r = 0
    for k, t in enumerate(toks):
        alone[k] = standalone(text, t.start, t.end) or t.kind == PO and _compact_parameter(text, t)
    # a call starts at a `<tool_call>` on its own line that opens a complete call, or that follows a `</tool_call>`
    starts = [t.kind == CO and alone[k] and (
        k + 1 < n and toks[k + 1].kind == FO and not text[t.end:toks[k + 1].start].strip() and _starts_call(toks, k)
        or k > 0 and toks[k - 1].kind == CC and not text[toks[k - 1].end:t.start].strip()) for k, t in enumerate(toks)]
    for k, t in enumerate(toks):
        if starts[k]:
            r += 1
        region[k] = r
        if t.kind == PO and alone[k]:
            opened[(r, t.name)] = opened.get((r, t.name), 0) + 1
    # closes[k]: the `</parameter>` at k can end a value (not when a parameter the call gives on a line of its own
    # follows it inside the line: `x = "</parameter><parameter=path>"`)
    closes = [False] * n
    for k, t in enumerate(toks):
        if t.kind == PC and _closes_value(text, toks, k):
            u = toks[k + 1] if k + 1 < n else None
            closes[k] = u is None or not (u.kind == PO and not alone[k + 1] and (region[k], u.name) in opened)
    # of several `</parameter>` with only closing tags (and text) between them, the last one ends the value:
    # `</parameter></tool_call>` written in a value followed by the call's own closing tags is text
    run_pc = False
    for k in range(n - 1, -1, -1):
        kind = toks[k].kind
        after = toks[k - 1].kind if k > 0 and not text[toks[k - 1].end:toks[k].start].strip() else -1
        if starts[k] or kind == PO and (alone[k] or after == PC) or (
                kind == FO and alone[k] and _function_block(toks, k)) or (
                kind == CO and after == CC and k + 1 < n and toks[k + 1].kind == FO and _starts_call(toks, k)):
            run_pc = False  # (an opener that starts structure: a call, a function or parameter on its own line)
        elif kind == PC and closes[k]:
            if run_pc:
                closes[k] = False
            run_pc = True
    # later[k]: a `</parameter>` that can end a value comes at k or after, before the next call starts
    later = [False] * (n + 1)
    for k in range(n - 1, -1, -1):
        t = toks[k]
        if closes[k]:
            later[k] = True
        elif starts[k]:
            later[k] = False
        else:
            later[k] = later[k + 1]
    out: list[Tok] = []
    lit: list[Tok] = []
    in_value = False
    i = 0
    while i < n:
        t = toks[i]
        k = t.kind
        if not in_value:
            out.append(t)
            in_value = k == PO
            i += 1
            continue
        if k == PC:
            if closes[i] or not later[i + 1]:
                out.append(t)
                in_value = False
            else:
                lit.append(t)
            i += 1
            continue
        if alone[i]:
            if k in (CO, FO, PO):
                close = CC if k == CO else FC if k == FO else PC
                j = next((x for x in range(i + 1, n) if toks[x].kind == close), -1)
                if j >= 0 and later[j + 1] and (k != PO or not closes[j]):
                    lit += toks[i:j + 1]  # a whole block written as text, the value goes on after it
                    i = j + 1
                    continue
                if k != PO and later[i + 1] and not (j >= 0 and _well_formed(toks, i, j)):
                    lit.append(t)  # an opener whose block is not a call: text (the value is closed later)
                    i += 1
                    continue
                if k == PO and later[i + 1] and opened.get((region[i], t.name), 0) > 1:
                    lit.append(t)  # the parameter is given elsewhere in the call: this mention is text
                    i += 1
                    continue
            elif later[i + 1]:  # a closing tag on its own line, the value is closed later
                lit.append(t)
                i += 1
                continue
        elif later[i + 1] and not (k == PO and text[t.start - 1].isalnum()):
            lit.append(t)
            i += 1
            continue
        out.append(t)
        in_value = k == PO
        i += 1
    return out, lit


def _compact_parameter(text: str, t: Tok) -> bool:
    """A ``<parameter=NAME>`` at the start of its line whose ``</parameter>`` follows on the same line."""
    eol = text.find("\n", t.end)
    line_end = len(text) if eol < 0 else eol
    # (standalone with the tag's own `<` as what follows it: only the text before it on its line is looked at)
    return standalone(text, t.start, t.start) and text.find("</parameter", t.end, line_end) >= 0


def _starts_call(toks: list[Tok], i: int) -> bool:
    """Whether the ``<tool_call>`` at ``i`` opens a complete call, or one the end of the text cuts short."""
    j = next((x for x in range(i + 1, len(toks)) if toks[x].kind in (CC, CO)), -1)
    if j < 0:
        return True  # (a call cut by the end of the text)
    return toks[j].kind == CC and _well_formed(toks, i, j)


def _function_block(toks: list[Tok], i: int) -> bool:
    """Whether the ``<function=`` at ``i`` opens a complete function (its parameters closed)."""
    j = next((x for x in range(i + 1, len(toks)) if toks[x].kind in (FC, FO, CO, CC)), -1)
    return j >= 0 and toks[j].kind == FC and _well_formed(toks, i, j)


def _well_formed(toks: list[Tok], i: int, j: int) -> bool:
    """Whether ``toks[i:j + 1]`` is a complete call (``<tool_call>``, one function, closed parameters) or a
    complete function: a real call that starts inside an unclosed value, not text."""
    k = i
    if toks[k].kind == CO:
        k += 1
        if k > j or toks[k].kind != FO:
            return False
    k += 1  # after <function=...>
    while k < j and toks[k].kind == PO and k + 1 < j and toks[k + 1].kind == PC:
        k += 2
    if toks[i].kind == CO:
        return k + 1 == j and toks[k].kind == FC
    return k == j


def attach_literals(drafts: list[CallDraft], lit: list[Tok]) -> None:
    """Record each literal tag on the call whose text holds it."""
    j = 0
    for d in drafts:  # (sorted by start; calls do not overlap)
        while j < len(lit) and lit[j].start < d.start:
            j += 1
        while j < len(lit) and lit[j].start < d.end:
            if d.literals is None:
                d.literals = []
            d.literals.append((lit[j].start, lit[j].end))
            j += 1


_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_FUNCTION = re.compile(r"\s*<function=([^>]*)>(.*?)</function>\s*", re.DOTALL)
_PARAMETER = re.compile(r"\s*<parameter=([^>]*)>(.*?)</parameter>", re.DOTALL)


_PARAM_TAG = re.compile(r"<parameter=([^<>\n]*)>|</parameter>")


def _schema_params(text: str, p: int, end: int, declared: Collection[str]) -> list[tuple[int, int, int, int]] | None:
    """The parameters of the function body ``text[p:end]`` read with the schema: a ``<parameter=X>`` inside a value
    whose name the tool does not declare is text of the value (as vLLM's schema-aware qwen3_coder reading takes
    it), and so is the ``</parameter>`` that closes it; a declared X ends the value (it starts a parameter). Returns
    (name start, name end, body start, closer start) per parameter, or None when the body is not a sequence of
    parameters closed this way."""
    out: list[tuple[int, int, int, int]] = []
    pos = p
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return out
        m = _PARAM_TAG.match(text, pos, end)
        if m is None or m.group(1) is None:
            return None
        depth, close, last = 0, -1, -1
        for t in _PARAM_TAG.finditer(text, m.end(), end):
            if t.group(1) is not None:
                if t.group(1) in declared:
                    break  # a declared parameter starts here
                depth += 1
            elif depth == 0:
                close = t.start()
                break
            else:
                depth -= 1
                last = t.start()
        if close < 0:
            close = last  # the value's own `</parameter>` is the last one written before the boundary
        if close < 0:
            return None
        out.append((m.start(1), m.end(1), m.end(), close))
        pos = close + len("</parameter>")


def closed_reading(text: str, lo: int, hi: int,
                   declared: Callable[[str], Collection[str] | None] | None = None) -> list[CallDraft] | None:
    """The calls of ``text[lo:hi]`` read the way verl's regexes read closed calls -- each ``<tool_call>`` block up
    to the first ``</tool_call>``, one ``<function=NAME>`` up to the first ``</function>``, each parameter up to
    the first ``</parameter>`` -- so that tag text verl reads as part of a value is kept there. None unless every
    call in the range is closed that way with nothing but whitespace between its tags (and no tag between the
    calls). :mod:`.analyze` weighs it against the scanner's reading (the fewer errors win).

    ``declared`` (a tool name -> its declared parameter names, None when unknown or open) asks for the
    schema-guided reading instead (:func:`_schema_params`): a ``<parameter=X>`` inside a value where the tool does
    not declare X is text of the value; None when a call's tool has no closed schema."""
    out: list[CallDraft] = []
    pos = lo
    for bm in _BLOCK.finditer(text, lo, hi):
        if TAG_AT.search(text, pos, bm.start()) is not None:
            return None
        fm = _FUNCTION.fullmatch(text, bm.start(1), bm.end(1))
        if fm is None:
            return None
        d = CallDraft("qwen3_coder", bm.start(), bm.end(), fm.group(1), fm.start(1), fm.end(1))
        d.span("structural", bm.start(), fm.start(1))
        d.span("function_name", fm.start(1), fm.end(1))
        p, end = fm.start(2), fm.end(2)
        q = fm.end(1) + 1
        guided = None
        if declared is not None:
            names = declared(fm.group(1))
            guided = _schema_params(text, p, end, names) if names is not None else None
            if guided is None:
                return None
        while p < end:
            if guided is not None:
                if not guided:
                    break
                ns, ne, a, b = guided.pop(0)
                pname, pstart, pend, after = text[ns:ne], ns, ne, b + len("</parameter>")
            else:
                pm = _PARAMETER.match(text, p, end)
                if pm is None:
                    if text[p:end].strip():
                        return None
                    break
                a, b = pm.start(2), pm.end(2)
                pname, pstart, pend, after = pm.group(1), pm.start(1), pm.end(1), pm.end()
            if text.startswith("\n", a, b):
                a += 1
            if b > a and text[b - 1] == "\n":
                b -= 1
            d.span("structural", q, pstart)
            d.span("param_name", pstart, pend)
            d.span("structural", pend, a)
            d.span("param_value", a, b)
            d.params.append(ParamDraft(pname, pstart, pend, text[a:b], None, a, b))
            for tm in TAG_AT.finditer(text, a, b):
                m = TAG_RE.match(text, tm.start(), b)
                if d.literals is None:
                    d.literals = []
                d.literals.append((tm.start(), m.end() if m is not None else tm.start() + 1))
            q = b
            p = after
        d.span("structural", q, bm.end())
        out.append(d)
        pos = bm.end()
    if not out or TAG_AT.search(text, pos, hi) is not None:
        return None
    return out

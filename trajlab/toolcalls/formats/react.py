"""The ReAct call format (``react``): ``Action: NAME`` / ``Action Input: INPUT`` lines in plain text.

ReAct agents (LangChain's ReAct prompt and the many agents written like it) call tools by writing::

    Thought: I should look this up.
    Action: search
    Action Input: {"query": "capital of France"}

(or, as in the ReAct paper, ``Action 1: Search[capital of France]``) and stop; the environment appends ``Observation: RESULT`` and the model goes on, until it writes
``Final Answer: ...``. The input is a JSON object (the tool's keyword arguments) or plain text (the input of a
single-input tool). An Action whose Observation is missing because the dump ends at the model's turn is a
pending call -- a call, not a malformed one (so is one followed only by a bare ``Observation:``: the agent's stop
sequence, kept when the server includes it in the output).

What this scanner reports (the rest -- unknown actions, arguments that do not fit the schema -- comes from the
shared checks): ``missing_action_input`` (an Action with no, or an empty, Action Input), ``missing_call_open``
(an Action Input with no Action line: a turn-level finding, no call is named), ``invalid_json`` (an
input that starts like JSON and does not decode), ``multiple_actions`` (several actions in one turn: LangChain's
parser takes the first and reads the rest of the text as its input), ``action_after_final_answer`` (an action
and ``Final Answer:`` in one turn, which LangChain rejects) and ``model_written_observation`` (an
``Observation:`` the model wrote itself: an invented tool result). Keys are read only at the start of a line, so
prose that mentions an "action" is no call.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from trajlab.toolcalls.draft import MISSING, CallDraft, Issue, Ranges
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.jsonbody import fill_json_arguments
from trajlab.toolcalls.ruleset import RuleSet

#: a ReAct key at the start of a line (``Action Input`` before ``Action``; LangChain allows a step number)
KEY_RE = re.compile(
    r"^[ \t]*(?:(?P<input>Action[ \t]*\d*[ \t]*Input)|(?P<action>Action)|(?P<obs>Observation)|"
    r"(?P<final>Final[ \t]+Answer)|(?P<thought>Thought))[ \t]*\d*[ \t]*:[ \t]*",
    re.MULTILINE,
)


#: the ReAct paper's action with its input in brackets: ``Search[Apple Remote]``, ``Finish[yes]``
_BRACKET = re.compile(r"([A-Za-z_][\w.\-]{0,63})\[(.*)\]")


def _keys(text: str, lo: int, hi: int) -> list[tuple[str, int, int]]:
    """(kind, start of the key, end of the key and its colon) for every key line in ``text[lo:hi]``."""
    out = []
    for m in KEY_RE.finditer(text, lo, hi):
        kind = m.lastgroup or ""
        out.append((kind, m.start() + (len(m.group(0)) - len(m.group(0).lstrip(" \t"))), m.end()))
    return out


def _strip_span(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s] in " \t\r\n":
        s += 1
    while e > s and text[e - 1] in " \t\r\n":
        e -= 1
    return s, e


#: end-of-turn special tokens a dump decoded with special tokens keeps after the input (not part of it)
_END_TOKENS = re.compile(r"(?:<\|(?:im_end|endoftext|eot_id|end)\|>|</s>|<｜end▁of▁sentence｜>)[ \t\r\n]*\Z")


def _read_input(d: CallDraft, text: str, s: int, e: int, rs: RuleSet, spans: bool) -> None:
    """The Action Input ``text[s:e]`` (stripped): a JSON object's members, or the text itself."""
    s, e = _strip_span(text, s, e)
    while s < e:
        m = _END_TOKENS.search(text, s, e)
        if m is None:
            break
        d.span("structural", m.start(), e)
        s, e = _strip_span(text, s, m.start())
    if s >= e:
        return
    if text[s] in "{[":
        fill_json_arguments(d, text, s, e, rs, spans=spans, fmt="react")
        if d.json_args is MISSING:  # (not an object: LangChain passes the text on as the single input)
            d.json_args = text[s:e]
        return
    qs, qe = s, e  # LangChain's str.strip('"'): every quote at either end of a text input goes, paired or not
    while qs < qe and text[qs] == '"':
        qs += 1
    while qe > qs and text[qe - 1] == '"':
        qe -= 1
    d.json_args = text[qs:qe]
    d.span("structural", s, qs)
    d.span("param_value", qs, qe)
    d.span("structural", qe, e)


#: LangChain's JSON agent step: ``Action:`` then a (fenced) JSON blob ``{"action": NAME, "action_input": INPUT}``
_BLOB_NAME = re.compile(r'"action"[ \t\r\n]*:[ \t\r\n]*"((?:[^"\\]|\\.)*)"')
_BLOB_INPUT = re.compile(r'"action_input"[ \t\r\n]*:[ \t\r\n]*')


def _blob_bounds(text: str, s: int, e: int) -> tuple[int, int, int] | None:
    """``(start, end)`` of the JSON object that ``text[s:e]`` holds alone, optionally inside a ```` ``` ````
    fence, and the end of the blob (after its closing fence); None when it holds anything else. (Linear: no
    regex over the whole region.)"""
    s, e = _strip_span(text, s, e)
    if text.startswith("```", s):
        eol = text.find("\n", s, e)
        if eol < 0 or text[s + 3:eol].strip() not in ("", "json", "JSON"):
            return None
        s = _strip_span(text, eol, e)[0]
    after = e
    if text.endswith("```", s, e):
        e = _strip_span(text, s, e - 3)[1]
    if e - s < 2 or text[s] != "{" or text[e - 1] != "}":
        return None
    return s, e, after


def _json_blob(text: str, ks: int, s: int, e: int, rs: RuleSet, spans: bool) -> CallDraft | None | Literal[False]:
    """The call in LangChain's JSON blob ``text[s:e]`` (as its ReActJsonSingleInputOutputParser reads it), None
    when the blob names ``Final Answer`` (the answer, no call), False when ``text[s:e]`` is no such blob."""
    m = _blob_bounds(text, s, e)
    if m is None:
        return False
    os_, oe, after = m
    try:
        obj = json.loads(text[os_:oe])
    except (ValueError, RecursionError):
        return False
    nm = _BLOB_NAME.search(text, os_, oe)
    if not isinstance(obj, dict) or not isinstance(obj.get("action"), str) or nm is None:
        return False
    name = obj["action"]
    if name.strip() == "Final Answer":
        return None
    end = after
    d = CallDraft("react", ks, end, name, nm.start(1), nm.end(1))
    d.span("structural", ks, nm.start(1))
    d.span("function_name", nm.start(1), nm.end(1))
    im = _BLOB_INPUT.search(text, nm.end(1), oe) or _BLOB_INPUT.search(text, os_, oe)
    if im is None or "action_input" not in obj:
        d.add("missing_action_input", "missing", ks, end, name=name,
              blocker="the input the action was meant to get is unknown")
        return d
    try:
        _v, ve = json.JSONDecoder().raw_decode(text, im.end())
    except (ValueError, RecursionError):
        return False
    if ve > oe:
        return False
    if text[im.end()] == "{":
        d.span("structural", nm.end(1), im.end())
        fill_json_arguments(d, text, im.end(), ve, rs, spans=spans, fmt="react")
        d.span("structural", ve, end)
    else:  # a string input (LangChain passes it on as the single input) or another JSON value
        d.json_args = obj["action_input"]
        d.span("structural", nm.end(1), im.end())
        d.span("param_value", im.end(), ve)
        d.span("structural", ve, end)
    return d


class ReactFormat(ToolFormat):
    """ReAct ``Action:`` / ``Action Input:`` steps."""

    name = "react"
    models = "ReAct agents (LangChain-style Thought / Action / Action Input / Observation / Final Answer)"
    text_input = True

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find("Action", lo, hi) < 0 and text.find("Observation", lo, hi) < 0:
            return [], []
        occ = Ranges(excluded) if excluded else None
        keys = [k for k in _keys(text, lo, hi) if occ is None or occ.covering(k[1]) < 0]
        calls: list[CallDraft] = []
        issues: list[Issue] = []
        finals = [k for k in keys if k[0] == "final"]
        for i, (kind, ks, ke) in enumerate(keys):
            if kind == "action":
                d = self._action(text, keys, i, hi, rs, spans)
                if d is not None:
                    calls.append(d)
            elif kind == "input" and (i == 0 or keys[i - 1][0] != "action"):
                # an Action Input with no Action before it: no tool is named, so no call (a turn-level problem)
                eol = text.find("\n", ke, hi)
                issues.append(Issue("missing_call_open", "action_line", ks, hi if eol < 0 else eol,
                                    {"tag": "Action Input:"}))
            elif kind == "obs":
                eol = text.find("\n", ke, hi)
                oe = hi if eol < 0 else eol
                if i == len(keys) - 1 and not text[ke:hi].strip():
                    # a bare `Observation:` that ends the turn is the agent's stop sequence kept in the dump (the
                    # model was stopped there): part of the step, not an invented result
                    if calls and calls[-1].end <= ks:
                        calls[-1].span("structural", calls[-1].end, ke)
                        calls[-1].end = ke
                    continue
                if calls:  # (keys are in text order: the last call found precedes this observation)
                    calls[-1].add("model_written_observation", "after_action", ks, oe,
                                  after=f" after `Action: {calls[-1].name or ''}`")
                else:
                    issues.append(Issue("model_written_observation", "without_action", ks, oe, {"after": ""}))
        if len(calls) > 1:
            for c in calls:
                c.add("multiple_actions", "several", c.start, c.end, count=len(calls))
        for c in calls:
            for _kind, fs, fe in finals:
                c.add("action_after_final_answer", "after" if fs < c.start else "before", fs, fe)
                break
        return calls, issues

    def _action(self, text: str, keys: list[tuple[str, int, int]], i: int, hi: int, rs: RuleSet,
                spans: bool) -> CallDraft | None:
        """The call of the Action key ``keys[i]``; None when it is LangChain's JSON blob naming ``Final Answer``."""
        _kind, ks, ke = keys[i]
        eol = text.find("\n", ke, hi)
        line_end = hi if eol < 0 else eol
        ns, ne = _strip_span(text, ke, line_end)
        if ns == ne:  # nothing on the Action line: the name, or LangChain's JSON blob, is on the lines below
            region_end = keys[i + 1][1] if i + 1 < len(keys) else hi
            blob = _json_blob(text, ks, line_end, region_end, rs, spans)
            if blob is not False:
                return blob
            bs, be = _strip_span(text, line_end, region_end)
            if bs < be and "\n" not in text[bs:be]:  # `Action:\nsearch` (LangChain's regex allows it)
                ns, ne, line_end = bs, be, be
        bm = _BRACKET.fullmatch(text, ns, ne)
        if bm is not None:  # the ReAct paper's `Action 1: Search[Apple Remote]`: the input inside the brackets
            d = CallDraft("react", ks, ne, bm.group(1), bm.start(1), bm.end(1))
            d.span("structural", ks, bm.start(1))
            d.span("function_name", bm.start(1), bm.end(1))
            d.span("structural", bm.end(1), bm.start(2))
            if bm.end(2) > bm.start(2):
                _read_input(d, text, bm.start(2), bm.end(2), rs, spans)
            else:
                d.add("missing_action_input", "empty", bm.start(2) - 1, ne, name=d.name or "",
                      blocker="the input the action was meant to get is unknown")
            d.span("structural", bm.end(2), ne)
            return d
        d = CallDraft("react", ks, line_end, text[ns:ne], ns, ne)
        d.span("structural", ks, ns)
        d.span("function_name", ns, ne)
        if not d.name:
            d.add("empty_call", "empty", ks, line_end)
        nxt = keys[i + 1] if i + 1 < len(keys) else None
        if nxt is None or nxt[0] != "input":
            d.add("missing_action_input", "missing", ks, line_end, name=d.name or "",
                  blocker="the input the action was meant to get is unknown")
            return d
        _k2, is_, ie = nxt
        end = keys[i + 2][1] if i + 2 < len(keys) else hi
        _s, e = _strip_span(text, ie, end)
        d.span("structural", ne, ie)
        d.end = max(e, ie)
        if e <= ie or not text[ie:e].strip():
            d.add("missing_action_input", "empty", is_, ie, name=d.name or "",
                  blocker="the input the action was meant to get is unknown")
            return d
        _read_input(d, text, ie, e, rs, spans)
        return d

    def text_arguments(self, text: str, props: dict[str, Any], required: tuple[str, ...] = ()) -> Any:
        """A plain-text input as the tool receives it: the value of its only (or only required) parameter, as
        LangChain passes a string to a single-input tool; the text itself when the schema does not say which."""
        if len(props) == 1:
            return {next(iter(props)): text}
        if len(required) == 1:
            return {required[0]: text}
        return text

    def render(self, name: str, arguments: Any) -> str:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return f"Action: {name}\nAction Input: {args}"


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (ReactFormat(),)

"""The Llama-3 JSON call format (Llama 3.1, 3.2, 3.3 and Llama 4): ``{"name": NAME, "parameters": {...}}``.

The Llama 3.1 template asks, in the tool block of the first user message (or of the system message), for "a JSON
for a function call" in the format ``{"name": function name, "parameters": dictionary of argument name and its
value}`` and renders a call in the history as exactly that object (``"parameters"``, not ``"arguments"``); the model
often writes ``"type": "function"`` first, and may put ``<|python_tag|>`` before it (a special token of the Llama
tokenizer: a ``skip_special_tokens=True`` dump drops it, so the stripped text is the bare JSON). Several calls are
written one after the other: separated by ``;`` (the Llama 3.x parsers' convention) or back to back, as the Llama 4
JSON template renders a history of several calls. Tool results come back in an ``ipython`` turn.

No wrapper is expected: a correct Llama-3 JSON call is *not* a Hermes call without ``<tool_call>``, and gives no
finding, with or without ``"type"``. What breaks: JSON that does not decode (reported by
:mod:`.json_decode` like Hermes' bodies), a call object without a ``name`` or with ``parameters`` that are not an
object, an output cut inside the JSON, garbled and undeclared names (the shared checks). ``"arguments"`` in place of
``"parameters"`` is read (vLLM's ``llama3_json`` accepts both) and noted (info).

verl 0.9.1 ships no parser for this format (its ``hermes`` parser needs ``<tool_call>``): verl's reading is
none, and a verl tool agent loop configured for ``hermes`` executes no Llama-3 JSON call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import MISSING, CallDraft, Issue, ParamDraft, Ranges
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.json_decode import decode_body
from trajlab.toolcalls.json_walk import walk, walk_valid
from trajlab.toolcalls.jsonbody import json_spans
from trajlab.toolcalls.ruleset import RuleSet

PYTHON_TAG = "<|python_tag|>"
#: where a call object starts: `{` then `"name"`, `"type"` or `"function"` as its first key
START_RE = re.compile(r'\{\s*"(?:name|type|function)"\s*:')
_DECODER = json.JSONDecoder()


def _end_of(text: str, s: int, hi: int, nxt: int) -> tuple[int, bool]:
    """(end of the call object starting at ``s``, whether it decodes): the raw JSON end, else the text up to the
    next call (``nxt``) without its trailing white space and ``;``."""
    try:
        _obj, e = _DECODER.raw_decode(text, s)
        if e <= hi:
            return e, True
    except (ValueError, RecursionError):
        pass
    body = text[s:nxt].rstrip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    return s + len(body), False


class Llama3JsonFormat(ToolFormat):
    """Llama 3.1-3.3 / Llama 4 JSON calls (with or without ``<|python_tag|>`` and ``"type": "function"``)."""

    name = "llama3_json"
    family = "Llama 3.1, 3.2, 3.3, Llama 4"
    json_arguments = True

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        if text.find('"', lo, hi) < 0:
            return [], []
        excl = Ranges(excluded) if excluded else None
        starts = [m.start() for m in START_RE.finditer(text, lo, hi) if not (excl and excl.covering(m.start()) >= 0)]
        calls: list[CallDraft] = []
        pos = lo
        for k, s in enumerate(starts):
            if s < pos:
                continue  # inside the previous call (a nested object whose first key is `name`)
            nxt = next((x for x in starts[k + 1:] if x > s), hi)
            e, ok = _end_of(text, s, hi, nxt)
            if ok and not self._is_call(text, s, e):
                pos = e
                continue  # a JSON object that is no call (a tool result quoted, a plain answer)
            d = CallDraft(self.name, s, e)
            tag = text.rfind(PYTHON_TAG, max(lo, s - 40), s)
            if tag >= 0 and not text[tag + len(PYTHON_TAG):s].strip():
                d.start = tag
                d.span("structural", tag, tag + len(PYTHON_TAG))
                d.span("structural", tag + len(PYTHON_TAG), s)
            self._fill(d, text, s, e, rs, at_end=not ok and nxt >= hi and e >= len(text[:hi].rstrip()),
                       spans=spans)
            calls.append(d)
            pos = e
        return calls, []

    @staticmethod
    def _is_call(text: str, s: int, e: int) -> bool:
        try:
            obj = json.loads(text[s:e])
        except (ValueError, RecursionError):
            return False
        if not isinstance(obj, dict):
            return False
        if isinstance(obj.get("function"), dict):
            return "name" in obj["function"]
        return isinstance(obj.get("name"), str) and any(k in obj for k in ("parameters", "arguments"))

    def _fill(self, d: CallDraft, text: str, bs: int, be: int, rs: RuleSet, *, at_end: bool, spans: bool) -> None:
        body = text[bs:be]
        dec = decode_body(body, rs, at_end=at_end)
        for f in dec.found:
            if f.category == "format_mismatch":
                f.params["expected"] = self.name
            d.add(f.category, f.variant, bs + f.start, bs + f.end, blocker=f.blocker, **f.params)
        if dec.truncated:
            d.add("truncated_call", "inside_json", bs, be, where="inside the JSON object",
                  blocker="the output ends inside the call, the rest cannot be recovered")
        whole = (bs, bs + len(body.rstrip()))
        members = walk_valid(text, bs, be) if dec.obj is not MISSING and not dec.repaired else None
        if members is None:
            members = walk(text, bs, be)
        obj = dec.obj
        if dec.repaired:
            d.rerender = True
        if obj is MISSING:
            m = re.search(r'"name"\s*:\s*"([^"\\]{1,80})"', body)
            if m:
                d.name, d.name_start, d.name_end = m.group(1), bs + m.start(1), bs + m.end(1)
        elif not isinstance(obj, dict):
            d.add("invalid_arguments", "call_not_object", *whole, problem=f"is a JSON {type(obj).__name__}, not an "
                  "object", blocker="the block is not a single call object")
        else:
            if "name" not in obj and isinstance(obj.get("function"), dict):  # an OpenAI tool_calls entry
                inner = obj["function"]
                d.add("invalid_arguments", "function_key", *whole,
                      problem="wraps the call in `function` (OpenAI message shape)")
                obj = {"name": inner.get("name"), "parameters": inner.get("arguments", inner.get("parameters", {}))}
                d.rerender = True
            self._shape(d, obj, whole, members, text)
        if spans:
            json_spans(d, text, bs, be, members)
        d.spans.sort(key=lambda x: x[1])

    def _shape(self, d: CallDraft, obj: dict[str, Any], whole: tuple[int, int], members: list[Any],
               text: str) -> None:
        name = obj.get("name")
        if name is None:
            d.add("invalid_arguments", "missing_name", *whole, problem="has no `name`",
                  blocker="the call does not say which function it calls")
            return
        if not isinstance(name, str):
            d.add("invalid_arguments", "name_not_string", *whole,
                  problem=f"has a `name` that is a JSON {type(name).__name__}", blocker="the function name is not a string")
            return
        d.name = name
        for mb in members:
            if mb.depth == 1 and mb.key == "name" and mb.vstr:
                d.name_start, d.name_end = mb.vs + 1, mb.ve - 1
                break
        key = "parameters" if "parameters" in obj else ("arguments" if "arguments" in obj else None)
        if key is None:
            rest = {k: v for k, v in obj.items() if k not in ("name", "type", "id")}
            if rest:
                d.add("invalid_arguments", "flattened", *whole,
                      problem="puts the arguments next to `name` instead of inside `parameters`")
                d.json_args, d.rerender = rest, True
                for k, v in rest.items():
                    d.params.append(ParamDraft(str(k), -1, -1, None, v, -1, -1))
            else:
                d.add("invalid_arguments", "missing_arguments", *whole, problem="has no `parameters`")
                d.json_args, d.rerender = {}, True
            return
        if key == "arguments":
            d.add("invalid_arguments", "llama_arguments_key", *whole,
                  problem="passes its arguments under `arguments`; the Llama template writes `parameters`")
            d.rerender = True
        t = obj.get("type")
        if t is not None and t != "function":
            d.add("invalid_arguments", "llama_type", *whole, problem=f"says `\"type\": {json.dumps(t)}`; a call "
                  "is `\"type\": \"function\"` or has no `type`")
            d.rerender = True
        args = obj[key]
        if isinstance(args, str):
            try:
                inner = json.loads(args)
            except (ValueError, RecursionError):
                inner = MISSING
            if isinstance(inner, dict):
                d.add("invalid_arguments", "arguments_string", *whole,
                      problem=f"gives `{key}` as a JSON-encoded string")
                d.json_args, d.rerender = inner, True
                for k, v in inner.items():
                    d.params.append(ParamDraft(str(k), -1, -1, None, v, -1, -1))
                return
        if not isinstance(args, dict):
            d.add("invalid_arguments", "arguments_not_object", *whole,
                  problem=f"gives `{key}` as a JSON {type(args).__name__}, not an object",
                  blocker="the arguments are not an object")
            return
        d.json_args = args
        located = [mb for mb in members if mb.depth == 2 and mb.parent == key]
        if len({mb.key for mb in located}) == len(args) and all(mb.key in args for mb in located):
            for mb in located:
                d.params.append(ParamDraft(mb.key, mb.ks, mb.ke, None, args.get(mb.key), mb.vs, mb.ve))
        else:
            for k, v in args.items():
                d.params.append(ParamDraft(str(k), -1, -1, None, v, -1, -1))
        del text

    def render(self, name: str, arguments: Any) -> str:
        args = arguments if isinstance(arguments, dict) else {}
        return json.dumps({"name": name, "parameters": args}, ensure_ascii=False)


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (Llama3JsonFormat(),)

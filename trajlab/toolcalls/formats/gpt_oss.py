"""The gpt-oss call format (OpenAI harmony): ``<|start|>assistant<|channel|>commentary to=functions.NAME
<|constrain|>json<|message|>{json}<|call|>``.

A completion is a sequence of harmony messages; a message is a call when its header names a recipient
``to=functions.NAME`` (call-formats.md §1). ``<|call|>`` is a stop token, so a generation holds at most one call.
verl's ``gpt-oss`` parser accepts only the exact header the model is trained to write (``<|start|>assistant
<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>``) and drops every other spelling; each other
spelling is a ``malformed_tag`` variant here, repaired by rewriting the header:

* ``harmony_recipient_in_role`` -- ``<|start|>assistant to=functions.NAME<|channel|>commentary json`` (the chat
  template's rendering of a *past* call, not what the model generates);
* ``harmony_missing_constrain`` / ``harmony_constrain_space`` -- ``json`` without ``<|constrain|>``, or no space;
* ``harmony_missing_namespace`` -- ``to=NAME`` without ``functions.``;
* ``harmony_wrong_channel`` -- a call on the ``analysis`` (or ``final``) channel;
* ``harmony_wrong_end`` -- a call ended by ``<|end|>`` / ``<|return|>`` instead of ``<|call|>``;
* ``harmony_missing_recipient`` -- a ``commentary`` message with no recipient whose body is JSON (or that ends with
  ``<|call|>``): the model wrote a call's arguments but named no function, so no parser sees a call (not
  repairable: which function was meant is not written).

The harmony markers are special tokens, so a dump decoded with ``skip_special_tokens=True`` keeps only
``commentary to=functions.NAME json{...}``; that *stripped* form is read too (name and arguments only: the markers
it would need to be checked are gone). A first message that is a call (no ``<|start|>assistant`` before it: the
generation prompt holds it) is accepted, although verl's regex drops it (docs/explanation/reading-calls.md, "what is not checked").
"""

from __future__ import annotations

import json
import re
from typing import Any

from trajlab.toolcalls.draft import CallDraft, Edit, Issue, Ranges, snip
from trajlab.toolcalls.formats.base import ToolFormat
from trajlab.toolcalls.formats.toolcall_blocks import tool_call_blocks
from trajlab.toolcalls.jsonbody import fill_json_arguments
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.sectioned import read_json_tail

START, CHANNEL, CONSTRAIN, MESSAGE, CALL = "<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|call|>"
_ENDS = re.compile(r"<\|(call|end|return|start)\|>")
_MSG_BOUNDARY = re.compile(r"<\|(?:start|end|call|return|message)\|>")
_RECIPIENT = re.compile(r"[ \t]*to=([^\s<]*)")
_BUILTIN = re.compile(r"(?:browser|python|container)(?:\.[\w\-]+)*\Z")
#: the stripped form (markers removed by the decode): channel word, recipient, optional content type, then JSON
STRIPPED_RE = re.compile(r"(?:(?<=assistant)|(?<![A-Za-z]))(commentary|analysis)?[ \t]?to=(functions\.)?"
                         r"([^\s{\"<\[]{1,64}?)[ \t]?(json)?(?=[{\"\[])")
#: the stripped form of a ``commentary`` message with no recipient whose body is a JSON object
STRIPPED_NO_RECIPIENT_RE = re.compile(r"(?:(?<=assistant)|(?<![A-Za-z]))commentary[ \t]?(?:json)?[ \t]?(?=\{)")
_COMMENTARY_HEAD = re.compile(r"[ \t]*commentary(?:[ \t]|\Z)")


def canonical_header(name: str) -> str:
    return f"{START}assistant{CHANNEL}commentary to=functions.{name} {CONSTRAIN}json{MESSAGE}"


class GptOssFormat(ToolFormat):
    """Harmony tool calls (markers kept or stripped)."""

    name = "gpt_oss"
    tools_source = "prompt_typescript"
    models = "gpt-oss-20b, gpt-oss-120b"
    json_arguments = True

    def find_calls(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                   spans: bool = True, fast: bool = True) -> tuple[list[CallDraft], list[Issue]]:
        calls: list[CallDraft] = []
        if text.find(MESSAGE, lo, hi) >= 0:
            if text.find("to=", lo, hi) >= 0 or text.find("commentary", lo, hi) >= 0:
                calls = self._kept(text, lo, hi, rs, excluded, spans)
        elif text.find("to=", lo, hi) >= 0 or text.find("commentary", lo, hi) >= 0:
            calls = self._stripped(text, lo, hi, rs, excluded, spans)
        calls += tool_call_blocks(self.name, text, lo, hi, rs, [(d.start, d.end) for d in calls] + list(excluded),
                                  spans, fast)
        calls.sort(key=lambda d: d.start)
        return calls, []

    # -- markers kept ---------------------------------------------------------------------------------------

    def _kept(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
              spans: bool) -> list[CallDraft]:
        out: list[CallDraft] = []
        occ = Ranges(excluded) if excluded else None
        pos = lo
        while True:
            mi = text.find(MESSAGE, pos, hi)
            if mi < 0:
                break
            # the header: back to the previous message boundary, never before the previous call's end (two
            # calls with no `<|start|>` between them: a header reaching back to the turn's start made every call
            # span the ones before it, quadratic in time and memory)
            hs = pos
            for b in _MSG_BOUNDARY.finditer(text, pos, mi):
                hs = b.start() if b.group() == START else b.end()
            header = text[hs:mi]
            body_s = mi + len(MESSAGE)
            em = _ENDS.search(text, body_s, hi)
            pos = body_s
            if occ is not None and occ.covering(hs) >= 0:
                continue
            if "to=" in header:
                d = self._header(text, hs, mi, header)
            else:
                d = self._no_recipient(text, hs, mi, header, body_s, em is not None and em.group(1) == "call")
            if d is None:
                continue
            be = em.start() if em else hi
            body = text[body_s:be]
            at_end = em is None
            bend = body_s + len(body.rstrip()) if at_end else be
            d.span("structural", mi, body_s)
            fill_json_arguments(d, text, body_s, bend, rs, at_end=at_end, spans=spans, fmt=self.name)
            truncated = any(i.category == "truncated_call" for i in d.issues)
            if em is not None and em.group(1) == "call":
                d.end = em.end()
                d.span("structural", em.start(), em.end())
            elif em is not None and em.group(1) in ("end", "return"):
                d.end = em.end()
                d.span("structural", em.start(), em.end())
                tok = em.group()
                d.add("malformed_tag", "harmony_wrong_end", em.start(), em.end(), tag=tok, format=self.name,
                      canonical_hint=f"a call message ends with `{CALL}`",
                      edits=[Edit(em.start(), em.end(), CALL, f"replaced `{tok}` by `{CALL}`")])
            else:
                d.end = hi if truncated else bend
                if not truncated:
                    d.add("missing_call_close", "harmony_no_call_token", d.start, body_s, tag=snip(header, 30),
                          edits=[Edit(bend, bend, CALL, f"added `{CALL}`")])
            pos = d.end
            d.spans.sort(key=lambda x: x[1])
            out.append(d)
        return out

    def _header(self, text: str, hs: int, he: int, header: str) -> CallDraft | None:
        """Read a call header ``text[hs:he]``; None when the recipient is not a function (a built-in tool, the
        assistant itself)."""
        has_start = header.startswith(START)
        ci = header.find(CHANNEL)
        role = header[len(START) if has_start else 0: ci if ci >= 0 else len(header)]
        chan_part = header[ci + len(CHANNEL):] if ci >= 0 else ""
        co = chan_part.find(CONSTRAIN)
        before_c = chan_part[:co] if co >= 0 else chan_part
        ctype = chan_part[co + len(CONSTRAIN):].strip() if co >= 0 else ""
        rm_role = _RECIPIENT.search(role)
        rm_chan = _RECIPIENT.search(before_c)
        rm = rm_chan or rm_role
        if rm is None:
            return None
        recipient = rm.group(1)
        if recipient == "assistant" or _BUILTIN.match(recipient) or (role.strip() not in ("", "assistant")
                                                                  and rm_role is None):
            return None
        # absolute offsets of the recipient
        base = hs + (len(START) if has_start else 0) if rm is rm_role else hs + ci + len(CHANNEL)
        rs_, re_ = base + rm.start(1), base + rm.end(1)
        d = CallDraft(self.name, hs, he)
        issues: list[tuple[str, str]] = []
        channel = (before_c[:rm_chan.start()] if rm_chan else before_c).strip().split(" ")[0] if ci >= 0 else ""
        if rm is rm_role:
            issues.append(("harmony_recipient_in_role", "the recipient stands after the channel, not after the role "
                                                         "(that is how the chat template renders a past call)"))
        if channel != "commentary":
            issues.append(("harmony_wrong_channel", f"a function call goes to the `commentary` channel, not "
                                                    f"`{channel or 'none'}`"))
        junk = ""
        if rm_chan is not None:
            after = before_c[rm_chan.end():]
            junk = after.strip()
            if junk == "json" and co < 0:
                junk = ""
            if co >= 0 and not after.endswith(" ") and not junk:
                issues.append(("harmony_constrain_space", f"a space separates the recipient from `{CONSTRAIN}`"))
        if co < 0:
            issues.append(("harmony_missing_constrain", f"the content type is written `{CONSTRAIN}json`"))
        elif ctype != "json":
            issues.append(("harmony_missing_constrain", f"the content type is `{CONSTRAIN}json`, not `{ctype}`"))
        name = recipient
        ns = rs_
        if recipient.startswith("functions."):
            name, ns = recipient[10:], rs_ + 10
        else:
            issues.append(("harmony_missing_namespace", "the recipient of a function call is `functions.NAME`"))
        d.name, d.name_start, d.name_end = name, ns, re_
        d.span("structural", hs, ns)
        d.span("function_name", ns, re_)
        d.span("structural", re_, he)
        if junk:
            js = text.find(junk, re_, he)
            d.add("stray_attribute", "harmony_header_junk", js, js + len(junk), tag=snip(header, 40), attribute=junk,
                  canonical=canonical_header(name or "NAME"),
                  edits=[Edit(hs, he, canonical_header(name)[:-len(MESSAGE)], "rewrote the message header")] if not issues else [],
                  _covered=bool(issues))
        for k, (variant, hint) in enumerate(issues):
            d.add("malformed_tag", variant, hs, he, tag=snip(header, 40), format=self.name, canonical_hint=hint,
                  edits=[Edit(hs, he, canonical_header(name)[:-len(MESSAGE)], "rewrote the message header as "
                                                             "`<|start|>assistant<|channel|>commentary to=functions."
                                                             "NAME <|constrain|>json<|message|>`")] if k == 0 else [],
                  _covered=k > 0)
        return d

    def _no_recipient(self, text: str, hs: int, he: int, header: str, body_s: int, ends_call: bool) -> CallDraft | None:
        """A ``commentary`` message header ``text[hs:he]`` with no recipient, read as a call when its body is a
        JSON object or it ends with ``<|call|>`` (a preamble to the user is plain text); None otherwise."""
        ci = header.find(CHANNEL)
        role = header[len(START) if header.startswith(START) else 0: ci if ci >= 0 else len(header)]
        if ci < 0 or role.strip() not in ("", "assistant") or not _COMMENTARY_HEAD.match(header, ci + len(CHANNEL)):
            return None
        if not ends_call and not text[body_s:body_s + 64].lstrip().startswith("{"):
            return None
        d = CallDraft(self.name, hs, he)
        d.span("structural", hs, he)
        d.add("malformed_tag", "harmony_missing_recipient", hs, he, tag=snip(header, 40), format=self.name,
              canonical_hint="a call names its function after the channel: `commentary to=functions.NAME`",
              blocker="the message names no function, so which tool was meant is not written")
        return d

    # -- markers stripped -----------------------------------------------------------------------------------

    def _stripped(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                  spans: bool) -> list[CallDraft]:
        out: list[CallDraft] = []
        occ = Ranges(excluded) if excluded else None
        for m in STRIPPED_RE.finditer(text, lo, hi):
            if (occ is not None and occ.covering(m.start()) >= 0) or (out and m.start() < out[-1].end):
                continue
            name = m.group(3)
            if name == "assistant" or (m.group(2) is None and _BUILTIN.match(name)):
                continue
            bs = m.end()
            end = read_json_tail(text, bs, hi)
            be = end if end >= 0 else bs + len(text[bs:hi].rstrip())
            d = CallDraft(self.name, m.start(), be)
            d.span("structural", m.start(), m.start(3))
            d.name, d.name_start, d.name_end = name, m.start(3), m.end(3)
            d.span("function_name", m.start(3), m.end(3))
            d.span("structural", m.end(3), bs)
            if m.group(1) == "analysis":
                d.add("malformed_tag", "harmony_wrong_channel", m.start(), m.end(3), tag=snip(m.group(), 40),
                      format=self.name, canonical_hint="a function call goes to the `commentary` channel")
            if m.group(2) is None:
                d.add("malformed_tag", "harmony_missing_namespace", m.start(), m.end(3), tag=snip(m.group(), 40),
                      format=self.name, canonical_hint="the recipient of a function call is `functions.NAME`")
            fill_json_arguments(d, text, bs, be, rs, at_end=end < 0, spans=spans, fmt=self.name)
            d.rerender = True
            d.spans.sort(key=lambda x: x[1])
            out.append(d)
        if text.find("commentary", lo, hi) >= 0:
            out = self._stripped_no_recipient(text, lo, hi, rs, excluded, spans, out)
        return out

    def _stripped_no_recipient(self, text: str, lo: int, hi: int, rs: RuleSet, excluded: list[tuple[int, int]],
                               spans: bool, found: list[CallDraft]) -> list[CallDraft]:
        """``found`` plus every stripped ``commentary`` message with no recipient whose body is a JSON object."""
        taken = Ranges([*excluded, *((d.start, d.end) for d in found)])
        out = list(found)
        for m in STRIPPED_NO_RECIPIENT_RE.finditer(text, lo, hi):
            if taken.covering(m.start()) >= 0:
                continue
            bs = m.end()
            end = read_json_tail(text, bs, hi)
            be = end if end >= 0 else bs + len(text[bs:hi].rstrip())
            d = CallDraft(self.name, m.start(), be)
            d.span("structural", m.start(), bs)
            d.add("malformed_tag", "harmony_missing_recipient", m.start(), bs, tag=snip(m.group(), 40),
                  format=self.name,
                  canonical_hint="a call names its function after the channel: `commentary to=functions.NAME`",
                  blocker="the message names no function, so which tool was meant is not written")
            fill_json_arguments(d, text, bs, be, rs, at_end=end < 0, spans=spans, fmt=self.name)
            d.spans.sort(key=lambda x: x[1])
            out.append(d)
        out.sort(key=lambda d: d.start)
        return out

    def render(self, name: str, arguments: Any) -> str:
        args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return f"{canonical_header(name)}{args}{CALL}"


FORMATS_PROVIDED: tuple[ToolFormat, ...] = (GptOssFormat(),)

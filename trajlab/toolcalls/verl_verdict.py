"""verl's reading of a call compared with ours: does verl execute it as intended, differently, or not at all.

:mod:`.verl_parser` reproduces verl's parser on the turn; this module matches its calls to one call draft,
says in a sentence what verl executes, and records the findings that come from the two readings disagreeing
(tag text inside a value that verl reads as markup).
"""

from __future__ import annotations

from typing import Any

from trajlab.model import Finding
from trajlab.toolcalls.draft import CallDraft, Edit, snip
from trajlab.toolcalls.verl_call import VerlCall
from trajlab.toolcalls.verl_parser import (
    AS_INTENDED,
    DIFFERENTLY,
    DROPPED,
    VERL_VERSION,
    describe,
    same_value,
)


def verl_verdict(d: CallDraft, args: Any, vcalls: list[VerlCall] | None) -> tuple[str | None, list[VerlCall]]:
    """How verl executes the call ``d`` (``as_intended`` | ``differently`` | ``dropped``; None: not modelled for
    the turn's format), and verl's calls read from its text."""
    if vcalls is None:
        return None, []
    mine = [v for v in vcalls if d.start <= v.anchor < d.end]
    if not mine:
        return DROPPED, mine
    if len(mine) == 1 and mine[0].name == d.name and same_value(mine[0].arguments, args):
        return AS_INTENDED, mine
    return DIFFERENTLY, mine


def verl_does(fmt: str, verdict: str, mine: list[VerlCall], vcalls: list[VerlCall] | None) -> str:
    """One sentence: what verl's parser executes for the call."""
    who = f"verl {VERL_VERSION}'s {fmt} parser"
    if verdict == DROPPED:
        end = " and, with no other call in the turn, the trajectory ends" if not vcalls else ""
        return f"{who} executes no call for it{end}"
    if verdict == AS_INTENDED:
        return f"{who} executes it as written"
    more = f" (and {len(mine) - 1} more call{'s' if len(mine) > 2 else ''} read from its text)" if len(mine) > 1 \
        else ""
    return f"{who} executes `{describe(mine[0])}`{more}"


def verl_issues(d: CallDraft, fmt: str, verdict: str, mine: list[VerlCall], vcalls: list[VerlCall] | None,
                text: str) -> None:
    """The findings that come from comparing the two readings of ``d``.

    Tag text inside a value: ``literal_tag_text`` (info when verl reads the call as intended, an error when it
    cuts, merges or drops it; ``nested_call`` when the text is a whole call). (A call that verl drops or
    executes differently with no error finding of its own gets ``verl_mismatch`` in :func:`finish_call`.)"""
    does = verl_does(fmt, verdict, mine, vcalls)
    if d.literals:
        s, e = d.literals[0]
        param = next((p.name for p in d.params if p.value_start <= s < max(p.value_end, p.value_start + 1)), "")
        tags = ", ".join(dict.fromkeys(f"`{snip(text[a:b], 30)}`" for a, b in d.literals[:4]))
        if verdict == AS_INTENDED:
            d.add("literal_tag_text", "as_intended", s, e, param=param, tags=tags, verl=does)
            return
        whole = all(any(text.startswith(tag, a) for a, _ in d.literals)
                    for tag in ("<tool_call>", "<function=", "</tool_call>"))
        if d.fmt == "hermes" and all(text.startswith("</", a) or text.startswith("<tool_call>", a)
                                     for a, _ in d.literals):
            # JSON can spell `</` as `<\/`: verl's regex no longer sees the tag, json.loads reads the same text
            edits = [Edit(a + 1, a + 1, "\\", f"escaped `{snip(text[a:b], 30)}` as `<\\/...`")
                     for a, b in d.literals if text.startswith("</", a)]
            d.add("literal_tag_text", "dropped" if verdict == DROPPED else "mangled", s, e, param=param, tags=tags,
                  verl=does, edits=edits,
                  blocker=None if edits else "verl reads the tag text in the value as markup")
            return
        cat, variant = ("nested_call", "in_value") if whole else (
            "literal_tag_text", "dropped" if verdict == DROPPED else "mangled")
        d.add(cat, variant, s, e, param=param, tags=tags, verl=does,
              blocker="the value holds tag text that verl's parser reads as markup, and raw XML values have no escape")
        return


def say_what_verl_does(findings: list[Finding], fmt: str, verdict: str, mine: list[VerlCall],
                       vcalls: list[VerlCall] | None) -> None:
    """Append what verl executes to the message of the call's most severe finding (as a second line)."""
    if not findings:
        return
    order = {"error": 0, "warning": 1, "info": 2}
    f = min(findings, key=lambda x: order.get(x.severity, 3))
    if f.category in ("verl_mismatch", "verl_conversion_divergence") and "verl" in f.message:
        return
    f.message = f"{f.message.rstrip()}\nWhat verl does: {verl_does(fmt, verdict, mine, vcalls)}."

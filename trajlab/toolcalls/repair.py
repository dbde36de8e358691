"""The repair of one call: the edits of its issues applied, or the call re-rendered canonically.

A repair is offered only when every error/warning of the call is repairable, and kept only when the repaired
text classifies as one call with no error or warning. That re-classification is the turn pipeline itself,
which imports this module: the caller passes it in as ``reclassify``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trajlab.model import Finding
from trajlab.toolcalls.call_checks import call_arguments
from trajlab.toolcalls.draft import MISSING, CallDraft, Edit
from trajlab.toolcalls.findings import BAD_SEVERITIES
from trajlab.toolcalls.formats import FORMATS
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.type_checks import intended_value

#: the categories that are about where a call stands, not what it says
_PLACEMENT = ("text_after_call", "call_inside_think", "fabricated_tool_response")

#: classifies a repaired call text as the pipeline does (``repaired, target, tools, index, rs``): the number of
#: calls, the arguments of the first, and the categories of its error/warning findings (sorted)
Reclassify = Callable[[str, str, Any, ToolIndex | None, RuleSet], tuple[int, Any, list[str]]]


def _edit_key(e: Edit) -> tuple[int, int]:
    return e.start, e.end


def _apply(text: str, start: int, end: int, edits: list[Edit]) -> str | None:
    """``text[start:end]`` with ``edits`` (sorted by :func:`_edit_key`) applied; None when they overlap."""
    out: list[str] = []
    pos = start
    for e in edits:
        if e.start < pos or e.end > end or e.start < start:
            return None  # overlapping or out-of-call edits: not one clean repair
        out.append(text[pos:e.start])
        out.append(e.new)
        pos = e.end
    out.append(text[pos:end])
    return "".join(out)


def repair_call(d: CallDraft, findings: list[Finding], text: str, fmt: str, name: str | None, renames: dict[str, str],
                props: dict[str, Any], tools: Any, index: ToolIndex | None, rs: RuleSet, reclassify: Reclassify,
                recheck: tuple[int, Any, list[str]] | None = None) -> tuple[str | None, Any, str | None]:
    """The repair of a call with errors/warnings: (repaired text, its arguments, note), or (None, None, why not).

    A repair is kept only if ``reclassify`` (the pipeline run on the repaired text:
    ``analyze._reclassify``) finds the repaired text
    one call with no error or warning. ``recheck`` is what it would answer for the repaired text, when the caller
    knows it."""
    bad = [iss for iss, f in zip(d.issues, findings, strict=False) if f.severity in BAD_SEVERITIES]
    blockers: list[str] = []
    placement_only = True  # every error/warning is about where the call is, not what it says
    unedited = False  # an error/warning that no text edit fixes (and no other issue covers)
    for iss in bad:
        why = iss.blocker
        if why is None:
            cat = rs.categories.get(iss.category)
            if cat is not None and not cat.repairable and not iss.params.get("_covered"):
                why = f"{iss.category} is not repairable (rules taxonomy)"
        if why and why not in blockers:
            blockers.append(why)
        if iss.category not in _PLACEMENT:
            placement_only = False
            if not iss.edits and not iss.params.get("_covered"):
                unedited = True
    if blockers:
        return None, None, "no repair: " + "; ".join(blockers)
    target = fmt if fmt in FORMATS else (d.fmt if d.fmt in FORMATS else None)
    if target is None:
        return None, None, "no repair: the trajectory's call format is unknown"
    if name is None:
        return None, None, "no repair: the function name cannot be recovered"
    needs_render = d.fmt != target or d.rerender or unedited
    what: list[str]
    if needs_render and not placement_only:
        fmt_mod = FORMATS[target]
        if d.json_args is MISSING and all(p.raw is not None for p in d.params):
            raw_params: dict[str, str] = {}
            for p in d.params:  # last value wins, like every parser
                raw_params[renames.get(p.name, p.name)] = p.raw or ""
            if target == "qwen3_coder":
                body = fmt_mod.render_raw(name, list(raw_params.items()))
            else:
                body = fmt_mod.render(name, {k: intended_value(v, k, props) for k, v in raw_params.items()})
        else:
            args = call_arguments(d, props)
            if not isinstance(args, dict):
                return None, None, "no repair: the arguments cannot be recovered as an object"
            body = fmt_mod.render(name, {renames.get(k, k): v for k, v in args.items()})
        repaired = body
        what = [f"re-rendered as a canonical {target} call"]
        if name != d.name and d.name is not None:
            what.append(f"function `{d.name}` -> `{name}`")
        what += [f"parameter `{a}` -> `{b}`" for a, b in renames.items()]
    else:
        edits = [e for iss in d.issues for e in iss.edits]
        edits.sort(key=_edit_key)
        got = _apply(text, d.start, d.end, edits)
        if got is None:
            return None, None, "no repair: the fixes overlap, so more than one repair is plausible"
        repaired = got.strip()
        if placement_only:
            what = ["the call text itself is well-formed; " + (
                "move it after </think>" if any(i.category == "call_inside_think" for i in bad)
                else "drop the text after it")]
        else:
            what = [e.what for e in edits if e.what]
    n_calls, arguments, left = recheck if recheck is not None else reclassify(repaired, target, tools, index, rs)
    if n_calls != 1 or left:
        why = ", ".join(left) if left else f"{n_calls} calls"
        return None, None, f"no repair: the automatic fix still leaves {why}"
    return repaired, arguments, "repaired: " + "; ".join(dict.fromkeys(what))

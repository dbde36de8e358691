"""One call's verdict: its checks, verl's reading of it, its findings and its repair, as a :class:`ParsedCall`.

:func:`finish_call` is step 4-5 of the turn pipeline (:mod:`.analyze`) for one call draft; the checks are in
:mod:`.call_checks`, the comparison with verl's parser in :mod:`.verl_verdict`, the repair in :mod:`.repair`.
"""

from __future__ import annotations

from typing import Any

from trajlab.model import Finding, ParsedCall
from trajlab.toolcalls.call_checks import call_arguments, check_name, check_params
from trajlab.toolcalls.draft import CallDraft, parsed_call
from trajlab.toolcalls.findings import BAD_SEVERITIES, call_status, issue_finding
from trajlab.toolcalls.formats import FORMATS
from trajlab.toolcalls.repair import Reclassify, repair_call
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_call import VerlCall
from trajlab.toolcalls.verl_parser import AS_INTENDED, DIFFERENTLY, DROPPED
from trajlab.toolcalls.verl_verdict import say_what_verl_does, verl_does, verl_issues, verl_verdict


def finish_call(i: int, d: CallDraft, text: str, fmt: str, index: ToolIndex | None, rs: RuleSet, tools: Any,
                repair: bool, vcalls: list[VerlCall] | None,
                reclassify: Reclassify) -> tuple[ParsedCall, list[Finding]]:
    fmt_key = fmt if fmt in FORMATS else (d.fmt if d.fmt in FORMATS else "none")
    for iss in d.issues:
        if iss.category == "foreign_format":
            iss.params.setdefault("expected", fmt if fmt in FORMATS else "trainer's")
    matched, repair_name = check_name(d, index, rs)
    tool = index.tools.get(matched) if index is not None and matched is not None else None
    props = tool.intended if tool is not None else {}
    renames: dict[str, str] = {}
    args = call_arguments(d, props, tool.required if tool is not None else ())
    if tool is not None and args is not None:
        renames = check_params(d, tool, rs, args)
    verdict, mine = verl_verdict(d, args, vcalls)
    if verdict is not None:
        verl_issues(d, fmt, verdict, mine, vcalls, text)
    findings: list[Finding] = []
    bad: set[str] = set()
    sevs: set[str] = set()
    for iss in d.issues:
        f = issue_finding(rs, iss, fmt_key, i)
        findings.append(f)
        if f.severity in BAD_SEVERITIES:
            bad.add(f.category)
            sevs.add(f.severity)
    if verdict is not None and verdict != AS_INTENDED and not d.literals:
        if not any(f.severity == "error" or f.category == "verl_conversion_divergence" for f in findings):
            # verl drops or mangles the call while no finding says so with an error: say it
            iss = d.add("verl_mismatch", "dropped" if verdict == DROPPED else "differently", d.start, d.end,
                        verl=verl_does(fmt, verdict, mine, vcalls),
                        blocker="verl's parser reads this call text differently from how it reads")
            f = issue_finding(rs, iss, fmt_key, i)
            findings.append(f)
            bad.add(f.category)
            sevs.add(f.severity)
        else:
            say_what_verl_does(findings, fmt, verdict, mine, vcalls)
    cats = sorted(bad)
    repaired = repaired_args = note = None
    if cats and repair:
        repaired, repaired_args, note = repair_call(d, findings, text, fmt, repair_name, renames, props, tools,
                                                    index, rs, reclassify)
    pc = parsed_call(i, d.fmt, text[d.start:d.end], d.start, d.end, d.name, matched, args,
                     call_status(sevs), cats, repaired, repaired_args, note)
    pc.verl_executes = verdict
    if verdict == DIFFERENTLY:
        pc.verl_function_name, pc.verl_arguments = mine[0].name, mine[0].arguments
    return pc, findings

"""Turn-level checks run after the calls are classified: invented tags and the user's regex rules.

User regex rules read the tiled spans (:mod:`.tiling`), so they run last.
"""

from __future__ import annotations

from trajlab.model import Finding, ParsedCall, Span
from trajlab.toolcalls.draft import CallDraft, Issue, snip
from trajlab.toolcalls.findings import BAD_SEVERITIES, issue_finding, worse_status
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex


def invented_tags(text: str, think: list[tuple[int, int, int, int, int, int]], rs: RuleSet, index: ToolIndex | None,
                  fmt_key: str) -> list[Finding]:
    out: list[Finding] = []
    for m in rs.invented_re.finditer(text):
        if any(cs <= m.start() < ce for cs, ce, *_ in think):
            continue
        tag = m.group(1)
        if tag in rs.invented_allowed:
            continue
        variant = "tool_named" if index is not None and tag in index.tools else "element"
        out.append(issue_finding(rs, Issue("invented_tag", variant, m.start(), m.end(), {"tag": tag}), fmt_key, None))
        if len(out) >= 3:
            break
    return out


def user_rules(text: str, rs: RuleSet, spans: list[Span], calls: list[ParsedCall], drafts: list[CallDraft],
               fmt_key: str) -> list[Finding]:
    out: list[Finding] = []
    value_param: dict[int, str] = {}
    for d in drafts:
        for p in d.params:
            if p.value_start >= 0:
                value_param[p.value_start] = p.name
    for rule in rs.regex_rules:
        if rule.formats and fmt_key not in rule.formats:
            continue
        regions: list[tuple[int, int, int | None]] = []
        for target in rule.applies_to:
            if target == "turn":
                regions.append((0, len(text), None))
            elif target == "call":
                regions += [(c.start, c.end, c.call_index) for c in calls]
            else:
                for sp in spans:
                    if sp.kind != target:
                        continue
                    if rule.params is not None and value_param.get(sp.start) not in rule.params:
                        continue
                    regions.append((sp.start, sp.end, sp.call_index))
        for s, e, ci in regions:
            if rule.functions is not None and (ci is None or calls[ci].function_name not in rule.functions):
                continue
            for m in rule.pattern.finditer(text, s, e):
                if m.end() <= m.start():
                    continue
                sev = rule.severity or rs.categories[rule.category].severity
                msg = rule.message or rs.message(rule.category, None, {"match": snip(m.group(), 40)})
                try:
                    msg = msg.format(match=snip(m.group(), 40))
                except (KeyError, IndexError, ValueError):
                    pass
                out.append(Finding(rule.category, sev, m.start(), m.end(), msg, f"user/{rule.id}", ci))  # type: ignore[arg-type]
                if ci is not None and sev in BAD_SEVERITIES and rule.category not in calls[ci].categories:
                    calls[ci].categories = sorted([*calls[ci].categories, rule.category])
                    calls[ci].status = worse_status(calls[ci].status, sev)
    return out

"""Issues as findings: an :class:`~.draft.Issue` described by the rule pack (severity, message, rule id).

Also the severities that make a call malformed (:data:`BAD_SEVERITIES`) and the order findings are reported in.
"""

from __future__ import annotations

from trajlab.model import Finding
from trajlab.toolcalls.draft import Issue
from trajlab.toolcalls.ruleset import RuleSet

BAD_SEVERITIES = ("error", "warning")


def finding_key(f: Finding) -> tuple[int, int, str]:
    return f.start, f.end, f.category


def issue_finding(rs: RuleSet, iss: Issue, fmt_key: str, call_index: int | None) -> Finding:
    sev, msg, rule_id = rs.describe(iss.category, iss.variant, fmt_key, iss.params)
    return Finding(iss.category, sev, iss.start, iss.end, msg, rule_id, call_index)  # type: ignore[arg-type]

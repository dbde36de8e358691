"""Issues as findings: an :class:`~.draft.Issue` described by the rule pack (severity, message, rule id).

Also the severities that put a finding on a call (:data:`BAD_SEVERITIES`), the call status they give
(:func:`call_status`: an error makes it malformed, warnings alone a warning) and the order findings are reported in.
"""

from __future__ import annotations

from trajlab.model import CallStatus, Finding
from trajlab.toolcalls.draft import Issue
from trajlab.toolcalls.ruleset import RuleSet

BAD_SEVERITIES = ("error", "warning")


def call_status(severities: list[str] | tuple[str, ...] | set[str]) -> CallStatus:
    """A call's status from the severities of its findings: ``malformed`` when one is an error (it breaks),
    ``warning`` when the worst is a warning (it runs, but breaks the schema or the prompt's rules), else ``ok``."""
    if "error" in severities:
        return "malformed"
    return "warning" if "warning" in severities else "ok"


def worse_status(status: CallStatus, severity: str) -> CallStatus:
    """``status`` after one more finding of ``severity`` on the call (a status never gets better)."""
    new = call_status((severity,))
    order = ("ok", "warning", "malformed")
    return new if order.index(new) > order.index(status) else status


def finding_key(f: Finding) -> tuple[int, int, str]:
    return f.start, f.end, f.category


def issue_finding(rs: RuleSet, iss: Issue, fmt_key: str, call_index: int | None) -> Finding:
    sev, msg, rule_id = rs.describe(iss.category, iss.variant, fmt_key, iss.params)
    return Finding(iss.category, sev, iss.start, iss.end, msg, rule_id, call_index)  # type: ignore[arg-type]

"""Terminal and JSON presentation of a :class:`~trajlab.model.TurnAnalysis` (for ``trajlab rules check``)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from trajlab.model import TurnAnalysis

_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_ESCAPE = re.compile(r"\\(n|t|r|\"|\\|u[0-9a-fA-F]{4})")


def unescape(text: str) -> str:
    """Undo the escaping of a snippet pasted from an issue (``\\n``, ``\\t``, ``\\"``, ``\\uXXXX``)."""

    def rep(m: re.Match[str]) -> str:
        g = m.group(1)
        return {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}.get(g) or chr(int(g[1:], 16))

    return _ESCAPE.sub(rep, text)


def analysis_to_dict(ta: TurnAnalysis, *, text: str, tool_format: str, schema_checked: bool) -> dict[str, Any]:
    """Plain-data form of an analysis (``--json``)."""
    return {
        "tool_format": tool_format,
        "schema_checked": schema_checked,
        "text": text,
        "calls": [dataclasses.asdict(c) for c in ta.calls],
        "findings": [dataclasses.asdict(f) for f in ta.findings],
        "spans": [dataclasses.asdict(s) for s in ta.spans],
    }


def _excerpt(text: str, start: int, end: int, context_lines: int = 0) -> Any:
    """The lines around ``[start, end)`` with the span highlighted (a rich Text)."""
    from rich.text import Text

    ls = text.rfind("\n", 0, start) + 1
    le = text.find("\n", max(end - 1, start))
    le = len(text) if le < 0 else le
    for _ in range(context_lines):
        p = text.rfind("\n", 0, max(ls - 1, 0))
        ls = p + 1 if ls > 0 else 0
    chunk = text[ls:le]
    lines = chunk.split("\n")
    if len(lines) > 6:  # long spans: first and last lines only
        head = "\n".join(lines[:3])
        tail = "\n".join(lines[-2:])
        t = Text("    ")
        t.append(head + "\n    …\n    " + tail)
        return t
    t = Text()
    pos = ls
    for i, line in enumerate(lines):
        if i:
            t.append("\n")
        t.append("    ")
        a, b = pos, pos + len(line)
        s, e = max(start, a), min(end, b)
        if e > s:
            t.append(text[a:s])
            t.append(text[s:e], style="bold reverse red")
            t.append(text[e:b])
        elif start == end and a <= start <= b:
            t.append(text[a:start])
            t.append("▏", style="bold red")
            t.append(text[start:b])
        else:
            t.append(line)
        pos = b + 1
    return t


def print_analysis(ta: TurnAnalysis, *, text: str, tool_format: str, schema_checked: bool, console: Any) -> None:
    """Human-readable report: calls, then every finding with its span highlighted, then repairs."""
    from rich.text import Text

    head = Text(f"format: {tool_format}   ")
    head.append("schema checks: on" if schema_checked else "schema checks skipped (no --tools)",
                style=None if schema_checked else "dim")
    console.print(head)
    if not ta.calls:
        console.print("no tool call found")
    for c in ta.calls:
        line = Text(f"call {c.call_index}: ")
        line.append(f"{c.function_name!s}", style="bold")
        if c.matched_tool and c.matched_tool != c.function_name:
            line.append(f" -> {c.matched_tool}")
        line.append(f"  [{c.format}]  ")
        line.append(c.status, style="green" if c.status == "ok" else "bold red")
        if c.categories:
            line.append("  " + ", ".join(c.categories))
        console.print(line)
        console.print(Text(f"    arguments: {c.arguments!r}", overflow="fold"))
    for f in ta.findings:
        t = Text("\n")
        t.append(f"{f.severity:<7} ", style=_SEV_STYLE.get(f.severity))
        t.append(f.category, style="bold")
        t.append(f"  chars {f.start}-{f.end}  ({f.rule_id})", style="dim")
        console.print(t)
        console.print(_excerpt(text, f.start, f.end))
        console.print(Text("    " + f.message, style="italic"), soft_wrap=True)
    for c in ta.calls:
        if c.repaired is not None:
            console.print(Text(f"\nrepaired call {c.call_index} ({c.repair_note}):", style="green"))
            console.print(Text(c.repaired), markup=False, highlight=False)
            console.print(Text(f"    parses to: {c.repaired_arguments!r}", overflow="fold"))
        elif c.repair_note:
            console.print(Text(f"\ncall {c.call_index}: {c.repair_note}", style="dim"))

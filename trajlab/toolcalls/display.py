"""Terminal and JSON presentation of a :class:`~trajlab.model.TurnAnalysis` (for ``trajlab rules check``)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from trajlab.model import TurnAnalysis

_SEV_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
#: the terminal view shows at most this many characters of one value or excerpt line (``--json`` has them all)
SHOW_CHARS = 2000


def clip(text: str, limit: int = SHOW_CHARS) -> str:
    """``text`` cut to ``limit`` characters with a note of what was left out (a 20 MB value prints at once)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters; --json prints everything)"
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
    """The lines around ``[start, end)`` with the span highlighted (a rich Text); a huge span or line is shown
    by its ends (at most :data:`SHOW_CHARS` characters in all)."""
    from rich.text import Text

    if end - start > SHOW_CHARS or len(text) > 4 * SHOW_CHARS:
        half = SHOW_CHARS // 2
        lo, hi = max(0, start - 80), min(len(text), end + 80)
        if hi - lo <= SHOW_CHARS:
            t = Text("    " + text[lo:start])
            t.append(text[start:end] or "▏", style="bold reverse red")
            t.append(text[end:hi])
            return t
        t = Text("    ")
        t.append(text[start:start + half], style="bold reverse red")
        t.append(f" … ({end - start - 2 * half:,} characters) … ")
        t.append(text[end - half:end], style="bold reverse red")
        return t

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
        line.append(clip(f"{c.function_name!s}", 200), style="bold")
        if c.matched_tool and c.matched_tool != c.function_name:
            line.append(f" -> {c.matched_tool}")
        line.append(f"  [{c.format}]  ")
        line.append(c.status, style={"ok": "green", "warning": "yellow"}.get(c.status, "bold red"))
        if c.categories:
            line.append("  " + ", ".join(c.categories))
        console.print(line)
        console.print(Text(f"    arguments: {clip(repr(c.arguments))}", overflow="fold"))
    for f in ta.findings:
        t = Text("\n")
        t.append(f"{f.severity:<7} ", style=_SEV_STYLE.get(f.severity))
        t.append(f.category, style="bold")
        t.append(f"  chars {f.start}-{f.end}  ({f.rule_id})", style="dim")
        console.print(t)
        console.print(_excerpt(text, f.start, f.end))
        console.print(Text("    " + clip(f.message), style="italic"), soft_wrap=True)
    for c in ta.calls:
        if c.repaired is not None:
            console.print(Text(f"\nrepaired call {c.call_index} ({c.repair_note}):", style="green"))
            console.print(Text(clip(c.repaired)), markup=False, highlight=False)
            console.print(Text(f"    parses to: {clip(repr(c.repaired_arguments))}", overflow="fold"))
        elif c.repair_note:
            console.print(Text(f"\ncall {c.call_index}: {c.repair_note}", style="dim"))

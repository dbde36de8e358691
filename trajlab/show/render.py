"""How ``trajlab show`` draws a trajectory with rich: the header, the turns with the calls tinted and each finding's
span highlighted in place, the findings under their turn, and each repair next to its call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajlab.console import literal, literal_with_offsets
from trajlab.show.load import Loaded

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import RenderableType
    from rich.text import Text

#: Styles (also used by the tests to find the highlighted spans in captured output).
STYLE_CALL = "on #1d2b3a"


STYLE_SPAN = {"error": "bold white on red3", "warning": "bold black on yellow3", "info": "underline"}


STYLE_MARK = {"error": "bold red", "warning": "bold yellow", "info": "dim"}


STYLE_TOOL = "dim"

#: without ``--full``: an assistant turn longer than this shows its first and last half (characters)
MAX_TURN_CHARS = 20_000
#: without ``--full``: the findings listed and the malformed calls drawn per turn
MAX_FINDINGS = 60
MAX_CALL_BLOCKS = 20


def _cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and how many more there are (``limit`` 0: all of it)."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit:,} more characters; --full)"



def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _header(data: Loaded) -> RenderableType:
    from rich.markup import escape
    from rich.table import Table

    t = data.trajectory
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_column(style="bold")
    grid.add_column()
    where = f"{t['source_path']}:{t['source_line']}"
    bad = t.get("n_malformed_calls") or 0
    calls_txt = f"{t.get('n_calls')} ({bad} malformed)"
    grid.add_row("trajectory", escape(str(t["trajectory_id"])), "source", escape(where))
    grid.add_row("step", f"{_fmt(t.get('step'))} · {escape(str(t.get('split')))}", "score", _fmt(t.get("score")))
    if t.get("run") is not None:
        grid.add_row("run", escape(str(t["run"])), "", "")
    grid.add_row("tool calls", f"[red]{calls_txt}[/]" if bad else calls_txt, "format",
                 escape(_fmt(t.get("tool_format"))))
    grid.add_row("final answer", _fmt(t.get("has_final_answer")), "truncated", _fmt(t.get("truncated")))
    if t.get("end_reason"):  # why it is truncated / has no final answer (older tables have no end_reason)
        from trajlab.ending import END_REASONS

        why = END_REASONS.get(str(t["end_reason"]), str(t["end_reason"]))
        grid.add_row("why", escape(why), "", "")
    if data.position:
        i, n = data.position  # i is 0-based, as --index takes it
        grid.add_row("position", f"--index {i}: {i + 1} of {n} at this step", "", "")
    return grid


def _highlight(text: str, offset: int, calls: list[dict[str, Any]], marks: list[tuple[int, dict[str, Any]]]) -> Text:
    """The turn text with calls tinted, finding spans highlighted and numbered markers after each span."""
    from rich.text import Text

    shown, at = literal_with_offsets(text)  # (rich would drop \r, BEL, ... from a Text: make them visible first)
    body = Text(shown)
    n = len(text)

    def place(i: int) -> int:
        i = max(0, min(n, i))
        return i if at is None else at[i]

    for c in calls:
        body.stylize(STYLE_CALL, place(c["char_start"] - offset), place(c["char_end"] - offset))
    inserts: list[tuple[int, Text]] = []
    for num, f in marks:
        s, e = place(f["char_start"] - offset), place(f["char_end"] - offset)
        sev = f.get("severity", "error")
        if e > s:
            body.stylize(STYLE_SPAN.get(sev, STYLE_SPAN["error"]), s, e)
        inserts.append((e, Text(f"⟨{num}⟩" if e > s else f"▲⟨{num}⟩", style=STYLE_MARK.get(sev, "bold red"))))
    if not inserts:
        return body
    inserts.sort(key=lambda x: x[0])
    pieces = body.divide([pos for pos, _ in inserts])  # one pass over the text, whatever the number of marks
    out = Text()
    for k, piece in enumerate(pieces):
        if k:
            out.append_text(inserts[k - 1][1])
        out.append_text(piece)
    return out


def _turn_text(text: str, offset: int, calls: list[dict[str, Any]], marks: list[tuple[int, dict[str, Any]]],
               max_chars: int) -> Text:
    """:func:`_highlight` of the turn, or -- when it is longer than ``max_chars`` (0: no limit) -- of its first and
    last ``max_chars // 2`` characters around a line saying how many are hidden (a 5 MB turn is neither printed
    nor laid out whole without ``--full``; the findings are all listed below it)."""
    n = len(text)
    if max_chars <= 0 or n <= max_chars:
        return _highlight(text, offset, calls, marks)
    half = max_chars // 2

    def piece(lo: int, hi: int) -> Text:
        a, b = offset + lo, offset + hi
        inside = [c for c in calls if c["char_start"] < b and c["char_end"] > a]
        return _highlight(text[lo:hi], a, inside, [(k, f) for k, f in marks if a <= f["char_end"] <= b])

    out = piece(0, half)
    out.append(f"\n… {n - 2 * half:,} characters hidden (--full) …\n", style="dim italic")
    out.append_text(piece(n - half, n))
    return out


def _clip(text: str, max_lines: int) -> tuple[str, int]:
    lines = text.split("\n")
    if max_lines <= 0 or len(lines) <= max_lines:
        return text, 0
    head = max_lines // 2
    tail = max_lines - head
    return "\n".join(lines[:head] + ["…"] + lines[-tail:]), len(lines) - max_lines


def render(data: Loaded, *, full: bool = False, prompt: bool = False, max_tool_lines: int = 8,
           token_view: dict[str, list[RenderableType]] | None = None) -> list[RenderableType]:
    """The renderables :func:`show` prints: header, (prompt), one panel per turn with its findings and repairs."""
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    parts: list[RenderableType] = [_header(data)]
    t = data.trajectory
    if prompt and t.get("input"):
        text, hidden = _clip(t["input"], 0 if full else 40)
        parts.append(Panel(Text(literal(text), style=STYLE_TOOL), title="prompt", title_align="left",
                           subtitle=f"{hidden} lines hidden (--full)" if hidden else None, border_style="dim"))
    numbered = list(enumerate(data.findings, 1))
    calls_by_turn: dict[int, list[dict[str, Any]]] = {}
    for c in data.calls:
        calls_by_turn.setdefault(c["turn_index"], []).append(c)
    for turn in data.turns:
        ti = turn["turn_index"]
        start, end = turn["char_start"], turn["char_end"]
        if turn["role"] != "assistant":
            text, hidden = _clip(turn["text"], 0 if full else max_tool_lines)
            parts.append(Panel(Text(literal(text), style=STYLE_TOOL), title=f"turn {ti} · {turn['role']}",
                               title_align="left",
                               subtitle=f"{hidden} lines hidden (--full)" if hidden else None,
                               border_style="dim"))
            continue
        calls = calls_by_turn.get(ti, [])
        marks = [(num, f) for num, f in numbered if f["turn_index"] == ti
                 and start <= f["char_start"] <= end]
        bad = any(c["status"] == "malformed" for c in calls) or any(f["severity"] == "error" for _, f in marks)
        body: list[RenderableType] = [_turn_text(turn["text"], start, calls, marks, 0 if full else MAX_TURN_CHARS)]
        if marks:
            ft = Table.grid(padding=(0, 1))
            ft.add_column(no_wrap=True)
            ft.add_column()
            output = t.get("output") or ""
            listed = marks if full else marks[:MAX_FINDINGS]
            for num, f in listed:
                span = literal(_cut(output[f["char_start"]:f["char_end"]], 0 if full else 200))
                span_txt = f" «{escape(span)}»" if span else " (at a position: something is missing)"
                sev = f.get("severity", "error")
                ft.add_row(f"[{STYLE_MARK.get(sev, 'bold red')}]⟨{num}⟩[/]",
                           f"[bold]{escape(f['category'])}[/] [dim]({sev}, {escape(f['rule_id'])})[/]{span_txt}\n"
                           f"{escape(literal(f['message']))}")
            if len(listed) < len(marks):
                ft.add_row("", f"[dim italic]… {len(marks) - len(listed):,} more findings in this turn (--full)[/]")
            body.append(Text(""))
            body.append(ft)
        shown_calls = 0
        for c in calls:
            if c["status"] != "malformed" and not (token_view and token_view.get(c["call_id"])):
                continue
            shown_calls += 1
            if not full and shown_calls > MAX_CALL_BLOCKS:
                continue
            body.append(Text(""))
            body.append(_call_block(c, full))
            for r in (token_view or {}).get(c["call_id"], []):
                body.append(r)
        if shown_calls > MAX_CALL_BLOCKS and not full:
            body.append(Text(f"… {shown_calls - MAX_CALL_BLOCKS:,} more malformed calls in this turn (--full)",
                             style="dim italic"))
        title = f"turn {ti} · assistant" + (f" · {len(calls)} call{'s' if len(calls) != 1 else ''}" if calls else "")
        parts.append(Panel(Group(*body), title=title, title_align="left",
                           border_style="red" if bad else "green" if calls else "blue"))
    return parts


def _call_block(c: dict[str, Any], full: bool = False) -> RenderableType:
    from rich.console import Group
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    name = c.get("function_name")
    matched = c.get("matched_tool")
    head = (f"[bold]call {c['call_index']}[/] [dim]{escape(c['call_id'])}[/]  status "
            + ("[red]malformed[/]" if c["status"] == "malformed" else "[green]ok[/]")
            + (f"  name [bold]{escape(name)}[/]" if name else "")
            + (f" → [green]{escape(matched)}[/]" if matched and matched != name else ""))
    if c.get("categories"):
        head += "  [dim]" + escape(", ".join(c["categories"])) + "[/]"
    grid = Table(show_header=True, header_style="bold", box=None, padding=(0, 2), expand=True)
    grid.add_column("as generated", ratio=1, overflow="fold")
    grid.add_column("repair", ratio=1, overflow="fold")
    repair: Text
    if c.get("repaired"):
        repair = Text(literal(c["repaired"]), style="green")
    else:
        repair = Text("no repair", style="dim italic")
    if c.get("repair_note"):
        repair.append("\n" + literal(c["repair_note"]), style="dim")
    grid.add_row(Text(literal(_cut(c["raw"], 0 if full else MAX_TURN_CHARS // 4)),
                      style="red" if c["status"] == "malformed" else ""), repair)
    return Group(Text.from_markup(head), grid)


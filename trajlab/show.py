"""``trajlab show``: one trajectory in the terminal, with its malformed calls highlighted in place.

:func:`show` reads a trajectory of a scan (by id, a unique id prefix, or by step and position) and prints
its turns with rich: the tool calls are tinted, each finding's span is highlighted where it occurs and
numbered, the findings are listed under their turn with their explanation, and every call with a repair is
shown next to it. With ``tokens=True`` and rescore results present, the per-token probabilities that each
checkpoint gave the call tokens are shown under the call (see :func:`token_renderables`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.duckrows import query_rows, view_names
from trajlab.errors import TrajlabError, param
from trajlab.show_options import ShowOptions

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    from rich.console import Console, RenderableType
    from rich.text import Text

#: Styles (also used by the tests to find the highlighted spans in captured output).
STYLE_CALL = "on #1d2b3a"
STYLE_SPAN = {"error": "bold white on red3", "warning": "bold black on yellow3", "info": "underline"}
STYLE_MARK = {"error": "bold red", "warning": "bold yellow", "info": "dim"}
STYLE_TOOL = "dim"


@dataclass
class Loaded:
    """Everything :func:`show` renders, read from the tables."""

    trajectory: dict[str, Any]
    turns: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    position: tuple[int, int] | None  # (index within its step, trajectories at that step)


def _has(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]).fetchall()[0][0])


def _resolve_id(con: duckdb.DuckDBPyConnection, trajectory_id: str) -> str:
    hit = query_rows(con, "SELECT trajectory_id FROM trajectories WHERE trajectory_id = ?", [trajectory_id])
    if hit:
        return trajectory_id
    like = trajectory_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    hits = query_rows(con, "SELECT trajectory_id FROM trajectories WHERE trajectory_id LIKE ? ESCAPE '\\' "
                      "ORDER BY trajectory_id LIMIT 6", [like])
    if len(hits) == 1:
        return hits[0]["trajectory_id"]
    if not hits:
        raise TrajlabError(f"no trajectory with id {trajectory_id!r}",
                           hint="list some with: trajlab sql OUT \"SELECT trajectory_id, step FROM trajectories LIMIT 20\"")
    ids = ", ".join(h["trajectory_id"] for h in hits[:5])
    raise TrajlabError(f"id prefix {trajectory_id!r} is ambiguous: {ids}{', ...' if len(hits) > 5 else ''}")


def load(out: Path | str, trajectory_id: str | None = None, *, step: int | None = None,
         index: int | None = None, split: str | None = None, run: str | None = None) -> Loaded:
    """Read one trajectory with its turns, calls and findings (by id or id prefix, or by step and index;
    ``run`` picks the run when several have that step)."""
    from trajlab.query import connect

    con = connect(out)
    try:
        if not _has(con, "trajectories"):
            raise TrajlabError(f"{out}: no trajectories.parquet (not a scan output)")
        position = None
        if trajectory_id is not None:
            if step is not None or index is not None:
                raise TrajlabError(f"give a {param('trajectory_id')} or {param('step')}/{param('index')}, not both")
            tid = _resolve_id(con, trajectory_id)
        else:
            if step is None:
                raise TrajlabError(f"give a {param('trajectory_id')}, or {param('step', metavar='S')} (and {param('index', metavar='I')})")
            rows = query_rows(con, "SELECT trajectory_id, run FROM trajectories_at(?, split_name := ?, run_name := ?)",
                         [step, split, run])
            runs = sorted({r["run"] for r in rows})
            if len(runs) > 1:
                raise TrajlabError(f"step {step} is in {len(runs)} runs: {', '.join(runs)}",
                                   hint=f"pick one with {param('run')}, e.g. {param('run', runs[0])}")
            if not rows and run is not None and not query_rows(
                    con, "SELECT 1 FROM trajectories WHERE run = ? LIMIT 1", [run]):
                known = ", ".join(r["run"] for r in query_rows(con, "SELECT DISTINCT run FROM trajectories ORDER BY run", []))
                raise TrajlabError(f"no run {run!r}; the runs are: {known}")
            if not rows:
                steps = query_rows(con, "SELECT DISTINCT step FROM trajectories WHERE step IS NOT NULL "
                                   "AND (? IS NULL OR run = ?) ORDER BY step", [run, run])
                known = [r["step"] for r in steps]
                near = ", ".join(str(s) for s in sorted(known, key=lambda s: abs(s - step))[:5])
                raise TrajlabError(f"no trajectories at step {step}" + (f" (split {split})" if split else "")
                                   + (f" in run {run}" if run else "")
                                   + (f"; nearest steps: {near}" if near else ""))
            idx = 0 if index is None else index
            if not -len(rows) <= idx < len(rows):
                raise TrajlabError(f"{param('index')} {idx}: step {step} has {len(rows)} trajectories (0..{len(rows) - 1})")
            tid = rows[idx]["trajectory_id"]
            position = (idx % len(rows), len(rows))
        traj = query_rows(con, "SELECT * FROM trajectories WHERE trajectory_id = ?", [tid])[0]
        turns = (query_rows(con, "SELECT * FROM turns WHERE trajectory_id = ? ORDER BY turn_index", [tid])
                 if _has(con, "turns") else [])
        calls = (query_rows(con, "SELECT * FROM calls WHERE trajectory_id = ? ORDER BY turn_index, call_index", [tid])
                 if _has(con, "calls") else [])
        findings = (query_rows(con, "SELECT * FROM findings WHERE trajectory_id = ? ORDER BY char_start, char_end, "
                               "category", [tid]) if _has(con, "findings") else [])
    finally:
        con.close()
    if not turns and traj.get("output"):
        turns = [{"turn_index": 0, "role": "assistant", "text": traj["output"], "char_start": 0,
                  "char_end": len(traj["output"])}]
    return Loaded(traj, turns, calls, findings, position)


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
    if data.position:
        grid.add_row("position", f"#{data.position[0]} of {data.position[1]} at this step", "", "")
    return grid


def _highlight(text: str, offset: int, calls: list[dict[str, Any]], marks: list[tuple[int, dict[str, Any]]]) -> Text:
    """The turn text with calls tinted, finding spans highlighted and numbered markers after each span."""
    from rich.text import Text

    body = Text(text)
    n = len(text)
    for c in calls:
        body.stylize(STYLE_CALL, max(0, c["char_start"] - offset), min(n, c["char_end"] - offset))
    inserts: list[tuple[int, Text]] = []
    for num, f in marks:
        s, e = max(0, f["char_start"] - offset), min(n, f["char_end"] - offset)
        sev = f.get("severity", "error")
        if e > s:
            body.stylize(STYLE_SPAN.get(sev, STYLE_SPAN["error"]), s, e)
        inserts.append((e, Text(f"⟨{num}⟩" if e > s else f"▲⟨{num}⟩", style=STYLE_MARK.get(sev, "bold red"))))
    if not inserts:
        return body
    out = Text()
    prev = 0
    for pos, mark in sorted(inserts, key=lambda x: x[0]):
        out.append_text(body[prev:pos])
        out.append_text(mark)
        prev = pos
    out.append_text(body[prev:])
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
        parts.append(Panel(Text(text, style=STYLE_TOOL), title="prompt", title_align="left",
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
            parts.append(Panel(Text(text, style=STYLE_TOOL), title=f"turn {ti} · {turn['role']}", title_align="left",
                               subtitle=f"{hidden} lines hidden (--full)" if hidden else None,
                               border_style="dim"))
            continue
        calls = calls_by_turn.get(ti, [])
        marks = [(num, f) for num, f in numbered if f["turn_index"] == ti
                 and start <= f["char_start"] <= end]
        bad = any(c["status"] == "malformed" for c in calls) or any(f["severity"] == "error" for _, f in marks)
        body: list[RenderableType] = [_highlight(turn["text"], start, calls, marks)]
        if marks:
            ft = Table.grid(padding=(0, 1))
            ft.add_column(no_wrap=True)
            ft.add_column()
            output = t.get("output") or ""
            for num, f in marks:
                span = output[f["char_start"]:f["char_end"]]
                span_txt = f" «{escape(span)}»" if span else " (at a position: something is missing)"
                sev = f.get("severity", "error")
                ft.add_row(f"[{STYLE_MARK.get(sev, 'bold red')}]⟨{num}⟩[/]",
                           f"[bold]{escape(f['category'])}[/] [dim]({sev}, {escape(f['rule_id'])})[/]{span_txt}\n"
                           f"{escape(f['message'])}")
            body.append(Text(""))
            body.append(ft)
        for c in calls:
            if c["status"] != "malformed" and not (token_view and token_view.get(c["call_id"])):
                continue
            body.append(Text(""))
            body.append(_call_block(c))
            for r in (token_view or {}).get(c["call_id"], []):
                body.append(r)
        title = f"turn {ti} · assistant" + (f" · {len(calls)} call{'s' if len(calls) != 1 else ''}" if calls else "")
        parts.append(Panel(Group(*body), title=title, title_align="left",
                           border_style="red" if bad else "green" if calls else "blue"))
    return parts


def _call_block(c: dict[str, Any]) -> RenderableType:
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
        repair = Text(c["repaired"], style="green")
    else:
        repair = Text("no repair", style="dim italic")
    if c.get("repair_note"):
        repair.append("\n" + c["repair_note"], style="dim")
    grid.add_row(Text(c["raw"], style="red" if c["status"] == "malformed" else ""), repair)
    return Group(Text.from_markup(head), grid)


# ------------------------------------------------------------------------------------------------------------
# --tokens: per-token probabilities of the call tokens, from the rescore tables

#: (lower bound of p, background style) from most to least likely
PROB_STYLES = ((0.9, "on dark_green"), (0.5, "on dark_olive_green3"), (0.1, "black on orange3"),
               (0.0, "bold white on red3"))


def _prob_style(p: float) -> str:
    return next(style for lo, style in PROB_STYLES if p >= lo)


def _tok(text: str) -> str:
    return text.replace("\n", "⏎").replace("\t", "⇥") if text.strip() else text.replace("\n", "⏎") or "∅"


def token_renderables(out: Path | str, data: Loaded, *,
                      checkpoints: list[str] | None = None, max_rows: int = 8) -> dict[str, list[RenderableType]]:
    """Per call id, what ``--tokens`` adds under the call: for each checkpoint the call's tokens coloured by
    the probability the checkpoint gave them, the least likely ones, and the malformed-vs-repaired comparison."""
    import math

    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from trajlab.query import connect
    from trajlab.report.rescore_data import checkpoint_order

    tid = data.trajectory["trajectory_id"]
    con = connect(out)
    try:
        views = view_names(con)
        if "rescore_tokens" not in views:
            raise TrajlabError(f"{out}: no rescore results (rescore/<checkpoint>/tokens.parquet)",
                               hint="run `trajlab rescore OUT --ckpt CHECKPOINT` first")
        rows = query_rows(con, "SELECT * FROM rescore_tokens WHERE trajectory_id = ? ORDER BY checkpoint, position", [tid])
        labels = sorted({r["checkpoint"] for r in rows})
        if checkpoints:
            unknown = [c for c in checkpoints if c not in labels]
            if unknown:
                raise TrajlabError(f"{param('checkpoints')} {', '.join(unknown)}: not rescored for this trajectory "
                                   f"(have: {', '.join(labels) or 'none'})")
            labels = [c for c in labels if c in checkpoints]
        if not rows:
            raise TrajlabError(f"trajectory {tid} has no rescored tokens",
                               hint=f"rescore it: trajlab rescore OUT --ckpt CKPT --where \"trajectory_id = '{tid}'\" "
                                    "(and --tokens all or calls)")
        order = [lab for lab, _ in checkpoint_order(con, views, labels)]
        mal = (query_rows(con, "SELECT * FROM rescore_malformations WHERE trajectory_id = ?", [tid])
               if "rescore_malformations" in views else [])
    finally:
        con.close()
    by_ckpt: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_ckpt.setdefault(r["checkpoint"], []).append(r)
    spans = [(f["char_start"], f["char_end"], num) for num, f in enumerate(data.findings, 1)]
    result: dict[str, list[RenderableType]] = {}
    for c in data.calls:
        parts: list[RenderableType] = []
        for lab in order:
            toks = [t for t in by_ckpt.get(lab, [])
                    if t["char_end"] > c["char_start"] and t["char_start"] < c["char_end"]]
            if not toks:
                continue
            probs = [math.exp(t["logprob"]) for t in toks]
            low = min(range(len(toks)), key=lambda i: probs[i])
            head = Text.from_markup(
                f"[bold]{escape(lab)}[/] · {len(toks)} call tokens · mean p {sum(probs) / len(probs):.3f} · "
                f"lowest p {probs[low]:.3g} at [bold]{escape(repr(toks[low]['token']))}[/]")
            strip = Text()
            for t, p in zip(toks, probs, strict=True):
                strip.append(_tok(t["token"]), style=_prob_style(p))
                strip.append("\u200b")
            parts.extend([Text(""), head, strip])
            worst = sorted(range(len(toks)), key=lambda i: (probs[i], toks[i]["position"]))
            worst = [i for i in worst if probs[i] < 0.5][:max_rows]
            if worst:
                tb = Table(box=None, padding=(0, 2), header_style="bold", show_edge=False)
                for col, just in (("pos", "right"), ("token", "left"), ("p", "right"), ("top choice", "left"),
                                  ("control mass", "right"), ("region", "left"), ("", "left")):
                    tb.add_column(col, justify=just)  # type: ignore[arg-type]
                for i in sorted(worst, key=lambda i: toks[i]["position"]):
                    t = toks[i]
                    hits = [n for s, e, n in spans if t["char_start"] < e and s < t["char_end"]]
                    tb.add_row(str(t["position"]), escape(repr(t["token"])),
                               Text(f"{probs[i]:.3g}", style=_prob_style(probs[i])),
                               f"{escape(repr(t['top_token']))} ({t['top_prob']:.2f})", f"{t['control_mass']:.2f}",
                               t["region"], " ".join(f"⟨{n}⟩" for n in hits))
                parts.append(tb)
            for m in mal:
                if m["checkpoint"] != lab or m["call_id"] != c["call_id"]:
                    continue
                if m["malformed_prob"] is None or m["repaired_prob"] is None:
                    parts.append(Text(f"at the malformation: {m['note'] or 'not scored'}", style="dim"))
                    continue
                lo = m["log_odds"]
                verdict = "prefers the malformation" if lo is not None and lo > 0 else "prefers the repair"
                parts.append(Text.from_markup(
                    f"at the malformation: P({escape(repr(m['malformed_token']))}) = {m['malformed_prob']:.3g} "
                    f"vs well-formed P({escape(repr(m['repaired_token']))}) = {m['repaired_prob']:.3g} "
                    f"(log-odds {lo:+.2f}: [bold]{verdict}[/])"))
        if parts:
            legend = Text("token colours: ", style="dim")
            for lo_p, style in PROB_STYLES:
                legend.append(f" p≥{lo_p:g} " if lo_p else " p<0.1 ", style=style)
                legend.append(" ")
            result[c["call_id"]] = [*parts, legend]
    return result


def show(out: Path | str, trajectory_id: str | None = None, options: ShowOptions | None = None, *,
         console: Console | None = None) -> Loaded:
    """Print one trajectory of the scan at ``out`` with rich and return what was shown.

    Pick it by ``trajectory_id`` (or a unique prefix of it), or by ``options.step`` and ``options.index`` (0-based
    position among the trajectories of that step in dump order; negative counts from the end; ``options.run``
    picks the run when several runs have that step). ``options.tokens`` adds the per-token probabilities of each
    call's tokens from the rescore results (all checkpoints, or those named in ``options.checkpoints``); it raises
    :class:`TrajlabError` when there are none. ``options.full`` shows tool responses and the prompt unclipped;
    ``options.prompt`` shows the prompt (:class:`~trajlab.show_options.ShowOptions`). ``console``: where to print
    (default: the shared console).

    Example::

        trajlab.show("out", options=trajlab.ShowOptions(step=120, index=3))
    """
    from trajlab.console import console as default_console

    opts = options if options is not None else ShowOptions()
    con_out = console or default_console
    data = load(out, trajectory_id, step=opts.step, index=opts.index, split=opts.split, run=opts.run)
    token_view = token_renderables(out, data, checkpoints=list(opts.checkpoints) or None) if opts.tokens else None
    for part in render(data, full=opts.full, prompt=opts.prompt, token_view=token_view):
        con_out.print(part)
    return data


from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, show)

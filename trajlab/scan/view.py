"""Rich rendering of a :class:`~trajlab.scan.summary.ScanSummary`: totals, categories, the per-step chart, early
warning; with several runs, the runs compared side by side (one row and one sparkline per run)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from trajlab.tables import CATEGORY_SHARE

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None], vmax: float | None = None) -> str:
    """One block character per value, scaled to ``vmax`` (a blank for missing values)."""
    vals = [v for v in values if v is not None]
    top = vmax if vmax else (max(vals) if vals else 0.0)
    if top <= 0:
        return "".join(" " if v is None else BLOCKS[0] for v in values)
    return "".join(" " if v is None else BLOCKS[min(len(BLOCKS) - 1, int(v / top * (len(BLOCKS) - 1) + 0.5))] for v in values)


def _buckets(rows: list[dict[str, Any]], n: int) -> list[list[dict[str, Any]]]:
    if len(rows) <= n:
        return [[r] for r in rows]
    size = -(-len(rows) // n)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _fmt_rate(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "-"


def _fmt_score(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "-"


#: where a run name may break across lines (after one of these), so it never wraps inside a word
_NAME_BREAK = re.compile(r"(?<=[_\-./:=@+,~ ])")


def wrap_name(name: str, width: int) -> str:
    """``name`` broken into lines of at most ``width`` characters after separators (``_ - . / : = @ + , ~``);
    a piece with no separator longer than a line is cut (the only mid-word break)."""
    width = max(1, width)
    if len(name) <= width:
        return name
    lines: list[str] = []
    cur = ""
    for piece in (p for p in _NAME_BREAK.split(name) if p):
        if cur and len(cur) + len(piece) > width:
            lines.append(cur)
            cur = ""
        while len(cur) + len(piece) > width:
            lines.append(piece[:width])
            piece = piece[width:]
        cur += piece
    if cur:
        lines.append(cur)
    return "\n".join(lines)


def _name_width(names: list[str], others: list[list[str]], width: int) -> int:
    """The width of a table's run column: what ``width`` leaves beside the other columns (widest cell or header
    each, two spaces between columns), at least 12, at most the longest name."""
    fixed = sum(max(len(line) for cell in col for line in cell.split("\n")) + 2 for col in others)
    return max(1, min(max(len(n) for n in names), max(12, width - fixed)))


def runs_table(runs: list[dict[str, Any]], steps: list[dict[str, Any]], width: int = 76) -> Group:
    """The runs compared: steps covered, trajectories, calls, malformed rate early → late, first warning; then
    each run's rate per step (a sparkline of up to 20 buckets), score trend and top category. Two tables, so that
    each fits ``width`` columns (the panel's inside); run names longer than their column break after a separator
    (``_``, ``-``, ``.``...), never inside a word."""
    cells: list[tuple[str, list[str], list[Any]]] = []
    for r in runs:
        seq = sorted((x for x in steps if x.get("run") == r["run"] and x["split"] == r["split"]
                      and x["step"] is not None), key=lambda x: x["step"])
        rates = [x["malformed_rate"] for x in seq]
        if len(rates) > 20:
            rates = [(sum(x["malformed_calls"] for x in g) / c) if (c := sum(x["calls"] for x in g)) else None
                     for g in _buckets(seq, 20)]
        ew = r["early_warning"]
        warn = (Text(f"step {ew['step']} ⚠", style="bold red") if ew else Text("none", style="green") if r["calls"]
                else Text("n/a (no calls)", style="dim"))
        span = f"{r['first_step']}..{r['last_step']}" if r["steps"] else "-"
        top = r["top_categories"][0] if r["top_categories"] else None
        n_traj = r.get("trajectories")
        cells.append((r["run"],
                      [span, f"{n_traj:,}" if isinstance(n_traj, int) else "-", f"{r['calls']:,}",
                       f"{_fmt_rate(r['early_rate'])} → {_fmt_rate(r['late_rate'])}", warn.plain],
                      [sparkline(rates, 1.0 if rates else None) if rates else "",
                       f"{_fmt_score(r['early_score'])} → {_fmt_score(r['late_score'])}",
                       (f"{top['category']} {top['calls']}" if top else "-")[:30], warn]))
    heads1 = ["steps", "trajectories", "calls", "malformed", "warning"]
    heads2 = ["rate per step", "score", "top category"]
    names = [c[0] for c in cells]
    w1 = _name_width(names, [[h, *(c[1][i] for c in cells)] for i, h in enumerate(heads1)], width)
    w2 = _name_width(names, [[h, *(str(c[2][i]) for c in cells)] for i, h in enumerate(heads2)], width)
    t = Table(title="runs compared: malformed-call rate and mean score, early → late (first → last quarter of a "
                    "run's steps)",
              title_justify="left", box=None, pad_edge=False)
    t.add_column("run", no_wrap=True, width=w1)
    for h in heads1:
        t.add_column(h, no_wrap=True, justify="right" if h in ("trajectories", "calls") else "left")
    trend = Table(box=None, pad_edge=False)
    trend.add_column("run", no_wrap=True, width=w2)
    for h in heads2:
        trend.add_column(h, no_wrap=True)
    for name, first, second in cells:
        warn_text = second[3]
        t.add_row(Text(wrap_name(name, w1)), *first[:4], warn_text)
        trend.add_row(Text(wrap_name(name, w2)), second[0], second[1], Text(second[2]))
    return Group(t, Text(""), trend)


def tools_note(s: Any) -> str:
    """What a scan without a single tool call evaluated, in words (the summary's "tool calls" line)."""
    with_tools = getattr(s, "trajectories_with_tools", 0)
    if with_tools:
        return (f"{with_tools:,} of {s.trajectories:,} trajectories declare tools, yet no output makes a call; "
                "nothing for the call checks or the early warning to evaluate")
    return ("no prompt declares tools and no output makes a call: a tool-less run; the call checks, the schema "
            "checks and the early warning do not apply (truncation and final answers are still counted)")


def end_note(s: Any) -> str:
    """`` (N without: reason n, ...)`` after the final-answer rate, from the summary's ``end_reasons``."""
    reasons = getattr(s, "end_reasons", None) or {}
    if not reasons:
        return ""
    n = sum(reasons.values())
    return f"  ({n:,} without: " + ", ".join(f"{k} {v:,}" for k, v in list(reasons.items())[:4]) + ")"


def render_summary(summary: Any, category_steps: dict[tuple[str, str, int], dict[str, int]] | None = None,
                   width: int = 80) -> Group:
    """The scan summary panel for a terminal ``width`` columns wide."""
    s = summary
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    rate = f"{s.malformed_rate:.1%}" if s.malformed_rate is not None else "n/a (no calls)"
    head.add_row("files", f"{s.files} ({s.files_reused} unchanged, reused)" if s.files_reused else str(s.files))
    head.add_row("trajectories", f"{s.trajectories:,}")
    no_calls = s.calls == 0 and s.trajectories > 0
    if no_calls:  # nothing for the call checks to evaluate: say so instead of printing zeros as results
        head.add_row("tool calls", Text(f"0: {tools_note(s)}", style="dim"))
    else:
        head.add_row("tool calls", f"{s.calls:,}")
        head.add_row("malformed calls", f"{s.malformed_calls:,}  ({rate})")
        if s.warning_calls:
            head.add_row("calls with warnings only", f"{s.warning_calls:,}  ({s.warning_calls / s.calls:.1%}; they run, "
                                                     f"not counted malformed)")
        head.add_row("trajectories with a malformed call", f"{s.trajectories_with_malformed:,}")
    if s.final_answer_rate is not None:
        head.add_row("final-answer rate", f"{s.final_answer_rate:.1%}" + end_note(s))
    if (s.schema_checked_rate is not None and s.schema_checked_rate < 1.0 and not no_calls
            and int(getattr(s, "unchecked_with_calls", 1)) > 0):  # (--tools helps only where calls went unchecked)
        head.add_row(
            "schema checks",
            Text(f"skipped for {1 - s.schema_checked_rate:.0%} of trajectories (no tool schema: pass --tools FILE)", style="yellow"),
        )
    unread = getattr(s, "unread_tool_declarations", 0)
    if unread:
        head.add_row("tool declarations", Text(
            f"{unread:,} trajector{'ies' if unread != 1 else 'y'} whose prompt declares tools in a form no call "
            "format reads (pass --tools FILE, and --tool-format if the calls use a known format)", style="yellow"))
    engines = getattr(s, "engines", None)
    if engines:
        n: dict[str, int] = {}
        for e in engines:
            n[e["engine"]] = n.get(e["engine"], 0) + 1
        fell = sum(1 for e in engines if e["fallback"])
        head.add_row("engines", ", ".join(f"{k} {v} file{'s' if v != 1 else ''}" for k, v in sorted(n.items()))
                     + (f" ({fell} fell back to records: see manifest.json)" if fell else ""))
    rp = getattr(s, "reward_plugin", None)
    if rp:
        head.add_row("reward plugin", f"{rp['trajectories']:,} trajectories carry trajlab's verl reward keys "
                     f"(mean task_score {rp['mean_task_score']:.3f}, format_reward {rp['mean_format_reward']:.3f})")
    if s.ingest_errors:
        head.add_row("ingest errors", Text(f"{s.ingest_errors} (something lost; see ingest_errors.parquet)",
                                           style="yellow"))
    if s.ingest_notes:
        head.add_row("ingest notes", Text(f"{s.ingest_notes} (nothing lost: {s.ingest_errors} ingest errors; "
                                          f"see ingest_errors.parquet, severity note)", style="dim"))
    for g in getattr(s, "grouping", None) or []:
        head.add_row("prompt groups", Text(g["message"], style="yellow"))
    for d in getattr(s, "retired", None) or []:
        head.add_row("retired", Text(f"{d} (made from this directory's earlier tables, not these)", style="yellow"))
    skipped = getattr(s, "skipped", None) or []
    if skipped:
        more = f"\n… and {len(skipped) - 5} more (manifest.json: summary.skipped)" if len(skipped) > 5 else ""
        head.add_row("not scanned", Text("\n".join(skipped[:5]) + more, style="dim"))
    parts: list[Any] = [head]

    if s.top_categories:
        splits = sorted({str(r.get("split")) for r in s.steps if r.get("split") is not None})
        cat = Table(title=f"malformed calls by category ({', '.join(splits) or 'all'} split"
                          f"{'s' if len(splits) != 1 else ''}, {s.malformed_calls:,} malformed calls)",
                    caption=CATEGORY_SHARE, caption_justify="left", title_justify="left", box=None, pad_edge=False)
        cat.add_column("category")
        cat.add_column("calls", justify="right")
        cat.add_column("share", justify="right")
        for name, n in s.top_categories[:10]:
            cat.add_row(name, f"{n:,}", f"{n / max(s.malformed_calls, 1):.0%}")
        parts.append(cat)

    runs = getattr(s, "runs", None) or []
    if len(runs) > 1:
        parts.append(runs_table(runs, s.steps, width - 4))
    for run_split in ([] if len(runs) > 1 else sorted({(r.get("run"), r["split"]) for r in s.steps},
                                                      key=lambda k: (k[0] or "", k[1]))):
        run, split = run_split
        rows = [r for r in s.steps if r.get("run") == run and r["split"] == split and r["step"] is not None]
        if len(rows) < 2:
            continue
        rates = [r["malformed_rate"] for r in rows]
        width = 60
        if len(rates) > width:  # pool neighbouring steps so the line fits
            groups = _buckets(rows, width)
            spark_rates = [
                (sum(r["malformed_calls"] for r in g) / c) if (c := sum(r["calls"] for r in g)) else None for g in groups
            ]
        else:
            spark_rates = rates
        spark = sparkline(spark_rates)
        vmax = max((x for x in rates if x is not None), default=0.0)
        t = Table(
            title=f"{split}: malformed-call rate per step (steps {rows[0]['step']}..{rows[-1]['step']}, max {vmax:.0%})",
            title_justify="left",
            box=None,
            pad_edge=False,
        )
        t.add_column("steps", no_wrap=True, min_width=9)
        t.add_column("calls", justify="right", no_wrap=True, min_width=6)
        t.add_column("malformed", justify="right", no_wrap=True, min_width=9)
        t.add_column("rate", justify="right", no_wrap=True, min_width=6)
        t.add_column("", no_wrap=True, min_width=20)
        t.add_column("top categories", overflow="ellipsis", no_wrap=True)
        ew = s.early_warning if s.early_warning and s.early_warning.get("split") == split else None
        for b in _buckets(rows, 12):
            c = sum(r["calls"] for r in b)
            m = sum(r["malformed_calls"] for r in b)
            r_ = m / c if c else None
            label = f"{b[0]['step']}" if len(b) == 1 else f"{b[0]['step']}-{b[-1]['step']}"
            mark = ""
            if ew and b[0]["step"] <= ew["step"] <= b[-1]["step"]:
                label += " ⚠"
                mark = "bold red"
            cats = ""
            if category_steps:
                agg: dict[str, int] = {}
                for r in b:
                    for k, v in category_steps.get((run, split, r["step"]), {}).items():
                        agg[k] = agg.get(k, 0) + v
                cats = ", ".join(f"{k} {v}" for k, v in sorted(agg.items(), key=lambda kv: (-kv[1], kv[0]))[:2])
            bar = "█" * int(round((r_ or 0) / vmax * 20)) if vmax else ""
            t.add_row(Text(label, style=mark), f"{c:,}", f"{m:,}", f"{r_:.1%}" if r_ is not None else "-", bar, cats)
        parts.append(Text(f"{split} malformed rate {rows[0]['step']}→{rows[-1]['step']}: {spark}", no_wrap=True))
        parts.append(t)

    warned = [(r["run"], r["early_warning"]) for r in runs if r["early_warning"]] if runs else (
        [(None, s.early_warning)] if s.early_warning else [])
    for run, ew in warned:
        who = f"run {run} " if len(runs) > 1 else ""
        parts.append(
            Text.assemble(
                ("early warning: ", "bold red"),
                f"{who}{ew['split']} step {ew['step']} — malformed rate {ew['window_rate']:.1%} over steps "
                f"{ew['window'][0]}..{ew['window'][-1]} vs baseline {ew['baseline_rate']:.1%} "
                f"(p = {ew['p_value']:.1e}" + (")" if who else f"; {ew['statistic']})"),
            )
        )
    if len(runs) > 1 and len(warned) < len(runs):
        quiet = ", ".join(r["run"] for r in runs if not r["early_warning"] and r["calls"])
        idle = ", ".join(r["run"] for r in runs if not r["calls"])
        if quiet:
            parts.append(Text(f"early warning: none for {quiet}", style="green"))
        if idle:
            parts.append(Text(f"early warning: not evaluated for {idle} (no tool calls)", style="dim"))
    elif not warned and s.steps and s.calls == 0:
        parts.append(Text("early warning: not evaluated (it watches the malformed-call rate, and no output makes a "
                          "tool call)", style="dim"))
    elif not warned and s.steps:
        parts.append(Text("early warning: none (no step rises significantly above its earlier baseline)", style="green"))
    parts += training_lines(s)
    for ex in s.ingest_error_examples[:3]:
        parts.append(Text(f"ingest error: {ex}", style="yellow"))
    parts.append(Text(f"tables: {s.out}/*.parquet (manifest.json); next: trajlab report {s.out} -o "
                      f"{s.out}/report.html, trajlab sql {s.out} \"SELECT ...\", trajlab build-sft-pool {s.out} -o pool",
                      style="dim"))
    return Group(Panel(Group(*parts), title=f"trajlab scan → {s.out}", title_align="left"))


def training_lines(s: Any) -> list[Text]:
    """The trainer's metrics read (how many logs, their problems) and each run's lead time, one line each."""
    from trajlab.console import literal

    m = getattr(s, "metrics", None) or {}
    logs = m.get("logs") or []
    out: list[Text] = []
    if logs:
        runs = sorted({x["run"] for x in logs})
        out.append(Text(literal(f"training metrics: {len(logs)} log{'s' if len(logs) != 1 else ''} for "
                                f"{', '.join(runs)}" + (f"; unmatched: {', '.join(m['unmatched'])} (name them "
                                                        "with --metrics RUN=PATH)" if m.get("unmatched") else "")
                                + (f"; {m['problem_count']} unreadable line(s)/record(s), e.g. "
                                   f"{m['problems'][0]}" if m.get("problem_count") else "")), style="dim"))
    for w in m.get("wandb") or []:
        if len(w.get("merged") or []) > 1:
            ids = ", ".join(f"{x['id']} (steps {x['first']}..{x['last']}, {x['kept']} kept)" for x in w["merged"])
            out.append(Text(literal(f"W&B: run {w['run']} merged from {len(w['merged'])} W&B runs, later wins on "
                                    f"{w['overlap_steps']} overlapping step(s): {ids}"), style="dim"))
    for f in getattr(s, "wandb", None) or []:
        out.append(Text(literal(f"W&B: trajlab's run written to {Path(f).parent} (upload: wandb sync "
                                f"{Path(f).parent})"), style="dim"))
    tb = getattr(s, "tensorboard", None) or []
    if tb:
        out.append(Text(literal(f"tensorboard: trajlab's curves in {', '.join(tb[:3])}"
                                + (f" and {len(tb) - 3} more" if len(tb) > 3 else "")
                                + f" (tensorboard --logdir {Path(tb[0]).parents[2]})"), style="dim"))
    for lt in getattr(s, "lead_times", None) or []:
        who = f"run {lt['run']}: " if len(getattr(s, "runs", [])) > 1 else ""
        good = lt["lead_steps"] is not None and lt["lead_steps"] > 0
        out.append(Text.assemble(("lead time: ", "bold"), (literal(who + lt["sentence"]),
                                                           "green" if good else "")))
    return out


def print_summary(summary: Any, console: Console, category_steps: dict | None = None) -> None:
    console.print(render_summary(summary, category_steps, console.width))

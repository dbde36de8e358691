"""The report page: one self-contained HTML document (inline CSS, inline SVG charts, a few lines of JS).

A Content-Security-Policy meta tag forbids every external resource, so the page cannot depend on the network
even by accident. The only script records JavaScript errors and CSP violations on ``<html data-js-errors>``
and, once the page has loaded, the number of charts that rendered with a non-empty box on
``<html data-charts-ready>`` (the headless-browser test reads both).

The module is longer than ~400 lines because it is one template: the stylesheet, the two scripts and the markup
of each section belong to the same page and change together.
"""

from __future__ import annotations

import html
from typing import Any

from trajlab.report.data import Example, ReportData
from trajlab.report.training import training_section
from trajlab.tables import CATEGORY_SHARE

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "font-src data:; base-uri 'none'; form-action 'none'")

CSS = """
:root { --fg: #1d1d1f; --muted: #5f6368; --line: #e3e3e8; --bg: #ffffff; --card: #f7f7f9;
        --bad: #b00020; --ok: #1b7f3b; --mark: #ffd6d6; --warn: #fff4e5; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif; }
main { max-width: 1080px; margin: 0 auto; padding: 24px 28px 60px; overflow-wrap: anywhere; }
h1 { font-size: 26px; margin: 8px 0 2px; }
h2 { font-size: 20px; margin: 40px 0 8px; padding-top: 12px; border-top: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0 0 6px; }
p.lead, .muted { color: var(--muted); }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas, monospace;
                   font-size: 13px; }
nav a { margin-right: 14px; color: #1a56db; text-decoration: none; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(165px, 1fr)); gap: 10px; margin: 16px 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.card .v { font-size: 22px; font-weight: 650; }
.card .k { color: var(--muted); font-size: 13px; }
.card.bad .v { color: var(--bad); }
.callout { background: var(--warn); border-left: 4px solid var(--bad); padding: 10px 14px; border-radius: 4px;
           margin: 14px 0; }
.callout.none { border-left-color: var(--ok); background: #eef8f1; }
figure.chart { margin: 14px 0; }
figure.chart svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; margin: 10px 0; font-size: 14px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--card); font-weight: 600; overflow-wrap: normal; word-break: normal; hyphens: none; }
td.label { white-space: nowrap; overflow-wrap: normal; }
table.runs th, th.mono { overflow-wrap: anywhere; }  /* names from the data, and the nine-column runs table, still fit */
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; overflow-wrap: normal; }
.bar { display: inline-block; height: 10px; background: #d62728; border-radius: 2px; vertical-align: middle; }
.ex { border: 1px solid var(--line); border-radius: 8px; margin: 16px 0; overflow: hidden; }
.ex header { background: var(--card); padding: 8px 12px; border-bottom: 1px solid var(--line); }
.ex .body { display: grid; grid-template-columns: 1fr 1fr; gap: 0; }
.ex .body > div { padding: 8px 12px; min-width: 0; }
.ex .body > div + div { border-left: 1px solid var(--line); }
@media (max-width: 760px) { .ex .body { grid-template-columns: 1fr; }
                             .ex .body > div + div { border-left: 0; border-top: 1px solid var(--line); } }
.ex pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; }
details.full { display: inline; } details.full > span { word-break: break-all; }
.ex .label { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.ex footer { padding: 6px 12px; border-top: 1px solid var(--line); font-size: 13px; color: var(--muted); }
mark { background: var(--mark); color: var(--bad); font-weight: 700; border-bottom: 2px solid var(--bad);
       padding: 0 1px; }
mark.point { background: none; border: 0; }
.repair { color: var(--ok); }
.garble { color: var(--bad); font-weight: 650; }
.sev-error { color: var(--bad); font-weight: 600; }
.sev-warning { color: #a15c00; font-weight: 600; }
"""

JS_ERRORS = """
(function () {
  var errs = [];
  function note(msg) { errs.push(msg); document.documentElement.setAttribute('data-js-errors', errs.join(' | ')); }
  window.addEventListener('error', function (e) { note('error: ' + (e.message || e.type)); }, true);
  window.addEventListener('unhandledrejection', function (e) { note('rejection: ' + e.reason); });
  document.addEventListener('securitypolicyviolation', function (e) { note('csp: ' + e.blockedURI); });
})();
"""

JS_READY = """
window.addEventListener('load', function () {
  var n = 0;
  document.querySelectorAll('figure.chart svg').forEach(function (s) {
    var b = s.getBBox(); if (b.width > 0 && b.height > 0) { n++; }
  });
  document.documentElement.setAttribute('data-charts-ready', String(n));
});
"""


def e(value: Any) -> str:
    """HTML-escaped text with control and bidi-override characters made visible (``\\u202e``), never live."""
    from trajlab.console import literal

    return html.escape(literal("" if value is None else str(value)), quote=True)


#: names longer than this are cut in tables; the full value stays one click away (``<details>``)
NAME_CHARS = 120


def clipped(value: str, limit: int = NAME_CHARS) -> str:
    """``e(value)``, cut to ``limit`` characters with the full value in a ``<details>`` element."""
    if len(value) <= limit:
        return e(value)
    return (f'{e(value[:limit])}…<details class="full"><summary>{len(value) - limit:,} more characters: show the '
            f'full value</summary><span class="mono">{e(value)}</span></details>')


def pct(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v * 100:.{digits}f}%"


def num(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3g}"
    return f"{v:,}"


def figure(svg: str, caption: str, name: str) -> str:
    return f'<figure class="chart" data-chart="{e(name)}">{svg}<figcaption>{caption}</figcaption></figure>'


def _cards(d: ReportData) -> str:
    ov = d.overview
    steps = "–" if ov["first_step"] is None else f"{ov['first_step']}–{ov['last_step']}"
    items = [
        ("trajectories", num(ov["trajectories"]), False),
        ("tool calls", num(ov["calls"]), False),
        ("malformed calls", f"{num(ov['malformed_calls'])} ({pct(ov['malformed_rate'])})", bool(ov["malformed_calls"])),
        ("trajectories with a malformed call", num(ov["trajectories_with_malformed"]), False),
        ("final-answer rate", pct(ov["final_answer_rate"]), False),
        ("mean score (reward)", "–" if ov["mean_score"] is None else f"{ov['mean_score']:.3f}", False),
        (f"steps ({ov['steps']})", steps, False),
        ("truncated outputs", num(ov["truncated"]), False),
        ("ingest errors", num(ov["ingest_errors"]), bool(ov["ingest_errors"])),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card{" bad" if bad else ""}"><div class="v">{e(v)}</div><div class="k">{e(k)}</div></div>'
        for k, v, bad in items) + "</div>"


def _grouping_callout(d: ReportData) -> str:
    """The scan's warnings about suspicious prompt groups (``manifest.json``: ``summary.grouping``) of this run."""
    found = (d.manifest.get("summary") or {}).get("grouping") if isinstance(d.manifest, dict) else None
    if not isinstance(found, list):
        return ""
    msgs = [g["message"] for g in found if isinstance(g, dict) and isinstance(g.get("message"), str)
            and (not d.run or g.get("run") == d.run)]
    return "".join(f'<div class="callout"><strong>Prompt groups.</strong> {e(m)}</div>' for m in msgs)


def _warning_callout(d: ReportData) -> str:
    ew = d.early_warning
    if not ew and d.overview.get("trajectories") and not d.overview.get("calls"):
        # a tool-less run: nothing was evaluated, so nothing "passed"
        return ('<div class="callout none"><strong>Early warning not evaluated.</strong> It watches the '
                'malformed-call rate, and no output in this run makes a tool call.</div>' + _grouping_callout(d))
    if not ew:
        return ('<div class="callout none"><strong>No early warning.</strong> The malformed-call rate never rose '
                'significantly above its own earlier baseline.</div>' + _grouping_callout(d))
    parts = [f"<strong>Early warning at step {e(ew.get('step'))}</strong>"]
    if ew.get("window_rate") is not None and ew.get("baseline_rate") is not None:
        win = ew.get("window") or []
        span = f" over steps {e(win[0])}–{e(win[-1])}" if win else ""
        parts.append(f": malformed-call rate {pct(ew['window_rate'])}{span} against a baseline of "
                     f"{pct(ew['baseline_rate'], 2)} before it")
    if ew.get("p_value") is not None:
        parts.append(f" (p = {ew['p_value']:.2g})")
    parts.append(".")
    if ew.get("statistic"):
        parts.append(f'<br><span class="muted">{e(ew["statistic"])}</span>')
    return '<div class="callout">' + "".join(parts) + "</div>" + _grouping_callout(d)


def _category_table(d: ReportData) -> str:
    if not d.category_totals:
        return '<p class="muted">No malformed calls.</p>'
    malformed = sum(int(s.get("malformed_calls") or 0) for s in d.steps)
    total = malformed or 1
    top = max(n for _, n in d.category_totals)
    rows = "".join(
        f'<tr><td class="mono">{e(c)}</td><td class="num">{n:,}</td><td class="num">{n / total:.0%}</td>'
        f'<td><span class="bar" style="width:{max(2, round(160 * n / top))}px"></span></td></tr>'
        for c, n in d.category_totals)
    return (f'<p class="muted">{CATEGORY_SHARE} Here: the {e(str(d.split))} split, {malformed:,} malformed calls.</p>'
            '<div class="scroll"><table><thead><tr><th>category</th><th class="num">malformed calls</th>'
            '<th class="num">share of malformed calls</th><th></th></tr></thead><tbody>' + rows + "</tbody></table></div>")


def _garble_html(name: str, nearest: str | None) -> str:
    if len(name) > NAME_CHARS:
        return f'<span class="garble">{clipped(name)}</span>'
    if not nearest:
        return f'<span class="garble">{e(name)}</span>'
    i = 0
    while i < min(len(name), len(nearest)) and name[i] == nearest[i]:
        i += 1
    return f'{e(name[:i])}<span class="garble">{e(name[i:])}</span>'


def _garbled_table(d: ReportData) -> str:
    if not d.garbled and d.overview.get("trajectories") and not d.overview.get("calls"):
        return '<p class="muted">No tool calls in this run: no function name to compare with declared tools.</p>'
    if not d.garbled:
        return '<p class="muted">No call used a function name outside the declared tools.</p>'
    rows = "".join(
        f'<tr><td class="mono">{_garble_html(g["function_name"], g.get("nearest_tool"))}</td>'
        f'<td class="mono">{e(g.get("nearest_tool") or "–")}</td><td class="num">{num(g.get("similarity"))}</td>'
        f'<td class="num">{num(g["calls"])}</td><td class="num">{num(g["trajectories"])}</td>'
        f'<td class="num">{num(g["first_step"])}</td><td class="num">{num(g["last_step"])}</td></tr>'
        for g in d.garbled)
    return ('<div class="scroll"><table><thead><tr><th>name as generated</th><th>nearest declared tool</th>'
            '<th class="num">similarity (Jaro-Winkler, 0–1)</th><th class="num">calls</th>'
            '<th class="num">trajectories</th><th class="num">first step</th><th class="num">last step</th>'
            '</tr></thead><tbody>' + rows + "</tbody></table></div>")


def _marked(ex: Example) -> str:
    t = ex.text
    if ex.span_end > ex.span_start:
        mid = f'<mark title="{e(ex.category)}">{e(t[ex.span_start:ex.span_end])}</mark>'
    else:
        mid = f'<mark class="point" title="{e(ex.category)}: missing here">▲</mark>'
    return e(t[: ex.span_start]) + mid + e(t[ex.span_end:])


def _example(ex: Example, out: str) -> str:
    repair = (f'<pre class="repair">{e(ex.repaired)}</pre>' if ex.repaired
              else '<p class="muted">No repair: it is not clear what the model meant.</p>')
    if ex.repair_note:
        repair += f'<p class="muted">{e(ex.repair_note)}</p>'
    where = "call" if ex.in_call else "excerpt of the output"
    name = ""
    if ex.function_name and ex.matched_tool and ex.function_name != ex.matched_tool:
        name = f' · name <code>{clipped(ex.function_name)}</code> → <code>{clipped(ex.matched_tool)}</code>'
    return (
        f'<article class="ex" data-category="{e(ex.category)}"><header><h3 class="mono">{e(ex.category)}</h3>'
        f'<span class="sev-{e(ex.severity)}">{e(ex.severity)}</span> · {ex.count:,} finding'
        f'{"s" if ex.count != 1 else ""} in the scan · rule <code>{e(ex.rule_id)}</code>{name}<br>{e(ex.message)}'
        f'</header><div class="body"><div><div class="label">as generated ({where})</div>'
        f'<pre>{_marked(ex)}</pre></div><div><div class="label">repair</div>{repair}</div></div>'
        f'<footer>step {e(ex.step)} · {e(ex.split)} · trajectory <code>{e(ex.trajectory_id)}</code> · '
        f'<code>trajlab show {e(out)} {e(ex.trajectory_id)}</code></footer></article>'
    )


def _runs_section(d: ReportData, charts: dict[str, str], max_categories: int = 8) -> str:
    """Runs compared: a row per run, every run on one step axis, categories by run (share of its malformed calls)."""
    if len(d.runs) < 2:
        return ""
    rows = []
    for r in d.runs:
        ew = r["early_warning"]
        warn = (f'<span class="sev-error">step {e(ew["step"])}</span>' if ew
                else '<span class="repair">none</span>')
        span = f"{e(r['first_step'])}–{e(r['last_step'])} ({r['steps']})" if r["steps"] else "–"
        early = f"steps {e(r['early_steps'][0])}–{e(r['early_steps'][1])}" if r["early_steps"] else ""
        late = f"steps {e(r['late_steps'][0])}–{e(r['late_steps'][1])}" if r["late_steps"] else ""
        score = ("–" if r["early_score"] is None else
                 f"{r['early_score']:.2f} → {r['late_score']:.2f}" if r["late_score"] is not None else "–")
        cats = ", ".join(f"{c['category']} ({c['calls']:,})" for c in r["top_categories"])
        rows.append(
            f'<tr data-run="{e(r["run"])}"><td class="mono">{e(r["run"])}</td><td>{span}</td>'
            f'<td class="num">{num(r["trajectories"])}</td><td class="num">{num(r["calls"])}</td>'
            f'<td class="num" title="{early}">{pct(r["early_rate"])}</td>'
            f'<td class="num" title="{late}">{pct(r["late_rate"])}</td><td>{warn}</td>'
            f'<td class="num">{e(score)}</td><td class="mono">{e(cats) or "–"}</td></tr>')
    table = ('<div class="scroll"><table class="runs"><thead><tr><th>run</th><th>steps</th>'
             '<th class="num">trajectories</th><th class="num">tool calls</th>'
             '<th class="num">malformed, early</th><th class="num">malformed, late</th><th>early warning</th>'
             '<th class="num">mean score, early → late</th><th>top categories</th></tr></thead><tbody>'
             + "".join(rows) + "</tbody></table></div>")
    totals: dict[str, int] = {}
    for cats_of in d.run_categories.values():
        for k, v in cats_of.items():
            totals[k] = totals.get(k, 0) + v
    shown = [k for k, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:max_categories + 4]]
    names = [r["run"] for r in d.runs if d.run_categories.get(r["run"])]
    by_run = ""
    if shown and names:
        head = "".join(f'<th class="num mono">{e(n)}</th>' for n in names)
        body = []
        for k in shown:
            cells = []
            for n in names:
                got = d.run_categories[n].get(k, 0)
                tot = sum(d.run_categories[n].values()) or 1
                cells.append(f'<td class="num">{"–" if not got else f"{got:,} ({got / tot:.0%})"}</td>')
            body.append(f'<tr><td class="mono">{e(k)}</td>{"".join(cells)}</tr>')
        by_run = ('<h3>Categories by run</h3><p class="muted">Malformed calls flagged with each category, and its '
                  "share of the run's flags (a call can carry several categories).</p>"
                  f'<div class="scroll"><table class="by-run"><thead><tr><th>category</th>{head}</tr></thead>'
                  f'<tbody>{"".join(body)}</tbody></table></div>')
    pooled = (f"lines pool the last {d.runs_window} steps (calls summed)" if d.runs_window > 1
              else "one point per step")
    cap = (f"Every run on one training-step axis. Top: share of tool calls that are malformed; a red triangle marks "
           f"a run's early-warning step. Bottom: mean score (reward per trajectory). Each run's "
           f"{e(', '.join(sorted({str(r['split']) for r in d.runs if r['split']})))} split; {pooled}.")
    fig = figure(charts["runs"], cap, "runs") if "runs" in charts else ""
    return (f'<h2 id="runs">Runs compared</h2><p class="lead">{len(d.runs)} runs in this scan, kept apart: each '
            f"directory of step files is a run. Early = the first quarter of a run's steps, late = the last quarter. "
            f"The sections below show run <code>{e(d.run)}</code> (<code>trajlab report --run NAME</code> for another)."
            f"</p>{table}{fig}{by_run}")


RESCORE_HEADERS = {
    "scored_tokens": "scored tokens",
    "intrusion_rate": "intrusion rate (% of content positions)",
    "dropout_rate": "dropout rate (% of logged control tokens)",
    "mean_logprob": "mean log-prob (nats)",
    "malformations_scored": "malformations scored",
    "malformed_preferred": "malformation preferred over repair",
}


def _rescore_section(d: ReportData, charts: dict[str, str]) -> str:
    r = d.rescore
    if r is None:
        return ""
    fixed = (' These rates use fixed thresholds (τ): a small or early checkpoint that is unsure everywhere counts '
             'as spiky, so read the drift page above first.' if r.drift is not None else '')
    parts = ['<h2 id="rescore">Control-token spikes per checkpoint (fixed thresholds)</h2>',
             '<p class="lead">From <code>trajlab rescore</code>: the logged trajectories teacher-forced through each '
             'checkpoint. An <em>intrusion</em> is a content position where the checkpoint puts most of its '
             'probability on control tokens; a <em>dropout</em> is a control token the trajectory needs that the '
             f'checkpoint makes unlikely.{fixed}</p>']
    if "spikes" in charts:
        parts.append(figure(charts["spikes"], "Spike rates per checkpoint, in training order: intrusions in % of "
                                              "content positions, dropouts in % of logged control tokens.", "spikes"))
    if r.rows:
        cols = list(r.rows[0].keys())
        head = "".join(f'<th class="{"num" if k != "checkpoint" else ""}">{e(RESCORE_HEADERS.get(k, k))}</th>'
                       for k in cols)
        body = "".join("<tr>" + "".join(
            f'<td class="{"num" if k != "checkpoint" else "mono label"}">'
            f'{e(pct(v) if k.endswith("_rate") and isinstance(v, float) else num(v) if k != "checkpoint" else v)}</td>'
            for k, v in row.items()) + "</tr>" for row in r.rows)
        parts.append(f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>')
    if "tokens" in charts:
        parts.append(figure(charts["tokens"], "Control tokens whose mean probability (0–1, averaged over every scored "
                                              "position) changed most between the first and the last checkpoint; "
                                              "red: more likely, blue: less likely.", "tokens"))
    if r.note:
        parts.append(f'<p class="muted">{e(r.note)}</p>')
    return "".join(parts)


def _drift_section(d: ReportData, charts: dict[str, str]) -> str:
    dr = d.rescore.drift if d.rescore is not None else None
    if dr is None:
        return ""
    q = dr.quantile
    parts = ['<h2 id="drift">Drift against the reference checkpoint</h2>',
             f'<p class="lead">Every checkpoint measured against <code>{e(dr.reference)}</code> on the same '
             f'trajectories. <em>Calibrated spikes</em>: control-token probability beyond the reference&#39;s own '
             f'{e(f"{q:.4g}")} quantile, per control token and region (a copy of the reference scores at most '
             f'{e(pct(1 - q, 2))}; a checkpoint that is only more confident scores less). <em>Paired drift</em>: '
             f'at the very tokens where malformed calls depart from their repair, the median change of '
             f'log P(malformed)/P(repaired) against the reference, with a 95% bootstrap interval over '
             f'trajectories.</p>']
    if "drift" in charts:
        parts.append(figure(charts["drift"], "Top: malformed-call rate of the run per training step (dotted lines: "
                                             "the checkpoints). Middle: calibrated spike rate per checkpoint. "
                                             "Bottom: paired drift per checkpoint (nats; 0 = like the reference).",
                            "drift"))
    head = ("<tr><th>checkpoint</th><th class=\"num\">step</th><th class=\"num\">calibrated spike rate</th>"
            "<th class=\"num\">paired drift, nats [95% CI]</th><th class=\"num\">malformation points</th></tr>")
    body = []
    for c in dr.checkpoints:
        if c["is_reference"]:
            drift = "reference"
        elif c["paired_drift"] is None:
            drift = "–"
        else:
            ci = "" if c["paired_lo"] is None else f' [{c["paired_lo"]:+.2f}, {c["paired_hi"]:+.2f}]'
            drift = f'{c["paired_drift"]:+.2f}{ci}'
        body.append(f'<tr><td class="mono label">{e(c["checkpoint"])}</td><td class="num">{e(num(c["step"]))}</td>'
                    f'<td class="num">{e(pct(c["calibrated_rate"], 2))}</td><td class="num">{e(drift)}</td>'
                    f'<td class="num">{e(num(c["paired_points"]))}</td></tr>')
    parts.append(f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></div>')
    if "distribution" in charts:
        parts.append(figure(charts["distribution"], "Share of positions per log10-probability bin (0.25 wide; the "
                                                    "first bin also holds everything below 1e-6): left, control "
                                                    "mass where content was written; right, the probability of a "
                                                    "control token that was written. Black: the reference.",
                            "distribution"))
    if "log_odds" in charts:
        parts.append(figure(charts["log_odds"], "Median log P(malformed)/P(repaired) at the malformation points, per "
                                                "category and checkpoint (above 0: the checkpoint prefers the "
                                                "malformation).", "log_odds"))
    if dr.discovered:
        last = dr.discovered[0]["checkpoint"]
        def g3(v: float | None, suffix: str = "") -> str:
            return "–" if v is None else f"{v:.3g}{suffix}"

        rows = "".join(
            f'<tr><td class="mono">{e(repr(r["token"]))}</td><td>{e(r["group"])}</td>'
            f'<td class="num">{e(g3(r["reference_prob"]))}</td><td class="num">{e(g3(r["prob"]))}</td>'
            f'<td class="num">{e(g3(r["ratio"], "×"))}</td>'
            f'<td>{"configured" if r["is_control"] else "new"}</td></tr>' for r in dr.discovered)
        parts.append(f'<h3 id="discovered">Discovered tokens: {e(last)} against {e(dr.reference)}</h3>'
                     '<p class="lead">Tokens, listed or not, whose mean probability at positions where they were '
                     'not the written token grew most (ranked by mass gained times the log of its growth). A new '
                     'one that looks like part of a malformation can be added to '
                     '<code>rules/control_tokens.yaml</code>.</p>'
                     '<div class="scroll"><table><thead><tr><th>token</th><th>positions</th>'
                     '<th class="num">reference</th><th class="num">now</th><th class="num">growth</th>'
                     f'<th>control list</th></tr></thead><tbody>{rows}</tbody></table></div>')
    return "".join(parts)


def _manifest_note(d: ReportData) -> str:
    """A warning line when the scan's manifest.json was damaged (the report then comes from the tables alone)."""
    if not d.manifest_problem:
        return ""
    return (f'<div class="callout">{e(d.manifest_problem)}: the input list and the scan\'s recorded early warning are '
            "not shown (the early warning is recomputed from the steps table). Re-run the same <code>trajlab scan"
            f" ... -o {e(d.out)}</code> to rewrite it.</div>\n")


def _exact_tokens_section(d: ReportData, charts: dict[str, str]) -> str:
    """Per-step exact-token figures (runs whose dumps log token ids and log-probs, e.g. NeMo-RL)."""
    if "exact_tokens" not in charts:
        return ""
    cap = ("Top: share of tool calls that are malformed. Middle: mean log-prob the inference engine gave the "
           "control tokens it sampled (left) and the share of them sampled at low probability (right). Bottom: "
           "train-inference mismatch, the mean |inference − training| log-prob over generated tokens and over "
           "control tokens. From the token ids and log-probs logged with the run (an exact-token dump, or the "
           "records the verl reward writes per sample), not re-scored by the report.")
    return (f'<h2 id="exact-tokens">Exact tokens: control-token log-probs and train–inference mismatch</h2>\n'
            f'{figure(charts["exact_tokens"], cap, "exact_tokens")}')


def page(d: ReportData, charts: dict[str, str], *, title: str, version: str) -> str:
    """The complete HTML document."""
    nav = ['<a href="#runs">runs</a>'] if len(d.runs) > 1 else []
    nav += ['<a href="#overview">overview</a>', '<a href="#categories">categories</a>',
           '<a href="#names">garbled names</a>', '<a href="#examples">examples</a>']
    if d.training:
        nav.append('<a href="#training">training metrics</a>')
    if d.rescore is not None:
        if d.rescore.drift is not None:
            nav.append('<a href="#drift">drift</a>')
        nav.append('<a href="#rescore">rescore</a>')
    first_rot = ""
    if d.early_warning and d.steps:
        w = d.early_warning["step"]
        before = [s for s in d.steps if s["step"] < w and s["calls"]]
        after = [s for s in d.steps if s["step"] >= w and s["calls"]]
        if before and after:
            rb = sum(s["malformed_calls"] for s in before) / sum(s["calls"] for s in before)
            ra = sum(s["malformed_calls"] for s in after) / sum(s["calls"] for s in after)
            first_rot = (f"<p>Before step {e(w)} {pct(rb)} of tool calls were malformed; from step {e(w)} on, "
                         f"{pct(ra)}.</p>")
    examples = "".join(_example(x, d.out) for x in d.examples) or '<p class="muted">No findings.</p>'
    other = (f'<p class="muted">“other” groups: {e(", ".join(d.other_categories))}.</p>'
             if d.other_categories else "")
    inputs = d.manifest.get("inputs") or []
    src = f"{len(inputs)} input file{'s' if len(inputs) != 1 else ''} · " if inputs else ""
    pooled = ("each line pools the last " + str(d.window) + " steps (calls summed), the dots are single steps"
              if d.window > 1 else "one point per step")
    ov_cap = (f"Top: share of tool calls that are malformed. Bottom: mean score (reward per trajectory, left axis) "
              f"and share of trajectories ending with a final answer (right axis). Split: {e(d.split)}; {pooled}; "
              f"the dashed line marks the early-warning step.")
    cat_cap = (f"One panel per category: the share of tool calls flagged with it (a call can carry several "
               f"categories), on the same scale in every panel; the grey area is the share of malformed calls of "
               f"any category. Lines pool the last {d.window} step{'s' if d.window != 1 else ''}.")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="trajlab {e(version)}">
<title>{e(title)}</title>
<script>{JS_ERRORS}</script>
<style>{CSS}</style>
</head>
<body>
<main>
<h1>{e(title)}</h1>
<p class="lead">{src}scan <code>{e(d.out)}</code> · trajlab {e(version)} · schema {e(d.manifest.get("schema_version", "–"))}</p>
{_manifest_note(d)}<nav>{"".join(nav)}</nav>
{_runs_section(d, charts)}
<h2 id="overview">Run overview{f": <code>{e(d.run)}</code>" if d.run else ""}</h2>
{_cards(d)}
{_warning_callout(d)}
{first_rot}
{figure(charts["overview"], ov_cap, "overview") if "overview" in charts else '<p class="muted">No steps to plot.</p>'}
{figure(charts["reward"], "Mean task_score and format_reward per step, from the keys trajlab's verl reward plugin wrote into the dumps.", "reward") if "reward" in charts else ""}
{_exact_tokens_section(d, charts)}
<h2 id="categories">Malformed calls per step, by category</h2>
{figure(charts["categories"], cat_cap, "categories") if "categories" in charts else ""}
{_category_table(d)}
{other}
<h2 id="names">Top garbled function names</h2>
<p class="lead">Names written in calls that are not a declared tool, with the declared tool they are closest to
(the part after the shared prefix is red).</p>
{_garbled_table(d)}
<h2 id="examples">One example per category</h2>
<p class="lead">The offending span is highlighted in the text as generated; the repair trajlab proposes is on the
right. Open the whole trajectory with the command under each example.</p>
{examples}
{training_section(d.training, charts)}
{_drift_section(d, charts)}
{_rescore_section(d, charts)}
<p class="muted" style="margin-top:40px">Ask your own questions: <code>trajlab sql {e(d.out)}</code> lists the tables.</p>
</main>
<script>{JS_READY}</script>
</body>
</html>
"""

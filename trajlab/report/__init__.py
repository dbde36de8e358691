"""``trajlab report``: one self-contained HTML file with the run's curves, the early warning and examples.

:func:`report` reads a scan output directory (and its rescore results when present) through the read-only
DuckDB views of :mod:`trajlab.query`, draws the charts with matplotlib as inline SVG and writes a single
HTML file that opens offline: no CDN, no external file, a Content-Security-Policy that forbids both.
"""

from __future__ import annotations

import os
from pathlib import Path

from trajlab.report.options import ReportOptions

__all__ = ["report", "ReportOptions"]


def report(out: Path | str, output_html: Path | str, options: ReportOptions | None = None) -> Path:
    """Write the HTML report of the scan at ``out`` to ``output_html`` (atomically) and return its path.

    Sections: run overview (trajectories, calls, malformed rate, final-answer rate, score over steps), the
    malformed-call rate per step by category with the early-warning step marked, the top garbled function
    names and their nearest tools, one example per category with the offending span highlighted next to its
    repair, and, when rescore results exist, spike rates per checkpoint and the control tokens that moved most.
    ``options`` (:class:`~trajlab.report.options.ReportOptions`; default: all defaults): ``split`` picks the split
    plotted (default ``train``, else the one with most steps); ``max_categories`` panels are drawn (the rest are
    summed as "other"). ``window``: steps pooled by the charts' lines (default: enough steps for about 50 tool
    calls; 1 plots every step on its own). With several runs in the scan, a "Runs compared" section comes first (a
    row per run, every run's malformed-call rate and mean score on one step axis, categories by run) and the
    per-step sections show ``run`` (default: the largest run that warned).

    Example::

        trajlab.report("out", "report.html")
        trajlab.report("out", "run_b.html", trajlab.ReportOptions(run="exp_b", window=1))
    """
    from trajlab import __version__
    from trajlab.atomic import atomic_write_bytes, default_file_mode
    from trajlab.outpaths import check_out_file
    from trajlab.report import charts
    from trajlab.report.data import collect
    from trajlab.report.html import page

    opts = options if options is not None else ReportOptions()
    title, window = opts.title, opts.window
    dest = check_out_file(output_html, report=True)  # before any work: never replace a file trajlab did not write
    data = collect(out, split=opts.split, max_categories=opts.max_categories, top_names=opts.top_names,
                   examples_per_category=opts.examples_per_category, window=window, run=opts.run)
    warn = data.early_warning.get("step") if data.early_warning else None
    figs: dict[str, str] = {}
    if data.steps:
        col = {k: [st[k] for st in data.steps] for k in ("step", "calls", "malformed_calls", "trajectories",
                                                          "mean_score", "final_answer_rate")}
        figs["overview"] = charts.overview_chart(
            col["step"], col["calls"], col["malformed_calls"], col["trajectories"], col["mean_score"],
            col["final_answer_rate"], warn, data.split, window=data.window)
        if any(st.get("generated_tokens") is not None for st in data.steps):  # a run with exact tokens
            ex = {k: [st.get(k) for st in data.steps] for k in (
                "control_logprob_mean", "control_low_prob_share", "logprob_mismatch", "control_logprob_mismatch")}
            figs["exact_tokens"] = charts.exact_token_chart(
                col["step"], col["calls"], col["malformed_calls"], ex["control_logprob_mean"],
                ex["control_low_prob_share"], ex["logprob_mismatch"], ex["control_logprob_mismatch"], warn,
                data.split, (data.manifest.get("options") or {}).get("control_prob"))
        if data.categories:
            figs["categories"] = charts.category_chart(
                col["step"], col["calls"], data.categories, col["malformed_calls"], warn, data.split,
                window=data.window)
    from trajlab.verl.readback import reward_steps

    rw = reward_steps(out, run=data.run, split=data.split)
    if len(rw) > 1:  # the verl reward plugin's keys in the dumps
        figs["reward"] = charts.reward_chart([r["step"] for r in rw], [r["task_score"] for r in rw],
                                             [r["format_reward"] for r in rw], data.split)
    if len(data.runs) > 1:
        from trajlab.report.data import auto_window

        series = {name: {k: [st[k] for st in rows] for k in ("step", "calls", "malformed_calls", "trajectories",
                                                             "mean_score")}
                  for name, rows in data.run_steps.items() if len(rows) > 1}
        if series:
            w = data.runs_window = window or max(auto_window(col["calls"]) for col in series.values())
            figs["runs"] = charts.runs_chart(
                series, {r["run"]: (r["early_warning"] or {}).get("step") for r in data.runs}, window=w)
    r = data.rescore
    if r is not None and r.checkpoints:
        figs["spikes"] = charts.spike_chart(r.checkpoints, r.intrusion, r.dropout, r.units)
        if r.moved:
            figs["tokens"] = charts.token_shift_chart([m["token"] for m in r.moved], [m["delta"] for m in r.moved],
                                                      r.checkpoints[0], r.checkpoints[-1], r.moved_units)
        d = r.drift
        if d is not None and d.checkpoints:
            from trajlab.report.data import rolling_ratio

            st = [s["step"] for s in data.steps]
            rate = rolling_ratio([s["malformed_calls"] for s in data.steps], [s["calls"] for s in data.steps],
                                 data.window)  # fmt: skip
            figs["drift"] = charts.drift_chart(st, rate, d.checkpoints, d.quantile, d.reference, data.split,
                                               window=data.window)  # fmt: skip
            if d.distribution:
                figs["distribution"] = charts.distribution_chart(d.distribution, d.reference)
            if d.log_odds:
                have = all(c["step"] is not None for c in d.checkpoints)
                xs = [c["step"] if have else i for i, c in enumerate(d.checkpoints)]
                figs["log_odds"] = charts.log_odds_chart(xs, [c["checkpoint"] for c in d.checkpoints], d.log_odds,
                                                         have)  # fmt: skip
    from trajlab.report.training import add_panels

    add_panels(data, figs, out, opts.metrics)
    name = Path(out).resolve().name
    doc = page(data, figs, title=title or f"trajlab report: {name}", version=__version__)
    atomic_write_bytes(dest, doc.encode("utf-8"))
    os.chmod(dest, default_file_mode())  # the atomic write's temp file is 0600; a report is meant to be shared
    return dest


from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, report)

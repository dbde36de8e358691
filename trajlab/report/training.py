"""The report's training-metrics panel: per run, trajlab's malformed-call rate and early warning stacked over the
trainer's own curves (reward, entropy, response length, turns, the rollout/training probability gap) on one step
axis, with the lead time in words.

:func:`panel_metrics` picks the curves (the user's list, else the defaults of :data:`DEFAULT_GROUPS` that the
run logged), :func:`collect_training` reads them from the scan's ``metrics`` table, :func:`training_chart` draws
one run's panel and :func:`training_section` is the page's section.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from trajlab.report.data import ReportData

#: default panel rows: a label and the metric names tried in order (the first one the run logged is drawn)
DEFAULT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward", ("critic/score/mean", "critic/rewards/mean")),
    ("validation", ("val-core/",)),  # a prefix: the first val-core/ metric
    ("entropy", ("actor/entropy",)),
    ("response length", ("response_length/mean",)),
    ("turns", ("training/num_turns/mean", "num_turns/mean")),
    ("probability gap", ("training/rollout_probs_diff_mean", "rollout_corr/")),
)


def panel_metrics(names: Sequence[str], wanted: Sequence[str] = ()) -> list[str]:
    """The metrics drawn for a run that logged ``names``: the ``wanted`` ones it has (a name ending in ``/`` is a
    prefix: its first metric), else one per :data:`DEFAULT_GROUPS` row."""
    have = sorted(set(names))
    out: list[str] = []
    for want in (wanted or [c for _, cands in DEFAULT_GROUPS for c in cands]):
        hit = ([n for n in have if n.startswith(want)][:1] if want.endswith("/") else
               ([want] if want in have else []))
        if not hit:
            continue
        if not wanted:  # one metric per default group
            group = next(g for g, cands in DEFAULT_GROUPS if want in cands)
            if any(g == group for g, _ in out_groups(out)):
                continue
        if hit[0] not in out:
            out.append(hit[0])
    return out


def out_groups(chosen: Sequence[str]) -> list[tuple[str, str]]:
    """``(group label, metric)`` of each chosen metric (``other`` for metrics outside the default groups)."""
    got = []
    for m in chosen:
        g = next((g for g, cands in DEFAULT_GROUPS
                  if any(m == c or (c.endswith("/") and m.startswith(c)) for c in cands)), "other")
        got.append((g, m))
    return got


def collect_training(out: Path | str, steps_by_run: dict[str, list[dict[str, Any]]], wanted: Sequence[str] = (),
                     lead: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One panel record per run that has metrics: ``run``, ``steps`` (its trajlab steps: step, calls,
    malformed_calls), ``metrics`` ({name: [(step, value)]}), ``lead`` (its lead-time record or None)."""
    from trajlab.metrics.load import metric_names, read_metrics, series

    panels = []
    for run, names in metric_names(out).items():
        chosen = panel_metrics(names, wanted)
        if not chosen:
            continue
        rows = read_metrics(out, chosen, run)
        panels.append({
            "run": run,
            "steps": steps_by_run.get(run, []),
            "metrics": {m: series(rows, run, m) for m in chosen},
            "lead": next((x for x in lead if x.get("run") == run), None),
        })
    return panels


def training_chart(panel: dict[str, Any], warn_step: int | None) -> str:
    """One run's panel: the malformed-call rate on top, one row per metric below, one shared step axis; the
    early-warning step is a dashed line through every row, the metric's breakdown step a dotted one on its row."""
    from trajlab.report.charts import PALETTE, RC, mark_warning, pct_axis, pyplot, to_svg

    plt = pyplot()
    metrics: dict[str, list[tuple[int, float]]] = panel["metrics"]
    lead = panel.get("lead") or {}
    rows = 1 + len(metrics)
    st = [s for s in panel["steps"] if s.get("calls")]
    with plt.rc_context(RC):
        fig, axes = plt.subplots(rows, 1, figsize=(9.5, 1.9 + 1.45 * rows), sharex=True)
        axes = list(axes) if rows > 1 else [axes]
        ax = axes[0]
        rate = [s["malformed_calls"] / s["calls"] for s in st]
        ax.plot([s["step"] for s in st], rate, color=PALETTE[1], linewidth=1.8, label="malformed calls")
        pct_axis(ax, top=max(0.05, max(rate, default=0.0) * 1.12))
        ax.set_ylabel("malformed\n(% of calls)")
        ax.set_title(plain(f"Training metrics beside the malformed-call rate: {panel['run']}"), loc="left")
        mark_warning(ax, warn_step)
        for i, (name, pts) in enumerate(metrics.items(), 1):
            a = axes[i]
            xs = [s for s, v in pts]
            ys = [v if math.isfinite(v) else float("nan") for _, v in pts]
            a.plot(xs, ys, color=PALETTE[(i + 1) % len(PALETTE)] if i != 1 else PALETTE[0], linewidth=1.6,
                   marker="o" if len(xs) < 30 else None, markersize=3)
            a.set_ylabel(_wrap(name), fontsize=9)
            mark_warning(a, warn_step, label=False)
            if lead.get("metric") == name and lead.get("breakdown_step") is not None:
                b = lead["breakdown_step"]
                a.axvline(b, color="#444444", linestyle=":", linewidth=1.6, zorder=5)
                a.annotate(f"{'fell' if lead.get('direction', 'down') == 'down' else 'rose'} at step {b}",
                           xy=(b, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -4),
                           textcoords="offset points", ha="left", va="top", fontsize=9, color="#444444")
        axes[-1].set_xlabel("training step")
        fig.align_ylabels(axes)
        return to_svg(fig)


def plain(text: str) -> str:
    """Text matplotlib draws as written (a ``$`` would start its math mode)."""
    return text.replace("$", r"\$")


def _wrap(name: str, width: int = 18) -> str:
    if len(name) <= width or "/" not in name:
        return plain(name)
    head, _, tail = name.rpartition("/")
    return plain(f"{head}/\n{tail}")


def training_section(panels: Sequence[dict[str, Any]], charts: dict[str, str]) -> str:
    """The page's section: per run its lead time in words and its panel (nothing when no run has metrics)."""
    if not panels:
        return ""
    e = html.escape
    parts = ['<h2 id="training">Training metrics</h2>',
             '<p class="lead">The trainer\'s own curves (verl\'s file logger or TensorBoard logs, table '
             '<code>metrics</code>) under trajlab\'s malformed-call rate, on one step axis. The dashed line is '
             'trajlab\'s early warning; the dotted line is where the reward broke down by the stated test.</p>']
    for i, p in enumerate(panels):
        lead = p.get("lead")
        if lead:
            bd = lead.get("breakdown") or {}
            cls = "callout" if lead.get("lead_steps") is not None and lead["lead_steps"] > 0 else "callout none"
            parts.append(f'<div class="{cls}" data-lead-steps="{e(str(lead.get("lead_steps")))}"><strong>'
                         f'{e(p["run"])}: {e(lead["sentence"])}.</strong>'
                         + (f'<br><span class="muted">Breakdown test: {e(bd["statistic"])}; p = '
                            f'{bd["p_value"]:.2g}.</span>' if bd else "") + "</div>")
        key = f"training_{i}"
        if key in charts:
            cap = (f"Run {e(p['run'])}: " + ", ".join(f"<code>{e(m)}</code>" for m in p["metrics"])
                   + " as logged by the trainer, one point per step.")
            parts.append(f'<figure class="chart" data-chart="{e(key)}">{charts[key]}<figcaption>{cap}'
                         "</figcaption></figure>")
    return "\n".join(parts)


def add_panels(data: ReportData, figs: dict[str, str], out: Path | str, wanted: Sequence[str] = ()) -> None:
    """The panel of every run with metrics into ``data.training`` and its chart into ``figs`` (``training_<i>``);
    each run's steps of its main split from the scan's ``steps`` table, the lead times from ``manifest.json``."""
    import pyarrow.parquet as pq

    from trajlab.tables import table_path
    from trajlab.trends import run_warnings

    steps = pq.read_table(table_path(out, "steps")).to_pylist()
    warnings = run_warnings(steps)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for run, w in warnings.items():
        rows = [r for r in steps if r["run"] == run and r["step"] is not None]
        count: dict[str, int] = {}
        for r in rows:
            count[r["split"]] = count.get(r["split"], 0) + 1
        ordered = sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))
        main = str((w or {}).get("split") or ("train" if "train" in count else (ordered[0][0] if ordered else "")))
        by_run[run] = sorted((r for r in rows if r["split"] == main), key=lambda r: int(r["step"]))
    lead = (data.manifest or {}).get("summary", {}).get("lead_times") or []
    data.training = collect_training(out, by_run, wanted, lead)
    for i, p in enumerate(data.training):
        figs[f"training_{i}"] = training_chart(p, (warnings.get(p["run"]) or {}).get("step"))

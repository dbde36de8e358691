"""The report's charts: matplotlib figures rendered to inline SVG (no files, no CDN, deterministic bytes).

Every chart has a title, labelled axes with units, a legend when it has several series, and marks the
early-warning step when there is one. Text stays text in the SVG (``svg.fonttype = none``), so it is crisp,
searchable and small; the browser's sans-serif font draws it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import Any

#: Colour cycle (matplotlib's tab10, colour-blind friendlier order first).
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f"]
WARN_COLOR = "#b00020"

_RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "trajlab",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica", "sans-serif"],
    "font.size": 10.5,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 10.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.8,
    "legend.frameon": False,
    "legend.fontsize": 9.5,
}


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def to_svg(fig: Any) -> str:
    """Serialise a figure to an ``<svg>`` element (XML prolog and comments stripped) and close it."""
    plt = _plt()
    buf = io.StringIO()
    with plt.rc_context(_RC):  # (a figure built in the context may be saved after it: text stays text)
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<!--.*?-->", "", svg, flags=re.S)
    # Let the page size it: keep the viewBox, drop the fixed width/height in pt.
    svg = re.sub(r'(<svg[^>]*?)\swidth="[^"]*"\sheight="[^"]*"', r"\1", svg, count=1)
    return svg.replace("<svg ", '<svg role="img" preserveAspectRatio="xMidYMid meet" ', 1)


def _mark_warning(ax: Any, warn_step: int | None, label: bool = True) -> None:
    if warn_step is None:
        return
    ax.axvline(warn_step, color=WARN_COLOR, linestyle="--", linewidth=1.4, zorder=5)
    if label:
        ax.annotate(f"early warning\nstep {warn_step}", xy=(warn_step, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(4, -4), textcoords="offset points", ha="left", va="top", color=WARN_COLOR,
                    fontsize=9.5, fontweight="bold")


def _pct_axis(ax: Any, top: float | None = None) -> None:
    from matplotlib.ticker import PercentFormatter

    decimals = 0 if not top or top >= 0.05 else 1 if top >= 0.005 else 2
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=decimals))
    ax.set_ylim(0, top if top else None)


def _window_label(window: int) -> str:
    return "per step" if window <= 1 else f"pooled over the last {window} steps"


def overview_chart(steps: Sequence[int], calls: Sequence[int], malformed: Sequence[int],
                   trajectories: Sequence[int], mean_score: Sequence[float | None],
                   final_answer_rate: Sequence[float | None], warn_step: int | None, split: str,
                   window: int = 1) -> str:
    """Two stacked panels over training steps: the malformed-call rate; mean score and final-answer rate.

    Each step's own value is a faint dot; the line pools the last ``window`` steps (calls or trajectories
    summed), so a few calls per step do not turn the curve into noise.
    """
    from trajlab.report.data import rolling_ratio

    plt = _plt()
    raw_rate = [m / c if c else None for m, c in zip(malformed, calls, strict=True)]
    rate = rolling_ratio(list(malformed), list(calls), window)
    score_w = [None if s is None else s * n for s, n in zip(mean_score, trajectories, strict=True)]
    score = rolling_ratio(score_w, list(trajectories), window)
    far_w = [None if f is None else f * n for f, n in zip(final_answer_rate, trajectories, strict=True)]
    far = rolling_ratio(far_w, list(trajectories), window)
    pooled = _window_label(window)
    with plt.rc_context(_RC):
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9.5, 5.8), sharex=True, height_ratios=[1, 1])
        if window > 1:
            ax1.scatter(steps, _nan(raw_rate), s=9, color=PALETTE[1], alpha=0.3, linewidths=0, label="one step")
        ax1.plot(steps, _nan(rate), color=PALETTE[1], linewidth=2.0, label=f"malformed calls, {pooled}")
        _pct_axis(ax1, top=max(0.05, _max([*rate, *(raw_rate if window > 1 else [])]) * 1.12))
        ax1.set_ylabel("malformed calls\n(% of tool calls)")
        ax1.set_title(f"Run overview ({split} split)", loc="left")
        ax1.legend(loc="upper left", bbox_to_anchor=(0.0, 0.9) if warn_step is not None else None)
        _mark_warning(ax1, warn_step)
        if window > 1:
            ax2.scatter(steps, _nan(mean_score), s=9, color=PALETTE[0], alpha=0.3, linewidths=0)
        ax2.plot(steps, _nan(score), color=PALETTE[0], linewidth=2.0, label=f"mean score (reward), {pooled}")
        ax2.set_ylabel("mean score\n(reward per trajectory)")
        ax3 = ax2.twinx()
        ax3.plot(steps, _nan(far), color=PALETTE[2], linestyle="-.", linewidth=1.6,
                 label="trajectories with a final answer")
        _pct_axis(ax3, top=1.05)
        ax3.set_ylabel("trajectories with a\nfinal answer (%)")
        ax3.grid(False)
        ax3.spines["right"].set_visible(True)
        _mark_warning(ax2, warn_step, label=False)
        h1, l1 = ax2.get_legend_handles_labels()
        h2, l2 = ax3.get_legend_handles_labels()
        ax2.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncols=2)
        ax2.set_xlabel("training step")
        fig.align_ylabels([ax1, ax2])
        return to_svg(fig)


def exact_token_chart(steps: Sequence[int], calls: Sequence[int], malformed: Sequence[int],
                      control_logprob: Sequence[float | None], low_share: Sequence[float | None],
                      mismatch: Sequence[float | None], control_mismatch: Sequence[float | None],
                      warn_step: int | None, split: str, control_prob: float | None = None) -> str:
    """Three stacked panels over training steps for runs with exact tokens: the malformed-call rate; the mean
    log-prob of the sampled control tokens with the share sampled below the low-probability threshold; and the
    train-inference mismatch (mean |inference - training| log-prob) over generated and over control tokens."""
    plt = _plt()
    rate = [m / c if c else None for m, c in zip(malformed, calls, strict=True)]
    below = f"below p={control_prob:g}" if control_prob is not None else "at low probability"
    with plt.rc_context(_RC):
        fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(9.5, 7.4), sharex=True)
        ax1.plot(steps, _nan(rate), color=PALETTE[1], linewidth=2.0, marker="o", markersize=3,
                 label="malformed calls")
        _pct_axis(ax1, top=max(0.05, _max(rate) * 1.12))
        ax1.set_ylabel("malformed calls\n(% of tool calls)")
        ax1.set_title(f"Exact tokens ({split} split)", loc="left")
        _mark_warning(ax1, warn_step)
        ax1.legend(loc="upper left")
        ax2.plot(steps, _nan(control_logprob), color=PALETTE[0], linewidth=2.0, marker="o", markersize=3,
                 label="mean log-prob of sampled control tokens")
        ax2.set_ylabel("log-prob\n(nats)")
        ax2b = ax2.twinx()
        ax2b.plot(steps, _nan(low_share), color=PALETTE[2], linestyle="-.", linewidth=1.6,
                  label=f"control tokens sampled {below}")
        _pct_axis(ax2b, top=max(0.05, _max(low_share) * 1.12))
        ax2b.set_ylabel(f"sampled {below}\n(% of control tokens)")
        ax2b.grid(False)
        ax2b.spines["right"].set_visible(True)
        h1, l1 = ax2.get_legend_handles_labels()
        h2, l2 = ax2b.get_legend_handles_labels()
        ax2.legend(h1 + h2, l1 + l2, loc="upper left")
        _mark_warning(ax2, warn_step, label=False)
        ax3.plot(steps, _nan(mismatch), color=PALETTE[3 % len(PALETTE)], linewidth=2.0, marker="o", markersize=3,
                 label="all generated tokens")
        ax3.plot(steps, _nan(control_mismatch), color=PALETTE[4 % len(PALETTE)], linestyle="--", linewidth=1.6,
                 marker="o", markersize=3, label="control tokens")
        ax3.set_ylabel("train-inference\nmismatch (nats)")
        ax3.legend(loc="upper left")
        _mark_warning(ax3, warn_step, label=False)
        ax3.set_xlabel("training step")
        fig.align_ylabels([ax1, ax2, ax3])
        return to_svg(fig)


def runs_chart(series: dict[str, dict[str, list[Any]]], warnings: dict[str, int | None], window: int = 1) -> str:
    """Every run on one step axis: the malformed-call rate (top) and the mean score (bottom), one colour per run,
    each run's early-warning step marked with a triangle on its own line.

    ``series``: run -> ``{"step", "calls", "malformed_calls", "trajectories", "mean_score"}`` lists.
    """
    from trajlab.report.data import rolling_ratio

    plt = _plt()
    pooled = _window_label(window)
    with plt.rc_context(_RC):
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9.5, 6.2), sharex=True, height_ratios=[1.2, 1])
        top = 0.05
        for i, (run, col) in enumerate(series.items()):
            color = PALETTE[i % len(PALETTE)]
            rate = rolling_ratio(list(col["malformed_calls"]), list(col["calls"]), window)
            score_w = [None if v is None else v * n for v, n in zip(col["mean_score"], col["trajectories"],
                                                                    strict=True)]
            score = rolling_ratio(score_w, list(col["trajectories"]), window)
            top = max(top, _max(rate) * 1.12)
            w = warnings.get(run)
            ax1.plot(col["step"], _nan(rate), color=color, linewidth=1.9,
                     label=run + (f" (early warning at step {w})" if w is not None else " (no early warning)"))
            ax2.plot(col["step"], _nan(score), color=color, linewidth=1.9, label=run)
            if w is not None and w in col["step"]:
                k = col["step"].index(w)
                if rate[k] is not None:
                    ax1.plot([w], [rate[k]], marker="v", markersize=10, color=WARN_COLOR,
                             markeredgecolor="white", zorder=6)
        _pct_axis(ax1, top=top)
        ax1.set_ylabel("malformed calls\n(% of tool calls)")
        ax1.set_title(f"Runs compared: malformed-call rate and mean score, {pooled}", loc="left")
        ax1.legend(loc="upper left")
        ax2.set_ylabel("mean score\n(reward per trajectory)")
        ax2.set_xlabel("training step")
        fig.align_ylabels([ax1, ax2])
        return to_svg(fig)


def category_chart(steps: Sequence[int], calls: Sequence[int], counts: dict[str, Sequence[int]],
                   malformed: Sequence[int], warn_step: int | None, split: str, window: int = 1) -> str:
    """Small multiples: one panel per category with its share of tool calls over steps, on a shared y axis.

    Every panel also draws the any-category rate in grey for scale and marks the early-warning step.
    """
    return to_svg(category_figure(steps, calls, counts, malformed, warn_step, split, window))


def fit_titles(fig: Any, gap_px: float = 6.0) -> int:
    """Shorten (with "…") each panel's left title until it ends before its right title, as drawn; returns how many
    were shortened. Measured on the laid-out figure, so it holds for any font and panel width."""
    fig.draw_without_rendering()
    shortened = 0
    for ax in fig.axes:
        left, right = ax._left_title, ax._right_title  # (set_title(loc=...) keeps them only there)
        if not left.get_text() or not right.get_text():
            continue
        text = left.get_text()
        cut = False
        while len(text) > 2 and left.get_window_extent().x1 + gap_px > right.get_window_extent().x0:
            text = text[:-2] + "…" if text.endswith("…") else text[:-1] + "…"
            text = text.replace("……", "…")
            left.set_text(text)
            cut = True
        shortened += cut
    return shortened


def category_figure(steps: Sequence[int], calls: Sequence[int], counts: dict[str, Sequence[int]],
                    malformed: Sequence[int], warn_step: int | None, split: str, window: int = 1) -> Any:
    """The figure :func:`category_chart` draws (open: the caller saves or closes it)."""
    from trajlab.report.data import rolling_ratio

    plt = _plt()
    cats = list(counts)
    n = max(1, len(cats))
    ncols = 1 if n == 1 else 2 if n <= 4 else 3
    nrows = -(-n // ncols)
    total = rolling_ratio(list(malformed), list(calls), window)
    series = {c: rolling_ratio(list(v), list(calls), window) for c, v in counts.items()}
    top = max(0.05, _max(total) * 1.1)
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(nrows, ncols, figsize=(9.5, 1.1 + 2.05 * nrows), sharex=True, sharey=True,
                                 squeeze=False)
        for i, ax in enumerate(axes.flat):
            if i >= n:
                ax.set_visible(False)
                continue
            if not cats:
                break
            c = cats[i]
            ax.fill_between(steps, _nan(total), color="#bbbbbb", alpha=0.35, linewidth=0,
                            label="any category" if i == 0 else None)
            ax.plot(steps, _nan(series[c]), color=PALETTE[i % len(PALETTE)], linewidth=1.9)
            ax.set_title(c if len(c) <= 28 else c[:27] + "…", loc="left", fontsize=10, fontweight="bold")
            ax.set_title(f"{sum(counts[c]):,} calls", loc="right", fontsize=8.5, color="#444444")
            _mark_warning(ax, warn_step, label=(i == 0))
            _pct_axis(ax, top=top)
            if i % ncols == 0:
                ax.set_ylabel("% of tool calls")
            if i >= n - ncols:
                ax.set_xlabel("training step")
                ax.xaxis.set_tick_params(labelbottom=True)
        if cats:
            axes.flat[0].legend(loc="upper left", bbox_to_anchor=(0.0, 0.78), fontsize=8.5)
        fig.suptitle(f"Malformed-call rate by category ({split} split, {_window_label(window)})", x=0.01,
                     ha="left", fontsize=12, fontweight="bold")
        fig.tight_layout()
        fit_titles(fig)
        return fig


def spike_chart(checkpoints: Sequence[str], intrusion: Sequence[float | None],
                dropout: Sequence[float | None], units: str) -> str:
    """Intrusion and dropout spike rates per checkpoint (grouped bars, checkpoints in training order)."""
    plt = _plt()
    import numpy as np

    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9.5, 3.9))
        x = np.arange(len(checkpoints))
        w = 0.38
        b1 = ax.bar(x - w / 2, _nan(intrusion), w, color=PALETTE[3], label="intrusion (control-token mass at a content position)")
        b2 = ax.bar(x + w / 2, _nan(dropout), w, color=PALETTE[4], label="dropout (a required control token made unlikely)")
        for bars in (b1, b2):
            ax.bar_label(bars, labels=[_pct_label(v) for v in bars.datavalues], fontsize=8.5, padding=2)
        ax.set_xticks(x, checkpoints, rotation=20 if max((len(c) for c in checkpoints), default=0) > 10 else 0,
                      ha="right" if max((len(c) for c in checkpoints), default=0) > 10 else "center")
        _pct_axis(ax, top=max(0.01, _max([*intrusion, *dropout]) * 1.3))
        ax.set_xlabel("checkpoint")
        ax.set_ylabel(f"spikes\n(% of {units})")
        ax.set_title("Control-token spike rates per checkpoint", loc="left")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22 if max((len(c) for c in checkpoints), default=0) <= 10
                                                     else -0.42), ncols=2)
        ax.grid(axis="x", visible=False)
        return to_svg(fig)


def token_shift_chart(tokens: Sequence[str], deltas: Sequence[float], first: str, last: str, units: str) -> str:
    """Horizontal bars: the control tokens whose statistic moved most between two checkpoints."""
    plt = _plt()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9.5, 0.9 + 0.36 * max(1, len(tokens))))
        y = list(range(len(tokens)))[::-1]
        colors = [PALETTE[1] if d > 0 else PALETTE[0] for d in deltas]
        bars = ax.barh(y, deltas, color=colors, height=0.6)
        ax.bar_label(bars, labels=[f"{d:+.3g}" for d in deltas], fontsize=8.5, padding=3)
        ax.set_yticks(y, [repr(t)[1:-1] if t.strip() == t and t else repr(t) for t in tokens])
        ax.axvline(0, color="#444444", linewidth=0.9)
        ax.set_xlabel(f"change from {first} to {last} ({units})")
        ax.set_title("Control tokens that moved most", loc="left")
        ax.grid(axis="y", visible=False)
        lo, hi = min([0.0, *deltas]), max([0.0, *deltas])
        pad = (hi - lo) * 0.18 or 0.01
        ax.set_xlim(lo - (pad if lo < 0 else 0), hi + (pad if hi > 0 else 0))
        return to_svg(fig)


def drift_chart(steps: Sequence[int], malformed_rate: Sequence[float | None], checkpoints: Sequence[dict[str, Any]],
                quantile: float, reference: str, split: str, window: int = 1) -> str:
    """Three panels on one training-step axis: the malformed-call rate, each checkpoint's calibrated spike rate
    (against the reference; a copy of the reference scores 1 - quantile), and its paired drift with 95 % CI."""
    plt = _plt()
    have_steps = all(c["step"] is not None for c in checkpoints)
    xs = [c["step"] if have_steps else i for i, c in enumerate(checkpoints)]
    labels = [c["checkpoint"] for c in checkpoints]
    with plt.rc_context(_RC):
        n = 3 if have_steps and steps else 2
        fig, axes = plt.subplots(n, 1, figsize=(9.5, 2.3 * n + 0.8), sharex=True)
        axes = list(axes)
        if n == 3:
            ax0 = axes.pop(0)
            ax0.plot(steps, _nan(malformed_rate), color=PALETTE[1], linewidth=2.0,
                     label=f"malformed calls, {_window_label(window)}")
            _pct_axis(ax0, top=max(0.05, _max(malformed_rate) * 1.15))
            ax0.set_ylabel("malformed calls\n(% of tool calls)")
            ax0.set_title(f"Drift against the reference {reference} ({split} split)", loc="left")
            ax0.legend(loc="upper left")
            for x in xs:
                ax0.axvline(x, color="#999999", linewidth=0.8, linestyle=":")
        ax1, ax2 = axes
        cal = [c["calibrated_rate"] for c in checkpoints]
        ax1.plot(xs, _nan(cal), color=PALETTE[3], marker="o", linewidth=2.0, label="calibrated spike rate")
        ax1.axhline(1 - quantile, color="#666666", linestyle="--", linewidth=1.0,
                    label=f"a copy of the reference ({1 - quantile:.2%})")
        for x, v, c in zip(xs, cal, checkpoints, strict=True):
            if v is not None:
                ax1.annotate(_pct_label(v) + (" (reference)" if c["is_reference"] else ""), (x, v),
                             xytext=(0, 6), textcoords="offset points", ha="center", fontsize=8.5)
        _pct_axis(ax1, top=max(0.01, _max(cal) * 1.35))
        ax1.set_ylabel("calibrated spikes\n(% of units)")
        ax1.legend(loc="upper left", fontsize=8.5)
        if n == 2:
            ax1.set_title(f"Drift against the reference {reference}", loc="left")
        med = [c["paired_drift"] for c in checkpoints]
        lo = [c["paired_lo"] if c["paired_lo"] is not None else c["paired_drift"] for c in checkpoints]
        hi = [c["paired_hi"] if c["paired_hi"] is not None else c["paired_drift"] for c in checkpoints]
        err = [[(m - a) if m is not None and a is not None else 0 for m, a in zip(med, lo, strict=True)],
               [(b - m) if m is not None and b is not None else 0 for m, b in zip(med, hi, strict=True)]]
        ax2.errorbar(xs, _nan(med), yerr=err, color=PALETTE[0], marker="s", linewidth=2.0, capsize=4,
                     label="paired drift: median change of log P(malformed)/P(repaired), 95% CI")
        ax2.axhline(0, color="#444444", linewidth=0.9)
        ax2.set_ylabel("paired drift\n(nats)")
        ax2.legend(loc="upper left", fontsize=8.5)
        ax2.set_xlabel("training step" if have_steps else "checkpoint")
        if not have_steps:
            ax2.set_xticks(xs, labels)
        fig.align_ylabels(axes if n == 2 else [ax0, ax1, ax2])
        fig.tight_layout()
        return to_svg(fig)


def distribution_chart(dist: dict[str, list[dict[str, Any]]], reference: str) -> str:
    """Per kind (intrusion, dropout), the share of positions per log10-probability bin, one line per checkpoint
    (darker = later), the reference drawn thick and black on top."""
    plt = _plt()
    kinds = [k for k in ("intrusion", "dropout") if dist.get(k)]
    titles = {"intrusion": "control mass at content positions", "dropout": "probability of a logged control token"}
    with plt.rc_context(_RC):
        fig, axes = plt.subplots(1, max(1, len(kinds)), figsize=(9.5, 3.6), squeeze=False)
        cmap = plt.get_cmap("viridis")
        for ax, kind in zip(axes.flat, kinds, strict=False):
            rows = dist[kind]
            labels = list(dict.fromkeys(r["checkpoint"] for r in rows))
            others = [lab for lab in labels if lab != reference]
            for i, lab in enumerate(others):
                rr = [r for r in rows if r["checkpoint"] == lab]
                step = rr[0]["step"]
                ax.plot([(r["log10_lo"] + r["log10_hi"]) / 2 for r in rr], [r["share"] for r in rr],
                        color=cmap(0.15 + 0.75 * i / max(1, len(others) - 1)), linewidth=1.5,
                        label=lab if step is None else f"step {step}")
            rr = [r for r in rows if r["checkpoint"] == reference]
            if rr:
                ax.plot([(r["log10_lo"] + r["log10_hi"]) / 2 for r in rr], [r["share"] for r in rr], color="black",
                        linewidth=2.6, label=f"reference ({reference})", zorder=5)
            _pct_axis(ax)
            ax.set_title(titles[kind], loc="left", fontsize=10.5)
            ax.set_xlabel("log10 probability")
        axes.flat[0].set_ylabel("% of positions")
        axes.flat[0].legend(loc="upper left", fontsize=8)
        fig.suptitle("Control-token probability per checkpoint", x=0.01, ha="left", fontsize=12, fontweight="bold")
        fig.tight_layout()
        return to_svg(fig)


def log_odds_chart(xs: Sequence[int], xlabels: Sequence[str], log_odds: dict[str, Sequence[float | None]],
                   have_steps: bool) -> str:
    """Median log P(malformed)/P(repaired) per malformation category across checkpoints (0: a coin flip)."""
    plt = _plt()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9.5, 3.9))
        for i, (cat, vals) in enumerate(log_odds.items()):
            ax.plot(list(xs), _nan(vals), marker="o", linewidth=1.8, color=PALETTE[i % len(PALETTE)], label=cat)
        ax.axhline(0, color="#444444", linewidth=0.9)
        ax.set_ylabel("median log odds\nmalformed vs repaired (nats)")
        ax.set_xlabel("training step" if have_steps else "checkpoint")
        if not have_steps:
            ax.set_xticks(list(xs), list(xlabels))
        ax.set_title("Malformation points by category across checkpoints", loc="left")
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5)
        return to_svg(fig)


def _nan(vals: Sequence[float | None]) -> list[float]:
    return [float("nan") if v is None else float(v) for v in vals]


def _max(vals: Sequence[float | None]) -> float:
    good = [v for v in vals if v is not None and v == v]
    return max(good) if good else 0.0


def _pct_label(v: float) -> str:
    if v != v:
        return ""
    return f"{v:.1%}" if v < 0.1 else f"{v:.0%}"


def reward_chart(steps: Sequence[int], task: Sequence[float | None], fmt: Sequence[float | None], split: str) -> str:
    """Mean task reward and mean format reward per step (the verl reward plugin's keys read back from dumps)."""
    plt = _plt()
    with plt.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9.5, 3.2))
        ax.plot(steps, _nan(task), color=PALETTE[0], linewidth=2.0, label="task reward (task_score)")
        ax.plot(steps, _nan(fmt), color=PALETTE[1], linewidth=2.0, label="format reward (format_reward)")
        ax.axhline(0, color="#999", linewidth=0.8)
        ax.set_title(f"Task vs. format reward per step ({split} split)", loc="left")
        ax.set_xlabel("training step")
        ax.set_ylabel("mean per trajectory")
        ax.legend(loc="best")
        return to_svg(fig)


# public names for the chart modules beside this one (trajlab.report.training)
RC = _RC
pyplot = _plt
mark_warning = _mark_warning
pct_axis = _pct_axis

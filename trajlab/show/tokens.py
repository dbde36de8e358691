"""``trajlab show --tokens``: the per-token probabilities each checkpoint gave a call's tokens, read from the
rescore tables, and for exact-token dumps (NeMo-RL) the probabilities logged at sampling time
(``rollout_tokens``), drawn under the call (:func:`token_renderables`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.duckrows import query_rows, view_names
from trajlab.errors import TrajlabError, param, shell_word
from trajlab.show.load import Loaded

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import RenderableType

#: (lower bound of p, background style) from most to least likely
PROB_STYLES = ((0.9, "on dark_green"), (0.5, "on dark_olive_green3"), (0.1, "black on orange3"),
               (0.0, "bold white on red3"))


def prob_style(p: float) -> str:
    return next(style for lo, style in PROB_STYLES if p >= lo)


def token_label(text: str) -> str:
    return text.replace("\n", "⏎").replace("\t", "⇥") if text.strip() else text.replace("\n", "⏎") or "∅"


#: the label of the probabilities a source logged at sampling time (exact-token dumps), shown before checkpoints
LOGGED = "logged (inference)"


def logged_rows(con: Any, tid: str, data: Loaded) -> list[dict[str, Any]]:
    """The generated tokens of ``rollout_tokens`` for one trajectory, shaped like ``rescore_tokens`` rows (label
    :data:`LOGGED`; probabilities as the inference engine logged them). Char offsets are the token strings'
    lengths summed from each turn's start (a character split across tokens is counted once, approximately)."""
    rows = query_rows(con, "SELECT turn, position, token, logprob FROM rollout_tokens WHERE trajectory_id = ? "
                           "ORDER BY position", [tid])
    start = {t["turn_index"]: t["char_start"] for t in data.turns}
    at: dict[int, int] = {}
    out: list[dict[str, Any]] = []
    for r in rows:
        ti = r["turn"]
        if ti not in start:
            continue
        cs = at.get(ti, start[ti])
        at[ti] = cs + len(r["token"])
        if r["logprob"] is None:
            continue
        out.append({"checkpoint": LOGGED, "trajectory_id": tid, "turn_index": ti, "position": r["position"],
                    "token": r["token"], "char_start": cs, "char_end": at[ti], "logprob": r["logprob"],
                    "top_token": None, "top_prob": None, "control_mass": None, "region": None})
    return out


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
        logged = logged_rows(con, tid, data) if "rollout_tokens" in views else []
        if "rescore_tokens" not in views and not logged:
            raise TrajlabError(f"{out}: no rescore results (rescore/<checkpoint>/tokens.parquet)",
                               hint=f"run `trajlab rescore {shell_word(out)} --ckpt CHECKPOINT` first")
        rows = (query_rows(con, "SELECT * FROM rescore_tokens WHERE trajectory_id = ? ORDER BY checkpoint, position",
                           [tid]) if "rescore_tokens" in views else [])
        rows += logged
        labels = sorted({r["checkpoint"] for r in rows})
        if checkpoints:
            unknown = [c for c in checkpoints if c not in labels]
            if unknown:
                raise TrajlabError(f"{param('checkpoints')} {', '.join(unknown)}: not rescored for this trajectory "
                                   f"(have: {', '.join(labels) or 'none'})")
            labels = [c for c in labels if c in checkpoints]
        if not rows:
            raise TrajlabError(f"trajectory {tid} has no rescored tokens",
                               hint=f"rescore it: trajlab rescore {shell_word(out)} --ckpt CKPT --where "
                                    f"\"trajectory_id = '{tid}'\" "
                                    "(and --tokens all or calls)")
        order = ([LOGGED] if LOGGED in labels else []) + [
            lab for lab, _ in checkpoint_order(con, views, [x for x in labels if x != LOGGED])]
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
                strip.append(token_label(t["token"]), style=prob_style(p))
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
                               Text(f"{probs[i]:.3g}", style=prob_style(probs[i])),
                               "–" if t["top_token"] is None else f"{escape(repr(t['top_token']))} ({t['top_prob']:.2f})",
                               "–" if t["control_mass"] is None else f"{t['control_mass']:.2f}",
                               t["region"] or "", " ".join(f"⟨{n}⟩" for n in hits))
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


"""Spike detection, per-trajectory scores, control-token statistics and malformation points.

Definitions (trajlab's own; the collapse paper publishes no statistic or threshold, τ values live in
``rules/control_tokens.yaml`` and on the command line):

* **intrusion**: at a *content position* (the logged token is not a control token of the trajectory's format,
  and its region is one of ``intrusion_regions``, by default function_name/param_name/param_value), the
  probability mass on the control set is ``>= τ_intrusion``;
* **dropout**: the logged token is a control token (region in ``dropout_regions``, by default structural) and
  the checkpoint gives it probability ``<= 1 - τ_dropout``.

The spike rate of a checkpoint is ``(intrusions + dropouts) / (intrusion-eligible + dropout-eligible positions)``.

A **malformation point** is where a malformed call first departs from its repair: the first char where
``raw`` and ``repaired`` differ, and the logged token that contains it (for a call whose only problem is text
after it, the first token after the call, against ``<|im_end|>``). A malformed call without a repair gets the
token where its first error finding starts, and no well-formed alternative. The probability the checkpoint gives
that token (the malformed continuation) is compared with the probability of the first token of the repaired
text from the same char on (the well-formed continuation); both come from the same next-token distribution
because the text before the token is shared.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trajlab.rescore.control_tokens import REGIONS, ControlSet, SpikeThresholds
from trajlab.rescore.scoring import ScoreResult
from trajlab.rescore.stream import REGION_CODE, TokenStream, TrajectoryText


@dataclass
class SpikeFlags:
    intrusion_eligible: np.ndarray  # bool [N]
    intrusion: np.ndarray
    dropout_eligible: np.ndarray
    dropout: np.ndarray


def classify(
    stream: TokenStream, res: ScoreResult, cset: ControlSet, fmt: str | None, th: SpikeThresholds
) -> SpikeFlags:
    """Which scored positions are eligible for, and show, an intrusion or a dropout spike."""
    logged = stream.ids[stream.positions]
    fmt_ids = np.fromiter(cset.ids_for(fmt), dtype=np.int64)
    is_ctrl = np.isin(logged, fmt_ids)
    in_intr = np.isin(stream.region, [REGION_CODE[r] for r in th.intrusion_regions])
    in_drop = np.isin(stream.region, [REGION_CODE[r] for r in th.dropout_regions])
    ie = in_intr & ~is_ctrl
    de = in_drop & is_ctrl
    intr = ie & (res.control_mass >= th.intrusion)
    drop = de & (np.exp(res.logprob) <= 1.0 - th.dropout)
    return SpikeFlags(ie, intr, de, drop)


def trajectory_row(tr: TrajectoryText, st: TokenStream, res: ScoreResult, fl: SpikeFlags) -> dict[str, Any]:
    """One row of ``trajectory_scores``."""
    n = st.n_scored
    row: dict[str, Any] = {
        "trajectory_id": tr.trajectory_id,
        "step": tr.step,
        "split": tr.split,
        "score": tr.score,
        "tool_format": tr.tool_format,
        "n_tokens": st.n_tokens,
        "n_scored": n,
        "n_calls": tr.n_calls,
        "n_malformed_calls": tr.n_malformed_calls,
        "roundtrip_ok": st.roundtrip_ok,
        "stream_note": st.note,
        "mean_logprob": float(res.logprob.mean()) if n else None,
        "mean_entropy": float(res.entropy.mean()) if n else None,
        "max_intrusion_mass": float(res.control_mass[fl.intrusion_eligible].max()) if fl.intrusion_eligible.any() else None,
        "min_structural_prob": None,
        "n_intrusion_positions": int(fl.intrusion_eligible.sum()),
        "n_intrusions": int(fl.intrusion.sum()),
        "n_dropout_positions": int(fl.dropout_eligible.sum()),
        "n_dropouts": int(fl.dropout.sum()),
    }
    struct = st.region == REGION_CODE["structural"]
    if struct.any():
        row["min_structural_prob"] = float(np.exp(res.logprob[struct].min()))
    for r in REGIONS:
        m = st.region == REGION_CODE[r]
        row[f"mean_logprob_{r}"] = float(res.logprob[m].mean()) if m.any() else None
    return row


def spike_rows(
    tr: TrajectoryText,
    st: TokenStream,
    res: ScoreResult,
    fl: SpikeFlags,
    cset: ControlSet,
    label: Any,
) -> list[dict[str, Any]]:
    """Rows of ``spikes`` for one trajectory (``label(id)`` gives a token's display string)."""
    rows = []
    logged = st.ids[st.positions]
    for kind, mask in (("intrusion", fl.intrusion), ("dropout", fl.dropout)):
        for j in np.nonzero(mask)[0]:
            j = int(j)
            if kind == "intrusion":
                ci = int(res.top_control[j])
                ctok = cset.labels[ci] if ci >= 0 else None
                cprob = float(res.top_control_prob[j])
                stat = float(res.control_mass[j])
            else:
                ctok = label(int(logged[j]))
                cprob = float(np.exp(res.logprob[j]))
                stat = cprob
            rows.append(
                {
                    "trajectory_id": tr.trajectory_id,
                    "step": tr.step,
                    "split": tr.split,
                    "turn_index": int(st.turn_index[j]),
                    "position": int(st.positions[j]),
                    "kind": kind,
                    "token_id": int(logged[j]),
                    "token": label(int(logged[j])),
                    "char_start": int(st.char_start[j]),
                    "char_end": int(st.char_end[j]),
                    "region": REGIONS[int(st.region[j])],
                    "value": stat,
                    "control_token": ctok,
                    "control_prob": cprob,
                    "logprob": float(res.logprob[j]),
                    "top_token": label(int(res.top_id[j])),
                    "top_prob": float(res.top_prob[j]),
                }
            )
    return rows


class ControlStats:
    """Per (control token, region) sums over many trajectories; parts add up (see ``outputs.merge_parts``).

    A position counts for a control token only when the token belongs to its trajectory's format set, so a
    Hermes brace is not averaged over XML-format trajectories.
    """

    def __init__(self, cset: ControlSet) -> None:
        self.cset = cset
        K, R = len(cset.ids), len(REGIONS)
        self.n_positions = np.zeros((K, R), np.int64)
        self.sum_prob = np.zeros((K, R), np.float64)
        self.max_prob = np.zeros((K, R), np.float64)
        self.n_logged = np.zeros((K, R), np.int64)
        self.sum_logged_prob = np.zeros((K, R), np.float64)
        self.n_intrusion_top = np.zeros((K, R), np.int64)
        self.n_dropouts = np.zeros((K, R), np.int64)
        self._index = {tid: k for k, tid in enumerate(cset.ids)}

    def add(self, st: TokenStream, res: ScoreResult, fl: SpikeFlags, fmt: str | None) -> None:
        if st.n_scored == 0 or not self.cset.ids:
            return
        member = np.array(self.cset.format_masks[fmt if fmt in self.cset.format_masks else "none"], dtype=bool)
        reg = st.region.astype(np.int64)
        counts = np.bincount(reg, minlength=len(REGIONS))
        self.n_positions[member] += counts
        for r in np.unique(reg):
            m = reg == r
            cp = res.control_probs[m][:, member]
            self.sum_prob[member, r] += cp.sum(axis=0, dtype=np.float64)
            self.max_prob[member, r] = np.maximum(self.max_prob[member, r], cp.max(axis=0))
        logged = st.ids[st.positions]
        ctrl_idx = np.array([self._index.get(int(t), -1) for t in logged], dtype=np.int64)
        hit = ctrl_idx >= 0
        hit[hit] = member[ctrl_idx[hit]]
        if hit.any():
            np.add.at(self.n_logged, (ctrl_idx[hit], reg[hit]), 1)
            np.add.at(self.sum_logged_prob, (ctrl_idx[hit], reg[hit]), np.exp(res.logprob[hit]))
            dh = hit & fl.dropout
            np.add.at(self.n_dropouts, (ctrl_idx[dh], reg[dh]), 1)
        ih = fl.intrusion & (res.top_control >= 0)
        if ih.any():
            np.add.at(self.n_intrusion_top, (res.top_control[ih], reg[ih]), 1)

    def rows(self, checkpoint: str) -> list[dict[str, Any]]:
        rows = []
        for k, tid in enumerate(self.cset.ids):
            for r, region in enumerate(REGIONS):
                n = int(self.n_positions[k, r])
                if n == 0:
                    continue
                rows.append(
                    {
                        "checkpoint": checkpoint,
                        "control_token": self.cset.labels[k],
                        "control_token_id": int(tid),
                        "control_strings": list(self.cset.sources[k]),
                        "region": region,
                        "n_positions": n,
                        "sum_prob": float(self.sum_prob[k, r]),
                        "mean_prob": float(self.sum_prob[k, r] / n),
                        "max_prob": float(self.max_prob[k, r]),
                        "n_logged": int(self.n_logged[k, r]),
                        "sum_logged_prob": float(self.sum_logged_prob[k, r]),
                        "n_intrusions": int(self.n_intrusion_top[k, r]),
                        "n_dropouts": int(self.n_dropouts[k, r]),
                    }
                )
        return rows


# ------------------------------------------------------------------------------------ malformation points
@dataclass
class MalformationPoint:
    call: dict[str, Any]
    diff_offset: int  # char offset into output where raw and repaired first differ
    index: int | None  # index into the stream's scored positions of the malformed token (None: not found)
    repaired_token_id: int | None
    note: str | None = None


def find_malformation_points(
    tr: TrajectoryText, st: TokenStream, calls: Sequence[dict[str, Any]], tokenizer: Any, im_end_id: int | None
) -> list[MalformationPoint]:
    """Locate, for each malformed call, the token where the malformation starts (and the repaired token)."""
    out = []
    cs, ce = st.char_start, st.char_end
    for c in calls:
        raw, rep = c["raw"], c["repaired"]
        sel = st.turn_index == c["turn_index"]
        if rep is None:
            # no repair: the malformation starts where the call's first error finding starts
            first = c.get("first_error")
            diff = int(first) if first is not None else int(c["char_start"])
            cond = sel & ((ce > diff) | ((cs == ce) & (cs >= diff)))
            j = int(np.argmax(cond)) if cond.any() else None
            out.append(MalformationPoint(c, diff, j, None, "no repair: point = first error finding, no alternative"))
            continue
        k = len(os.path.commonprefix([raw, rep]))
        diff = int(c["char_start"]) + k
        after_call = raw == rep and any("after_call" in cat for cat in c.get("categories") or ())
        if raw == rep and not after_call:
            out.append(MalformationPoint(c, diff, None, None, "raw equals repaired"))
            continue
        cond = sel & ((ce > diff) | ((cs == ce) & (cs >= diff)))
        if not cond.any():
            out.append(MalformationPoint(c, diff, None, None, "no scored token at the malformation"))
            continue
        j = int(np.argmax(cond))
        ts = int(cs[j])
        turn = next((t for t in tr.turns if t[0] == c["turn_index"]), None)
        turn_end = turn[3] if turn else len(tr.output)
        call_s, call_e = int(c["char_start"]), int(c["char_end"])
        if after_call:
            # the call itself is fine; the malformation is text after it: well-formed is ending the turn
            alt = im_end_id
            note = None if alt is not None else "no well-formed token"
            out.append(MalformationPoint(c, diff, j, alt, note))
            continue
        if ts >= call_s:
            suffix = rep[ts - call_s :] + tr.output[call_e:turn_end]
        else:
            suffix = tr.output[ts:call_s] + rep + tr.output[call_e:turn_end]
        if suffix:
            enc = tokenizer(suffix[:200], add_special_tokens=False)["input_ids"]
            alt = int(enc[0]) if enc else im_end_id
        else:
            alt = im_end_id  # the repaired turn ends here: the well-formed continuation is <|im_end|>
        note = None if alt is not None else "no well-formed token"
        if alt is not None and alt == int(st.ids[st.positions[j]]):
            note = "malformed and repaired continuations start with the same token"
        out.append(MalformationPoint(c, diff, j, alt, note))
    return out


def malformation_rows(
    tr: TrajectoryText,
    st: TokenStream,
    res: ScoreResult,
    points: Sequence[MalformationPoint],
    extra_index: dict[int, int],
    label: Any,
    checkpoint: str,
) -> list[dict[str, Any]]:
    """Rows of ``malformations``; ``extra_index[i]`` is where point i's repaired token sits in ``extra_logprob``."""
    rows = []
    for i, p in enumerate(points):
        c = p.call
        row: dict[str, Any] = {
            "checkpoint": checkpoint,
            "call_id": c["call_id"],
            "trajectory_id": tr.trajectory_id,
            "turn_index": int(c["turn_index"]),
            "step": tr.step,
            "split": tr.split,
            "categories": list(c["categories"]),
            "diff_offset": p.diff_offset,
            "context": tr.output[max(int(c["char_start"]), p.diff_offset - 40) : p.diff_offset],
            "note": p.note,
        }
        if p.index is not None:
            j = p.index
            tid = int(st.ids[st.positions[j]])
            row.update(
                position=int(st.positions[j]),
                char_start=int(st.char_start[j]),
                char_end=int(st.char_end[j]),
                malformed_token=label(tid),
                malformed_token_id=tid,
                malformed_prob=float(np.exp(res.logprob[j])),
                top_token=label(int(res.top_id[j])),
                top_prob=float(res.top_prob[j]),
                control_mass=float(res.control_mass[j]),
            )
            if p.repaired_token_id is not None and i in extra_index:
                lp = float(res.extra_logprob[extra_index[i]])
                row.update(
                    repaired_token=label(p.repaired_token_id),
                    repaired_token_id=p.repaired_token_id,
                    repaired_prob=float(np.exp(lp)),
                    log_odds=float(res.logprob[j]) - lp,
                )
        rows.append(row)
    return rows

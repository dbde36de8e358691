"""Rows of the per-checkpoint tables (tokens, positions, token mass) built from one block's scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from trajlab.rescore.caches import TokenLabels


def tokens_table(
    label: str, tr: Any, st: Any, res: Any, cset: Any, labels: TokenLabels, mode: str
) -> pa.Table | None:
    n = st.n_scored
    if mode == "none" or n == 0:
        return None
    keep = np.ones(n, dtype=bool)
    if mode == "calls":
        keep[:] = False
        for cs, ce in tr.call_ranges:
            keep |= (st.char_start < ce) & (st.char_end > cs)
            keep |= (st.char_start == st.char_end) & (st.char_start == ce)  # <|im_end|> right after a call
        if not keep.any():
            return None
    idx = np.nonzero(keep)[0]
    from trajlab.rescore.control_tokens import REGIONS

    logged = st.ids[st.positions[idx]]
    top_ctrl = res.top_control[idx]
    ctrl_labels = pa.array([cset.labels[i] if i >= 0 else None for i in top_ctrl.tolist()], type=pa.string())
    regions = pa.array(REGIONS, type=pa.string()).take(pa.array(st.region[idx].astype(np.int64)))
    return pa.table(
        {
            "checkpoint": pa.array([label] * len(idx), pa.string()),
            "trajectory_id": pa.array([tr.trajectory_id] * len(idx), pa.string()),
            "turn_index": pa.array(st.turn_index[idx], pa.int32()),
            "position": pa.array(st.positions[idx], pa.int64()),
            "token_id": pa.array(logged, pa.int64()),
            "token": labels.array(logged),
            "char_start": pa.array(st.char_start[idx], pa.int64()),
            "char_end": pa.array(st.char_end[idx], pa.int64()),
            "region": regions,
            "logprob": pa.array(res.logprob[idx], pa.float32()),
            "entropy": pa.array(res.entropy[idx], pa.float32()),
            "top_token": labels.array(res.top_id[idx]),
            "top_prob": pa.array(res.top_prob[idx], pa.float32()),
            "control_mass": pa.array(res.control_mass[idx], pa.float32()),
            "top_control_token": ctrl_labels,
            "top_control_prob": pa.array(res.top_control_prob[idx], pa.float32()),
            "logged_logprob": pa.array(logged_logprobs(tr, st.positions[idx]), pa.float32()),
        }
    )


def logged_logprobs(tr: Any, positions: np.ndarray) -> list[float | None]:
    """The source's logged log-prob at each stream position (None for text-only trajectories)."""
    ex = getattr(tr, "exact", None)
    if ex is None:
        return [None] * int(positions.shape[0])
    return [ex.logprob[int(p)] for p in positions.tolist()]


def positions_table(label: str, tr: Any, st: Any, res: Any, cset: Any, fl: Any) -> pa.Table:
    """Rows of ``positions`` for one trajectory (every scored token; control probabilities where eligible)."""
    from trajlab.rescore.control_tokens import REGIONS

    n = st.n_scored
    member = np.array(cset.format_masks[tr.tool_format if tr.tool_format in cset.format_masks else "none"], bool)
    elig = fl.intrusion_eligible
    K = len(cset.ids)
    cp = np.asarray(res.control_probs[elig], dtype=np.float32).copy()
    if K:
        cp[:, ~member] = np.nan
    offsets = np.zeros(n + 1, np.int32)
    offsets[1:] = np.cumsum(np.where(elig, K, 0))
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(cp.reshape(-1), pa.float32()),
                                     mask=pa.array(~elig))
    logged = st.ids[st.positions]
    return pa.table(
        {
            "checkpoint": pa.array([label] * n, pa.string()),
            "trajectory_id": pa.array([tr.trajectory_id] * n, pa.string()),
            "position": pa.array(st.positions, pa.int64()),
            "region": pa.array(REGIONS, type=pa.string()).take(pa.array(st.region.astype(np.int64))),
            "token_id": pa.array(logged, pa.int64()),
            "logprob": pa.array(res.logprob, pa.float32()),
            "is_control": pa.array(np.isin(logged, list(cset.ids_for(tr.tool_format)))),
            "control_mass": pa.array(res.control_mass, pa.float32()),
            "control_probs": lists,
        }
    )


def mass_groups(st: Any, th: Any) -> np.ndarray:
    """Mass group of each scored position: 0 structural, 1 content (the intrusion regions), -1 neither."""
    from trajlab.rescore.stream import REGION_CODE

    g = np.full(st.n_scored, -1, np.int64)
    g[st.region == REGION_CODE["structural"]] = 0
    g[np.isin(st.region, [REGION_CODE[r] for r in th.intrusion_regions])] = 1
    return g


def token_mass_rows(label: str, mass: np.ndarray, logged: np.ndarray) -> pa.Table:
    """Sparse rows of ``token_mass`` for one block (tokens whose summed probability is at least 1e-6)."""
    from trajlab.rescore.outputs import MASS_GROUPS

    g, v = np.nonzero(mass >= 1e-6)
    return pa.table(
        {
            "checkpoint": pa.array([label] * len(g), pa.string()),
            "group": pa.array(MASS_GROUPS, pa.string()).take(pa.array(g.astype(np.int64))),
            "token_id": pa.array(v.astype(np.int64), pa.int64()),
            "mass": pa.array(mass[g, v], pa.float64()),
            "logged_mass": pa.array(logged[g, v], pa.float64()),
        }
    )

"""Every checkpoint against a reference checkpoint: calibrated spikes, paired drift, discovered tokens.

Fixed thresholds (τ) are model-dependent: a small or early checkpoint is unsure everywhere, and counting that
uncertainty as "spikes" makes a healthy reference look worse than a drifted checkpoint. So, once every
checkpoint is scored, :func:`compare_to_reference` measures them against one of them (``--reference``, by
default the first in step order), from the per-position tables of :mod:`trajlab.rescore.outputs`:

* **Calibrated spikes.** For each control token × region the reference's own distribution sets the threshold:
  *intrusion*, the token's probability at content positions (the intrusion regions, logged token not a control
  token) above the reference's ``q``-quantile; *dropout*, a logged control token's probability (the dropout
  regions) below the reference's ``(1 - q)``-quantile. ``calibrated_spike_rate`` = spikes / units over every
  cell (a unit is one content position × control token of its format, or one logged control token). A checkpoint
  identical to the reference scores at most ``1 - q`` (``numpy.quantile(method="higher"/"lower")``: cells with
  fewer than ``1 / (1 - q)`` reference units use the reference's extreme and score 0).
* **Paired drift.** The same trajectories and positions are scored by every checkpoint, so the change is taken
  position by position: Δ log-probability (checkpoint − reference) per region (the logged token), per control
  token (its probability at content positions; a logged control token's probability), per malformation
  category (P(malformed), P(repaired), their log odds). Median and mean with 95 % percentile bootstrap intervals
  that resample *trajectories* (positions of one trajectory are not independent), and the share of positions
  that moved up. The headline ``paired_drift`` is the median paired change of the malformation points' log odds
  log P(malformed)/P(repaired) (0 for a copy of the reference; > 0: the checkpoint leans further toward the
  malformed continuation at the very tokens where the run went wrong; confidence that grows everywhere moves
  both continuations and cancels). The table's ``drift`` row is the mean change of probability *toward
  spikes* over every eligible position (+ Δ control mass at content positions, − Δ P(logged control token)).
* **Discovered tokens.** Any vocabulary token, listed or not, whose mean probability at the positions where it
  was *not* the logged token grew most between the reference and a checkpoint, at structural and at content
  positions (from ``token_mass``: probability sums per group, gathered chunk by chunk while scoring). Ranked by
  the mass gained per position times the log of its growth ratio (its term of a KL divergence), so a token
  that appears from nothing (` v`, `英文`) outranks a common token that became a little more likely.
* **Distribution.** Per checkpoint a log10 histogram of control mass at content positions and of logged
  control-token probability, for the report's overlay with the reference.

Writes ``OUT/rescore/{calibration,paired,discovered,distribution}.parquet``.

The module is longer than ~400 lines because it is one comparison: the four measures are computed in one pass
over the checkpoints from the same loaded and paired positions (``_Pos``, :func:`_pair_index`) and the
reference's thresholds, and the headline of each checkpoint (:class:`CheckpointDrift`) takes a figure from each;
split apart, every module would share that private state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trajlab.errors import TrajlabError, param

__all__ = ["DriftResult", "compare_to_reference", "pick_reference", "bootstrap_delta"]

LOG_FLOOR = 1e-30
HIST_LO, HIST_HI, HIST_STEP = -6.0, 0.0, 0.25


@dataclass
class CheckpointDrift:
    """The headline figures of one checkpoint against the reference."""

    label: str
    calibrated_spike_rate: float = 0.0
    calibrated_spikes: int = 0
    calibrated_units: int = 0
    calibrated_intrusion_rate: float | None = None
    calibrated_dropout_rate: float | None = None
    paired_drift: float | None = None
    paired_drift_lo: float | None = None
    paired_drift_hi: float | None = None
    paired_points: int = 0


@dataclass
class DriftResult:
    """Result of :func:`compare_to_reference` (the tables are written under ``OUT/rescore/``)."""

    reference: str
    quantile: float
    checkpoints: dict[str, CheckpointDrift]
    moves: list[dict[str, Any]] = field(default_factory=list)  # paired rows, biggest |median| first
    discovered: list[dict[str, Any]] = field(default_factory=list)  # top rows per checkpoint and group
    malformation: list[dict[str, Any]] = field(default_factory=list)  # paired log-odds rows, 'all' category


def pick_reference(checkpoints: Sequence[tuple[str, int | None]], reference: str | None) -> str:
    """The reference label: ``first`` (or ``None``) is the first checkpoint in step order, else a label."""
    if not checkpoints:
        raise TrajlabError("no checkpoints to compare")
    if reference in (None, "", "first"):
        order = sorted(range(len(checkpoints)), key=lambda i: (checkpoints[i][1] is None, checkpoints[i][1] or 0, i))
        return checkpoints[order[0]][0]
    labels = [lab for lab, _ in checkpoints]
    if reference not in labels:
        raise TrajlabError(f"{param('reference')} {reference!r} is not a checkpoint of this run; labels: {', '.join(labels)}")
    return reference


def bootstrap_delta(
    values: np.ndarray, clusters: np.ndarray, *, n_boot: int = 200, seed: int = 0
) -> dict[str, float | None]:
    """Median and mean of ``values`` with 95 % percentile intervals from resampling whole ``clusters``.

    ``clusters`` (one id per value, e.g. the trajectory) are drawn with replacement ``n_boot`` times; each
    draw weights every value by how often its cluster was drawn.
    """
    v = np.asarray(values, np.float64)
    out: dict[str, float | None] = {"median": float(np.median(v)), "mean": float(v.mean()),
                                    "median_lo": None, "median_hi": None, "mean_lo": None, "mean_hi": None}
    _, code = np.unique(np.asarray(clusters), return_inverse=True)
    m = int(code.max()) + 1 if code.size else 0
    if m < 2 or n_boot < 1:
        return out
    rng = np.random.default_rng(seed)
    sums = np.bincount(code, v, m)
    cnts = np.bincount(code, None, m)
    order = np.argsort(v, kind="stable")
    vs, cs = v[order], code[order]
    means, meds = np.empty(n_boot), np.empty(n_boot)
    for b in range(n_boot):
        w = np.bincount(rng.integers(0, m, m), minlength=m).astype(np.float64)
        means[b] = (w @ sums) / max(w @ cnts, 1.0)
        cw = np.cumsum(w[cs])
        meds[b] = vs[min(int(np.searchsorted(cw, cw[-1] / 2.0)), len(vs) - 1)]
    out["mean_lo"], out["mean_hi"] = (float(x) for x in np.percentile(means, [2.5, 97.5]))
    out["median_lo"], out["median_hi"] = (float(x) for x in np.percentile(meds, [2.5, 97.5]))
    return out


# ------------------------------------------------------------------------------------------ loading
@dataclass
class _Pos:
    """One checkpoint's positions as numpy arrays, sorted by (trajectory_id, position)."""

    traj: np.ndarray  # object (str)
    position: np.ndarray
    region: np.ndarray  # object (str)
    token_id: np.ndarray
    logprob: np.ndarray  # float64
    is_control: np.ndarray
    control_mass: np.ndarray
    elig: np.ndarray  # bool: intrusion-eligible (control_probs present)
    cprobs: np.ndarray  # [n_elig, K] float64, NaN outside the format's set
    labels: list[str]  # control token label per column
    ids: list[int]  # control token id per column

    @property
    def control_ids(self) -> set[int]:
        return set(self.ids)


def _load_positions(ldir: Path) -> _Pos:
    import pyarrow.parquet as pq

    from trajlab.errors import TrajlabError, param
    from trajlab.outpaths import read_json_object

    man, why = read_json_object(ldir / "manifest.json")
    ct = man.get("control_tokens")
    toks = ct.get("tokens") if isinstance(ct, dict) else None
    if why or not isinstance(toks, list) or not all(isinstance(t, dict) and isinstance(t.get("token"), str)
                                                    for t in toks):
        raise TrajlabError(f"{ldir / 'manifest.json'}: {why or 'has no control_tokens list'}; the checkpoint's "
                           "positions cannot be read", hint=f"rescore this checkpoint again (without {param('resume')})")
    labels = [t["token"] for t in toks]
    t = pq.read_table(ldir / "positions.parquet")
    cp = t.column("control_probs").combine_chunks()
    elig = np.asarray(cp.is_valid().to_numpy(zero_copy_only=False), bool)
    K = len(labels)
    flat = cp.flatten().to_numpy(zero_copy_only=False).astype(np.float64) if K else np.zeros(0)
    mat = flat.reshape(int(elig.sum()), K) if K else np.zeros((int(elig.sum()), 0))
    col = lambda n: t.column(n).to_numpy(zero_copy_only=False)  # noqa: E731
    return _Pos(col("trajectory_id"), col("position"), col("region"), col("token_id"),
                col("logprob").astype(np.float64), col("is_control").astype(bool),
                col("control_mass").astype(np.float64), elig, mat, labels, [int(x["id"]) for x in toks])  # fmt: skip


def _pair_index(ref: _Pos, c: _Pos) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into ref, into c) of the positions both scored with the same logged token."""
    ka = np.char.add(ref.traj.astype(str), np.char.add("\0", ref.position.astype(str)))
    kb = np.char.add(c.traj.astype(str), np.char.add("\0", c.position.astype(str)))
    _, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    same = ref.token_id[ia] == c.token_id[ib]
    return ia[same], ib[same]


def _log(p: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(p, LOG_FLOOR))


# ------------------------------------------------------------------------------------------ calibration
def _cells(p: _Pos, th: Any) -> dict[tuple[str, str, str], np.ndarray]:
    """Values per (kind, control token, region): intrusion P(token) at content positions; dropout P(logged)."""
    cells: dict[tuple[str, str, str], np.ndarray] = {}
    reg_e = p.region[p.elig]
    for r in th.intrusion_regions:
        rows = reg_e == r
        if not rows.any():
            continue
        sub = p.cprobs[rows]
        for k, lab in enumerate(p.labels):
            v = sub[:, k]
            v = v[~np.isnan(v)]
            if v.size:
                cells[("intrusion", lab, r)] = v
    drop = p.is_control & np.isin(p.region, list(th.dropout_regions))
    lab_of = dict(zip(p.ids, p.labels, strict=True))
    prob = np.exp(p.logprob)
    for tid in np.unique(p.token_id[drop]):
        lab = lab_of.get(int(tid))
        if lab is None:
            continue
        m = drop & (p.token_id == tid)
        for r in np.unique(p.region[m]):
            cells[("dropout", lab, str(r))] = prob[m & (p.region == r)]
    return cells


def _thresholds(cells: dict[tuple[str, str, str], np.ndarray], q: float) -> dict[tuple[str, str, str], tuple[float, int]]:
    out = {}
    for key, v in cells.items():
        if key[0] == "intrusion":
            out[key] = (float(np.quantile(v, q, method="higher")), int(v.size))
        else:
            out[key] = (float(np.quantile(v, 1.0 - q, method="lower")), int(v.size))
    return out


# ------------------------------------------------------------------------------------------ main
def compare_to_reference(
    out: str | Path,
    checkpoints: Sequence[tuple[str, int | None]],
    *,
    reference: str | None = "first",
    quantile: float = 0.999,
    thresholds: Any = None,
    decoders: dict[str, Callable[[int], str]] | None = None,
    n_boot: int = 200,
    seed: int = 0,
    top_tokens: int = 20,
) -> DriftResult:
    """Compare every scored checkpoint with the reference; write the four tables; return the headlines.

    ``checkpoints``: ``(label, step)`` in run order, each with ``OUT/rescore/<label>/`` written by
    :func:`trajlab.rescore.rescore`. ``thresholds``: the :class:`~trajlab.rescore.control_tokens.SpikeThresholds`
    whose regions define content and structural positions (default: the rule file's). ``decoders[label](id)``
    names discovered tokens (default: the id).
    """
    from trajlab.rescore import outputs, specs
    from trajlab.rescore.control_tokens import load_control_rules, thresholds_from_rules
    from trajlab.tables import write_table

    if not 0.5 <= quantile < 1.0:
        raise TrajlabError(f"{param('calibration_quantile')} {quantile}: expected a value in [0.5, 1), e.g. 0.999")
    th = thresholds if thresholds is not None else thresholds_from_rules(load_control_rules())
    out = Path(out)
    present = [(lab, st) for lab, st in checkpoints if (outputs.label_dir(out, lab) / "positions.parquet").exists()]
    ref_label = pick_reference(present or checkpoints, reference)
    index = {lab: i for i, (lab, _) in enumerate(checkpoints)}
    ref = _load_positions(outputs.label_dir(out, ref_label))
    ref_cells = _cells(ref, th)
    thr = _thresholds(ref_cells, quantile)

    cal_rows: list[dict[str, Any]] = []
    paired_rows: list[dict[str, Any]] = []
    disc_rows: list[dict[str, Any]] = []
    dist_rows: list[dict[str, Any]] = []
    heads: dict[str, CheckpointDrift] = {}
    ref_mal = _malformations(outputs.label_dir(out, ref_label))
    ref_mass = _token_mass(outputs.label_dir(out, ref_label))
    for lab, step in present:
        ldir = outputs.label_dir(out, lab)
        c = ref if lab == ref_label else _load_positions(ldir)
        base = {"checkpoint": lab, "checkpoint_index": index[lab], "step": step, "reference": ref_label}
        head = CheckpointDrift(lab)
        # calibrated spikes
        units = {"intrusion": 0, "dropout": 0}
        spikes = {"intrusion": 0, "dropout": 0}
        for key, v in sorted(_cells(c, th).items()):
            if key not in thr:
                continue
            t, n_ref = thr[key]
            n_sp = int((v > t).sum() if key[0] == "intrusion" else (v < t).sum())
            units[key[0]] += int(v.size)
            spikes[key[0]] += n_sp
            cal_rows.append({**base, "kind": key[0], "control_token": key[1], "region": key[2], "quantile": quantile,
                             "threshold": t, "reference_units": n_ref, "units": int(v.size), "spikes": n_sp,
                             "rate": n_sp / v.size})  # fmt: skip
        head.calibrated_units = units["intrusion"] + units["dropout"]
        head.calibrated_spikes = spikes["intrusion"] + spikes["dropout"]
        head.calibrated_spike_rate = head.calibrated_spikes / head.calibrated_units if head.calibrated_units else 0.0
        for kind in ("intrusion", "dropout"):
            rate = spikes[kind] / units[kind] if units[kind] else None
            setattr(head, f"calibrated_{kind}_rate", rate)
        # paired drift
        if lab != ref_label:
            ia, ib = _pair_index(ref, c)
            paired_rows += _paired_positions(ref, c, ia, ib, th, base, n_boot, seed)
            mal_rows = _paired_malformations(ref_mal, _malformations(ldir), base, n_boot, seed)
            paired_rows += mal_rows
            d = next((r for r in mal_rows if r["name"] == "all" and r["measure"] == "log odds"), None)
            if d is not None:
                head.paired_drift, head.paired_drift_lo, head.paired_drift_hi = (d["median"], d["median_lo"],
                                                                                 d["median_hi"])
                head.paired_points = d["n"]
            disc_rows += _discover(ref, c, ref_mass, _token_mass(ldir), th, base, top_tokens,
                                   (decoders or {}).get(lab))  # fmt: skip
        else:
            head.paired_drift, head.paired_drift_lo, head.paired_drift_hi = 0.0, 0.0, 0.0
        dist_rows += _distribution(c, th, {**base, "is_reference": lab == ref_label})
        heads[lab] = head

    write_table(specs.CALIBRATION, cal_rows, out / "rescore" / "calibration.parquet")
    write_table(specs.PAIRED, paired_rows, out / "rescore" / "paired.parquet")
    write_table(specs.DISCOVERED, disc_rows, out / "rescore" / "discovered.parquet")
    write_table(specs.DISTRIBUTION, dist_rows, out / "rescore" / "distribution.parquet")
    moves = [r for r in paired_rows if r["scope"] in ("intrusion", "dropout") and r["n"] >= 5]
    moves.sort(key=lambda r: (-abs(r["median"]), r["checkpoint_index"], r["name"]))
    mal = [r for r in paired_rows if r["scope"] == "malformation" and r["measure"] == "log odds"]
    return DriftResult(ref_label, quantile, heads, moves, disc_rows, mal)


def _row(base: dict[str, Any], scope: str, name: str, measure: str, delta: np.ndarray, traj: np.ndarray,
         n_boot: int, seed: int) -> dict[str, Any]:  # fmt: skip
    b = bootstrap_delta(delta, traj, n_boot=n_boot, seed=seed)
    return {**base, "scope": scope, "name": name, "measure": measure, "n": int(delta.size),
            "trajectories": int(np.unique(traj).size), **b, "share_up": float((delta > 0).mean())}  # fmt: skip


def _paired_positions(ref: _Pos, c: _Pos, ia: np.ndarray, ib: np.ndarray, th: Any, base: dict[str, Any],
                      n_boot: int, seed: int) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    traj = ref.traj[ia]
    region = ref.region[ia]
    dlp = c.logprob[ib] - ref.logprob[ia]
    for r in sorted(set(region.tolist())):
        m = region == r
        rows.append(_row(base, "region", r, "log P(logged)", dlp[m], traj[m], n_boot, seed))
    # intrusion side: rows of the eligible matrices for the paired positions
    e_ref = np.cumsum(ref.elig) - 1
    e_c = np.cumsum(c.elig) - 1
    both = ref.elig[ia] & c.elig[ib]
    ra, rb = e_ref[ia[both]], e_c[ib[both]]
    toward: list[np.ndarray] = []
    toward_t: list[np.ndarray] = []
    if both.any():
        toward.append(c.control_mass[ib[both]] - ref.control_mass[ia[both]])
        toward_t.append(traj[both])
        col_c = {lab: k for k, lab in enumerate(c.labels)}
        for k, lab in enumerate(ref.labels):
            kc = col_c.get(lab)
            if kc is None:
                continue
            pa_, pb_ = ref.cprobs[ra, k], c.cprobs[rb, kc]
            ok = ~np.isnan(pa_) & ~np.isnan(pb_)
            if ok.sum() >= 1:
                rows.append(_row(base, "intrusion", lab, "log P(token)", _log(pb_[ok]) - _log(pa_[ok]),
                                 traj[both][ok], n_boot, seed))  # fmt: skip
    drop = ref.is_control[ia] & np.isin(region, list(th.dropout_regions))
    if drop.any():
        toward.append(np.exp(ref.logprob[ia][drop]) - np.exp(c.logprob[ib][drop]))
        toward_t.append(traj[drop])
        lab_of = dict(zip(ref.ids, ref.labels, strict=True))
        tids = ref.token_id[ia][drop]
        for tid in np.unique(tids):
            lab = lab_of.get(int(tid))
            if lab is None:
                continue
            m = tids == tid
            rows.append(_row(base, "dropout", lab, "log P(logged)", dlp[drop][m], traj[drop][m], n_boot, seed))
    if toward:
        rows.append(_row(base, "drift", "all", "P toward spikes", np.concatenate(toward), np.concatenate(toward_t),
                         n_boot, seed))  # fmt: skip
    return rows


def _malformations(ldir: Path) -> Any:
    import polars as pl

    p = ldir / "malformations.parquet"
    if not p.exists():
        return None
    return pl.read_parquet(p, columns=["call_id", "trajectory_id", "position", "categories", "malformed_prob",
                                       "repaired_prob"])  # fmt: skip


def _paired_malformations(ref: Any, c: Any, base: dict[str, Any], n_boot: int, seed: int) -> list[dict[str, Any]]:
    import polars as pl

    if ref is None or c is None or ref.height == 0 or c.height == 0:
        return []
    j = ref.join(c.select("call_id", "position", pl.col("malformed_prob").alias("mp_c"),
                          pl.col("repaired_prob").alias("rp_c")), on=["call_id", "position"], how="inner")  # fmt: skip
    j = j.filter(pl.col("malformed_prob").is_not_null() & pl.col("mp_c").is_not_null())
    if j.height == 0:
        return []
    rows = []
    j = j.with_columns(cat=pl.concat_list(pl.lit(["all"]), pl.col("categories"))).explode("cat")
    for cat in sorted(set(j.get_column("cat").to_list())):
        s = j.filter(pl.col("cat") == cat)
        traj = s.get_column("trajectory_id").to_numpy()
        mp_r, mp_c = s.get_column("malformed_prob").to_numpy(), s.get_column("mp_c").to_numpy()
        d_mal = _log(mp_c) - _log(mp_r)
        rows.append(_row(base, "malformation", cat, "log P(malformed)", d_mal, traj, n_boot, seed))
        rp = s.filter(pl.col("repaired_prob").is_not_null() & pl.col("rp_c").is_not_null())
        if rp.height:
            t2 = rp.get_column("trajectory_id").to_numpy()
            d_rep = _log(rp.get_column("rp_c").to_numpy()) - _log(rp.get_column("repaired_prob").to_numpy())
            d_odds = (_log(rp.get_column("mp_c").to_numpy()) - _log(rp.get_column("rp_c").to_numpy())) - (
                _log(rp.get_column("malformed_prob").to_numpy()) - _log(rp.get_column("repaired_prob").to_numpy()))
            rows.append(_row(base, "malformation", cat, "log P(repaired)", d_rep, t2, n_boot, seed))
            rows.append(_row(base, "malformation", cat, "log odds", d_odds, t2, n_boot, seed))
    return rows


def _token_mass(ldir: Path) -> Any:
    import polars as pl

    p = ldir / "token_mass.parquet"
    if not p.exists():
        return None
    return pl.read_parquet(p).select("group", "token_id",
                                     off=pl.col("mass") - pl.col("logged_mass"))  # fmt: skip


def _group_counts(p: _Pos, th: Any) -> dict[str, int]:
    return {"structural": int((p.region == "structural").sum()),
            "content": int(np.isin(p.region, list(th.intrusion_regions)).sum())}  # fmt: skip


def _discover(ref: _Pos, c: _Pos, ref_mass: Any, c_mass: Any, th: Any, base: dict[str, Any], top: int,
              decode: Callable[[int], str] | None) -> list[dict[str, Any]]:  # fmt: skip
    import polars as pl

    if ref_mass is None or c_mass is None:
        return []
    n_ref, n_c = _group_counts(ref, th), _group_counts(c, th)
    j = ref_mass.rename({"off": "off_ref"}).join(c_mass, on=["group", "token_id"], how="full", coalesce=True)
    j = j.with_columns(pl.col("off_ref").fill_null(0.0), pl.col("off").fill_null(0.0))
    rows = []
    for g in ("structural", "content"):
        if not n_ref.get(g) or not n_c.get(g):
            continue
        s = j.filter(pl.col("group") == g).with_columns(
            reference_prob=pl.col("off_ref") / n_ref[g], prob=pl.col("off") / n_c[g]
        ).with_columns(gained=pl.col("prob") - pl.col("reference_prob"))
        s = s.with_columns(score=pl.col("gained") * ((pl.col("prob") + 1e-6) / (pl.col("reference_prob") + 1e-6)).log())
        s = s.filter(pl.col("gained") > 0).sort(["score", "token_id"], descending=[True, False]).head(top)
        for rank, r in enumerate(s.iter_rows(named=True), 1):
            tid = int(r["token_id"])
            rows.append({**base, "group": g, "rank": rank, "token_id": tid,
                         "token": decode(tid) if decode else str(tid), "is_control": tid in c.control_ids,
                         "n_positions": n_c[g], "reference_prob": r["reference_prob"], "prob": r["prob"],
                         "gained": r["gained"], "score": r["score"],
                         "ratio": r["prob"] / r["reference_prob"] if r["reference_prob"] > 0 else None})  # fmt: skip
    return rows


def _distribution(p: _Pos, th: Any, base: dict[str, Any]) -> list[dict[str, Any]]:
    edges = np.arange(HIST_LO, HIST_HI + HIST_STEP / 2, HIST_STEP)
    nb = len(edges) - 1
    vals = {"intrusion": p.control_mass[p.elig],
            "dropout": np.exp(p.logprob[p.is_control & np.isin(p.region, list(th.dropout_regions))])}  # fmt: skip
    rows = []
    for kind, v in vals.items():
        if v.size == 0:
            continue
        lv = np.clip(np.log10(np.maximum(v, 1e-300)), HIST_LO, HIST_HI)
        b = np.minimum(((lv - HIST_LO) / HIST_STEP).astype(np.int64), nb - 1)
        counts = np.bincount(b, minlength=nb)
        for i in range(nb):
            rows.append({**base, "kind": kind, "bin": i, "log10_lo": float(edges[i]), "log10_hi": float(edges[i + 1]),
                         "count": int(counts[i]), "share": float(counts[i] / v.size)})  # fmt: skip
    return rows

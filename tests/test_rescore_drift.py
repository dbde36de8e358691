"""Checkpoints against a reference (trajlab.rescore.drift) on constructed cases with known answers.

Each case writes real per-checkpoint tables (``positions``, ``malformations``, ``token_mass`` with the rescore
specs, and ``manifest.json``) the way ``trajlab rescore`` does, then runs the real comparison:

* a checkpoint identical to the reference has a calibrated spike rate near (never above) 1 - quantile;
* one more confident everywhere (less control mass at content positions, more probability on the logged
  control tokens) does not get more calibrated spikes, although it would under fixed thresholds' logic of
  counting uncertainty the other way round;
* one that moves mass onto a control token at content positions gets many more, and its paired rows say which
  token moved; malformation points that lean toward the malformed continuation raise the paired drift;
* a token that gains probability where it was not written is discovered.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trajlab.errors import TrajlabError
from trajlab.rescore.control_tokens import SpikeThresholds
from trajlab.rescore.drift import bootstrap_delta, compare_to_reference, pick_reference
from trajlab.rescore.outputs import label_dir
from trajlab.rescore.specs import DISCOVERED, MALFORMATIONS, PAIRED, POSITIONS, TOKEN_MASS
from trajlab.tables import write_table

TH = SpikeThresholds()
CTRL = [("<|im_end|>", 5), ("</", 6), ("<", 7)]  # (label, id): the control set of every position
REGIONS = ["structural", "function_name", "param_name", "param_value", "text"]
N_TRAJ, PER_TRAJ = 200, 120
Q = 0.99


def _base(seed: int = 0) -> dict[str, np.ndarray]:
    """A reference: per position a region, a logged token, its logprob, and control probabilities."""
    rng = np.random.default_rng(seed)
    n = N_TRAJ * PER_TRAJ
    region = np.array(REGIONS)[rng.integers(0, len(REGIONS), n)]
    is_ctrl = (region == "structural") & (rng.random(n) < 0.5)
    token = np.where(is_ctrl, rng.choice([5, 6, 7], n), rng.integers(100, 2000, n))
    p_logged = np.where(is_ctrl, rng.beta(8, 2, n), rng.beta(2, 3, n))
    cprobs = rng.beta(0.5, 20, (n, len(CTRL))) * 0.3
    return {"traj": np.repeat([f"t{i:04d}" for i in range(N_TRAJ)], PER_TRAJ),
            "position": np.tile(np.arange(10, 10 + PER_TRAJ), N_TRAJ), "region": region, "token": token,
            "is_ctrl": is_ctrl, "p_logged": p_logged, "cprobs": cprobs}  # fmt: skip


def _write(out: Path, label: str, d: dict[str, np.ndarray], *, log_odds: float = -5.0,
           mass: dict[tuple[str, int], tuple[float, float]] | None = None) -> None:  # fmt: skip
    ldir = label_dir(out, label)
    elig = np.isin(d["region"], TH.intrusion_regions) & ~d["is_ctrl"]
    cp = pa.array([list(map(float, r)) if e else None for r, e in zip(d["cprobs"], elig, strict=True)],
                  pa.list_(pa.float32()))  # fmt: skip
    n = len(d["traj"])
    write_table(POSITIONS, pa.table({
        "checkpoint": [label] * n, "trajectory_id": d["traj"], "position": d["position"], "region": d["region"],
        "token_id": d["token"], "logprob": np.log(d["p_logged"]).astype(np.float32), "is_control": d["is_ctrl"],
        "control_mass": d["cprobs"].sum(1).astype(np.float32), "control_probs": cp}), ldir / "positions.parquet")
    mal = []
    for i in range(40):
        mp = 1 / (1 + np.exp(-(log_odds + 0.1 * (i % 7))))
        mal.append({"checkpoint": label, "call_id": f"c{i}", "trajectory_id": f"t{i:04d}", "turn_index": 0,
                    "categories": ["stray_attribute" if i % 2 else "garbled_function_name"], "diff_offset": 5,
                    "context": "", "position": 20, "malformed_prob": mp, "repaired_prob": 1 - mp,
                    "log_odds": float(np.log(mp) - np.log(1 - mp))})  # fmt: skip
    write_table(MALFORMATIONS, mal, ldir / "malformations.parquet")
    rows = [{"checkpoint": label, "group": g, "token_id": t, "mass": m, "logged_mass": lm}
            for (g, t), (m, lm) in (mass or {}).items()]
    write_table(TOKEN_MASS, rows, ldir / "token_mass.parquet")
    (ldir / "manifest.json").write_text(json.dumps(
        {"control_tokens": {"tokens": [{"token": lab, "id": i, "strings": [lab]} for lab, i in CTRL]}}))


def _compare(out: Path, labels: list[str], **kw):
    return compare_to_reference(out, [(lab, 10 * (i + 1)) for i, lab in enumerate(labels)], quantile=Q,
                                thresholds=TH, n_boot=100, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("drift")
    ref = _base()
    _write(out, "ref", ref, mass={("content", 900): (40.0, 40.0), ("content", 901): (30.0, 0.0),
                                  ("structural", 902): (1.0, 0.0)})  # fmt: skip
    _write(out, "same", ref, mass={("content", 900): (40.0, 40.0), ("content", 901): (30.0, 0.0),
                                   ("structural", 902): (1.0, 0.0)})  # fmt: skip
    confident = {**ref, "cprobs": ref["cprobs"] * 0.5,
                 "p_logged": np.where(ref["is_ctrl"], 1 - (1 - ref["p_logged"]) * 0.5, ref["p_logged"])}
    _write(out, "confident", confident)
    moved = {**ref, "cprobs": ref["cprobs"].copy()}
    content = np.isin(ref["region"], TH.intrusion_regions)
    moved["cprobs"][content, 1] += 0.25  # mass onto "</" where content was written
    # "suffix" (903) appears where it was never written; 900 only grows where it is the logged token
    _write(out, "moved", moved, log_odds=-1.0,
           mass={("content", 900): (80.0, 80.0), ("content", 901): (30.0, 0.0), ("content", 903): (200.0, 0.0),
                 ("structural", 902): (1.0, 0.0)})  # fmt: skip
    d = _compare(out, ["ref", "same", "confident", "moved"], decoders={"moved": lambda i: f"tok{i}"})
    return out, d


def test_identical_checkpoint_scores_about_one_minus_quantile(cases):
    out, d = cases
    for lab in ("ref", "same"):
        h = d.checkpoints[lab]
        assert h.calibrated_units > 10_000
        assert 0.3 * (1 - Q) <= h.calibrated_spike_rate <= 1 - Q
    assert d.checkpoints["same"].calibrated_spike_rate == d.checkpoints["ref"].calibrated_spike_rate
    assert d.checkpoints["same"].paired_drift == 0.0  # paired: not one position moved
    paired = pq.read_table(out / "rescore" / "paired.parquet").to_pylist()
    same = [r for r in paired if r["checkpoint"] == "same"]
    assert same and all(r["median"] == 0 and r["mean"] == 0 and r["share_up"] == 0 for r in same)
    assert {r["scope"] for r in same} == {"region", "intrusion", "dropout", "drift", "malformation"}


def test_more_confident_everywhere_is_not_more_spikes(cases):
    _, d = cases
    conf, ref = d.checkpoints["confident"], d.checkpoints["ref"]
    assert conf.calibrated_spike_rate <= ref.calibrated_spike_rate
    assert conf.calibrated_spike_rate < 0.5 * ref.calibrated_spike_rate


def test_mass_onto_a_control_token_at_content_positions_is_more_spikes(cases):
    out, d = cases
    moved, ref = d.checkpoints["moved"], d.checkpoints["ref"]
    assert moved.calibrated_intrusion_rate > 0.25  # one token of three, at every content position
    assert moved.calibrated_spike_rate > 10 * ref.calibrated_spike_rate
    cal = pq.read_table(out / "rescore" / "calibration.parquet").to_pylist()
    by_tok = {}
    for r in cal:
        if r["checkpoint"] == "moved" and r["kind"] == "intrusion":
            by_tok[r["control_token"]] = by_tok.get(r["control_token"], 0) + r["spikes"]
    assert max(by_tok, key=by_tok.get) == "</"
    # the biggest paired move is "</" at content positions, up nearly everywhere
    top = d.moves[0]
    assert (top["checkpoint"], top["scope"], top["name"]) == ("moved", "intrusion", "</")
    assert top["median"] > 0 and top["median_lo"] > 0 and top["share_up"] == 1.0
    # the malformation points lean further toward the malformed continuation: paired drift > 0, CI above 0
    assert moved.paired_drift == pytest.approx(4.0, abs=0.01) and moved.paired_drift_lo > 3.5
    assert d.checkpoints["confident"].paired_drift == pytest.approx(0.0, abs=1e-9)


def test_discovered_token_is_the_one_that_appears_where_it_was_not_written(cases):
    out, d = cases
    rows = [r for r in pq.read_table(out / "rescore" / "discovered.parquet").to_pylist() if r["checkpoint"] == "moved"]
    top = min((r for r in rows if r["group"] == "content"), key=lambda r: r["rank"])
    assert (top["token_id"], top["token"], top["reference_prob"]) == (903, "tok903", 0.0)
    assert top["prob"] == pytest.approx(200.0 / top["n_positions"])
    assert 900 not in {r["token_id"] for r in rows}  # grew only where it was the logged token
    assert pq.read_schema(out / "rescore" / "discovered.parquet").names == DISCOVERED.column_names
    assert pq.read_schema(out / "rescore" / "paired.parquet").names == PAIRED.column_names


def test_distribution_overlays_the_reference(cases):
    out, _ = cases
    t = pq.read_table(out / "rescore" / "distribution.parquet").to_pylist()
    for lab in ("ref", "moved"):
        for kind in ("intrusion", "dropout"):
            rows = [r for r in t if r["checkpoint"] == lab and r["kind"] == kind]
            assert rows and sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert {r["checkpoint"] for r in t if r["is_reference"]} == {"ref"}


def test_reference_choice_and_errors(cases):
    out, _ = cases
    assert pick_reference([("b", 80), ("a", 20), ("c", None)], "first") == "a"
    assert pick_reference([("b", 80), ("a", 20)], "b") == "b"
    with pytest.raises(TrajlabError, match="reference 'x'.*labels: b, a"):
        pick_reference([("b", 80), ("a", 20)], "x")
    d = _compare(out, ["ref", "same", "confident", "moved"], reference="moved")
    assert d.reference == "moved" and d.checkpoints["moved"].calibrated_spike_rate <= 1 - Q
    with pytest.raises(TrajlabError, match="calibration_quantile 1.0"):
        compare_to_reference(out, [("ref", 1)], quantile=1.0)


def test_bootstrap_resamples_trajectories():
    rng = np.random.default_rng(1)
    clusters = np.repeat(np.arange(100), 20)
    v = rng.normal(0.5, 1.0, clusters.size) + np.repeat(rng.normal(0, 1.0, 100), 20)  # per-trajectory offsets
    b = bootstrap_delta(v, clusters, n_boot=300, seed=0)
    assert b["mean_lo"] < v.mean() < b["mean_hi"] and b["median_lo"] < b["median"] < b["median_hi"]
    # positions of one trajectory move together: the interval is wider than an i.i.d. one (~ 2 x 1.4/sqrt(2000))
    assert b["mean_hi"] - b["mean_lo"] > 0.25
    assert bootstrap_delta(v[:5], np.zeros(5))["mean_lo"] is None  # one trajectory: no interval

"""The breaker on the sample runs with in-training records whose control-token log-probs are computed, not invented:
how many steps before the reward falls each trip comes, and whether the healthy run trips.

The shipped demo checkpoints (``sample_data/demo_checkpoints``, a tiny Qwen3 trained along the collapsing sample
run: ``global_step_20`` on steps 1-20, then 50, 80, 110, 140 each on the steps since the one before) stand in
for the policy: every train trajectory of a step is teacher-forced through the latest checkpoint at or before it
(``global_step_20`` for steps 1-49) with ``trajlab rescore``, and the log-probs it gives the output's control
tokens (the family's control set, ``rules/control_tokens.yaml``) become that sample's reward record
(:mod:`trajlab.verl.records`), as the verl reward writes them from the sampler's own log-probs. The healthy
interleaved-SFT run is scored with the healthy checkpoint only (there is no policy trained on it). Then
``trajlab watch`` runs over each copy with the records beside the dumps, ``--keep-watching``, and the trips are
compared with the step where the reward falls (``scan``'s lead time from the run's metrics log).

    python benchmarks/bench_breaker_sample.py            # ~5-10 min on 2 cores (the rescoring)
    python benchmarks/bench_breaker_sample.py --json
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "sample_data" / "demo_checkpoints"
SEGMENTS = ((20, 1, 49), (50, 50, 79), (80, 80, 109), (110, 110, 139), (140, 140, 150))


def control_records(out: Path, run_dir: Path, segments: tuple[tuple[int, int, int], ...], control_prob: float) -> int:
    """Rescore ``out``'s train trajectories per segment and write one record per trajectory into ``run_dir``."""
    import polars as pl

    from trajlab.rescore import RescoreOptions, rescore
    from trajlab.verl.records import RecordLog, record_row

    traj = pl.read_parquet(out / "trajectories.parquet", columns=["trajectory_id", "step", "score", "n_calls",
                                                                   "n_malformed_calls", "group_id", "output"])
    log = RecordLog(run_dir)
    written = 0
    for ckpt, lo, hi in segments:
        rescore(out, [DEMO], RescoreOptions(progress=False, steps=f"{lo}-{hi}", ckpt_steps=str(ckpt),
                                            where="split = 'train'", reference=None))
        d = out / "rescore" / f"global_step_{ckpt}"
        ids = set(pl.read_parquet(d / "control_stats.parquet", columns=["control_token_id"])["control_token_id"])
        tok = pl.read_parquet(d / "tokens.parquet", columns=["trajectory_id", "token_id", "logprob"])
        ctl = tok.filter(pl.col("token_id").is_in(list(ids))).group_by("trajectory_id").agg(
            pl.len().alias("n"), pl.col("logprob").mean().alias("mean"), pl.col("logprob").min().alias("min"),
            (pl.col("logprob") < math.log(control_prob)).mean().alias("low"))
        gen = tok.group_by("trajectory_id").len().rename({"len": "generated"})
        rows = (traj.filter(pl.col("step").is_between(lo, hi)).join(ctl, on="trajectory_id", how="inner")
                .join(gen, on="trajectory_id", how="left").sort("step", "trajectory_id"))
        written += log.append(record_row(
            {"score": r["score"] or 0.0, "tool_calls": float(r["n_calls"]), "malformed_calls": float(r["n_malformed_calls"]),
             "exact_tokens": 1.0, "generated_tokens": float(r["generated"] or 0), "control_tokens": float(r["n"]),
             "control_logprob_mean": r["mean"], "control_logprob_min": r["min"], "control_low_prob_share": r["low"]},
            step=r["step"], uid=r["group_id"], stripped_text=r["output"]) for r in rows.iter_rows(named=True))
        shutil.rmtree(out / "rescore")
    log.close()
    return written


def breaker(run: str, segments: tuple[tuple[int, int, int], ...], work: Path, control_prob: float) -> dict:
    import polars as pl

    from trajlab.scan import scan
    from trajlab.watch import WatchOptions, watch

    copy = work / run
    shutil.copytree(ROOT / "sample_data" / run, copy)
    t0 = time.perf_counter()
    n = control_records(Path(scan([copy], work / f"{run}-scan", progress=False).out), copy, segments, control_prob)
    scored = time.perf_counter() - t0
    log = ROOT / "sample_data" / "trajlab-samples" / f"{run}.jsonl"  # the run's verl FileLogger metrics
    res = watch(WatchOptions(paths=[copy], out=work / f"{run}-watch", interval=0.05, idle_exit=0.5,
                             keep_watching=True, publish_every=600,
                             metrics=(f"{run}={log}",) if log.is_file() else ()))
    lead = (res.summary.lead_times or [{}])[0]
    return {"run": run, "records": n, "rescore_seconds": round(scored, 1),
            "trips": [{"reason": t.reason, "step": t.step, "noticed_step": t.noticed_step, "detail": t.detail}
                      for t in res.trips],
            "breakdown_step": lead.get("breakdown_step"),
            "control_steps": [r for r in pl.read_parquet(work / f"{run}-watch" / "steps.parquet",
                                                         columns=["split", "step", "control_logprob_mean"])
                              .filter(pl.col("split") == "train").drop("split").iter_rows(named=True)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--control-prob", type=float, default=0.5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trajlab-breaker-") as tmp:
        got = [breaker("qwen35_xml_run", SEGMENTS, Path(tmp), a.control_prob),
               breaker("qwen35_xml_sft_run", ((20, 1, 150),), Path(tmp), a.control_prob)]
    if a.json:
        print(json.dumps(got, indent=2))
        return 0
    for g in got:
        print(f"{g['run']}: {g['records']} records (rescored in {g['rescore_seconds']} s); reward falls at step "
              f"{g['breakdown_step']}")
        for t in g["trips"]:
            ahead = (f", {g['breakdown_step'] - t['step']} steps before the reward falls"
                     if g["breakdown_step"] is not None else "")
            print(f"  trip {t['reason']} at step {t['step']} (noticed at {t['noticed_step']}){ahead}"
                  + (f": {t['detail']}" if t["detail"] else ""))
        if not g["trips"]:
            print("  no trip")
    return 0


if __name__ == "__main__":
    sys.exit(main())

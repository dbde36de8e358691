#!/usr/bin/env python3
"""Generate the verl reward's record file of the collapsing sample run, its control-token log-probs computed by
teacher forcing the run's own text through the shipped demo checkpoints (none of it invented):
``qwen35_xml_run/trajlab_records/trajlab-records-demo-0.jsonl``, one record per train trajectory (1200: 150 steps
x 8), in the layout :mod:`trajlab.verl.records` writes (``reward_kwargs record_dir``), so ``trajlab scan`` /
``watch`` / ``report`` / ``show`` read it beside the dumps as they read a real run's.

How it is computed. ``trajlab scan`` of ``qwen35_xml_run`` gives the trajectories; each train trajectory of a step
is teacher-forced with ``trajlab rescore`` (CPU, float32, every scored token kept) through the latest demo
checkpoint (``demo_checkpoints``, a tiny Qwen3 trained along this very run: ``global_step_20`` on steps 1-20,
then 50, 80, 110 and 140 each on the steps since the one before) at or before it, the first one for the steps
before it (:data:`SEGMENTS`):

    global_step_20  -> steps 1-49       global_step_50  -> steps 50-79      global_step_80 -> steps 80-109
    global_step_110 -> steps 110-139    global_step_140 -> steps 140-150

These log-probs **stand in for the sampler's own**: a real run's reward reads the log-probs the rollout engine
sampled the tokens with; no engine sampled this text (``generate.py`` wrote it), so the nearest honest figure is
the log-prob the policy of that stretch of training gives the logged text, token by token.

What each field is:

* computed (the teacher forcing, under the segment's checkpoint and its tokenizer): ``generated_tokens`` and
  ``response_tokens`` (the model-written tokens rescore scored), ``control_tokens`` (of those, the tokens of the
  family's control set, ``rules/control_tokens.yaml``), ``control_logprob_mean`` / ``control_logprob_min``
  (their mean and smallest log-prob) and ``control_low_prob_share`` (the share below ``log 0.5``, the reward's
  default ``control_prob``); the three statistics are rounded to 4 decimals, so CPU thread counts or BLAS
  builds cannot change the bytes;
* from the dump: ``step``, ``uid`` and ``session_id`` (the V1 dump's ``uid`` is ``{uid}_{session_id}_{index}``),
  ``output_sha1`` (SHA-1 of the dump's ``output``: the join key), ``score``; ``split`` is ``train``;
* derived: ``tool_calls`` and ``malformed_calls`` are trajlab's judge of the text (the scan's ``n_calls`` /
  ``n_malformed_calls``, what the plugin's reward would count); ``exact_tokens`` is 1 because the statistics
  come from token ids (the checkpoint tokenizer's, not the sampler's, see above);
* ``logprobs_from`` (not a reward key; readers ignore it) says so in every row, naming the checkpoint:
  ``"teacher forcing: demo_checkpoints/global_step_20"``.

Rows are sorted by step then trajlab's ``trajectory_id`` with a fixed key order; the file is written whole to a
temporary file and moved into place. The healthy interleaved-SFT run (``qwen35_xml_sft_run``) ships **no** records:
no policy was trained on it (``benchmarks/bench_breaker_sample.py`` scores it with the healthy checkpoint at run
time). Needs the ``rescore`` extra (torch, transformers); about 5-10 minutes on 2 CPU cores:

    python sample_data/generate_records.py           # rewrite qwen35_xml_run/trajlab_records/ in place
    python sample_data/generate_records.py --check   # regenerate into a temp dir; exit 1 if the shipped file differs
"""

from __future__ import annotations

import argparse
import filecmp
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEMO = HERE / "demo_checkpoints"
RUN_DIR = HERE / "qwen35_xml_run"
#: where the record file lives, beside the run's dumps (the generator writes nowhere else)
RECORDS_DIR_NAME = "trajlab_records"
RECORD_FILE_NAME = "trajlab-records-demo-0.jsonl"
#: (checkpoint step, first rollout step, last rollout step) it scores: the latest checkpoint at or before a step
SEGMENTS: tuple[tuple[int, int, int], ...] = ((20, 1, 49), (50, 50, 79), (80, 80, 109), (110, 110, 139),
                                              (140, 140, 150))
#: the healthy interleaved-SFT run: only the healthy checkpoint (no policy was trained on it)
HEALTHY_SEGMENTS: tuple[tuple[int, int, int], ...] = ((20, 1, 150),)
#: the low-probability threshold of ``control_low_prob_share`` (the reward's default ``control_prob``)
CONTROL_PROB = 0.5
#: decimals the computed statistics are rounded to
DECIMALS = 4
#: the computed statistics (rounded)
STAT_KEYS = ("control_logprob_mean", "control_logprob_min", "control_low_prob_share")


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), DECIMALS) + 0.0  # + 0.0: no "-0.0"


def control_records(scan_out: str | Path, segments: Sequence[tuple[int, int, int]] = SEGMENTS, *,
                    control_prob: float = CONTROL_PROB, checkpoints: str | Path = DEMO) -> list[dict[str, Any]]:
    """One record (:func:`trajlab.verl.records.record_row`) per train trajectory of the scan ``scan_out`` in the
    steps of ``segments``, its control-token statistics from teacher forcing it through the segment's checkpoint
    under ``checkpoints``; sorted by step then trajectory id. ``scan_out/rescore`` is used as scratch and removed."""
    import shutil

    import polars as pl

    from trajlab.rescore import RescoreOptions, rescore
    from trajlab.verl.records import record_row

    out = Path(scan_out)
    traj = pl.read_parquet(out / "trajectories.parquet",
                           columns=["trajectory_id", "split", "step", "score", "n_calls", "n_malformed_calls",
                                    "extra", "output"]).filter(pl.col("split") == "train")
    traj = traj.with_columns(pl.col("extra").str.json_path_match("$.uid").alias("dump_uid")).drop("extra")
    low = math.log(control_prob)
    rows: list[tuple[int, str, dict[str, Any]]] = []
    for ckpt, lo, hi in segments:
        rescore(out, [Path(checkpoints)], RescoreOptions(progress=False, steps=f"{lo}-{hi}", ckpt_steps=str(ckpt),
                                                         where="split = 'train'", reference=None, device="cpu",
                                                         dtype="float32", tokens="all"))
        d = out / "rescore" / f"global_step_{ckpt}"
        ids = pl.read_parquet(d / "control_stats.parquet", columns=["control_token_id"])["control_token_id"]
        tok = pl.read_parquet(d / "tokens.parquet", columns=["trajectory_id", "token_id", "logprob"])
        ctl = tok.filter(pl.col("token_id").is_in(ids.unique().to_list())).group_by("trajectory_id").agg(
            pl.len().alias("n"), pl.col("logprob").mean().alias("mean"), pl.col("logprob").min().alias("min"),
            (pl.col("logprob") < low).mean().alias("low"))
        gen = tok.group_by("trajectory_id").len().rename({"len": "generated"})
        seg = (traj.filter(pl.col("step").is_between(lo, hi)).join(gen, on="trajectory_id", how="inner")
               .join(ctl, on="trajectory_id", how="left"))
        for r in seg.iter_rows(named=True):
            uid, session, _index = r["dump_uid"].rsplit("_", 2)  # the V1 dump's f"{uid}_{session_id}_{index}"
            rec = record_row(
                {"score": r["score"], "tool_calls": float(r["n_calls"]), "malformed_calls": float(r["n_malformed_calls"]),
                 "exact_tokens": 1.0, "generated_tokens": float(r["generated"]), "control_tokens": float(r["n"] or 0),
                 "control_logprob_mean": _round(r["mean"]), "control_logprob_min": _round(r["min"]),
                 "control_low_prob_share": _round(r["low"]),
                 "logprobs_from": f"teacher forcing: {Path(checkpoints).name}/global_step_{ckpt}"},
                step=r["step"], uid=uid, session_id=int(session), split="train", stripped_text=r["output"],
                response_tokens=int(r["generated"]))
            rows.append((int(r["step"]), str(r["trajectory_id"]), rec))
        shutil.rmtree(out / "rescore")
    return [rec for _, _, rec in sorted(rows, key=lambda t: (t[0], t[1]))]


def records_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """The record file's bytes: one JSON line per row (the key order of :func:`~trajlab.verl.records.record_row`),
    as :class:`~trajlab.verl.records.RecordLog` writes them."""
    return "".join(json.dumps(dict(r), ensure_ascii=False, allow_nan=False) + "\n" for r in rows).encode("utf-8")


def write_records(rows: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write ``rows`` to ``path`` whole (:func:`trajlab.atomic.atomic_write_bytes`), world-readable."""
    from trajlab.atomic import atomic_write_bytes

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(p, records_bytes(rows))
    os.chmod(p, 0o644)  # the atomic write's temporary file is 0600; a shipped data file is world-readable
    return p


def run_records(run_dir: str | Path, segments: Sequence[tuple[int, int, int]] = SEGMENTS, *,
                control_prob: float = CONTROL_PROB, work: str | Path | None = None) -> list[dict[str, Any]]:
    """Scan ``run_dir`` (into ``work``, default a temporary directory) and compute its records
    (:func:`control_records`)."""
    from trajlab.scan import scan

    with tempfile.TemporaryDirectory(prefix="trajlab-records-") as tmp:
        out = Path(work or tmp) / "scan"
        scan([Path(run_dir)], out, progress=False)
        return control_records(out, segments, control_prob=control_prob)


def generate(run_dir: str | Path = RUN_DIR, dest: str | Path | None = None) -> Path:
    """Write the record file of ``run_dir`` to ``dest`` (default ``run_dir/trajlab_records/<file>``)."""
    target = Path(dest) if dest is not None else Path(run_dir) / RECORDS_DIR_NAME / RECORD_FILE_NAME
    return write_records(run_records(run_dir), target)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and exit 1 if the shipped file differs")
    a = ap.parse_args(argv)
    shipped = RUN_DIR / RECORDS_DIR_NAME / RECORD_FILE_NAME
    if not a.check:
        p = generate()
        print(f"wrote {p.relative_to(HERE)} ({p.stat().st_size} bytes)")
        return 0
    with tempfile.TemporaryDirectory(prefix="trajlab-records-check-") as tmp:
        fresh = generate(dest=Path(tmp) / RECORD_FILE_NAME)
        if not shipped.is_file() or not filecmp.cmp(fresh, shipped, shallow=False):
            print(f"{shipped.relative_to(HERE)} differs from what generate_records.py writes "
                  f"(re-run python sample_data/generate_records.py)", file=sys.stderr)
            return 1
    print(f"{shipped.relative_to(HERE)} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())

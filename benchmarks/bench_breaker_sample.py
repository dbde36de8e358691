"""The breaker on the sample runs with in-training records whose control-token log-probs are computed, not invented:
how many steps before the reward falls each trip comes, and whether the healthy run trips.

The collapsing run ships its records (``sample_data/qwen35_xml_run/trajlab_records/``, written by
``sample_data/generate_records.py``, whose docstring says what was computed how: every train trajectory
teacher-forced with ``trajlab rescore`` through the latest demo checkpoint at or before its step). The benchmark
copies the run with them; ``--recompute`` computes them afresh instead (the same function,
:func:`generate_records.control_records`). The healthy interleaved-SFT run ships none (no policy was trained on
it): its records are always computed here, with the healthy checkpoint ``global_step_20`` only. Then
``trajlab watch`` runs over each copy with the records beside the dumps, ``--keep-watching``, and the trips are
compared with the step where the reward falls (``scan``'s lead time from the run's metrics log).

    python benchmarks/bench_breaker_sample.py              # ~2-4 min on 2 cores (the healthy run's rescoring)
    python benchmarks/bench_breaker_sample.py --recompute  # ~8-12 min: the collapsing run's records too
    python benchmarks/bench_breaker_sample.py --json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _records_module() -> ModuleType:
    """``sample_data/generate_records.py``, the one home of the record computation (loaded by path: it is not part
    of the installed package)."""
    mod = sys.modules.get("trajlab_generate_records")
    if mod is None:
        spec = importlib.util.spec_from_file_location("trajlab_generate_records",
                                                      ROOT / "sample_data" / "generate_records.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    return mod


def breaker(run: str, segments: tuple[tuple[int, int, int], ...] | None, work: Path, control_prob: float) -> dict:
    """Watch a copy of ``sample_data/<run>``: with its shipped records (``segments`` None) or with records computed
    over ``segments`` (replacing any shipped ones)."""
    import polars as pl

    from trajlab.verl.records import read_records
    from trajlab.watch import WatchOptions, watch

    gr = _records_module()
    copy = work / run
    shutil.copytree(ROOT / "sample_data" / run, copy)
    t0 = time.perf_counter()
    if segments is not None:
        shutil.rmtree(copy / gr.RECORDS_DIR_NAME, ignore_errors=True)
        rows = gr.run_records(copy, segments, control_prob=control_prob, work=work / f"{run}-records")
        gr.write_records(rows, copy / gr.RECORDS_DIR_NAME / gr.RECORD_FILE_NAME)
    n = len(read_records(copy / gr.RECORDS_DIR_NAME))
    scored = time.perf_counter() - t0
    log = ROOT / "sample_data" / "trajlab-samples" / f"{run}.jsonl"  # the run's verl FileLogger metrics
    res = watch(WatchOptions(paths=[copy], out=work / f"{run}-watch", interval=0.05, idle_exit=0.5,
                             keep_watching=True, publish_every=600,
                             metrics=(f"{run}={log}",) if log.is_file() else ()))
    lead = (res.summary.lead_times or [{}])[0]
    return {"run": run, "records": n, "records_from": "shipped" if segments is None else "computed",
            "rescore_seconds": round(scored, 1),
            "trips": [{"reason": t.reason, "step": t.step, "noticed_step": t.noticed_step, "detail": t.detail}
                      for t in res.trips],
            "breakdown_step": lead.get("breakdown_step"),
            "control_steps": [r for r in pl.read_parquet(work / f"{run}-watch" / "steps.parquet",
                                                         columns=["split", "step", "control_logprob_mean"])
                              .filter(pl.col("split") == "train").drop("split").iter_rows(named=True)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--recompute", action="store_true",
                    help="compute the collapsing run's records afresh instead of using the shipped ones")
    ap.add_argument("--control-prob", type=float, default=None,
                    help="low-probability threshold of the computed records (default: the generator's, 0.5; "
                         "implies --recompute)")
    a = ap.parse_args()
    gr = _records_module()
    prob = gr.CONTROL_PROB if a.control_prob is None else a.control_prob
    recompute = a.recompute or a.control_prob is not None
    with tempfile.TemporaryDirectory(prefix="trajlab-breaker-") as tmp:
        got = [breaker("qwen35_xml_run", gr.SEGMENTS if recompute else None, Path(tmp), prob),
               breaker("qwen35_xml_sft_run", gr.HEALTHY_SEGMENTS, Path(tmp), prob)]
    if a.json:
        print(json.dumps(got, indent=2))
        return 0
    for g in got:
        how = "shipped" if g["records_from"] == "shipped" else f"rescored in {g['rescore_seconds']} s"
        print(f"{g['run']}: {g['records']} records ({how}); reward falls at step "
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

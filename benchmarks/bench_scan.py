#!/usr/bin/env python3
"""Benchmark ``trajlab scan`` against a polars-only floor and ``polars.read_ndjson`` on the same verl dump.

    python benchmarks/bench_scan.py                          # 1 GB dump, scan with one worker per CPU
    python benchmarks/bench_scan.py --size-gb 2 --jobs 1 2 4 # scan once per job count
    python benchmarks/bench_scan.py --shape small-files --size-gb 0.3   # ~1,000 files of ~300 KB

Steps, all in one run:

1. generate (or reuse, when the options match) a realistic verl 0.9.x dump with
   ``benchmarks/gen_large_dump.py`` under ``--work-dir`` (default: ``$TMPDIR/trajlab_bench``): ``--shape
   big-files`` (default; ~1.6 MB step files) or ``small-files`` (~300 KB step files, long think blocks and
   tool responses);
2. read every file once so both contenders start from a warm page cache;
3. run (a) ``polars.read_ndjson`` on the dump's files, (b) a *floor*: the least work that reshapes the dump
   into tables of the issue's shape with polars alone (read, split outputs into turns, cut out raw calls, write
   three Parquet tables; no checks, no classifier, no ids, no part cache), and (c) ``trajlab.scan`` exactly as
   the CLI runs it by default (classifier on, part files written for later re-scans) into a fresh output
   directory, once per ``--jobs`` value -- each in its own subprocess, so memory is measured per variant;
4. print throughput (input MB / seconds of the timed call, MB = 10^6 bytes), wall time including interpreter
   start, CPU time (user + system, all processes; MB/CPU-s is the fairer number on a shared machine) and
   peak memory, then check the targets (issue 15): scan throughput >= 40% of the floor's, measured in the
   same run, and scan peak RSS < 1.5 GB. Exit status 1 when a target is missed (``--no-check`` to only
   report). The floor, not read_ndjson, is the yardstick: writing the tables alone costs about as much as
   the parse, so the floor itself reaches only 30-40% of read_ndjson.

Peak memory is reported two ways: ``peak RSS (tree)`` is the largest sum of the resident set sizes of the
subprocess and all its descendants (scan's worker processes), sampled every 20 ms with psutil -- the number
the target applies to; ``max RSS (1 proc)`` is the kernel's ``ru_maxrss`` for the subprocess (the largest
single process among it and the children it waited for), which catches spikes shorter than the sampling
interval.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gen_large_dump  # noqa: E402  (sibling script)

RSS_LIMIT = int(1.5 * 1024**3)  # 1.5 GiB
FLOOR_RATIO = 0.4  # scan throughput / the floor's

POLARS_CHILD = r"""
import json, sys, time
import polars as pl
files = json.loads(sys.argv[1])
t0 = time.perf_counter()
df = pl.read_ndjson(files)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": df.height}))
"""

# The least work that turns the dump into tables of the shape, in polars alone: the yardstick's read,
# one literal split of each output into turns, one regex for the raw calls, three Parquet (zstd) writes.
# No input checks, no classifier, no ids, no steps table, no part cache for re-scans -- so its throughput is an
# upper bound for any scan built from these libraries, and shows what share of read_ndjson's speed the
# output format alone leaves.
FLOOR_CHILD = r"""
import json, os, sys, time
import polars as pl
args = json.loads(sys.argv[1])
out = args["out"]
os.makedirs(out, exist_ok=True)
t0 = time.perf_counter()
df = pl.read_ndjson(args["files"]).with_row_index("row")
df.write_parquet(f"{out}/trajectories.parquet", compression="zstd")
turns = (df.select("row", pl.col("output").str.split("<tool_response>").alias("text"))
         .with_columns(pl.int_ranges(0, pl.col("text").list.len()).alias("turn_index")).explode("text", "turn_index"))
turns.write_parquet(f"{out}/turns.parquet", compression="zstd")
calls = (turns.select("row", "turn_index", pl.col("text").str.extract_all(r"(?s)<tool_call>.*?</tool_call>").alias("raw"))
         .explode("raw").drop_nulls())
calls.write_parquet(f"{out}/calls.parquet", compression="zstd")
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": df.height, "turns": turns.height, "calls": calls.height}))
"""

SCAN_CHILD = r"""
import json, sys, time
import trajlab
from trajlab.scan import ScanOptions
args = json.loads(sys.argv[1])
t0 = time.perf_counter()
kw = {} if args["engine"] == "auto" else {"engine": args["engine"]}
s = trajlab.scan([args["dump"]], args["out"], ScanOptions(jobs=args["jobs"], **kw), progress=False)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": s.trajectories, "calls": s.calls, "malformed_calls": s.malformed_calls,
                  "ingest_errors": s.ingest_errors}))
"""

# The scan's own stages, timed by CPU clock in one process over the whole dump (units of 10 step files, as the
# scan plans them): how much of the scan's CPU the two parts that the floor leaves out entirely cost -- the
# canonical-call recogniser and the per-turn classifier on the turns the recogniser cannot vouch for. Their sum
# plus the floor's own CPU is a lower bound on any scan that classifies every turn with this classifier.
STAGES_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
import bench_scan_stages as st
args = json.loads(sys.argv[1])
st.setup("cpu")
t0 = time.perf_counter()
units = []
total, acc, counts = st.time_units([__import__("pathlib").Path(f) for f in args["files"]], per_unit=units)
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_units": total, "stages": acc, "counts": counts,
                  "units": units,
                  "recogniser": acc.get(st.RECOGNISER, 0.0), "classifier": acc.get(st.CLASSIFIER, 0.0),
                  "classified_turns": counts.get(st.CLASSIFIER, 0)}))
"""


@dataclass
class Result:
    variant: str
    seconds: float  # the timed call only
    wall_seconds: float  # including interpreter start and imports
    mb_per_s: float
    cpu_seconds: float  # user + system time of the subprocess and the children it waited for
    peak_rss_tree: int
    max_rss_proc: int
    rows: int
    detail: dict


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_measured(variant: str, code: str, arg: str, n_bytes: int, log_dir: Path, *extra: str) -> Result:
    """Run ``code`` in a fresh interpreter (arguments ``arg``, ``*extra``), sampling its process tree's RSS until
    it exits."""
    out_path, err_path = log_dir / f"{variant}.stdout", log_dir / f"{variant}.stderr"
    t0 = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        child = subprocess.Popen([sys.executable, "-c", code, arg, *extra], stdout=out, stderr=err)
        ps = psutil.Process(child.pid)
        peak = 0
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, _tree_rss(ps))
            time.sleep(0.02)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        tail = err_path.read_text(errors="replace")[-3000:]
        raise SystemExit(f"{variant} failed with exit code {child.returncode}:\n{tail}")
    lines = [ln for ln in out_path.read_text().splitlines() if ln.startswith("{")]
    detail = json.loads(lines[-1])
    max_rss = usage.ru_maxrss * 1024  # Linux reports KiB
    cpu = usage.ru_utime + usage.ru_stime
    return Result(variant, detail["seconds"], wall, n_bytes / 1e6 / detail["seconds"], cpu, peak, max_rss,
                  detail.get("rows", 0), detail)


def stretch_rates(units: list[dict[str, float]]) -> list[tuple[str, float, float]]:
    """``(name, MB per CPU-second, the per-turn classifier's share of the CPU)`` of the first and the last third
    of the units (step order): a healthy stretch of the generated run and its collapse."""
    k = len(units) // 3
    if k == 0:
        return []
    out = []
    for name, part in (("first third (healthy)", units[:k]), ("last third (collapse)", units[-k:])):
        sec = sum(u["seconds"] for u in part)
        out.append((name, sum(u["bytes"] for u in part) / 1e6 / max(sec, 1e-9),
                    sum(u["classifier"] for u in part) / max(sec, 1e-9)))
    return out


def _warm(files: list[Path]) -> None:
    buf = bytearray(8 << 20)
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.readinto(buf):
                pass


def _fmt_bytes(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Benchmark trajlab scan against a polars-only floor and read_ndjson.")
    ap.add_argument("--size-gb", type=float, default=1.0, help="dump size in GB (10^9 bytes); default 1")
    ap.add_argument("--shape", choices=sorted(gen_large_dump.SHAPES), default="big-files",
                    help="big-files (~1.6 MB step files; default) or small-files (~300 KB, long think blocks and "
                         "tool responses)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[0],
                    help="scan worker processes, one scan per value; 0 = one per CPU (default)")
    ap.add_argument("--engine", default="auto", help="scan engine: auto (default), columnar or records")
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "trajlab_bench",
                    help="where the dump (reused across runs) and the scan output go")
    ap.add_argument("--keep", action="store_true", help="keep the scan output (the dump is always kept)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results as JSON to this file")
    ap.add_argument("--no-check", action="store_true", help="report only; exit 0 even if a target is missed")
    ap.add_argument("--no-bound", action="store_true",
                    help="skip the stage timing that computes the classifier's lower bound (saves one more pass)")
    a = ap.parse_args(argv)

    work = a.work_dir
    work.mkdir(parents=True, exist_ok=True)
    dump = work / ("dump" if a.shape == "big-files" else f"dump_{a.shape}")
    info = gen_large_dump.generate(dump, a.size_gb, jobs=max(a.jobs), shape=a.shape)
    roll = dump / "rollout"
    files = sorted(roll.glob("*.jsonl"), key=lambda p: int(p.stem))
    n_bytes = sum(f.stat().st_size for f in files)
    cpus = os.cpu_count() or 1
    print(f"load average before: {os.getloadavg()[0]:.1f}; dump ({a.shape}): {len(files)} files, "
          f"{n_bytes / 1e9:.2f} GB, {info['lines']} lines; {cpus} CPUs, scan --jobs "
          f"{' '.join(str(j or cpus) for j in a.jobs)}, --engine {a.engine}")
    _warm(files)

    logs = work / "logs"
    logs.mkdir(exist_ok=True)
    results = [run_measured("polars.read_ndjson", POLARS_CHILD, json.dumps([str(f) for f in files]), n_bytes, logs)]
    floor_out = work / "floor_out"
    shutil.rmtree(floor_out, ignore_errors=True)
    results.append(run_measured("floor (polars only)", FLOOR_CHILD,
                                json.dumps({"files": [str(f) for f in files], "out": str(floor_out)}), n_bytes, logs))
    shutil.rmtree(floor_out, ignore_errors=True)
    scan_out = work / "scan_out"
    for jobs in a.jobs:
        shutil.rmtree(scan_out, ignore_errors=True)
        results.append(run_measured(f"scan --jobs {jobs or cpus}", SCAN_CHILD,
                                    json.dumps({"dump": str(roll), "out": str(scan_out), "jobs": jobs,
                                                "engine": a.engine}), n_bytes, logs))
    if not a.keep:
        shutil.rmtree(scan_out, ignore_errors=True)
    stages = None if a.no_bound else run_measured(
        "stages (in-process)", STAGES_CHILD, json.dumps({"files": [str(f) for f in files]}), n_bytes, logs, str(HERE))

    print()
    print(f"{'variant':<20} {'MB/s':>8} {'time s':>8} {'wall s':>8} {'CPU s':>8} {'MB/CPU-s':>9} "
          f"{'peak RSS (tree)':>16} {'max RSS (1 proc)':>17} {'rows':>9}")
    for r in results:
        print(f"{r.variant:<20} {r.mb_per_s:>8.1f} {r.seconds:>8.1f} {r.wall_seconds:>8.1f} {r.cpu_seconds:>8.1f} "
              f"{n_bytes / 1e6 / max(r.cpu_seconds, 1e-9):>9.1f} "
              f"{_fmt_bytes(r.peak_rss_tree):>16} {_fmt_bytes(r.max_rss_proc):>17} {r.rows:>9}")
    load = os.getloadavg()
    print(f"load average after the run: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {cpus} CPUs"
          + ("  (busy machine: compare MB/CPU-s too)" if load[1] > cpus else ""))
    pol, flo, scans = results[0], results[1], results[2:]
    d = scans[0].detail
    print(f"\nscan found {d.get('calls')} calls, {d.get('malformed_calls')} malformed, "
          f"{d.get('ingest_errors')} ingest errors")
    print(f"floor (read + split + write three tables, no checks, no classifier): {flo.mb_per_s / pol.mb_per_s:.0%} "
          f"of read_ndjson's throughput")
    best = max(scans, key=lambda r: r.mb_per_s)
    for r in scans:
        print(f"{r.variant}: {r.mb_per_s / flo.mb_per_s:.0%} of the floor's throughput (MB/s), "
              f"{flo.cpu_seconds / r.cpu_seconds:.0%} of its MB/CPU-s, {r.mb_per_s / pol.mb_per_s:.0%} of read_ndjson's")
    ratio = best.mb_per_s / flo.mb_per_s
    bound = bound_cpu = None
    if stages is not None:
        sd = stages.detail
        need = flo.cpu_seconds + sd["recogniser"] + sd["classifier"]
        # scan needs at least `need` CPU-s, so its MB/CPU-s is at most the floor's x floor CPU / need; and, spread
        # perfectly over every CPU, it cannot take less than need / cpus seconds of wall time (valid on an idle
        # machine only: on a busy one the floor's own wall time is inflated)
        bound_cpu = flo.cpu_seconds / need
        bound = flo.seconds / (need / cpus)
        print(f"\nwhere scan's CPU goes (one process, units of 10 files, {sd['cpu_units']:.1f} CPU-s in the units):")
        for label, sec in sorted(sd["stages"].items(), key=lambda kv: -kv[1]):
            print(f"  {label:62s} {sec:6.2f} s  {sec / sd['cpu_units']:4.0%}")
        print(f"bound: the floor's CPU ({flo.cpu_seconds:.1f} s) + the canonical-call recogniser "
              f"({sd['recogniser']:.1f} s) + the per-turn classifier on the {sd['classified_turns']} turns it cannot "
              f"vouch for ({sd['classifier']:.1f} s, {sd['classifier'] / max(sd['classified_turns'], 1) * 1e6:.0f} "
              f"µs each) = {need:.1f} CPU-s, before reading checks, ids, part files and the merge:")
        print(f"  at best {bound_cpu:.0%} of the floor's MB/CPU-s; spread perfectly over {cpus} CPUs, at best "
              f"{bound:.0%} of its throughput (the floor itself ran on {flo.cpu_seconds / flo.seconds:.1f} CPUs)"
              + ("  [busy machine: the throughput bound is not reliable]" if load[1] > cpus else ""))
        stretches = stretch_rates(sd.get("units", []))
        if stretches:
            floor_rate = n_bytes / 1e6 / flo.cpu_seconds
            print(f"the units alone (no start-up, hashing or merge), by stretch of the run "
                  f"(the floor: {floor_rate:.1f} MB/CPU-s):")
            for name, rate, share in stretches:
                print(f"  {name:<24} {rate:6.1f} MB/CPU-s = {rate / floor_rate:4.0%} of the floor's; per-turn "
                      f"classifier {share:4.0%} of the units' CPU")
    ok_speed = ratio >= FLOOR_RATIO
    rss = max(max(r.peak_rss_tree, r.max_rss_proc) for r in scans)
    ok_rss = rss < RSS_LIMIT
    print(f"target: scan >= {FLOOR_RATIO:.0%} of the floor's throughput: {ratio:.0%} ({best.variant}) "
          f"-> {'PASS' if ok_speed else 'FAIL'}")
    print(f"target: scan peak RSS < {_fmt_bytes(RSS_LIMIT)}: {_fmt_bytes(rss)} -> {'PASS' if ok_rss else 'FAIL'}")
    if a.json:
        a.json.write_text(json.dumps({"dump": info, "shape": a.shape, "bytes": n_bytes, "cpus": cpus,
                                      "jobs": a.jobs, "engine": a.engine, "load_after": load,
                                      "results": [asdict(r) for r in results], "floor_ratio": ratio,
                                      "floor_vs_read_ndjson": flo.mb_per_s / pol.mb_per_s,
                                      "stages": None if stages is None else asdict(stages),
                                      "classifier_bound": bound,
                                      "classifier_bound_cpu": bound_cpu,
                                      "pass_speed": ok_speed, "pass_rss": ok_rss}, indent=2) + "\n")
    return 0 if a.no_check or (ok_speed and ok_rss) else 1


if __name__ == "__main__":
    sys.exit(main())

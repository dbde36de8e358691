#!/usr/bin/env python3
"""Where ``trajlab scan``'s time goes: one unit of work timed stage by stage, in one process.

    python benchmarks/bench_scan_stages.py                       # 10 files of the 1 GB benchmark dump
    python benchmarks/bench_scan_stages.py --first 400 --files 10 --repeat 3

It takes ``--files`` consecutive step files of the dump that ``bench_scan.py`` generates (``--first`` is the
first step; late steps have more malformed turns), runs them through the worker's entry point
(:func:`trajlab.scan.worker.process_unit`) as one unit, and prints the time of each stage (wall, or CPU with ``--clock cpu``): the columnar reader,
the turn split, the canonical-call recogniser, the per-turn classifier on the remaining turns, reassembly,
part files. ``polars.read_ndjson`` alone on the same bytes is printed first, as the yardstick.
"""

from __future__ import annotations

import argparse
import functools
import io
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: the clock stages are timed with: wall (``time.perf_counter``) or CPU of all threads (``time.process_time``)
CLOCK = [time.perf_counter]
sys.path.insert(0, str(HERE))


def wrap(owner: Any, name: str, label: str, acc: dict[str, float], counts: dict[str, int]) -> None:
    """Replace ``owner.name`` by a version that adds its time (``CLOCK``) to ``acc[label]``."""
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*a: Any, **k: Any) -> Any:
        t0 = CLOCK[0]()
        try:
            return fn(*a, **k)
        finally:
            acc[label] += CLOCK[0]() - t0
            counts[label] += 1

    setattr(owner, name, timed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "trajlab_bench"))
    ap.add_argument("--first", type=int, default=300, help="first step file (default 300)")
    ap.add_argument("--files", type=int, default=10, help="files in the unit (default 10, ~16 MB)")
    ap.add_argument("--repeat", type=int, default=2, help="timed repetitions (the first run warms caches)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time stages by wall clock (default) or by CPU time of all threads (fairer on a busy machine)")
    a = ap.parse_args()
    CLOCK[0] = time.process_time if a.clock == "cpu" else time.perf_counter

    import polars as pl

    import trajlab.scan
    import trajlab.scan.columnar as col
    import trajlab.scan.worker as worker
    import trajlab.toolcalls as tc
    import trajlab.toolcalls.vectorized as vec
    from trajlab.ingest import plan_tasks

    roll = Path(a.work_dir) / "dump" / "rollout"
    files = [roll / f"{i}.jsonl" for i in range(a.first, a.first + a.files)]
    missing = [f for f in files if not f.is_file()]
    if missing:
        print(f"missing {missing[0]}: run benchmarks/bench_scan.py (or gen_large_dump.py) first", file=sys.stderr)
        return 2
    data = b"".join(f.read_bytes() for f in files)
    mb = len(data) / 1e6

    acc: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    wrap(col, "read_clean_segments", "columnar reader (read_ndjson + checks + extra/group columns)", acc, counts)
    wrap(col, "split_turns_frame", "turn split (one regex pass over outputs)", acc, counts)
    wrap(vec, "classify_canonical", "canonical-call recogniser (polars)", acc, counts)
    wrap(tc, "analyze_turn", "per-turn classifier on the other turns", acc, counts)
    wrap(col._Range, "_concat", "reassembly (sort, split by file, to Arrow)", acc, counts)
    wrap(col._Range, "__init__", "trajectory ids + prompt facts", acc, counts)
    wrap(worker, "write_unit_parts", "part files (Arrow IPC, lz4, one per table) + done.json", acc, counts)
    opts = trajlab.scan.ScanOptions()
    with tempfile.TemporaryDirectory() as tmp:
        unit = [(plan_tasks(f, f.name, "verl_jsonl")[0], "0" * 40, str(Path(tmp) / f.stem)) for f in files]
        totals = []
        for _ in range(a.repeat + 1):
            acc.clear()
            counts.clear()
            t0 = CLOCK[0]()
            worker.process_unit(unit, opts, str(Path(tmp) / "unit"))
            totals.append(CLOCK[0]() - t0)
        t0 = CLOCK[0]()
        pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        yard = CLOCK[0]() - t0
    total = min(totals[1:])
    print(f"unit: {len(files)} files, {mb:.1f} MB, steps {a.first}..{a.first + a.files - 1}")
    print(f"{'polars.read_ndjson alone':62s} {yard * 1e3:8.1f} ms  {mb / yard:7.1f} MB/s")
    print(f"{'process_unit (whole worker unit), last run':62s} {total * 1e3:8.1f} ms  {mb / total:7.1f} MB/s")
    for label, s in sorted(acc.items(), key=lambda kv: -kv[1]):
        extra = f"  ({counts[label]} turns, {s / counts[label] * 1e6:.0f} µs each)" if "per-turn" in label else ""
        print(f"  {label:60s} {s * 1e3:8.1f} ms  {100 * s / total:5.1f}%{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

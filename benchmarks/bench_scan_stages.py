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


#: stage labels, in the order the worker runs them: (module path, attribute, label)
STAGES = (
    ("trajlab.scan.columnar", "read_clean_segments", "columnar reader (read_ndjson + checks + extra/group columns)"),
    ("trajlab.scan.columnar", "split_turns_frame", "turn split (one regex pass over outputs)"),
    ("trajlab.toolcalls.vectorized", "classify_canonical", "canonical-call recogniser (polars)"),
    ("trajlab.toolcalls", "analyze_turn", "per-turn classifier on the other turns"),
    ("trajlab.scan.columnar", "_Range._concat", "reassembly (sort, split by file, to Arrow)"),
    ("trajlab.scan.columnar", "_Range.__init__", "trajectory ids + prompt facts"),
    ("trajlab.scan.worker", "write_unit_parts", "part files (Arrow IPC, lz4, one per table) + done.json"),
)
RECOGNISER, CLASSIFIER = STAGES[2][2], STAGES[3][2]


def instrument(acc: dict[str, float], counts: dict[str, int]) -> None:
    """Wrap every stage of :data:`STAGES` so that its time (``CLOCK``) adds up in ``acc``, its calls in ``counts``."""
    import importlib

    for mod, attr, label in STAGES:
        owner: Any = importlib.import_module(mod)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        wrap(owner, name, label, acc, counts)


def time_units(files: list[Path], unit_files: int = 10, repeat: int = 0,
               per_unit: list[dict[str, float]] | None = None) -> tuple[float, dict[str, float], dict[str, int]]:
    """Run ``files`` through the worker's entry point, ``unit_files`` consecutive files per unit (as the scan's
    planner groups step files), ``repeat`` + 1 times; the last run's total time and per-stage times and counts.
    With ``per_unit``, one ``{"bytes", "seconds", "classified_turns", "classifier"}`` dict per unit of the last
    run is appended to it (how the cost moves from a healthy stretch of the run to its collapse).
    :func:`instrument` must have been called."""
    import trajlab.scan.options
    import trajlab.scan.worker as worker
    from trajlab.ingest import plan_tasks

    acc: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    opts = trajlab.scan.options.WorkerOptions()
    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(repeat + 1):
            ACC[0].clear()
            COUNTS[0].clear()
            total = 0.0
            units: list[dict[str, float]] = []
            for i in range(0, len(files), unit_files):
                batch = files[i:i + unit_files]
                unit = [(plan_tasks(f, f.name, "verl_jsonl")[0], "0" * 40, str(Path(tmp) / f"{run}-{f.stem}"))
                        for f in batch]
                before = (ACC[0].get(CLASSIFIER, 0.0), COUNTS[0].get(CLASSIFIER, 0))
                t0 = CLOCK[0]()
                worker.process_unit(unit, opts, str(Path(tmp) / f"unit-{run}-{i}"))
                dt = CLOCK[0]() - t0
                total += dt
                units.append({"bytes": float(sum(f.stat().st_size for f in batch)), "seconds": dt,
                              "classifier": ACC[0].get(CLASSIFIER, 0.0) - before[0],
                              "classified_turns": float(COUNTS[0].get(CLASSIFIER, 0) - before[1])})
    if per_unit is not None:
        per_unit.extend(units)
    acc.update(ACC[0])
    counts.update(COUNTS[0])
    return total, acc, counts


#: the accumulators :func:`instrument` was given (one instrumentation per process)
ACC: list[dict[str, float]] = [{}]
COUNTS: list[dict[str, int]] = [{}]


def setup(clock: str) -> None:
    """Choose the clock (``wall`` or ``cpu``) and instrument the stages once."""
    CLOCK[0] = time.process_time if clock == "cpu" else time.perf_counter
    ACC[0], COUNTS[0] = defaultdict(float), defaultdict(int)
    instrument(ACC[0], COUNTS[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "trajlab_bench"))
    ap.add_argument("--first", type=int, default=300, help="first step file (default 300)")
    ap.add_argument("--files", type=int, default=10, help="files in the unit (default 10, ~16 MB)")
    ap.add_argument("--repeat", type=int, default=2, help="timed repetitions (the first run warms caches)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time stages by wall clock (default) or by CPU time of all threads (fairer on a busy machine)")
    a = ap.parse_args()
    setup(a.clock)

    import polars as pl

    roll = Path(a.work_dir) / "dump" / "rollout"
    files = [roll / f"{i}.jsonl" for i in range(a.first, a.first + a.files)]
    missing = [f for f in files if not f.is_file()]
    if missing:
        print(f"missing {missing[0]}: run benchmarks/bench_scan.py (or gen_large_dump.py) first", file=sys.stderr)
        return 2
    data = b"".join(f.read_bytes() for f in files)
    mb = len(data) / 1e6
    total, acc, counts = time_units(files, unit_files=len(files), repeat=a.repeat)
    t0 = CLOCK[0]()
    pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
    yard = CLOCK[0]() - t0
    print(f"unit: {len(files)} files, {mb:.1f} MB, steps {a.first}..{a.first + a.files - 1}")
    print(f"{'polars.read_ndjson alone':62s} {yard * 1e3:8.1f} ms  {mb / yard:7.1f} MB/s")
    print(f"{'process_unit (whole worker unit), last run':62s} {total * 1e3:8.1f} ms  {mb / total:7.1f} MB/s")
    for label, s in sorted(acc.items(), key=lambda kv: -kv[1]):
        extra = f"  ({counts[label]} turns, {s / counts[label] * 1e6:.0f} µs each)" if "per-turn" in label else ""
        print(f"  {label:60s} {s * 1e3:8.1f} ms  {100 * s / total:5.1f}%{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

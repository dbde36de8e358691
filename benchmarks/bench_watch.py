#!/usr/bin/env python3
"""``trajlab watch`` latency: from a step file landing in the run directory to its line being printed.

    python benchmarks/bench_watch.py                         # 30 steps of the sample run, one every 1.5 s
    python benchmarks/bench_watch.py --steps 40 --every 1.0 --interval 0.5 --publish-every 10

A writer process copies the sample run's step files (``sample_data/qwen35_xml_run/rollout``, 8 trajectories a
step) into a fresh directory one at a time, the way verl writes them (open, write, close), and records when each
file was closed. :func:`trajlab.watch.watch` follows the directory in this process; each step's line is
timestamped when it is emitted. Printed: latency per step (median, 90th percentile, max) and the time the
final publish took. The latency is at most one ``--interval`` of waiting plus the time to classify the new file
(and, when a publish falls due, to merge OUT); a publish runs after the lines of its look are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WRITER = r"""
import json, os, sys, time
plan, every, log = json.loads(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
stamps = {}
time.sleep(1.0)
for src, dst, step in plan:
    data = open(src, "rb").read()
    with open(dst, "wb") as f:
        f.write(data)
    stamps[step] = time.time()
    time.sleep(every)
json.dump(stamps, open(log, "w"))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--first", type=int, default=70, help="first step copied (the run rots after 80)")
    ap.add_argument("--every", type=float, default=1.5, help="seconds between step files")
    ap.add_argument("--interval", type=float, default=0.5, help="watch --interval")
    ap.add_argument("--publish-every", type=float, default=10.0, help="watch --publish-every")
    args = ap.parse_args(argv)

    from trajlab.watch import WatchOptions, watch

    src = ROOT / "sample_data" / "qwen35_xml_run" / "rollout"
    with tempfile.TemporaryDirectory() as tmp:
        live = Path(tmp) / "exp" / "rollout"
        live.mkdir(parents=True)
        steps = range(args.first, args.first + args.steps)
        plan = [(str(src / f"{s}.jsonl"), str(live / f"{s}.jsonl"), s) for s in steps]
        log = Path(tmp) / "stamps.json"
        writer = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(plan), str(args.every), str(log)])
        seen: dict[int, float] = {}

        def emit(line: object) -> None:
            seen.setdefault(line.step, line.at)  # type: ignore[attr-defined]

        t0 = time.perf_counter()
        result = watch(WatchOptions(paths=[Path(tmp) / "exp"], out=Path(tmp) / "out", interval=args.interval,
                                    keep_watching=True, publish_every=args.publish_every,
                                    idle_exit=args.every + 2.0 * args.interval + 1.0), emit=emit)
        total = time.perf_counter() - t0
        writer.wait()
        stamps = {int(k): v for k, v in json.loads(log.read_text()).items()}
    lat = sorted(seen[s] - stamps[s] for s in stamps if s in seen)
    print(f"steps {len(lat)}/{len(stamps)} · interval {args.interval:g} s · a step every {args.every:g} s · "
          f"publish every {args.publish_every:g} s · trips {[(t.run, t.step) for t in result.trips]}")
    print(f"latency file closed → line printed: median {statistics.median(lat):.3f} s, "
          f"p90 {lat[int(0.9 * (len(lat) - 1))]:.3f} s, max {lat[-1]:.3f} s (min {lat[0]:.3f} s)")
    print(f"whole watch {total:.1f} s (ends {args.every + 2 * args.interval + 1:g} s after the last step, "
          f"then the final publish)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast trajlab reads the trainer's metrics logs: a TensorBoard event file (pure-Python TFRecord framing,
CRC-32C and protobuf) and a verl file-logger JSONL of the same scalars. Prints MB/s and scalars/s.

    python benchmarks/bench_metrics_read.py [--steps 2000] [--metrics 100]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from trajlab.metrics.filelog import read_file_log
from trajlab.metrics.tfevents import event_file_bytes, read_scalars


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--metrics", type=int, default=100)
    a = ap.parse_args()
    names = [f"group{i % 7}/metric_{i}/mean" for i in range(a.metrics)]
    rows = [(s, n, (s * 31 + i) % 97 / 97) for s in range(1, a.steps + 1) for i, n in enumerate(names)]
    with tempfile.TemporaryDirectory() as d:
        ev = Path(d) / "events.out.tfevents.bench"
        ev.write_bytes(event_file_bytes(rows, 0.0))
        js = Path(d) / "exp.jsonl"
        with open(js, "w") as f:
            for s in range(1, a.steps + 1):
                f.write(json.dumps({"step": s, "data": {n: (s * 31 + i) % 97 / 97 for i, n in enumerate(names)}}) + "\n")
        for label, path, fn in (("event file", ev, read_scalars), ("file-logger jsonl", js, read_file_log)):
            t0 = time.perf_counter()
            got = fn(path)
            dt = time.perf_counter() - t0
            mb = path.stat().st_size / 1e6
            print(f"{label:18s} {mb:7.1f} MB  {len(got):>9,} scalars  {dt:6.2f} s  {mb / dt:6.1f} MB/s  "
                  f"{len(got) / dt:>10,.0f} scalars/s")


if __name__ == "__main__":
    main()

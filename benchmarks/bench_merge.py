#!/usr/bin/env python3
"""The scan's merge alone at growing sizes: peak RSS of merging N copies of a scanned run's part files.

    python benchmarks/bench_merge.py --copies 30 300 1000 --work-dir /tmp/merge-bench

A scan's memory beyond its workers is the merge and what follows it in the driver; this measures that part
without paying for the classifier: it scans ``sample_data/qwen35_xml_run`` (4.4 MB, 150 step files) once,
writes its tables back as unit part files (:func:`trajlab.scan.parts.write_unit_parts`, one unit per copy, one
range per step file), and for each ``--copies N`` merges N copies of every range (N x the rows: 340 copies hold
as many trajectories as a 1.5 GB dump of ``gen_large_dump.py``) into fresh tables, then aggregates ``steps``
-- in a subprocess whose peak RSS is sampled every 20 ms. The part-file layout is the one every trajlab since
parts layout 5 writes, so the same parts can be merged by another checkout (``PYTHONPATH=<checkout>``) to
compare. Prints rows merged, seconds and peak RSS per N.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]

MERGE_CHILD = r"""
import json, sys, time
from pathlib import Path
from trajlab.scan.parts import merge_parts
from trajlab.scan.plan import FileEntry
from trajlab.trends import steps_table
from trajlab.tables import STEPS, table_path, write_table
a = json.loads(sys.argv[1])
stats = json.loads(Path(a["stats"]).read_text())
keep = []
for k in range(a["copies"]):
    for rel, st in stats:
        e = FileEntry(Path(rel), f"c{k}/{rel}", "verl_jsonl", 0, f"k{k}-{rel}", [None])
        e.stats = [{**st, "unit": f"u-copy{k % a['units']:05d}"}]
        keep.append(e)
out = Path(a["out"])
t0 = time.perf_counter()
merge_parts(keep, Path(a["parts"]), out, [])
write_table(STEPS, steps_table(out), table_path(out, "steps"))
import pyarrow.parquet as pq
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "trajectories": pq.read_metadata(table_path(out, "trajectories")).num_rows}))
"""


def make_parts(work: Path, units: int) -> Path:
    """Scan the sample run and write its tables back as ``units`` identical unit directories; returns the
    stats file (``[[rel, range stats]]``)."""
    import polars as pl
    import pyarrow.parquet as pq

    from trajlab.scan import ScanOptions, scan
    from trajlab.scan.parts import PART_TABLES, RangeParts, write_unit_parts
    from trajlab.tables import table_path

    src = work / "src"
    if not (src / "manifest.json").is_file():
        scan([REPO / "sample_data" / "qwen35_xml_run"], src, ScanOptions(jobs=1), progress=False)
    tables = {s.name: pl.from_arrow(pq.read_table(table_path(src, s.name))) for s in PART_TABLES}
    traj = tables["trajectories"]
    by_file = traj.select("trajectory_id", "source_path").partition_by("source_path", as_dict=True)
    parts = work / "parts"
    shutil.rmtree(parts, ignore_errors=True)
    ranges = []
    from trajlab.ingest import FileTask

    for i, ((path,), ids) in enumerate(sorted(by_file.items())):
        idset = ids["trajectory_id"]
        got = {}
        for s in PART_TABLES:
            t = tables[s.name]
            got[s.name] = (t.filter(pl.col("trajectory_id").is_in(idset.to_list())) if "trajectory_id" in t.columns
                           else t.head(0)).to_arrow().cast(s.schema)
        task = FileTask(path=path, rel=path, fmt="verl_jsonl", split=None, step=None, start=0, end=1, first_line=0,
                        chunk=0)
        ranges.append((path, RangeParts(task, "0" * 40, parts / f"f{i}", got, "records")))
    stats = []
    for u in range(units):
        st = write_unit_parts(parts / f"u-copy{u:05d}", [r for _, r in ranges])
        if u == 0:
            stats = [[rel, s] for (rel, _), s in zip(ranges, st, strict=True)]
    (work / "stats.json").write_text(json.dumps(stats))
    return work / "stats.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Peak RSS of the scan's merge at growing sizes.")
    ap.add_argument("--copies", type=int, nargs="+", default=[30, 300, 1000])
    ap.add_argument("--units", type=int, default=8, help="distinct unit directories the copies cycle through")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/trajlab-merge-bench"))
    a = ap.parse_args(argv)
    a.work_dir.mkdir(parents=True, exist_ok=True)
    stats = make_parts(a.work_dir, a.units)
    for n in a.copies:
        out = a.work_dir / f"out-{n}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        arg = json.dumps({"stats": str(stats), "parts": str(a.work_dir / "parts"), "out": str(out),
                          "copies": n, "units": a.units})
        child = subprocess.Popen([sys.executable, "-c", MERGE_CHILD, arg], stdout=subprocess.PIPE)
        ps, peak = psutil.Process(child.pid), 0
        while child.poll() is None:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.02)
        assert child.stdout is not None
        if child.returncode != 0:
            raise SystemExit(f"merge of {n} copies failed ({child.returncode})")
        d = json.loads(child.stdout.read().decode().strip().splitlines()[-1])
        size = sum(f.stat().st_size for f in out.glob("*.parquet"))
        print(f"{n:5d} copies: {d['trajectories']:>9,} trajectories merged in {d['seconds']:.1f} s, "
              f"peak RSS {peak / (1 << 20):.0f} MiB, tables {size / 1e6:.1f} MB")
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

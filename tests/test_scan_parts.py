"""Part files are written per unit of work and shared by its files: an incremental re-scan reuses the rows of
unchanged files from their unit, writes a new unit for the changed ones, gives the bytes of a full scan, and
prunes a unit once none of its files uses it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.scan_inputs import make_generated

from trajlab.scan import ScanOptions, scan
from trajlab.scan.parts import UNIT_PREFIX
from trajlab.tables import SCAN_TABLES


def units(out: Path) -> set[str]:
    return {d.name for d in (out / ".parts").iterdir() if d.name.startswith(UNIT_PREFIX)}


def tables(out: Path) -> dict[str, bytes]:
    return {n: (out / f"{n}.parquet").read_bytes() for n in SCAN_TABLES}


def test_units_shared_reused_and_pruned(tmp_path: Path) -> None:
    root = make_generated(tmp_path / "in", files=4, per_file=10)
    out = tmp_path / "out"
    scan([root], out, ScanOptions(jobs=1), progress=False)
    first = units(out)
    assert len(first) == 1  # four small files of one directory: one unit, one part file per table

    changed = root / "rollout" / "2.jsonl"
    changed.write_bytes(changed.read_bytes() + changed.read_bytes().splitlines(keepends=True)[0])
    os.utime(changed, ns=(1, 1))
    scan([root], out, ScanOptions(jobs=1), progress=False)
    inputs = {i["rel"]: i["reused"] for i in json.loads((out / "manifest.json").read_text())["inputs"]}
    assert inputs == {"rollout/1.jsonl": True, "rollout/2.jsonl": False, "rollout/3.jsonl": True,
                      "rollout/4.jsonl": True}
    assert first < units(out) and len(units(out)) == 2  # the old unit still holds three files' rows
    scan([root], tmp_path / "full", ScanOptions(jobs=1, incremental=False), progress=False)
    assert tables(out) == tables(tmp_path / "full")

    for f in (root / "rollout").glob("*.jsonl"):
        os.utime(f, ns=(2, 2))
    scan([root], out, ScanOptions(jobs=1), progress=False)
    assert not first & units(out)  # no file uses the first unit any more
    assert tables(out) == tables(tmp_path / "full")


def _child_pool_size(q: object) -> None:  # runs in a spawned process, like a scan worker
    import polars as pl

    q.put(pl.thread_pool_size())  # type: ignore[attr-defined]


def test_worker_threads_share_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers started inside ``worker_threads(n)`` size their polars pool to cpus // n (at least 1): a spawned
    process really reads it; afterwards the variable is gone; a value the user set is kept."""
    import multiprocessing as mp

    from trajlab.scan.worker import POLARS_THREADS_ENV, worker_threads

    monkeypatch.delenv(POLARS_THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    ctx = mp.get_context("spawn")
    with worker_threads(4) as given:
        assert given == 2
        q = ctx.Queue()
        p = ctx.Process(target=_child_pool_size, args=(q,))
        p.start()
        assert q.get(timeout=60) == 2
        p.join()
    assert POLARS_THREADS_ENV not in os.environ
    with worker_threads(16) as given:
        assert given == 1 and os.environ[POLARS_THREADS_ENV] == "1"
    monkeypatch.setenv(POLARS_THREADS_ENV, "3")
    with worker_threads(4) as given:
        assert given is None and os.environ[POLARS_THREADS_ENV] == "3"
    assert os.environ[POLARS_THREADS_ENV] == "3"

"""Part files are written per unit of work and shared by its files until the merge; then the merged tables are
the cache: an incremental re-scan reuses the rows of unchanged files from the tables, reads the changed ones,
gives the bytes of a full scan, and leaves no part file behind."""

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


def reused(out: Path) -> dict[str, bool]:
    return {i["rel"]: i["reused"] for i in json.loads((out / "manifest.json").read_text())["inputs"]}


def cache_bytes(out: Path) -> int:
    return sum(f.stat().st_size for f in (out / ".parts").rglob("*") if f.is_file())


def test_the_tables_are_the_cache(tmp_path: Path) -> None:
    """After a scan no part file is left: each range's done.json points at its rows in the merged tables, so the
    cache is a few hundred bytes per range; a re-scan reuses the unchanged files' rows from the tables, reads
    the changed one, and gives the bytes of a full scan; tables that are not the recorded merge (a killed
    rewrite, a table replaced) are never trusted."""
    root = make_generated(tmp_path / "in", files=4, per_file=10)
    out = tmp_path / "out"
    scan([root], out, ScanOptions(jobs=1), progress=False)
    assert units(out) == set()
    key = json.loads((out / "manifest.json").read_text())["merge_key"]
    done = [json.loads(p.read_text()) for p in (out / ".parts").rglob("*.done.json")]
    assert len(done) == 4 and all(d["unit"] is None and d["merged"] == key for d in done)
    assert cache_bytes(out) < 4 * 1024 < sum(len(b) for b in tables(out).values())

    changed = root / "rollout" / "2.jsonl"
    changed.write_bytes(changed.read_bytes() + changed.read_bytes().splitlines(keepends=True)[0])
    os.utime(changed, ns=(1, 1))
    scan([root], out, ScanOptions(jobs=1), progress=False)
    assert reused(out) == {"rollout/1.jsonl": True, "rollout/2.jsonl": False, "rollout/3.jsonl": True,
                           "rollout/4.jsonl": True}
    assert units(out) == set()
    scan([root], tmp_path / "full", ScanOptions(jobs=1, incremental=False), progress=False)
    assert tables(out) == tables(tmp_path / "full")

    scan([root], out, ScanOptions(jobs=1), progress=False)  # nothing changed: all reused, nothing merged
    assert all(reused(out).values()) and tables(out) == tables(tmp_path / "full")

    (out / ".trajlab-incomplete").write_text("{}")  # a scan killed while rewriting the tables
    scan([root], out, ScanOptions(jobs=1), progress=False)
    assert not any(reused(out).values()) and tables(out) == tables(tmp_path / "full")

    other = tmp_path / "other"  # a table replaced by another scan's table of the same name
    scan([make_generated(tmp_path / "in2", seed=9, files=2, per_file=7)], other, ScanOptions(jobs=1), progress=False)
    (out / "calls.parquet").write_bytes((other / "calls.parquet").read_bytes())
    scan([root], out, ScanOptions(jobs=1), progress=False)
    assert not any(reused(out).values()) and tables(out) == tables(tmp_path / "full")


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


@pytest.mark.slow
def test_rows_read_back_from_the_tables_keep_their_place(tmp_path: Path) -> None:
    """Reused rows come back from the previous tables at the right offsets: with damaged files (ingest errors
    from the parts), a duplicate file (a driver-side error heading ingest_errors), a big file cut into many
    ranges, and a changed file between two unchanged ones, the incremental scan equals the full one."""
    import shutil

    from helpers.scan_inputs import make_messy

    root = make_messy(tmp_path / "in")
    shutil.copy(root / "rollout" / "1.jsonl", root / "rollout" / "dup.jsonl")
    make_generated(tmp_path / "gen", files=1, per_file=300)
    (root / "big").mkdir()
    shutil.copy(tmp_path / "gen" / "rollout" / "1.jsonl", root / "big" / "1.jsonl")
    out, full = tmp_path / "out", tmp_path / "full"
    opts = ScanOptions(jobs=1, chunk_bytes=50_000)
    scan([root], out, opts, progress=False)
    changed = root / "rollout" / "7.jsonl"
    changed.write_bytes(changed.read_bytes() * 2)
    os.utime(changed, ns=(3, 3))
    scan([root], out, opts, progress=False)
    got = reused(out)
    assert not got["rollout/7.jsonl"] and got["big/1.jsonl"] and got["rollout/2.jsonl"]
    assert len(list((out / ".parts").rglob("*.done.json"))) > 20  # the big file is many ranges
    scan([root], full, ScanOptions(jobs=1, chunk_bytes=50_000, incremental=False), progress=False)
    assert tables(out) == tables(full)


def test_row_group_writer_packs_small_tables_and_writes_the_same_bytes(tmp_path: Path) -> None:
    """Thousands of tiny tables (one file's calls each) wait packed, not one by one, and the file is byte for
    byte the one a single table gives; row groups stay exactly ``n`` rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajlab.memory import release_memory
    from trajlab.scan.parts import PACK_EVERY, RowGroupWriter

    schema = pa.schema([("id", pa.string()), ("x", pa.float64())])
    pieces = [pa.table({"id": [f"t{i}-{k}" for k in range(i % 4)], "x": [float(k) for k in range(i % 4)]},
                       schema=schema) for i in range(3 * PACK_EVERY + 7)]
    whole = pa.concat_tables(pieces)
    n = 500
    with pq.ParquetWriter(tmp_path / "a.parquet", whole.schema, compression="zstd") as w:
        rg = RowGroupWriter(w, n)
        for t in pieces:
            rg.add(t)
            assert len(rg.pending) <= PACK_EVERY + 1
        rg.close()
    with pq.ParquetWriter(tmp_path / "b.parquet", whole.schema, compression="zstd") as w:
        for i in range(0, whole.num_rows, n):
            w.write_table(whole.slice(i, n).combine_chunks(), row_group_size=n)
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    md = pq.read_metadata(tmp_path / "a.parquet")
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups - 1)] == [n] * (md.num_row_groups - 1)
    release_memory()  # callable anywhere, any number of times

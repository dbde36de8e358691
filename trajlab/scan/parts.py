"""Part files and the merge: each unit's tables on disk, then streamed into one Parquet file per table.

A worker writes one Arrow IPC file (lz4) per table for its whole unit of work, under
``OUT/.parts/u-<unit id>/``, with one record batch (or a few) per range of input, and then one ``done.json``
per range under ``OUT/.parts/<file key>/`` with the range's stats: row counts, splits, first step, the file's
sha1, the engine, and where its rows are (the unit directory and the batch indices per table). One file per
table per unit, not per file, keeps a dump of many small step files from costing thousands of tiny writes and
reads. The merge streams the batches of every kept file, in scan order, into ``OUT/<table>.parquet`` with row
groups of a fixed size, so the output bytes do not depend on chunking, units or jobs.

After a merge the tables *are* the cache: each kept range's ``done.json`` is rewritten to point at its rows in
the merged tables (``merged``: the merge key, ``offsets``: the first row per table;
:func:`trajlab.scan.cache.point_at_tables`) and its unit's part files are deleted, so the cache costs a few
hundred bytes per range instead of a second copy of the tables. The next merge reads an unchanged range's rows
back from the previous tables (:class:`TableSlices`), a row group at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab.atomic import atomic_path, atomic_write_bytes, commit_temp, temp_beside
from trajlab.ingest import FileTask
from trajlab.memory import release_memory
from trajlab.model import IngestError
from trajlab.scan.length_limit import longest_outputs, run_longest, settle
from trajlab.scan.plan import FileEntry
from trajlab.tables import (
    CALLS,
    FINDINGS,
    INGEST_ERRORS,
    ROLLOUT_TOKENS,
    TRAJECTORIES,
    TURNS,
    TableSpec,
    sort_table,
    table_path,
    to_table,
)

#: the tables every range produces (``steps`` is aggregated from the merged tables)
PART_TABLES: tuple[TableSpec, ...] = (TRAJECTORIES, TURNS, CALLS, FINDINGS, INGEST_ERRORS, ROLLOUT_TOKENS)
PARTS_DIR = ".parts"
#: rows per row group of each merged table (fixed, so output bytes do not depend on how input was chunked)
ROW_GROUP_ROWS = {"trajectories": 2048, "turns": 16384, "rollout_tokens": 262144}
DEFAULT_ROW_GROUP_ROWS = 65536


#: part directories of units start with this (the others are named by a file key and hold ``done.json`` files)
UNIT_PREFIX = "u-"


def unit_name(range_keys: list[str]) -> str:
    """The directory name of a unit's part files, from the ``<file key>:<chunk>`` of each of its ranges."""
    return UNIT_PREFIX + hashlib.sha1("\n".join(range_keys).encode()).hexdigest()[:20]


def part_path(unit_dir: Path, table: str) -> Path:
    """The part file of ``table`` for the unit whose part directory is ``unit_dir``."""
    return unit_dir / f"{table}.arrow"


def done_path(pdir: Path, chunk: int) -> Path:
    """The ``done.json`` of range ``chunk``: written last, so its presence means the range's parts are whole."""
    return pdir / f"{chunk:05d}.done.json"


@dataclass
class RangeParts:
    """What a worker writes for one range: its part tables, the engine that read it and why it fell back."""

    task: FileTask
    digest: str
    pdir: Path
    tables: dict[str, pa.Table]
    engine: str
    fallback: str | None = None


def write_unit_parts(unit_dir: Path, ranges: list[RangeParts]) -> list[dict[str, Any]]:
    """Write a unit's part files (one Arrow IPC file per table, lz4, a batch per range) and each range's
    ``done.json``; returns the ranges' stats.

    A table with no rows in the unit gets no part file (most units have no ingest errors, healthy ones no
    findings). ``done.json`` records every table's row count and batch indices, so the merge reads exactly
    its range's rows, and the engine that read the range with the reason the columnar engine did not."""
    unit_dir.mkdir(parents=True, exist_ok=True)
    spans: list[dict[str, list[int]]] = [{} for _ in ranges]
    for spec in PART_TABLES:
        if not any(r.tables[spec.name].num_rows for r in ranges):
            continue
        path = part_path(unit_dir, spec.name)
        tmp = temp_beside(path)  # a unique name: never shared with a racer
        n = 0
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(
                sink, spec.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
            for k, r in enumerate(ranges):
                batches = [b for b in r.tables[spec.name].to_batches() if b.num_rows]
                for b in batches:
                    w.write_batch(b)
                if batches:
                    spans[k][spec.name] = [n, n + len(batches)]
                    n += len(batches)
        commit_temp(tmp, path)
    out = []
    for r, span in zip(ranges, spans, strict=True):
        traj = r.tables["trajectories"]
        steps = [s for s in traj.column("step").to_pylist() if s is not None]  # drop_null() loads pyarrow.compute
        stats = {
            "chunk": r.task.chunk,
            "bytes": r.task.end - r.task.start,
            "min_step": min(steps) if steps else None,
            "splits": sorted(set(traj.column("split").to_pylist())),
            "sha1": r.digest,
            "rows": {spec.name: r.tables[spec.name].num_rows for spec in PART_TABLES},
            "unit": unit_dir.name,
            "batches": span,
            "engine": r.engine,
            "fallback": r.fallback,
            "longest": longest_outputs(traj),
        }
        r.pdir.mkdir(parents=True, exist_ok=True)
        # a cache (lost is recomputed): no fsync; compact JSON (C encoder: a dump of many small files has many)
        atomic_write_bytes(done_path(r.pdir, r.task.chunk), json.dumps(stats, sort_keys=True).encode(), fsync=False)
        out.append(stats)
    return out


class _UnitReaders:
    """Open unit part files of one table (read as plain files, not memory-mapped: the pages of a mapped file
    read once stay resident until it is closed, and a merge reads every part; the least recently used closed
    beyond ``limit``)."""

    def __init__(self, parts_root: Path, table: str, limit: int = 4) -> None:
        self.root, self.table, self.limit = parts_root, table, limit
        self.open: OrderedDict[str, tuple[pa.NativeFile, pa.ipc.RecordBatchFileReader]] = OrderedDict()

    def batches(self, unit: str, first: int, end: int) -> list[pa.RecordBatch]:
        if unit in self.open:
            self.open.move_to_end(unit)
        else:
            src = pa.OSFile(str(part_path(self.root / unit, self.table)))
            self.open[unit] = (src, pa.ipc.open_file(src))
            if len(self.open) > self.limit:
                self.open.popitem(last=False)[1][0].close()
        reader = self.open[unit][1]
        return [reader.get_batch(i) for i in range(first, end)]

    def close(self) -> None:
        for src, _ in self.open.values():
            src.close()
        self.open.clear()


class TableSlices:
    """Rows of a previous merged table by row number, read a row group at a time (the last one kept, since a
    merge reads unchanged ranges in the order it wrote them)."""

    def __init__(self, path: Path, spec: TableSpec) -> None:
        self.file, self.spec = pq.ParquetFile(str(path)), spec
        md = self.file.metadata
        self.starts = [0]
        for i in range(md.num_row_groups):
            self.starts.append(self.starts[-1] + md.row_group(i).num_rows)
        self.cached: tuple[int, pa.Table] | None = None

    def group(self, i: int) -> pa.Table:
        if self.cached is None or self.cached[0] != i:
            self.cached = (i, self.file.read_row_group(i).cast(self.spec.schema))
        return self.cached[1]

    def rows(self, start: int, n: int) -> pa.Table:
        """Rows ``start`` to ``start + n`` (a range must lie inside the table: else a ValueError)."""
        if start < 0 or start + n > self.starts[-1]:
            raise ValueError(f"rows {start}..{start + n} are not in {self.file.metadata.num_rows}-row table")
        import bisect

        pieces = []
        at, end = start, start + n
        while at < end:
            i = bisect.bisect_right(self.starts, at) - 1
            g = self.group(i)
            lo = at - self.starts[i]
            take = min(end, self.starts[i + 1]) - at
            pieces.append(g.slice(lo, take))
            at += take
        return pa.concat_tables(pieces) if pieces else self.spec.schema.empty_table()

    def close(self) -> None:
        self.cached = None
        self.file.close()


#: small tables a :class:`RowGroupWriter` holds loose before it packs them into one (each costs its own buffers
#: and objects: 20,000 tables of a few call rows each held 240 MiB for a 1 MB table)
PACK_EVERY = 256


class RowGroupWriter:
    """Write tables into row groups of exactly ``n`` rows (the last one shorter), whatever the input sizes.
    Tables waiting for a row group are packed into one every :data:`PACK_EVERY` (the rows and the bytes
    written are the same; only the memory they wait in is less)."""

    def __init__(self, writer: pq.ParquetWriter, n: int) -> None:
        self.w, self.n, self.pending, self.rows, self.loose = writer, n, [], 0, 0

    def add(self, t: pa.Table) -> None:
        if not t.num_rows:
            return
        self.pending.append(t)
        self.rows += t.num_rows
        self.loose += 1
        if self.loose >= PACK_EVERY and self.rows < self.n:
            self.pending[-self.loose:] = [pa.concat_tables(self.pending[-self.loose:]).combine_chunks()]
            self.loose = 0
        if self.rows >= self.n:
            whole = pa.concat_tables(self.pending).combine_chunks()
            k = (whole.num_rows // self.n) * self.n
            for i in range(0, k, self.n):
                self.w.write_table(whole.slice(i, self.n), row_group_size=self.n)
            rest = whole.slice(k)
            self.pending, self.rows = ([rest] if rest.num_rows else []), rest.num_rows
            self.loose = len(self.pending)
            del whole
            release_memory()  # the concatenated row groups are freed: keep the merge's resident set flat

    def close(self) -> None:
        if self.rows:
            self.w.write_table(pa.concat_tables(self.pending).combine_chunks(), row_group_size=self.n)
        self.pending, self.rows, self.loose = [], 0, 0


def merge_parts(keep: list[FileEntry], parts_root: Path, out: Path, errors: list[IngestError],
                progress: bool = False) -> None:
    """Stream every part of every table into ``out/<table>.parquet`` (bounded memory: a row group at a time
    per table); the tables are written by parallel threads (Arrow's readers and writers release the GIL).
    With ``progress``, a bar on stderr counts the part files merged (a big scan's merge takes minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    from trajlab.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn, progress_bar

    n_parts = sum(len(e.tasks) for e in keep) * len(PART_TABLES)
    prog = progress_bar(TextColumn("merge"), BarColumn(), MofNCompleteColumn(), TextColumn("part files"),
                        TimeRemainingColumn(), enabled=progress and bool(n_parts))
    longest = run_longest(st for e in keep for st in e.stats)
    with prog, ThreadPoolExecutor(max_workers=min(len(PART_TABLES), os.cpu_count() or 1)) as ex:
        bar = prog.add_task("merge", total=max(n_parts, 1))

        def advance() -> None:
            prog.advance(bar)

        for f in [ex.submit(merge_table, spec, keep, parts_root, out, errors, advance,
                            (lambda t: settle(t, longest)) if spec is TRAJECTORIES else None)
                  for spec in PART_TABLES]:
            f.result()
    release_memory()  # before the steps aggregate and the summary read the tables back


def merge_table(spec: TableSpec, keep: list[FileEntry], parts_root: Path, out: Path,
                errors: list[IngestError], advance: Callable[[], None] = lambda: None,
                transform: Callable[[pa.Table], pa.Table] | None = None) -> None:
    """Write ``out/<spec.name>.parquet`` from the parts of ``keep`` (atomically: temp file, then rename), each
    range's rows through ``transform`` when given (``trajectories``: the length-limit settling,
    :func:`trajlab.scan.length_limit.settle`)."""
    fix = transform or (lambda t: t)
    final = table_path(out, spec.name)
    # ranges whose rows are in the previous tables (the cache points there): read back from the old file,
    # which stays in place (open) until the new one replaces it
    old = (TableSlices(final, spec) if any(st.get("unit") is None and st["rows"].get(spec.name)
                                           for e in keep for st in e.stats) else None)
    readers = _UnitReaders(parts_root, spec.name)
    try:
        with atomic_path(final) as tmp:
            with pq.ParquetWriter(tmp, spec.schema, compression="zstd", write_statistics=True) as w:
                rg = RowGroupWriter(w, ROW_GROUP_ROWS.get(spec.name, DEFAULT_ROW_GROUP_ROWS))
                if spec is INGEST_ERRORS and errors:
                    rg.add(sort_table(spec, to_table(spec, [asdict(x) for x in errors])))
                for e in keep:
                    for st in e.stats:
                        n = st["rows"].get(spec.name, 0)
                        if st.get("unit") is None:
                            if n and old is not None:
                                rg.add(fix(old.rows(st["offsets"][spec.name], n)))
                        else:
                            span = st["batches"].get(spec.name)
                            if span:
                                rg.add(fix(pa.Table.from_batches(readers.batches(st["unit"], *span),
                                                                 schema=spec.schema)))
                        advance()
                rg.close()
    finally:
        readers.close()
        if old is not None:
            old.close()
        release_memory()  # between tables

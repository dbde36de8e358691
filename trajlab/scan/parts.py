"""Part files and the merge: each range's tables on disk, then streamed into one Parquet file per table.

A worker writes one Arrow IPC file (lz4) per table with rows for each range it processed, plus a
``done.json`` with the range's stats (row counts, splits, first step, the file's sha1), under
``OUT/.parts/<file key>/``. The merge streams the parts of every kept file, in scan order, into
``OUT/<table>.parquet`` with row groups of a fixed size, so the output bytes do not depend on chunking or jobs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab.ingest import FileTask
from trajlab.model import IngestError
from trajlab.scan.plan import FileEntry
from trajlab.tables import (
    CALLS,
    FINDINGS,
    INGEST_ERRORS,
    TRAJECTORIES,
    TURNS,
    TableSpec,
    atomic_write_json,
    make_readable,
    sort_table,
    table_path,
    to_table,
)

#: the tables every range produces (``steps`` is aggregated from the merged tables)
PART_TABLES: tuple[TableSpec, ...] = (TRAJECTORIES, TURNS, CALLS, FINDINGS, INGEST_ERRORS)
PARTS_DIR = ".parts"
#: rows per row group of each merged table (fixed, so output bytes do not depend on how input was chunked)
ROW_GROUP_ROWS = {"trajectories": 2048, "turns": 16384}
DEFAULT_ROW_GROUP_ROWS = 65536


def part_path(pdir: Path, chunk: int, table: str) -> Path:
    """The part file of ``table`` for range ``chunk`` of a file whose part directory is ``pdir``."""
    return pdir / f"{chunk:05d}.{table}.arrow"


def done_path(pdir: Path, chunk: int) -> Path:
    """The ``done.json`` of range ``chunk``: written last, so its presence means the range's parts are whole."""
    return pdir / f"{chunk:05d}.done.json"


def write_parts(task: FileTask, digest: str, pdir: Path, tables: dict[str, pa.Table]) -> dict[str, Any]:
    """Write one range's part files (Arrow IPC, lz4: fast to write and to merge) and its ``done.json``.

    A table with no rows gets no part file (most ranges have no ingest errors, healthy ones no findings);
    ``done.json`` records every table's row count, so the merge knows which files exist."""
    pdir.mkdir(parents=True, exist_ok=True)
    for spec in PART_TABLES:
        if tables[spec.name].num_rows:
            write_part(tables[spec.name], part_path(pdir, task.chunk, spec.name))
    traj = tables["trajectories"]
    steps = traj.column("step").drop_null()
    stats = {
        "chunk": task.chunk,
        "bytes": task.end - task.start,
        "min_step": pa.compute.min(steps).as_py() if len(steps) else None,
        "splits": sorted(set(traj.column("split").to_pylist())),
        "sha1": digest,
        "rows": {spec.name: tables[spec.name].num_rows for spec in PART_TABLES},
    }
    atomic_write_json(done_path(pdir, task.chunk), stats, fsync=False)  # a cache: lost is recomputed
    return stats


def write_part(table: pa.Table, path: Path) -> None:
    """Atomically write a part file (temp file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(
            sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(table)
    os.replace(tmp, path)


def read_part(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_file(src).read_all()


class RowGroupWriter:
    """Write tables into row groups of exactly ``n`` rows (the last one shorter), whatever the input sizes."""

    def __init__(self, writer: pq.ParquetWriter, n: int) -> None:
        self.w, self.n, self.pending, self.rows = writer, n, [], 0

    def add(self, t: pa.Table) -> None:
        if not t.num_rows:
            return
        self.pending.append(t)
        self.rows += t.num_rows
        if self.rows >= self.n:
            whole = pa.concat_tables(self.pending).combine_chunks()
            k = (whole.num_rows // self.n) * self.n
            for i in range(0, k, self.n):
                self.w.write_table(whole.slice(i, self.n), row_group_size=self.n)
            rest = whole.slice(k)
            self.pending, self.rows = ([rest] if rest.num_rows else []), rest.num_rows

    def close(self) -> None:
        if self.rows:
            self.w.write_table(pa.concat_tables(self.pending).combine_chunks(), row_group_size=self.n)
        self.pending, self.rows = [], 0


def merge_parts(keep: list[FileEntry], parts_root: Path, out: Path, errors: list[IngestError],
                progress: bool = False) -> None:
    """Stream every part of every table into ``out/<table>.parquet`` (bounded memory: a row group at a time
    per table); the tables are written by parallel threads (Arrow's readers and writers release the GIL).
    With ``progress``, a bar on stderr counts the part files merged (a big scan's merge takes minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from trajlab.console import err_console

    n_parts = sum(len(e.tasks) for e in keep) * len(PART_TABLES)
    prog = Progress(TextColumn("merge"), BarColumn(), MofNCompleteColumn(), TextColumn("part files"),
                    TimeRemainingColumn(), console=err_console, disable=not progress or not n_parts, transient=True)
    with prog, ThreadPoolExecutor(max_workers=min(len(PART_TABLES), os.cpu_count() or 1)) as ex:
        bar = prog.add_task("merge", total=max(n_parts, 1))

        def advance() -> None:
            prog.advance(bar)

        for f in [ex.submit(merge_table, spec, keep, parts_root, out, errors, advance) for spec in PART_TABLES]:
            f.result()


def merge_table(spec: TableSpec, keep: list[FileEntry], parts_root: Path, out: Path,
                errors: list[IngestError], advance: Callable[[], None] = lambda: None) -> None:
    """Write ``out/<spec.name>.parquet`` from the parts of ``keep`` (atomically: temp file, then rename)."""
    import tempfile

    final = table_path(out, spec.name)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=out)
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp, spec.schema, compression="zstd", write_statistics=True) as w:
            rg = RowGroupWriter(w, ROW_GROUP_ROWS.get(spec.name, DEFAULT_ROW_GROUP_ROWS))
            if spec is INGEST_ERRORS and errors:
                rg.add(sort_table(spec, to_table(spec, [asdict(x) for x in errors])))
            for e in keep:
                for i in range(len(e.tasks)):
                    if e.stats[i]["rows"].get(spec.name):
                        rg.add(read_part(part_path(parts_root / e.key, i, spec.name)))
                    advance()
            rg.close()
        make_readable(tmp)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""Export a query's result as CSV, JSON, JSON lines or Parquet, streamed batch by batch (:func:`export`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import TrajlabError, param
from trajlab.query.limits import DEFAULT_LIMITS, Deadline, SqlLimits
from trajlab.query.run import connect, open_reader
from trajlab.query.sources import discover

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa


#: Output formats of :func:`export` (``table`` is the CLI's rich table and is not a file format).
EXPORT_FORMATS = ("csv", "json", "jsonl", "parquet")
#: the mark an export file carries (:mod:`trajlab.ownfiles`): discovery never reads it as a dump
EXPORT_KIND = "sql export"


def nested_to_json(batch: pa.RecordBatch) -> pa.RecordBatch:
    """CSV cannot hold lists, maps or structs: turn those columns into JSON text."""
    import pyarrow as pa

    cols = []
    for col in batch.columns:
        if pa.types.is_nested(col.type):
            vals = col.to_pylist(maps_as_pydicts="lossy") if pa.types.is_map(col.type) else col.to_pylist()
            cols.append(
                pa.array([None if v is None else json.dumps(v, ensure_ascii=False, default=str) for v in vals],
                         pa.string())
            )
        else:
            cols.append(col)
    return pa.RecordBatch.from_arrays(cols, names=batch.schema.names)


def csv_values(col: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column as CSV cells: booleans as true/false (like SQL), nulls as empty cells."""
    import pyarrow as pa

    vals = col.to_pylist()
    if pa.types.is_boolean(col.type):
        return [None if v is None else ("true" if v else "false") for v in vals]
    return vals


def json_rows(batch: pa.RecordBatch) -> Iterator[str]:
    from trajlab.console import safe_json

    for row in batch.to_pylist(maps_as_pydicts="lossy"):  # control / bidi characters as \u escapes (same value)
        yield safe_json(json.dumps(row, ensure_ascii=False, default=str))


def export(out: Path | str, query: str, fmt: str, dest: Path | str | None = None, *,
           limits: SqlLimits | None = None) -> int:
    """Write the result of ``query`` as ``fmt`` (csv | json | jsonl | parquet) to ``dest`` (stdout when None).

    Streams record batches, so large results use bounded memory. ``json`` is one JSON array of objects,
    ``jsonl`` one object per line; nested values (lists, maps, structs) become JSON text in csv. Parquet
    needs ``dest``. ``dest`` is written atomically (temp file, then rename) and may not be one of the tables
    the query reads. A file export carries trajlab's mark (:mod:`trajlab.ownfiles`: Parquet metadata, or a
    ``.FILE.trajlab`` sidecar for json/jsonl), so a later scan never reads it as a dump. Returns the number of
    rows written.
    """
    import csv
    import io
    import sys

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from trajlab.atomic import commit_temp, temp_beside

    if fmt not in EXPORT_FORMATS:
        raise TrajlabError(f"unknown format {fmt!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "parquet" and dest is None:
        raise TrajlabError(f"{param('fmt', 'parquet')} needs {param('dest', metavar='FILE')}")
    tmp: str | None = None
    if dest is not None:
        from trajlab.outpaths import check_out_file

        dest = check_out_file(dest, inputs=[p for src in discover(out).values() for _, p in src.files])
        tmp = str(temp_beside(dest))
    n = 0
    lim = limits or DEFAULT_LIMITS
    con = connect(out, limits=lim)
    dl = Deadline(con, lim.timeout_s).__enter__()
    try:
        reader = open_reader(con, query)
        if fmt == "parquet":
            assert tmp is not None
            from trajlab.ownfiles import parquet_metadata

            schema = reader.schema.with_metadata({**(reader.schema.metadata or {}), **parquet_metadata(EXPORT_KIND)})
            with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
                for b in reader:
                    writer.write_batch(b)
                    n += b.num_rows
        else:
            if tmp:
                fh = open(tmp, "w", encoding="utf-8", newline="")
            else:
                fh = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", newline="", write_through=True)
            try:
                first = True
                cw = csv.writer(fh, lineterminator="\n")
                if fmt == "csv" and reader.schema.names:
                    cw.writerow(reader.schema.names)
                if fmt == "json":
                    fh.write("[")
                to_terminal = tmp is None and sys.stdout.isatty()
                for b in reader:
                    n += b.num_rows
                    if fmt == "csv":
                        flat = nested_to_json(b)
                        rows: Iterable[Sequence[Any]] = zip(*(csv_values(c) for c in flat.columns), strict=True)
                        if to_terminal:  # CSV has no escapes: on a terminal, control characters are made visible
                            from trajlab.console import literal

                            rows = ([literal(v) if isinstance(v, str) else v for v in r] for r in rows)
                        cw.writerows(rows)
                        continue
                    for line in json_rows(b):
                        if fmt == "json":
                            fh.write(("\n" if first else ",\n") + line)
                        else:
                            fh.write(line + "\n")
                        first = False
                if fmt == "json":
                    fh.write("]\n" if first else "\n]\n")
            finally:
                if tmp:
                    fh.close()
                else:
                    fh.flush()
                    fh.detach()
        if tmp:
            commit_temp(tmp, dest)  # type: ignore[arg-type]
            tmp = None
            if fmt in ("json", "jsonl") and dest is not None:  # rows only, no room for a mark inside: a sidecar
                from trajlab.ownfiles import write_sidecar

                write_sidecar(dest, EXPORT_KIND)
    except (duckdb.Error, pa.ArrowException, TrajlabError) as e:
        raise dl.failure(e) from None
    finally:
        dl.__exit__()
        con.close()
        if tmp:
            Path(tmp).unlink(missing_ok=True)
    return n


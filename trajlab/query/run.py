"""Connections and queries: :func:`connect` (the read-only views), :func:`sql`, :func:`iter_batches`,
:func:`preview` and :func:`list_views`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import TrajlabError
from trajlab.query.helpers import HELPERS
from trajlab.query.limits import DEFAULT_LIMITS, Deadline, SqlLimits, query_error
from trajlab.query.sources import discover, quote, register

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa


@dataclass(frozen=True)
class ViewInfo:
    """What :func:`list_views` reports for one view or macro."""

    name: str
    kind: str  # scan | rescore | sft | view | macro
    columns: tuple[tuple[str, str], ...]
    rows: int | None
    doc: str


def connect(out: Path | str, *, read_only: bool = True, limits: SqlLimits | None = None) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB connection with a view for every table under ``out`` and the helper views.

    With ``read_only=True`` (the default) DuckDB is denied all file-system access and its configuration is
    locked, so SQL can read the views but never write a file (``COPY ... TO`` fails); threads, memory and the
    spill directory are bounded by ``limits`` (:class:`SqlLimits`). ``read_only=False``
    gives an ordinary connection (file access allowed, e.g. to ``COPY`` a result elsewhere); the views are
    the same.

    Example::

        con = trajlab.connect("out")
        con.sql("SELECT step, malformed_rate FROM steps ORDER BY step").show()
    """
    import duckdb

    sources = discover(out)
    settings = (limits or DEFAULT_LIMITS).settings()
    temp = settings.pop("temp_directory")
    config: dict[str, Any] = {"autoinstall_known_extensions": False, "autoload_known_extensions": False, **settings}
    con = duckdb.connect(":memory:", config=config)
    con.execute("SET temp_directory = " + "'" + temp.replace("'", "''") + "'")  # before file access is denied
    if read_only:
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    for src in sources.values():
        register(con, src)
    for h in HELPERS:
        if all(n in sources for n in h.needs):
            con.execute(h.sql)
    return con


def run_query(con: duckdb.DuckDBPyConnection, query: str) -> Any:
    import duckdb

    if not query.strip():
        raise TrajlabError("empty SQL query")
    try:
        return con.sql(query)
    except duckdb.Error as e:
        raise query_error(e) from None


def sql(out: Path | str, query: str, *, limits: SqlLimits | None = None) -> pa.Table:
    """Run ``query`` over the views of ``out`` (read-only) and return the result as an Arrow table.

    Bad SQL raises :class:`TrajlabError` carrying DuckDB's message. Statements without a result
    (e.g. ``CREATE VIEW``) return an empty table.
    """
    import duckdb
    import pyarrow as pa

    lim = limits or DEFAULT_LIMITS
    con = connect(out, limits=lim)
    try:
        with Deadline(con, lim.timeout_s) as dl:
            try:
                rel = run_query(con, query)
                if rel is None:
                    return pa.table({})
                return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()
            except (duckdb.Error, pa.ArrowException, TrajlabError) as e:
                raise dl.failure(e) from None
    finally:
        con.close()


def open_reader(con: duckdb.DuckDBPyConnection, query: str, batch_rows: int = 65536) -> pa.RecordBatchReader:
    import duckdb
    import pyarrow as pa

    rel = run_query(con, query)
    if rel is None:
        return pa.RecordBatchReader.from_batches(pa.schema([]), [])
    try:  # duckdb 2.x: to_arrow_reader; 1.x: fetch_record_batch
        if hasattr(rel, "to_arrow_reader"):
            return rel.to_arrow_reader(batch_rows)
        return rel.fetch_record_batch(batch_rows)
    except duckdb.Error as e:
        raise query_error(e) from None


def iter_batches(out: Path | str, query: str, batch_rows: int = 65536, *,
                 limits: SqlLimits | None = None) -> Iterator[pa.RecordBatch]:
    """Stream the result of ``query`` as Arrow record batches (bounded memory for large results)."""
    import duckdb
    import pyarrow as pa

    lim = limits or DEFAULT_LIMITS
    con = connect(out, limits=lim)
    try:
        with Deadline(con, lim.timeout_s) as dl:
            reader = open_reader(con, query, batch_rows)
            try:
                yield from reader
            except (duckdb.Error, pa.ArrowException) as e:
                raise dl.error(e) from None
    finally:
        con.close()


def preview(out: Path | str, query: str, limit: int = 50, *,
            limits: SqlLimits | None = None) -> tuple[pa.Table, bool]:
    """The first ``limit`` rows of ``query``'s result (all when ``limit`` <= 0) and whether there are more.

    Reading stops at the first row past the limit, so previewing a large result costs neither time nor memory.
    """
    import duckdb
    import pyarrow as pa

    lim = limits or DEFAULT_LIMITS
    con = connect(out, limits=lim)
    try:
        dl = Deadline(con, lim.timeout_s).__enter__()
        try:
            reader = open_reader(con, query)
        except TrajlabError as e:
            dl.__exit__()
            raise dl.failure(e) from None
        kept: list[pa.RecordBatch] = []
        n_kept = 0
        more = False
        try:
            for b in reader:
                if b.num_rows == 0:
                    continue
                if limit > 0 and n_kept >= limit:
                    more = True
                    break
                take = b if limit <= 0 else b.slice(0, limit - n_kept)
                kept.append(take)
                n_kept += take.num_rows
                if take.num_rows < b.num_rows:
                    more = True
                    break
        except (duckdb.Error, pa.ArrowException) as e:
            raise dl.error(e) from None
        finally:
            dl.__exit__()
        return pa.Table.from_batches(kept, schema=reader.schema), more
    finally:
        con.close()


def table_docs() -> dict[str, str]:
    """One-line descriptions of every table trajlab writes (:mod:`trajlab.table_registry`)."""
    from trajlab.table_registry import ALL_TABLES

    return {name: spec.doc for name, spec in ALL_TABLES.items()}


def list_views(out: Path | str) -> list[ViewInfo]:
    """Every view (tables, helper views) and table macro of ``out`` with its columns and row count."""
    sources = discover(out)
    con = connect(out)
    infos: list[ViewInfo] = []
    try:
        helpers = {h.name: h for h in HELPERS}
        docs = table_docs()
        names = [*sources, *(h.name for h in HELPERS if h.kind == "view" and all(n in sources for n in h.needs))]
        for name in names:
            desc = con.execute(f"DESCRIBE SELECT * FROM {quote(name)}").fetchall()
            rows = con.execute(f"SELECT count(*) FROM {quote(name)}").fetchall()[0][0]
            if name in sources:
                src = sources[name]
                kind = src.kind
                doc = docs.get(name) or ", ".join(
                    f"{lab}/{p.name}" if lab else str(p.relative_to(Path(out))) for lab, p in src.files
                )
            else:
                kind, doc = "view", helpers[name].doc
            infos.append(ViewInfo(name, kind, tuple((r[0], str(r[1])) for r in desc), int(rows), doc))
        for h in HELPERS:
            if h.kind == "macro" and all(n in sources for n in h.needs):
                params = con.execute(
                    "SELECT parameters FROM duckdb_functions() WHERE function_name = ? AND function_type = 'table_macro'",
                    [h.name],
                ).fetchone()
                cols = tuple((str(p), "parameter") for p in (params[0] if params else []))
                infos.append(ViewInfo(h.name, "macro", cols, None, h.doc))
    finally:
        con.close()
    return infos


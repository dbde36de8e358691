"""SQL over a trajlab output directory: read-only DuckDB views over every table found.

:func:`connect` opens an in-memory DuckDB database whose views are the Parquet tables of one output directory:

* scan tables by name (``trajectories``, ``turns``, ``calls``, ``findings``, ``steps``, ``ingest_errors``);
* rescore tables ``OUT/rescore/<label>/<table>.parquet`` as ``rescore_<table>``, unioned across checkpoints with
  a ``checkpoint`` column (the label), and ``OUT/rescore/<name>.parquet`` (e.g. ``compare``) as ``rescore_<name>``;
* SFT pool files ``OUT/sft_pool/**/<name>.parquet`` as ``sft_<name>``;
* helper views and table macros for the common questions (:data:`HELPERS`).

The tables are handed to DuckDB as Arrow datasets (scanned lazily, with projection and filter pushdown), so
in the default read-only mode DuckDB itself needs no file access at all: the connection is opened with
``enable_external_access = false`` and its configuration locked, which makes ``COPY ... TO``, ``ATTACH``,
``EXPORT DATABASE``, ``read_csv(...)`` and ``INSTALL`` fail. Nothing a query does can write into ``OUT``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import TableError, TrajlabError, param
from trajlab.tables import SCAN_TABLES

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    import pyarrow as pa

#: Output formats of :func:`export` (``table`` is the CLI's rich table and is not a file format).
EXPORT_FORMATS = ("csv", "json", "jsonl", "parquet")


@dataclass(frozen=True)
class Helper:
    """A named view or table macro created on top of the tables (when the tables it needs exist)."""

    name: str
    kind: str  # view | macro
    needs: tuple[str, ...]
    doc: str
    sql: str
    example: str


HELPERS: tuple[Helper, ...] = (
    Helper(
        "malformed_by_step",
        "view",
        ("steps",),
        "malformed-call rate per (run, split, step, category): one row for every step and every category seen, "
        "rate = calls flagged with the category / calls at that step (0 when none were flagged)",
        """
        CREATE VIEW malformed_by_step AS
        WITH entries AS (
            SELECT run, split, step, unnest(map_entries(category_counts)) AS e FROM steps
        ), flat AS (
            SELECT run, split, step, e.key AS category, e.value AS n FROM entries
        ), cats AS (
            SELECT DISTINCT category FROM flat
        )
        SELECT s.run, s.split, s.step, c.category, s.calls,
               coalesce(f.n, 0)::BIGINT AS flagged_calls,
               CASE WHEN s.calls > 0 THEN coalesce(f.n, 0) / s.calls END AS rate
        FROM steps s CROSS JOIN cats c
        LEFT JOIN flat f
          ON f.run = s.run AND f.split = s.split AND f.step IS NOT DISTINCT FROM s.step AND f.category = c.category
        ORDER BY s.run, s.split, s.step NULLS FIRST, c.category
        """,
        "SELECT run, step, category, round(rate, 3) AS rate FROM malformed_by_step "
        "WHERE split = 'train' AND rate > 0 ORDER BY run, step, category",
    ),
    Helper(
        "run_steps",
        "view",
        ("steps",),
        "per (run, split, step): calls, malformed calls, the step's malformed-call rate, the rate pooled over "
        "the run's last 3 steps (rolling_rate) and over all its steps so far (cumulative_rate), mean score; "
        "steps of different runs side by side",
        """
        CREATE VIEW run_steps AS
        SELECT run, split, step, trajectories, calls, malformed_calls, malformed_rate,
               sum(malformed_calls) OVER w3 / nullif(sum(calls) OVER w3, 0) AS rolling_rate,
               sum(malformed_calls) OVER wc / nullif(sum(calls) OVER wc, 0) AS cumulative_rate,
               mean_score, final_answer_rate
        FROM steps
        WHERE step IS NOT NULL
        WINDOW w3 AS (PARTITION BY run, split ORDER BY step ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
               wc AS (PARTITION BY run, split ORDER BY step ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        ORDER BY run, split, step
        """,
        "SELECT step, run, round(rolling_rate, 3) AS rate FROM run_steps WHERE split = 'train' AND step >= 80 "
        "ORDER BY step, run",
    ),
    Helper(
        "finding_spans",
        "view",
        ("findings", "trajectories"),
        "every finding with the text it points at (span) and, for call findings, the call, its raw text and repair",
        """
        CREATE VIEW finding_spans AS
        SELECT f.trajectory_id, f.turn_index, f.call_id, f.step, f.split, f.category, f.severity,
               f.message, f.rule_id, f.char_start, f.char_end,
               substring(t.output, f.char_start + 1, f.char_end - f.char_start) AS span,
               c.function_name, c.matched_tool, c.status, c.raw, c.char_start AS call_start,
               c.repaired, c.repair_note
        FROM findings f
        JOIN trajectories t ON t.trajectory_id = f.trajectory_id
        LEFT JOIN calls c ON c.call_id = f.call_id
        """,
        "SELECT step, category, span, repaired FROM finding_spans WHERE severity = 'error' LIMIT 5",
    ),
    Helper(
        "call_findings",
        "view",
        ("calls", "findings", "trajectories"),
        "every call with its findings as a list of structs (category, severity, message, rule_id, "
        "char_start, char_end, span) and their count n_findings",
        """
        CREATE VIEW call_findings AS
        SELECT c.*, coalesce(len(fl.findings), 0)::INTEGER AS n_findings, fl.findings
        FROM calls c
        LEFT JOIN (
            SELECT call_id,
                   list(struct_pack(category, severity, message, rule_id, char_start, char_end, span)
                        ORDER BY char_start, category, rule_id) AS findings
            FROM finding_spans WHERE call_id IS NOT NULL GROUP BY call_id
        ) fl ON fl.call_id = c.call_id
        """,
        "SELECT call_id, function_name, n_findings, findings[1].category AS first FROM call_findings "
        "WHERE status = 'malformed' LIMIT 5",
    ),
    Helper(
        "garbled_names",
        "view",
        ("calls", "trajectories"),
        "function names written in calls that are not a declared tool, with the nearest declared tool "
        "(the classifier's match, else the most similar name by Jaro-Winkler), how often and at which steps",
        """
        CREATE VIEW garbled_names AS
        WITH cand AS (
            SELECT c.call_id, c.trajectory_id, c.step, c.function_name, c.matched_tool,
                   CASE WHEN t.tools IS NULL THEN NULL
                        ELSE CAST(json_extract_string(t.tools, '$[*].name') AS VARCHAR[]) END AS declared
            FROM calls c JOIN trajectories t ON t.trajectory_id = c.trajectory_id
            WHERE c.function_name IS NOT NULL AND c.function_name <> ''
        ), unknown AS (
            SELECT * FROM cand
            WHERE (declared IS NOT NULL AND len(declared) > 0 AND NOT list_contains(declared, function_name))
               OR ((declared IS NULL OR len(declared) = 0)
                   AND matched_tool IS NOT NULL AND matched_tool <> function_name)
        ), nearest AS (
            SELECT call_id, arg_max(d.name, jaro_winkler_similarity(function_name, d.name)) AS nearest
            FROM unknown, unnest(declared) AS d(name) GROUP BY call_id
        ), per_call AS (
            SELECT u.*, coalesce(u.matched_tool, n.nearest) AS nearest_tool
            FROM unknown u LEFT JOIN nearest n ON n.call_id = u.call_id
        )
        SELECT function_name, mode(nearest_tool) AS nearest_tool,
               round(jaro_winkler_similarity(function_name, coalesce(mode(nearest_tool), '')), 3) AS similarity,
               count(*) AS calls, count(DISTINCT trajectory_id) AS trajectories,
               min(step) AS first_step, max(step) AS last_step
        FROM per_call GROUP BY function_name
        ORDER BY calls DESC, function_name
        """,
        "SELECT function_name, nearest_tool, calls, first_step FROM garbled_names LIMIT 10",
    ),
    Helper(
        "trajectories_at",
        "macro",
        ("trajectories",),
        "table macro trajectories_at(step, split_name := NULL, run_name := NULL): the trajectories of one step "
        "(summary columns, in dump order; NULL means any split / any run)",
        """
        CREATE MACRO trajectories_at(s, split_name := NULL, run_name := NULL) AS TABLE
        SELECT trajectory_id, run, split, step, score, n_turns, n_calls, n_malformed_calls, has_final_answer,
               truncated, tool_format, source_path, source_line
        FROM trajectories
        WHERE step = s AND (split_name IS NULL OR split = split_name) AND (run_name IS NULL OR run = run_name)
        ORDER BY run, split, source_path, source_line
        """,
        "SELECT trajectory_id, score, n_calls, n_malformed_calls FROM trajectories_at(120) "
        "WHERE n_malformed_calls > 0",
    ),
)


@dataclass
class TableSource:
    """One view backed by Parquet: the files it reads and, for rescore tables, their checkpoint labels."""

    name: str
    kind: str  # scan | rescore | sft
    files: list[tuple[str | None, Path]] = field(default_factory=list)  # (checkpoint label or None, path)


@dataclass(frozen=True)
class ViewInfo:
    """What :func:`list_views` reports for one view or macro."""

    name: str
    kind: str  # scan | rescore | sft | view | macro
    columns: tuple[tuple[str, str], ...]
    rows: int | None
    doc: str


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def _ident(text: str) -> str:
    name = _IDENT.sub("_", text).strip("_").lower()
    return name or "_"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def discover(out: Path | str) -> dict[str, TableSource]:
    """Find every table under ``out`` (scan, rescore, SFT pool); raises :class:`TableError` if there is none."""
    root = Path(out)
    if not root.is_dir():
        raise TableError(f"{root}: no such directory (expected the output of `trajlab scan`)")
    from trajlab.outpaths import check_complete

    check_complete(root)
    found: dict[str, TableSource] = {}
    for name in SCAN_TABLES:
        p = root / f"{name}.parquet"
        if p.is_file():
            found[name] = TableSource(name, "scan", [(None, p)])
    rescore = root / "rescore"
    if rescore.is_dir():
        for p in sorted(rescore.glob("*.parquet")):
            view = f"rescore_{_ident(p.stem)}"
            found[view] = TableSource(view, "rescore", [(None, p)])
        for d in sorted(x for x in rescore.iterdir() if x.is_dir()):
            for p in sorted(d.glob("*.parquet")):
                view = f"rescore_{_ident(p.stem)}"
                src = found.get(view)
                if src is None or src.files and src.files[0][0] is None:
                    src = found[view] = TableSource(view, "rescore", [])
                src.files.append((d.name, p))
    pool = root / "sft_pool"
    if pool.is_dir():
        for p in sorted(pool.rglob("*.parquet")):
            rel = p.relative_to(pool).with_suffix("")
            view = f"sft_{_ident('_'.join(rel.parts))}"
            found.setdefault(view, TableSource(view, "sft", [(None, p)]))
    if not found:
        raise TableError(
            f"{root}: no trajlab tables found (no trajectories.parquet, rescore/ or sft_pool/)",
            hint="run `trajlab scan DUMPS -o OUT` first",
        )
    return found


def _register(con: duckdb.DuckDBPyConnection, src: TableSource) -> None:
    import pyarrow.dataset as ds

    def dataset(path: Path) -> ds.Dataset:
        try:
            return ds.dataset(str(path), format="parquet")
        except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError: truncated or not Parquet
            raise TableError(f"{path}: not a readable Parquet file ({e})") from None

    if len(src.files) == 1 and src.files[0][0] is None:
        con.register(src.name, dataset(src.files[0][1]))
        return
    parts = []
    for i, (label, path) in enumerate(src.files):
        hidden = f"__{src.name}_{i}"
        d = dataset(path)
        con.register(hidden, d)
        has_checkpoint = "checkpoint" in d.schema.names
        lab = "'" + (label or "").replace("'", "''") + "'"
        cols = "*" if has_checkpoint else f"{lab} AS checkpoint, *"
        parts.append(f"SELECT {cols} FROM {_quote(hidden)}")
    con.execute(f"CREATE VIEW {_quote(src.name)} AS " + " UNION ALL BY NAME ".join(parts))


@dataclass(frozen=True)
class SqlLimits:
    """Resource bounds of a DuckDB connection (a shared box: never all cores, all memory, or the cwd).

    ``threads``: default ``min(4, CPUs)``; ``memory_limit``: default a quarter of physical memory, at most
    8 GiB; ``temp_dir``: where DuckDB may spill, default ``<system temp>/trajlab-sql-<pid>`` (never the caller's
    working directory); ``timeout_s``: a query still running after this many seconds is interrupted (None: no
    limit; the CLI's ``--timeout`` defaults to 300).
    """

    threads: int | None = None
    memory_limit: str | None = None
    temp_dir: str | None = None
    timeout_s: float | None = None

    def settings(self) -> dict[str, Any]:
        import os
        import tempfile

        threads = self.threads or min(4, os.cpu_count() or 1)
        mem = self.memory_limit
        if mem is None:
            try:
                phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            except (ValueError, OSError, AttributeError):
                phys = 8 << 30
            mem = f"{max(256, min(phys // 4, 8 << 30) >> 20)}MiB"
        temp = self.temp_dir or os.path.join(tempfile.gettempdir(), f"trajlab-sql-{os.getpid()}")
        return {"threads": threads, "memory_limit": mem, "temp_directory": temp}


DEFAULT_LIMITS = SqlLimits()


class _Deadline:
    """Interrupt the connection's running query after ``seconds`` (a timer thread calls ``con.interrupt()``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float | None) -> None:
        import threading

        self.fired = False
        self.seconds = seconds
        self.timer = None
        if seconds is not None and seconds > 0:
            def fire() -> None:
                self.fired = True
                con.interrupt()

            self.timer = threading.Timer(seconds, fire)
            self.timer.daemon = True

    def __enter__(self) -> _Deadline:
        if self.timer is not None:
            self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()

    def error(self, e: Exception) -> TrajlabError:
        if self.fired:
            return TrajlabError(f"query interrupted after {param('timeout_s')} {self.seconds:g} s",
                                hint=f"narrow the query (WHERE, LIMIT) or raise {param('timeout_s')}")
        return TrajlabError(_duckdb_message(e))


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
        _register(con, src)
    for h in HELPERS:
        if all(n in sources for n in h.needs):
            con.execute(h.sql)
    return con


def _run(con: duckdb.DuckDBPyConnection, query: str) -> Any:
    import duckdb

    if not query.strip():
        raise TrajlabError("empty SQL query")
    try:
        return con.sql(query)
    except duckdb.Error as e:
        raise TrajlabError(_duckdb_message(e)) from None


def _duckdb_message(e: Exception) -> str:
    """DuckDB's own message (with its LINE / caret lines), blank lines dropped."""
    return "\n".join(line.rstrip() for line in str(e).strip().splitlines() if line.strip())


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
        with _Deadline(con, lim.timeout_s) as dl:
            try:
                rel = _run(con, query)
                if rel is None:
                    return pa.table({})
                return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()
            except (duckdb.Error, pa.ArrowException) as e:
                raise dl.error(e) from None
            except TrajlabError as e:
                raise (dl.error(e) if dl.fired else e) from None
    finally:
        con.close()


def _reader(con: duckdb.DuckDBPyConnection, query: str, batch_rows: int = 65536) -> pa.RecordBatchReader:
    import duckdb
    import pyarrow as pa

    rel = _run(con, query)
    if rel is None:
        return pa.RecordBatchReader.from_batches(pa.schema([]), [])
    try:  # duckdb 2.x: to_arrow_reader; 1.x: fetch_record_batch
        if hasattr(rel, "to_arrow_reader"):
            return rel.to_arrow_reader(batch_rows)
        return rel.fetch_record_batch(batch_rows)
    except duckdb.Error as e:
        raise TrajlabError(_duckdb_message(e)) from None


def iter_batches(out: Path | str, query: str, batch_rows: int = 65536, *,
                 limits: SqlLimits | None = None) -> Iterator[pa.RecordBatch]:
    """Stream the result of ``query`` as Arrow record batches (bounded memory for large results)."""
    import duckdb
    import pyarrow as pa

    lim = limits or DEFAULT_LIMITS
    con = connect(out, limits=lim)
    try:
        with _Deadline(con, lim.timeout_s) as dl:
            reader = _reader(con, query, batch_rows)
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
        dl = _Deadline(con, lim.timeout_s).__enter__()
        try:
            reader = _reader(con, query)
        except TrajlabError as e:
            dl.__exit__()
            raise (dl.error(e) if dl.fired else e) from None
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


def _table_docs() -> dict[str, str]:
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
        docs = _table_docs()
        names = [*sources, *(h.name for h in HELPERS if h.kind == "view" and all(n in sources for n in h.needs))]
        for name in names:
            desc = con.execute(f"DESCRIBE SELECT * FROM {_quote(name)}").fetchall()
            rows = con.execute(f"SELECT count(*) FROM {_quote(name)}").fetchall()[0][0]
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


def _nested_to_json(batch: pa.RecordBatch) -> pa.RecordBatch:
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


def _csv_values(col: pa.Array | pa.ChunkedArray) -> list[Any]:
    """A column as CSV cells: booleans as true/false (like SQL), nulls as empty cells."""
    import pyarrow as pa

    vals = col.to_pylist()
    if pa.types.is_boolean(col.type):
        return [None if v is None else ("true" if v else "false") for v in vals]
    return vals


def _json_rows(batch: pa.RecordBatch) -> Iterator[str]:
    from trajlab.console import safe_json

    for row in batch.to_pylist(maps_as_pydicts="lossy"):  # control / bidi characters as \u escapes (same value)
        yield safe_json(json.dumps(row, ensure_ascii=False, default=str))


def export(out: Path | str, query: str, fmt: str, dest: Path | str | None = None, *,
           limits: SqlLimits | None = None) -> int:
    """Write the result of ``query`` as ``fmt`` (csv | json | jsonl | parquet) to ``dest`` (stdout when None).

    Streams record batches, so large results use bounded memory. ``json`` is one JSON array of objects,
    ``jsonl`` one object per line; nested values (lists, maps, structs) become JSON text in csv. Parquet
    needs ``dest``. ``dest`` is written atomically (temp file, then rename) and may not be one of the tables
    the query reads. Returns the number of rows written.
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
    dl = _Deadline(con, lim.timeout_s).__enter__()
    try:
        reader = _reader(con, query)
        if fmt == "parquet":
            assert tmp is not None
            with pq.ParquetWriter(tmp, reader.schema, compression="zstd") as writer:
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
                        flat = _nested_to_json(b)
                        rows = zip(*(_csv_values(c) for c in flat.columns), strict=True)
                        if to_terminal:  # CSV has no escapes: on a terminal, control characters are made visible
                            from trajlab.console import literal

                            rows = ([literal(v) if isinstance(v, str) else v for v in r] for r in rows)
                        cw.writerows(rows)
                        continue
                    for line in _json_rows(b):
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
    except (duckdb.Error, pa.ArrowException) as e:
        raise dl.error(e) from None
    except TrajlabError as e:
        raise (dl.error(e) if dl.fired else e) from None
    finally:
        dl.__exit__()
        con.close()
        if tmp:
            Path(tmp).unlink(missing_ok=True)
    return n

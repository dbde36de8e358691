"""``trajlab sql``: ask your own question of a scan (and its rescore / SFT-pool tables) in DuckDB SQL."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from trajlab.commands import options as opt

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from rich.table import Table

FORMATS = ("table", "csv", "json", "jsonl", "parquet")
SUFFIX_FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}


def _cell(value: Any, width: int) -> str:
    """A value as one line of terminal text: newlines shown as \\n, control characters made visible, cut to
    ``width``."""
    from trajlab.console import literal

    if value is None:
        return "∅"
    if isinstance(value, float):
        text = f"{value:.6g}"
    else:
        text = str(value)
    text = literal(text.replace("\r", "\\r").replace("\n", "\\n").replace("\t", "\\t"))
    return text if width <= 0 or len(text) <= width else text[: max(1, width - 1)] + "…"


def rich_table(table: pa.Table, max_width: int = 80, title: str | None = None) -> Table:
    """Render an Arrow table as a rich table (newlines shown as \\n, long cells cut to ``max_width``)."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, show_lines=False, header_style="bold", title_justify="left")
    for f in table.schema:
        t.add_column(f"{escape(f.name)}\n[dim]{escape(str(f.type))}[/]", justify="right" if _numeric(f.type) else "left",
                     overflow="fold")
    for row in table.to_pylist(maps_as_pydicts="lossy"):
        t.add_row(*(Text(_cell(v, max_width)) for v in row.values()))
    return t


def rich_records(table: pa.Table, max_width: int = 80) -> list[Table]:
    """One two-column (column, value) table per row: for results too wide for the terminal."""
    from rich.table import Table
    from rich.text import Text

    from trajlab.console import literal

    out = []
    for i, row in enumerate(table.to_pylist(maps_as_pydicts="lossy"), 1):
        t = Table(title=f"row {i}", title_justify="left", show_header=False, box=None, padding=(0, 1))
        t.add_column(style="bold cyan", no_wrap=True)
        t.add_column(overflow="fold")
        for k, v in row.items():
            t.add_row(Text(literal(k)), Text(_cell(v, max_width)))
        out.append(t)
    return out


def _numeric(type_: Any) -> bool:
    return str(type_).startswith(("int", "uint", "double", "float", "decimal"))


def _fits(table: pa.Table, width: int, max_width: int) -> bool:
    """Whether a horizontal table would fit in ``width`` columns without folding cells to slivers."""
    need = 1
    sample = table.slice(0, 50).to_pylist(maps_as_pydicts="lossy")
    for f in table.schema:
        longest = max([len(_cell(r[f.name], max_width)) for r in sample] or [0])
        need += min(max(len(f.name), len(str(f.type)), longest), 24) + 3
    return need <= width


def register(app: typer.Typer) -> None:
    @app.command("sql")
    def sql_cmd(
        out: Path = typer.Argument(
            ..., metavar="OUT", show_default=False,
            help="Output directory of `trajlab scan` (its rescore/ and sft_pool/ are included)."),
        query: str | None = typer.Argument(
            None, metavar="QUERY", show_default=False,
            help="SQL to run (DuckDB dialect); '-' reads it from stdin. Omit it to list the views."),
        fmt: str = typer.Option("table", "--format", "-f",
                                help="table (rich, on the terminal) | csv | json (one array) | jsonl | parquet."),
        out_file: Path | None = opt.out_option(
            None, help="Write the result to FILE; the format follows its suffix (.csv .json .jsonl .parquet) unless --format is given.",
            show_default=False),
        output: Path | None = opt.output_alias_option(),
        limit: int = typer.Option(50, "--limit", "-n", help="Rows shown by --format table (0: all)."),
        vertical: bool | None = typer.Option(
            None, "--vertical/--horizontal",
            help="--format table: one block per row, or one table (default: vertical when the columns do not fit)."),
        max_width: int = typer.Option(80, "--max-width", help="Longest cell shown by --format table (0: no limit)."),
        timeout: float = typer.Option(300.0, "--timeout", help="Interrupt the query after this many seconds (0: no limit)."),
        memory_limit: str | None = typer.Option(
            None, "--memory-limit", metavar="SIZE",
            help="Most memory DuckDB may use, e.g. 4GiB (default: a quarter of RAM, at most 8 GiB)."),
        max_temp_size: str | None = typer.Option(
            None, "--max-temp-size", metavar="SIZE",
            help="Most DuckDB may spill to the temp directory, e.g. 20GiB (default: a quarter of its free space, at most 16 GiB)."),
    ) -> None:
        """Query the tables of a scan with DuckDB SQL (read-only views, one per table).

        Views: the scan tables (trajectories, turns, calls, findings, steps, ingest_errors); rescore_<table> for every rescore table (all checkpoints, with a checkpoint column) and rescore_compare when `trajlab rescore` ran; sft_<name> for the SFT pool; the helper views malformed_by_step, finding_spans, call_findings, garbled_names and the table macro trajectories_at(step). DuckDB runs without file access, so nothing can write into OUT; it uses at most 4 threads and a quarter of the memory (8 GiB at most), spills to the system temp directory (never the current directory; at most a quarter of its free space, 16 GiB at most) and stops a query after --timeout seconds. Without QUERY the views are listed with their columns and row counts.

        Examples:

          trajlab sql out

          trajlab sql out "SELECT step, category, rate FROM malformed_by_step WHERE rate > 0.1"

          trajlab sql out "SELECT * FROM garbled_names" --format csv -o garbled.csv
        """
        from rich.markup import escape

        from trajlab import query as q
        from trajlab.console import console, err_console, warn
        from trajlab.errors import TrajlabError

        output = opt.pick_out(out_file, output)
        if fmt == "table" and output is not None:  # -o FILE alone: the format from the file name
            fmt = SUFFIX_FORMATS.get(output.suffix.lower(), "")
            if not fmt:
                raise TrajlabError(f"{output}: cannot tell the format from the file name; add --format "
                                   "csv, json, jsonl or parquet")
        if fmt not in FORMATS:
            raise TrajlabError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
        from trajlab.watch_store import publish_note

        note = publish_note(out)  # tables a watch published: how old they are, and whether it still runs
        if note:
            warn(note)
        if query is None:
            if fmt != "table" or output is not None:
                raise TrajlabError("--format/-o need a QUERY")
            _print_views(q.list_views(out), console, out)
            err_console.print(f'[dim]try: trajlab sql {escape(str(out))} "SELECT function_name, nearest_tool, calls FROM '
                              f'garbled_names LIMIT 10"[/]', highlight=False, soft_wrap=True)
            return
        from trajlab.options import check_min

        check_min(timeout, 0, "--timeout")
        check_min(limit, 0, "--limit")
        limits = q.SqlLimits(timeout_s=timeout or None, memory_limit=memory_limit, max_temp_size=max_temp_size)
        if query == "-":
            query = sys.stdin.read()
        if fmt == "table":
            table, more = q.preview(out, query, limit=limit, limits=limits)
            if vertical is None:
                vertical = not _fits(table, console.width, max_width)
            if vertical and table.num_rows:
                for block in rich_records(table, max_width=max_width):
                    console.print(block)
            else:
                console.print(rich_table(table, max_width=max_width))
            n = table.num_rows
            if more:
                err_console.print(f"[dim]first {n} rows shown; there are more (--limit 0 shows all, "
                                  f"--format csv exports)[/]")
            else:
                err_console.print(f"[dim]{n} row{'s' if n != 1 else ''}[/]")
            return
        n = q.export(out, query, fmt, output, limits=limits)
        if output is not None:
            err_console.print(f"[dim]{n} row{'s' if n != 1 else ''} written to {escape(str(output))}[/]")


def _print_views(infos: list[Any], console: Any, out: Path) -> None:
    from rich.markup import escape
    from rich.table import Table

    from trajlab.errors import shell_word

    t = Table(title=escape(f"views (trajlab sql {shell_word(out)} \"SELECT ...\")"), title_justify="left",
              header_style="bold",
              show_lines=True)
    t.add_column("view")
    t.add_column("kind")
    t.add_column("rows", justify="right")
    t.add_column("columns", overflow="fold")
    for v in infos:
        cols = ", ".join(f"{escape(n)} [dim]{escape(ty)}[/]" if ty != "parameter" else escape(n) for n, ty in v.columns)
        if v.kind == "macro":
            cols = f"{v.name}({cols})"
        t.add_row(f"[bold]{escape(v.name)}[/]\n[dim]{escape(v.doc)}[/]", v.kind, "" if v.rows is None else f"{v.rows:,}", cols)
    console.print(t)

"""DuckDB results as plain Python rows: the small helpers every reader of a connection (``show``, ``report``)
shares, so a query's result has one shape everywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


def query_rows(con: duckdb.DuckDBPyConnection, query: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Run ``query`` with ``params`` and return every result row as a ``{column: value}`` dict, in result order."""
    cur = con.execute(query, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def view_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The names of the views defined on ``con`` (the tables :func:`trajlab.query.connect` exposes, helpers)."""
    return {r[0] for r in con.execute("SELECT view_name FROM duckdb_views()").fetchall()}

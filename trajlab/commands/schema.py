"""``trajlab schema``: print the documented, versioned table schemas."""

from __future__ import annotations

import json

import typer

from trajlab.commands import options as opt


def register(app: typer.Typer) -> None:
    @app.command("schema")
    def schema_cmd(
        table: str | None = typer.Argument(None, help="Only this table."),
        as_json: bool = opt.json_option(),
        markdown: bool = typer.Option(False, "--markdown", help="Print as Markdown (docs/reference/tables.md is built from it)."),
    ) -> None:
        """Print the schema (columns, types, meaning) of every table trajlab writes.

        Example: trajlab schema calls
        """
        from rich.table import Table

        from trajlab.console import console
        from trajlab.errors import TrajlabError
        from trajlab.table_registry import all_specs, describe_tables, tables_markdown

        specs = all_specs()
        if table is not None:
            if table not in specs:
                raise TrajlabError(f"unknown table {table!r}; tables: {', '.join(specs)}")
            docs = describe_tables([specs[table]])
        else:
            docs = describe_tables(specs.values())
        if as_json:
            typer.echo(json.dumps(docs, indent=2))
            return
        if markdown:
            typer.echo(tables_markdown([specs[d["table"]] for d in docs]))
            return
        for d in docs:
            t = Table(title=f"{d['table']} (schema {d['schema_version']}): {d['doc']}", title_justify="left")
            t.add_column("column")
            t.add_column("type")
            t.add_column("null")
            t.add_column("meaning")
            for c in d["columns"]:
                t.add_row(c["name"], c["type"], "yes" if c["nullable"] else "no", c["doc"])
            console.print(t)

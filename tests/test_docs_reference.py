"""The reference pages are generated from the code and current; a change made without regenerating is caught.

``docs/gen_reference.py`` writes the command, table, category, API and exit-code references and the code map.
These tests check every page against what the code says now, and show that an option, a column or a category
added without regenerating makes the page stale (each builder is handed a modified app, registry or rule pack).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest
import typer.main

from trajlab.cli import app
from trajlab.table_registry import all_specs
from trajlab.tables import Column

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _gen()
_pages = functools.cache(gen.pages)  # built once per test process


def _page(rel: str) -> str:
    return (DOCS / rel).read_text(encoding="utf-8")


def test_every_generated_page_is_current() -> None:
    stale = gen.stale(_pages())
    assert stale == [], f"stale generated pages {stale}: run `python docs/gen_reference.py`"


def test_check_mode_names_a_stale_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = _pages()
    for rel, text in pages.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert gen.stale(pages, tmp_path) == []
    (tmp_path / "reference/tables.md").write_text("hand edited\n", encoding="utf-8")
    assert gen.stale(pages, tmp_path) == ["reference/tables.md"]


def test_an_option_added_without_regenerating_is_caught() -> None:
    group = typer.main.get_command(app)
    scan = group.commands["scan"]  # type: ignore[attr-defined]
    flag = copy.copy(next(p for p in scan.params if "--strict" in p.opts))
    flag.opts, flag.name, flag.help = ["--brand-new-flag"], "brand_new_flag", "An option nobody documented."
    new_scan = copy.copy(scan)
    new_scan.params = [*scan.params, flag]
    new_group = copy.copy(group)
    new_group.commands = {**group.commands, "scan": new_scan}  # type: ignore[attr-defined]
    page = gen.cli_page(new_group)
    assert "`--brand-new-flag`" in page and "An option nobody documented." in page
    assert page != _page("reference/cli.md")


def test_a_column_added_without_regenerating_is_caught() -> None:
    specs = all_specs()
    calls = specs["calls"]
    specs["calls"] = dataclasses.replace(
        calls, columns=(*calls.columns, Column("brand_new_column", pa.int32(), "A column nobody documented.")))
    page = gen.tables_page(specs.values())
    assert "| `brand_new_column` | `int32` | yes | A column nobody documented. |" in page
    assert page != _page("reference/tables.md")


def test_a_category_added_without_regenerating_is_caught(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "taxonomy.yaml").write_text(
        "categories:\n"
        "  brand_new_category:\n"
        "    severity: warning\n"
        "    description: A category nobody documented.\n"
        "    explanation: The call does something new.\n"
        "    generic: The call does something new.\n"
        "    variants: {}\n", encoding="utf-8")
    page = gen.categories_page([pack])
    assert "## `brand_new_category`" in page and "A category nobody documented." in page
    assert "**Severity** warning" in page.split("## `brand_new_category`")[1]
    assert page != _page("reference/categories.md")


def test_an_unexplained_exit_code_fails_the_generator(tmp_path: Path) -> None:
    (tmp_path / "newcmd.py").write_text("import typer\n\ndef run():\n    raise typer.Exit(42)\n", encoding="utf-8")
    assert 42 in gen.exit_codes(tmp_path)
    with pytest.raises(SystemExit, match="42"):
        gen.exit_codes_page(tmp_path)


def test_every_command_and_option_is_in_the_command_reference() -> None:
    page = _page("reference/cli.md")
    group = typer.main.get_command(app)
    for name, cmd in gen._commands(group):
        m = re.search(rf"^## `trajlab {re.escape(name)}`$", page, re.M)
        assert m, f"no section for trajlab {name}"
        section = page[m.end():].split("\n## ", 1)[0]
        for p in cmd.params:
            for spelling in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]:
                if spelling.startswith("--") and spelling != "--help":
                    assert f"`{spelling}`" in section, f"trajlab {name} {spelling} missing from reference/cli.md"


def test_every_table_and_column_is_in_the_table_reference() -> None:
    page = _page("reference/tables.md")
    for name, spec in all_specs().items():
        m = re.search(rf"^## `{re.escape(name)}`$", page, re.M)
        assert m, f"reference/tables.md lacks table {name}"
        block = page[m.end():].split("\n## ", 1)[0]
        for col in spec.columns:
            assert f"| `{col.name}` | `{col.type}` |" in block, f"{name}.{col.name} ({col.type}) not documented"


def test_every_category_has_severity_and_message_and_every_module_is_mapped() -> None:
    from trajlab.toolcalls import list_rules

    cats = _page("reference/categories.md")
    for item in list_rules():
        if item["kind"] == "category":
            block = cats.split(f"## `{item['id']}`", 1)[1].split("\n## ", 1)[0]
            assert f"**Severity** {item['severity']}" in block and "**Message**" in block, item["id"]
    code_map = _page("development/code-map.md")
    for py in (ROOT / "trajlab").rglob("*.py"):
        if py.name != "__init__.py":
            dotted = ".".join(py.relative_to(ROOT).with_suffix("").parts)
            assert f"`{dotted}`" in code_map, dotted

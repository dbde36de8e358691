"""Every command and every option is documented in README.md, and every --help is complete with an example."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from trajlab.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
DOCS = Path(__file__).resolve().parents[1] / "docs"  # the user guide README.md is moving into


# typer ships its own copy of click, so commands and parameters are recognised by their click attributes
def _commands() -> dict[str, Any]:
    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def _is_option(p: Any) -> bool:
    return getattr(p, "param_type_name", None) == "option"


def _is_argument(p: Any) -> bool:
    return getattr(p, "param_type_name", None) == "argument"


def _options(cmd: Any) -> list[str]:
    """The long spelling of every option (both halves of a --flag/--no-flag pair), --help excluded."""
    names: list[str] = []
    for p in cmd.params:
        if _is_option(p):
            for spelling in [*p.opts, *p.secondary_opts]:
                if spelling.startswith("--") and spelling != "--help":
                    names.append(spelling)
    return names


def _section(readme: str, name: str) -> str | None:
    """The README text under the first heading that names `trajlab <name>`, up to the next heading of its level."""
    lines = readme.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+)\s", line)
        if m and re.search(rf"trajlab {re.escape(name)}\b", line):
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"^(#+)\s", lines[j])) and len(h.group(1)) <= level), len(lines))
            return "\n".join(lines[i:end])
    return None


def test_there_are_commands() -> None:
    assert {"sql", "report", "show"} <= set(_commands())


@pytest.mark.parametrize("name", sorted(_commands()))
def test_command_and_its_options_are_in_the_readme(name: str) -> None:
    readme = README.read_text(encoding="utf-8")
    section = _section(readme, name)
    assert section is not None, f"README.md has no heading naming `trajlab {name}`"
    # an option may also be documented in a docs/ page, under a heading that names the command
    pages = [_section(p.read_text(encoding="utf-8"), name) for p in sorted(DOCS.rglob("*.md"))] if DOCS.is_dir() else []
    section = "\n".join([section, *(x for x in pages if x)])
    missing = [o for o in _options(_commands()[name]) if not re.search(rf"{re.escape(o)}(?![\w-])", section)]
    assert not missing, f"`trajlab {name}` options missing from its README section: {missing}"


@pytest.mark.parametrize("name", ["", *sorted(_commands())])
def test_help_is_complete_and_has_an_example(name: str) -> None:
    args = [name, "--help"] if name else ["--help"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    text = res.output
    assert "Example" in text and re.search(rf"trajlab {name}", text), f"`trajlab {' '.join(args)}` shows no example"
    if name:
        cmd = _commands()[name]
        assert cmd.help and cmd.help.strip(), f"`trajlab {name}` has no description"
        for p in cmd.params:
            if _is_option(p) and "--help" not in p.opts:
                assert p.help, f"`trajlab {name}` option {p.opts} has no help text"
            if _is_argument(p):
                assert getattr(p, "help", None), f"`trajlab {name}` argument {p.name} has no help text"

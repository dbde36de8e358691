"""Shared CLI options: one definition each, one meaning per short flag, and the old ``--output`` still works."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from helpers.query_run import build_run
from typer.testing import CliRunner

from trajlab.cli import app, main
from trajlab.commands.options import TOOL_FORMAT_NAMES
from trajlab.toolcalls.formats import KNOWN_FORMATS

COMMANDS_DIR = Path(__file__).resolve().parents[1] / "trajlab" / "commands"
SHARED = ("--json", "--rules", "--no-progress", "--tokenizer", "--tools", "--tool-format", "--out", "--output")


def _all_commands() -> list[tuple[str, Any]]:
    """(path, click command) of every leaf command, sub-command groups (``rules``) walked."""
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, cmd: Any) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            found.append((prefix, cmd))

    walk("", typer.main.get_command(app))
    return found


def test_each_short_flag_has_one_meaning_and_o_is_out() -> None:
    meaning: dict[str, set[str]] = {}
    for name, cmd in _all_commands():
        for p in cmd.params:
            shorts = [o for o in p.opts if re.fullmatch(r"-\w", o)]
            longs = [o for o in p.opts if o.startswith("--")]
            for s in shorts:
                meaning.setdefault(s, set()).update(longs)
                if s == "-o":
                    assert longs == ["--out"], f"`trajlab {name}`: -o is {longs}, not --out"
    assert "-o" in meaning
    clashes = {s: sorted(ls) for s, ls in meaning.items() if len(ls) != 1}
    assert not clashes, f"short flags with several meanings: {clashes}"


def test_shared_options_are_defined_only_in_the_options_module() -> None:
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        if path.name == "options.py":
            continue
        text = path.read_text(encoding="utf-8")
        typed = [f for f in SHARED if re.search(rf"""["']{re.escape(f)}["']\s*[,)]""", text)]
        assert not typed, f"{path.name} spells {typed} itself; use trajlab.commands.options"


def test_tool_format_names_are_the_registry() -> None:
    assert TOOL_FORMAT_NAMES == KNOWN_FORMATS


def test_input_format_names_are_the_converters() -> None:
    from trajlab.commands.options import INPUT_FORMAT_NAMES
    from trajlab.ingest.detect import FORMATS

    assert INPUT_FORMAT_NAMES == ("auto", *FORMATS)
    res = CliRunner().invoke(app, ["scan", "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    line = next(x for x in res.output.splitlines() if "--format" in x and "--tool-format" not in x)
    for name in FORMATS:
        assert name in line, name


@pytest.mark.parametrize("name", ["scan", "watch", "rules check"])
def test_tool_format_help_lists_every_format(name: str) -> None:
    res = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "400", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if "--tool-format" in x)
    assert all(f in line for f in KNOWN_FORMATS), line


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("opts") / "run")


def test_output_is_a_hidden_alias_of_out_in_sql_and_report(run: Path, tmp_path: Path) -> None:
    query = "SELECT step, category, rate FROM malformed_by_step ORDER BY ALL"
    assert main(["sql", str(run), query, "-o", str(tmp_path / "a.csv")]) == 0
    assert main(["sql", str(run), query, "--out", str(tmp_path / "b.csv")]) == 0
    assert main(["sql", str(run), query, "--output", str(tmp_path / "c.csv")]) == 0
    a = (tmp_path / "a.csv").read_bytes()
    assert a.count(b"\n") > 1
    assert (tmp_path / "b.csv").read_bytes() == a == (tmp_path / "c.csv").read_bytes()
    assert main(["report", str(run), "--out", str(tmp_path / "r1.html")]) == 0
    assert main(["report", str(run), "--output", str(tmp_path / "r2.html")]) == 0
    assert (tmp_path / "r1.html").read_bytes() == (tmp_path / "r2.html").read_bytes()
    for name in ("sql", "report"):
        res = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"})
        assert "--out " in res.output and "--output" not in res.output

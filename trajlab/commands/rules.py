"""``trajlab rules``: list the loaded classifier rules, or classify one snippet from the terminal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from trajlab.commands import options as opt

rules_app = typer.Typer(
    name="rules",
    help="The tool-call taxonomy and rule packs.\n\nExample: trajlab rules check '<tool_call>\\n<function=search_web英文>...'",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


@rules_app.command("list")
def list_cmd(
    rules: list[Path] = opt.rules_option(),
    as_json: bool = opt.json_option(),
) -> None:
    """List every loaded rule: the taxonomy categories (severity, description) and user regex rules.

    Example: trajlab rules list --rules rules/user_rules_example
    """
    from trajlab.toolcalls import list_rules

    items = list_rules(tuple(str(r) for r in rules))
    if as_json:
        from trajlab.console import safe_json

        typer.echo(safe_json(json.dumps(items, indent=2, ensure_ascii=False)))
        return
    from rich.table import Table
    from rich.text import Text

    from trajlab.console import console

    t = Table(title="tool-call categories", title_justify="left")
    t.add_column("category", no_wrap=True)
    t.add_column("severity", no_wrap=True)
    t.add_column("repair", no_wrap=True)
    t.add_column("description", overflow="fold", ratio=1)
    t.add_column("source", overflow="fold")
    for it in items:
        if it["kind"] == "category":
            t.add_row(*(Text(str(v)) for v in (it["id"], it["severity"], "yes" if it["repairable"] else "-",
                                               it["description"], it["source"])))
    console.print(t)
    f = Table(title="call formats (--tool-format)", title_justify="left")
    f.add_column("format", no_wrap=True)
    f.add_column("family", no_wrap=True)
    f.add_column("models", overflow="fold")
    f.add_column("call", overflow="fold", ratio=1)
    for it in items:
        if it["kind"] == "format":
            f.add_row(it["id"], it["family"], it["models"], it["description"])
    console.print(f)
    regex = [it for it in items if it["kind"] == "regex"]
    if regex:
        r = Table(title="user regex rules", title_justify="left")
        for col in ("rule", "category", "severity"):
            r.add_column(col, no_wrap=True)
        for col in ("applies to", "pattern", "source"):
            r.add_column(col, overflow="fold")
        for it in regex:
            r.add_row(*(Text(str(v)) for v in (it["id"], it["category"], it["severity"], ", ".join(it["applies_to"]),
                                               it["pattern"], it["source"])))
        console.print(r)


@rules_app.command("check")
def check_cmd(
    snippet: str = typer.Argument(..., metavar="TEXT|FILE", help="Model output to classify: the text itself, a file holding it, or - for stdin."),
    tools: Path | None = opt.tools_option("Tool schemas (JSON list of OpenAI tools, or verl tool-config YAML): enables the schema checks."),
    tool_format: str = opt.tool_format_option("auto (detect from the text)"),
    rules: list[Path] = opt.rules_option(),
    no_suffix: bool = typer.Option(False, "--no-suffix", help="The prompt forbids text after the call (Qwen3-Coder/3.5/3.6 'ONLY reply ... with NO suffix')."),
    raw: bool = typer.Option(False, "--raw", help="Take TEXT literally (by default a one-line TEXT has its \\n, \\t, \\\" escapes undone)."),
    as_json: bool = opt.json_option("Print calls, findings and spans as JSON."),
) -> None:
    """Classify one snippet: every call, every finding with its span highlighted, and the repair if there is one.

    Exits 1 when an error-severity finding is present, else 0.

    Example: trajlab rules check '<tool_call>\\n<function=search_web v2="">\\n</function>\\n</tool_call>' --tools tools.json
    """
    from trajlab.errors import InputError
    from trajlab.toolcalls import check_text
    from trajlab.toolcalls.display import analysis_to_dict, print_analysis, unescape

    if snippet == "-":
        text = sys.stdin.read()
    elif "\n" not in snippet and len(snippet) < 4096 and Path(snippet).is_file():
        try:
            text = Path(snippet).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{snippet}: cannot read: {e}") from None
    else:
        looks_like_path = not any(c in snippet for c in "<{\n") and (
            "/" in snippet or snippet.rsplit(".", 1)[-1] in ("txt", "json", "jsonl", "xml", "md"))
        if looks_like_path:
            raise InputError(f"{snippet}: no such file (pass the text itself, a file, or - for stdin)")
        text = snippet if raw or "\n" in snippet else unescape(snippet)
    tool_list = None
    if tools is not None:
        from trajlab.ingest.tool_schemas import load_tools_file

        tool_list = load_tools_file(tools)
    fmt = None if tool_format in ("auto", "") else tool_format
    ta = check_text(text, tools=tool_list, tool_format=fmt, rules_dirs=tuple(str(r) for r in rules),
                    forbids_suffix=no_suffix)
    used = fmt or _detected(text)
    if as_json:
        from trajlab.console import safe_json

        typer.echo(safe_json(json.dumps(analysis_to_dict(ta, text=text, tool_format=used,
                                                         schema_checked=tool_list is not None),
                                        indent=2, ensure_ascii=False, default=str)))
    else:
        from trajlab.console import console

        print_analysis(ta, text=text, tool_format=used, schema_checked=tool_list is not None, console=console)
    if any(f.severity == "error" for f in ta.findings):
        raise typer.Exit(1)


def _detected(text: str) -> str:
    from trajlab.toolcalls.analyze import detect_output_format
    from trajlab.toolcalls.ruleset import get_ruleset

    return detect_output_format(text, get_ruleset(()))


def register(app: typer.Typer) -> None:
    app.add_typer(rules_app, name="rules")

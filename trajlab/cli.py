"""The ``trajlab`` command line: a thin typer shell over the library.

Each command lives in ``trajlab/commands/<name>.py`` as a ``register(app)`` function whose body only parses
options, calls the documented library function and prints. Expected problems raise
:class:`trajlab.errors.TrajlabError`; :func:`main` prints them in one line and exits with their code.
"""

from __future__ import annotations

import importlib
import sys

import typer

from trajlab import __version__
from trajlab.commands.coercion import install as _fast_coercion
from trajlab.errors import TrajlabError

_fast_coercion()  # typer's coercion without pydantic for values that need none (trajlab/commands/coercion.py)

COMMAND_MODULES = ("scan", "watch", "handoff", "schema", "rules", "rescore", "sft_pool", "sql", "report", "show")

app = typer.Typer(
    name="trajlab",
    help=(
        "Find, explain and fix malformed tool calls in agentic-RL rollouts.\n\n"
        "Example: trajlab scan sample_data/qwen35_xml_run -o out && trajlab report out -o report.html"
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trajlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """trajlab: offline diagnosis of tool-use RL runs."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"trajlab.commands.{_name}").register(app)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code. Without ``argv`` (the process is the
    ``trajlab`` command: the console script, ``python -m trajlab``) pandas is loaded only if Python code asks for
    it (:mod:`trajlab.import_gate`)."""
    if argv is None:
        from trajlab.import_gate import install

        install(("pandas",))
    try:
        rc = app(args=argv, standalone_mode=False)
    except TrajlabError as e:
        from trajlab.commands.options import flag_for
        from trajlab.console import error

        error(e.render(flag_for))  # the library names parameters; the user reads the flags that set them
        return e.exit_code
    except OSError as e:  # the environment (disk full, permissions) at a place no check foresaw: one line, exit 2
        from trajlab.console import error

        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        error(f"{e.strerror or e}{where}")
        return 2
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        return 130
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # usage errors (typer vendors its own click, so match by shape, not class)
        if callable(getattr(e, "format_message", None)) and isinstance(getattr(e, "exit_code", None), int):
            _usage_error(e)
            return e.exit_code
        raise
    return rc if isinstance(rc, int) else 0


def _usage_error(e: Exception) -> None:
    """A usage error: the usage line, the message exactly as written (through the terminal sanitiser), a hint."""
    from trajlab.console import err_console, error

    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        err_console.print(ctx.get_usage(), markup=False, highlight=False)
        err_console.print(f"Try '{ctx.command_path} --help' for help.", markup=False, highlight=False)
    error(e.format_message())  # type: ignore[attr-defined]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""The CLI's fast parameter coercion (``trajlab/commands/coercion.py``) returns what typer's own coercion returns.

Every parameter of every command is tried with its default and with command-line strings of each kind; where
the fast path answers, its value (and type) must be typer's own; where it does not, typer's own coercion runs,
so a bad value keeps typer's error message. A command line whose values need no conversion loads no pydantic.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer import _coercion

from trajlab.cli import app, main
from trajlab.commands.coercion import SLOW, fast_value

CLI_STRINGS = ("abc", "12", "-3", "+5", "007", "1.5", "1.", ".5", "-2.5e3", "1e400", "1_0", " 1", "inf", "nan", "0x10",
               "", "-", "some/dir", "out/x.parquet", "ü/ß", "a b", "٣", "9" * 120)


def _params() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, cmd: Any) -> None:
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(f"{prefix} {name}".strip(), sub)
        for p in getattr(cmd, "params", []):
            if getattr(p, "type_descriptor", None) is not None:
                found.append((f"{prefix} {p.name}", p))

    walk("", typer.main.get_command(app))
    return found


PARAMS = _params()


def _stock(desc: Any, value: Any, param: Any) -> tuple[str, Any]:
    try:
        return "ok", _coercion.build_runtime_param(desc)._coerce_value(value, param=param, ctx=None)
    except Exception as e:  # typer's BadParameter: the fast path must not answer these
        return "error", type(e).__name__


def test_there_are_parameters_of_each_kind() -> None:
    kinds = {repr(p.type_descriptor.annotation) for _, p in PARAMS}
    assert {"<class 'str'>", "<class 'int'>", "<class 'pathlib.Path'>", "list[pathlib.Path]"} <= kinds, kinds


@pytest.mark.parametrize(("where", "param"), PARAMS, ids=[w for w, _ in PARAMS])
def test_fast_value_is_typers_value(where: str, param: Any) -> None:
    desc = param.type_descriptor
    values: list[Any] = [param.default, *CLI_STRINGS, *([s] for s in CLI_STRINGS[:3]), list(CLI_STRINGS), [], ()]
    answered = 0
    for v in values:
        if v is None:
            continue
        got = fast_value(desc, v, param, None)
        if got is SLOW:
            continue
        answered += 1
        status, want = _stock(desc, v, param)
        assert status == "ok", f"{where}: {v!r}: typer rejects it, the fast path returned {got!r}"
        assert got == want and type(got) is type(want), f"{where}: {v!r}: fast {got!r}, typer {want!r}"
    if param.default is not None and type(param.default) in (str, int, float, list):
        assert answered, f"{where}: the fast path answered nothing, not even the default {param.default!r}"


def test_values_that_need_conversion_keep_typers_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", str(tmp_path), "SELECT 1", "--limit", "abc"]) == 2
    err = capsys.readouterr().err
    assert "Invalid value for '--limit'" in err and "integer" in err
    assert main(["scan", str(tmp_path), "-o", str(tmp_path / "o"), "--window", "1.5"]) == 2
    assert "--window" in capsys.readouterr().err


def test_a_plain_command_line_loads_no_pydantic(tmp_path: Path) -> None:
    call = tmp_path / "call.txt"
    call.write_text("<tool_call>\n<function=f>\n</function>\n</tool_call>\n", encoding="utf-8")
    code = ("import sys; sys.argv = ['trajlab', 'rules', 'check', sys.argv[1], '--rules', sys.argv[2]]\n"
            "from trajlab.cli import main\nrc = main()\nassert 'pydantic' not in sys.modules, 'pydantic loaded'")
    rules = Path(__file__).resolve().parents[1] / "rules" / "user_rules_example"
    got = subprocess.run([sys.executable, "-c", code, str(call), str(rules)], capture_output=True, text=True)
    assert got.returncode in (0, 1) and "pydantic loaded" not in got.stderr, got.stderr[-2000:]

"""Library errors name parameters; the CLI prints the same one-line message with the flags that set them."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from trajlab.cli import main
from trajlab.commands.options import flag_for
from trajlab.errors import InputError, TrajlabError, param
from trajlab.report import ReportOptions
from trajlab.rescore.options import RescoreOptions
from trajlab.scan import ScanOptions
from trajlab.show import ShowOptions

ROOT = Path(__file__).resolve().parents[1]


def test_param_renders_as_name_or_flag():
    e = InputError(f"{param('max_tokens')} 0: must be >= 1", hint=f"e.g. {param('max_tokens', 8192)} or "
                   f"{param('dest', metavar='FILE')}")
    assert str(e) == "max_tokens 0: must be >= 1\n  hint: e.g. max_tokens=8192 or dest"
    assert e.args == ("max_tokens 0: must be >= 1",) and e.hint == "e.g. max_tokens=8192 or dest"
    assert e.param == "max_tokens"
    assert e.render(flag_for) == "--max-tokens 0: must be >= 1\n  hint: e.g. --max-tokens 8192 or -o FILE"
    assert e.render() == str(e)
    assert TrajlabError("plain").param is None and TrajlabError("x", param="seed").param == "seed"


def test_flag_for():
    assert flag_for("max_batch_tokens") == "--max-batch-tokens"
    assert flag_for("rules_dirs") == "--rules" and flag_for("ckpts") == "--ckpt" and flag_for("timeout_s") == "--timeout"


def test_values_are_kept_as_given():
    value = "a\ue000b"  # a stray private-use character in a user value is no parameter reference
    e = TrajlabError(f"{param('where')} {value}: bad")
    assert str(e) == f"where {value}: bad" and e.render(flag_for) == f"--where {value}: bad"


@pytest.mark.parametrize(
    "kwargs,name,library,cli",
    [
        ({"tokens": "some"}, "tokens", "tokens 'some': expected one of all, calls, none",
         "--tokens 'some': expected one of all, calls, none"),
        ({"fail_above": 1.5}, "fail_above", "fail_above 1.5: expected a rate between 0 and 1",
         "--fail-above 1.5: expected a rate between 0 and 1"),
        ({"calibration_quantile": 0.2}, "calibration_quantile", "calibration_quantile 0.2: expected a value in",
         "--calibration-quantile 0.2: expected a value in"),
        ({"max_batch_tokens": 0}, "max_batch_tokens", "max_batch_tokens must be at least 1",
         "--max-batch-tokens must be at least 1"),
        ({"chunk": 0}, "chunk", "chunk must be at least 1", "--chunk must be at least 1"),
        ({"steps": "ten"}, "steps", "steps: cannot read 'ten'", "--steps: cannot read 'ten'"),
    ],
)
def test_rescore_options_validate_once(kwargs, name, library, cli):
    with pytest.raises(TrajlabError) as e:
        RescoreOptions(**kwargs)
    assert e.value.param == name and str(e.value).startswith(library)
    assert e.value.render(flag_for).startswith(cli) and "\n" not in str(e.value)


def test_rescore_options_normalise():
    o = RescoreOptions(steps="80-82", ckpt_steps=[20, 140], rules_dirs=[Path("rules/x/")], block_size=0)
    assert o.steps == frozenset({80, 81, 82}) and o.ckpt_steps == frozenset({20, 140})
    assert o.rules_dirs == ("rules/x",) and o.block_size == 1
    assert RescoreOptions(steps="").steps is None and o.as_dict()["steps"] == [80, 81, 82]
    with pytest.raises(AttributeError):
        o.seed = 3  # type: ignore[misc]


def test_report_and_show_options():
    with pytest.raises(TrajlabError) as e:
        ReportOptions(max_categories=0)
    assert str(e.value) == ("max_categories and window must be >= 1; top_names and examples_per_category must "
                            "be >= 0")
    assert e.value.render(flag_for) == "--max-categories and --window must be >= 1; --top-names and --examples must be >= 0"
    assert ShowOptions(checkpoints=["a"]).checkpoints == ("a",)


@pytest.mark.parametrize("kwargs, library, cli", [
    ({"jobs": -1}, "jobs -1: must be a whole number >= 0 (0 = one per CPU)",
     "--jobs -1: must be a whole number >= 0 (0 = one per CPU)"),
    ({"chunk_bytes": 0}, "chunk_bytes 0: must be a whole number >= 1", "--chunk-bytes 0: must be a whole number >= 1"),
    ({"tool_format": "xml"}, "unknown tool_format 'xml'", "unknown --tool-format 'xml'"),
    ({"input_format": "csv"}, "unknown input_format 'csv'", "unknown --format 'csv'"),
    ({"engine": "fast"}, "unknown engine 'fast'", "unknown --engine 'fast'"),
])
def test_scan_options_validate_once(kwargs, library, cli):
    """A bad scan option is refused when the options are made, naming the field (the CLI names the flag)."""
    with pytest.raises(InputError) as e:
        ScanOptions(**kwargs)
    assert str(e.value).startswith(library) and e.value.render(flag_for).startswith(cli)


def test_scan_options_normalise():
    o = ScanOptions(tool_format="auto", input_format="auto", rules_dirs=["a/b"], runs={"x": "p"})
    assert (o.tool_format, o.input_format, o.rules_dirs, dict(o.runs)) == (None, None, ("a/b",), {"x": "p"})
    with pytest.raises(dataclasses.FrozenInstanceError):  # frozen: one validated object, never changed behind the check
        o.jobs = 3  # type: ignore[misc]


def test_cli_prints_flags(sample_xml_scan, tmp_path, capsys):
    out = str(sample_xml_scan.out)
    assert main(["report", out, "-o", str(tmp_path / "r.html"), "--examples", "-1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--max-categories and --window must be >= 1; --top-names and --examples must be >= 0" in err
    assert main(["show", out, "abc", "--step", "5"]) == 2
    assert "give a TRAJECTORY_ID or --step/--index, not both" in " ".join(capsys.readouterr().err.split())
    assert main(["show", out]) == 2
    assert "give a TRAJECTORY_ID, or --step S (and --index I)" in " ".join(capsys.readouterr().err.split())
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert main(["rescore", out, "--ckpt", "x", "--tokens", "some"]) == 2
    assert "--tokens 'some': expected one of all, calls, none" in capsys.readouterr().err


# every trajlab flag a library error message could spell out
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
_NOT_OURS = ("pip install", "model_merger", "--target_dir", "trajlab rescore ", "trajlab scan ")


def _error_strings(tree: ast.AST):
    """Literal text of every exception's message and hint (``...Error(...)`` calls; ``IngestError`` is a row of
    the ingest_errors table, data rather than a message)."""
    for node in ast.walk(tree):
        name = getattr(node.func, "id", getattr(node.func, "attr", "")) if isinstance(node, ast.Call) else ""
        if name.endswith("Error") and name != "IngestError":
            for arg in [*node.args, *(k.value for k in node.keywords if k.arg == "hint")]:
                yield node.lineno, "".join(sub.value for sub in ast.walk(arg)
                                           if isinstance(sub, ast.Constant) and isinstance(sub.value, str))


def test_library_error_messages_name_no_flags():
    bad = []
    for path in sorted((ROOT / "trajlab").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("trajlab/commands/") or rel in ("trajlab/cli.py", "trajlab/options.py"):
            continue  # the CLI layer speaks flags
        for line, text in _error_strings(ast.parse(path.read_text(encoding="utf-8"))):
            if _FLAG.search(text) and not any(s in text for s in _NOT_OURS):
                bad.append(f"{rel}:{line}: {text!r}")
    assert not bad, "library errors that name a flag (use trajlab.errors.param):\n" + "\n".join(bad)

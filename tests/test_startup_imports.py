"""No command loads a heavy module it does not need (issue 24), and the pandas gate keeps pyarrow from loading pandas.

Each command runs in its own interpreter, started the way ``trajlab ...`` starts (``trajlab.cli.main()`` with the
command line in ``sys.argv``: exactly what the console script runs); the runs of one command (its cases, its
error path) follow one another in that interpreter. An import hook there notes, for each module on the deny
list, which run imported it first and through which frames; at exit the test compares the modules loaded with
what that run may load, and a failure prints the import chain of each module too many, outermost frame first.

Covered: ``--help`` of every command and sub-command the app registers (found at test time, so a new command is
covered the day it is added), real runs of every command on small real inputs (and its error path, where the
heavy module would only be needed after the input is checked), ``import trajlab``, ``import trajlab.toolcalls``
and one classification (what the verl reward plugin loads), and every module of ``trajlab.verl`` when it exists.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from trajlab.cli import app

ROOT = Path(__file__).resolve().parents[1]
#: modules no command may load unless it needs them (pandas: never, unless pandas is the output asked for)
DENY = ("pandas", "torch", "transformers", "matplotlib", "datasets")
#: the classifier (and the reward plugin built on it) loads none of these either
CLASSIFIER_DENY = (*DENY, "polars", "pyarrow", "duckdb")
ONE_CALL = "<tool_call>\n<function=search_web>\n<parameter=query>\nParis\n</parameter>\n</function>\n</tool_call>"

# Runs in the child: runs the steps one after the other (each a command line given to trajlab.cli.main(), or
# code), records the import chain of the first real import of each watched module and the step that made it
# (find_spec calls made by importlib.util.find_spec, e.g. polars probing for pandas, only look), and writes
# {rcs: {step: exit code}, loaded: {module: [step, chain]}} to the report path.
DRIVER = r"""
import json, os, sys, traceback
from importlib.abc import MetaPathFinder
case = json.loads(sys.argv[1])
watch, chains, current = set(case["watch"]), {}, [""]

def where(f):
    fn = f.filename
    for base in case["bases"]:
        if fn.startswith(base):
            fn = fn[len(base):].lstrip("/")
            break
    return f"{fn}:{f.lineno} in {f.name}: {(f.line or '').strip()}"

class Audit(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in watch and name not in chains:
            stack = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith("<frozen importlib._")]
            last = stack[-1].filename if stack else ""
            if last != "<frozen importlib.util>" and not last.endswith(os.sep + "importlib" + os.sep + "util.py"):
                chains[name] = [current[0], [where(f) for f in stack[1:]]]
        return None

sys.meta_path.insert(0, Audit())
rcs = {}
for step in case["steps"]:
    current[0] = step["label"]
    rc = 0
    try:
        if "argv" in step:
            sys.argv = ["trajlab", *step["argv"]]
            from trajlab.cli import main
            rc = main()
        else:
            exec(step["code"], {})
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    rcs[step["label"]] = rc
with open(case["report"], "w") as f:
    json.dump({"rcs": rcs, "loaded": {m: chains.get(m, ["?", ["(no Python frame recorded)"]])
                                      for m in sorted(watch) if m in sys.modules}}, f)
"""


def run_steps(tmp: Path, steps: list[dict[str, Any]], watch: tuple[str, ...] = DENY,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``steps`` (``{label, argv}`` or ``{label, code}``) one after the other in one fresh interpreter;
    return ``{rcs: {label: exit code}, loaded: {module: [label of the step that loaded it, import chain]}}``."""
    report = tmp / f"report_{len(list(tmp.glob('report_*')))}.json"
    site = [p for p in sys.path if p.endswith("site-packages")]
    case = {"watch": list(watch), "report": str(report), "bases": [str(ROOT), *site], "steps": steps}
    child_env = {k: v for k, v in os.environ.items() if k not in ("TRAJLAB_IMPORT_GATE", "TRAJLAB_ENGINE")}
    child_env.update(env or {})
    got = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(case)], cwd=tmp, env=child_env,
                         capture_output=True, text=True, timeout=600)
    assert report.exists(), f"the steps did not finish (exit {got.returncode}):\n{got.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(report.read_text())
    out["stderr"] = got.stderr
    return out


def assert_loads_nothing_denied(got: dict[str, Any], allowed: dict[str, tuple[str, ...]] | None = None) -> None:
    """Every watched module that is loaded was loaded by a step allowed to (``allowed``: label -> modules)."""
    allowed = allowed or {}
    extra = {m: v for m, v in got["loaded"].items() if m not in allowed.get(v[0], ())}
    if not extra:
        return
    lines = []
    for m, (label, chain) in sorted(extra.items()):
        lines.append(f"{label} loaded {m}, which it does not need; import chain (outermost first):")
        lines += [f"    {c}" for c in chain[-14:]]
    lines.append(
        "Fix: import the heavy module inside the function that uses it (not at the top of a module this command "
        "imports), or split the cheap part out of the module that needs it; pandas comes in through pyarrow "
        "converting Python objects outside the import gate (trajlab/import_gate.py). If the command really "
        "needs the module, allow it for that run in tests/test_startup_imports.py (RUNS) and say why. "
        "See docs/explanation/startup.md.")
    raise AssertionError("\n".join(lines))


# ---------------------------------------------------------------------------------------------------- inputs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, sample_xml_scan: Any) -> dict[str, str]:
    """Small real inputs: one call as text, a one-line verl dump, and a copy of the sample scan."""
    import polars as pl

    d = tmp_path_factory.mktemp("startup_inputs")
    (d / "one_call.txt").write_text(ONE_CALL + "\n", encoding="utf-8")
    one = d / "one_line" / "rollout" / "1.jsonl"
    one.parent.mkdir(parents=True)
    with open(ROOT / "sample_data" / "qwen35_xml_run" / "rollout" / "1.jsonl", "rb") as f:
        one.write_bytes(f.readline())
    out = d / "scan"
    shutil.copytree(sample_xml_scan.out, out)
    traj = pl.read_parquet(out / "trajectories.parquet", columns=["trajectory_id"]).sort("trajectory_id")
    return {"one_call": str(d / "one_call.txt"), "one_line": str(one), "one_line_dir": str(one.parents[1]),
            "out": str(out), "traj_id": traj["trajectory_id"][0]}


def _commands() -> list[str]:
    """Every command and sub-command path the app registers (``scan``, ``rules``, ``rules check``, ...)."""
    found: list[str] = []

    def walk(prefix: str, cmd: Any) -> None:
        if prefix:
            found.append(prefix)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(f"{prefix} {name}".strip(), sub)

    walk("", typer.main.get_command(app))
    return found


# ---------------------------------------------------------------------------------------------------- cases


def test_help_of_every_command(tmp_path: Path) -> None:
    """``--help`` of the app and of every command loads none of the deny list."""
    commands = _commands()
    assert {"scan", "show", "sql", "rules", "rules check", "report", "rescore"} <= set(commands), commands
    steps = [{"label": f"`trajlab {c} --help`".replace("  ", " "), "argv": [*c.split(), "--help"]}
             for c in ["", *commands]]
    got = run_steps(tmp_path, steps)
    assert set(got["rcs"].values()) == {0}, got["stderr"][-2000:]
    assert_loads_nothing_denied(got)


#: command -> its runs: (argv with {placeholders}, exit codes that are fine, modules the run may load). The runs
#: of a command share one interpreter; a run allowed a module comes after the runs that are not.
RUNS: dict[str, list[tuple[list[str], tuple[int, ...], tuple[str, ...]]]] = {
    "rules": [
        (["rules", "check", "{one_call}"], (0, 1), ()),
        (["rules", "check", ONE_CALL, "--json", "--tool-format", "qwen3_coder"], (0, 1), ()),
        (["rules", "list"], (0,), ()),
    ],
    "schema": [(["schema"], (0,), ()), (["schema", "calls", "--json"], (0,), ())],
    "scan": [
        (["scan", "{tmp}/missing", "-o", "{tmp}/o0"], (0, 2), ()),
        (["scan", "{one_line}", "-o", "{tmp}/o1", "--no-progress", "-j", "1"], (0,), ()),
        (["scan", "{one_line}", "-o", "{tmp}/o2", "--engine", "records", "--no-progress"], (0,), ()),
        (["scan", str(ROOT / "sample_data" / "glm45_run"), "-o", "{tmp}/o3", "--json", "-j", "1"], (0,), ()),
    ],
    "show": [
        (["show", "{tmp}/missing", "abc"], (2,), ()),
        (["show", "{out}", "{traj_id}"], (0,), ()),
        (["show", "{out}", "--step", "120", "--index", "1", "--prompt"], (0,), ()),
    ],
    "sql": [
        (["sql", "{tmp}/missing", "SELECT 1"], (2,), ()),
        (["sql", "{out}", "SELECT count(*) FROM calls"], (0,), ()),
        (["sql", "{out}"], (0,), ()),
        (["sql", "{out}", "SELECT * FROM garbled_names", "-o", "{tmp}/g.csv"], (0,), ()),
        (["sql", "{out}", "SELECT * FROM steps", "-o", "{tmp}/s.parquet"], (0,), ()),
    ],
    "report": [(["report", "{tmp}/missing"], (2,), ()),
               (["report", "{out}", "-o", "{tmp}/r.html"], (0,), ("matplotlib",))],  # the charts
    "build-sft-pool": [(["build-sft-pool", "{tmp}/out"], (0,), ())],
    "handoff": [(["handoff", "{tmp}/missing"], (2,), ()),  # no trip file and no step: one line
                (["handoff", "{out}", "--split-step", "88", "-o", "{tmp}/pool", "--no-progress"], (0,), ())],
    "watch": [(["watch", "{one_line_dir}", "-o", "{tmp}/w", "--idle-exit", "0.3", "--interval", "0.1"], (0,), ())],
    # rescore needs torch and transformers to score; a bad checkpoint is reported before either is loaded
    "rescore": [(["rescore", "{out}", "--ckpt", "{tmp}/missing"], (2,), ())],
}


@pytest.mark.parametrize("command", list(RUNS))
def test_command_runs(command: str, inputs: dict[str, str], tmp_path: Path) -> None:
    fill = {**inputs, "tmp": str(tmp_path)}
    if command == "build-sft-pool":  # it writes into OUT
        shutil.copytree(inputs["out"], tmp_path / "out")
    steps, ok, allowed = [], {}, {}
    for argv, codes, may in RUNS[command]:
        real = [re.sub(r"\{(\w+)\}", lambda m: fill[m.group(1)], a) for a in argv]
        label = f"`trajlab {' '.join(a if len(a) < 60 else a[:57] + '...' for a in argv)}`"
        steps.append({"label": label, "argv": real})
        ok[label], allowed[label] = codes, may
    got = run_steps(tmp_path, steps)
    bad = {label: rc for label, rc in got["rcs"].items() if rc not in ok[label]}
    assert not bad, f"unexpected exit codes {bad}:\n{got['stderr'][-2000:]}"
    assert_loads_nothing_denied(got, allowed)


def test_every_command_has_runs() -> None:
    """Each top-level command has real runs above (a new command: add its runs to RUNS)."""
    top = {c for c in _commands() if " " not in c}
    assert top <= set(RUNS), (
        f"commands without runs in RUNS: {sorted(top - set(RUNS))}; add a few real runs of each (small real "
        "inputs, an error path) to RUNS in tests/test_startup_imports.py so the deny list guards them")


def test_classifier_imports(tmp_path: Path) -> None:
    """``import trajlab``, ``import trajlab.toolcalls`` and one classification load no table or dataframe engine."""
    steps = [{"label": repr(code), "code": code} for code in (
        "import trajlab", "import trajlab.toolcalls",
        f"from trajlab.toolcalls import check_text; assert check_text({ONE_CALL!r}).calls")]
    got = run_steps(tmp_path, steps, watch=CLASSIFIER_DENY)
    assert_loads_nothing_denied(got)


def test_reward_plugin_imports(tmp_path: Path) -> None:
    """Every module of ``trajlab.verl`` (the verl reward plugin: it runs inside verl's reward workers) loads the
    classifier and nothing heavier. ``trajlab.verl.manager`` subclasses verl's ``RewardManagerBase`` and
    ``trajlab.verl.agent_loop`` verl's agent loops: they are only ever loaded by verl itself, with verl (and torch,
    numpy) already imported, so they are left out, with ``trajlab.verl.exact``, which only they load (it resolves
    control tokens through :mod:`trajlab.rescore.control_tokens`)."""
    pkg = ROOT / "trajlab" / "verl"
    if not pkg.is_dir():
        pytest.skip("no trajlab/verl package in this tree")
    mods = [".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in sorted(pkg.rglob("*.py"))]
    mods = [m for m in mods if m not in ("trajlab.verl.manager", "trajlab.verl.agent_loop", "trajlab.verl.exact")]
    assert "trajlab.verl.reward" in mods
    got = run_steps(tmp_path, [{"label": f"import {m}", "code": f"import {m}"} for m in mods], watch=CLASSIFIER_DENY)
    assert_loads_nothing_denied(got)


# ----------------------------------------------------------------------------------------------- the gate


GATE_CHECKS = r"""
import importlib.util, sys
from trajlab.import_gate import install
install()
import pyarrow as pa
import pyarrow.dataset  # its initialisation converts a Python scalar
t = pa.table({"a": [1, None], "b": ["x", "y"]})
assert pa.scalar(True).as_py() is True and t.num_rows == 2
assert "pandas" not in sys.modules, "pyarrow loaded pandas through the gate"
assert importlib.util.find_spec("pandas") is not None  # looking is not importing
assert "pandas" not in sys.modules
try:
    t.to_pandas()
except ModuleNotFoundError as e:
    assert "TRAJLAB_IMPORT_GATE" in str(e) and e.name == "pandas", e
else:
    raise AssertionError("to_pandas() as the first use of pandas went through")
from pandas import DataFrame  # Python asking for pandas gets it
assert "pandas" in sys.modules
assert t.to_pandas().shape == (2, 2) and pa.Table.from_pandas(DataFrame({"x": [1]})).num_rows == 1
"""

WORKER_GATE = r"""
import os, sys
from trajlab.scan.worker import worker_init
worker_init(os.getppid())
import pyarrow as pa
pa.table({"a": [1]})
assert "pandas" not in sys.modules
"""

GATE_OFF = r"""
import sys, pyarrow as pa
from trajlab.import_gate import install
install()
pa.table({"a": [1]})
assert "pandas" in sys.modules
"""


NUMPY_GATE = r"""
import sys
from trajlab.import_gate import install
install(("pandas", "numpy"))
import pyarrow as pa, pyarrow.dataset
t = pa.table({"a": [1.5, None], "b": [[1], []]})
assert t.to_pylist() == [{"a": 1.5, "b": [1]}, {"a": None, "b": []}]
assert "numpy" not in sys.modules and "pandas" not in sys.modules
import numpy  # Python asking for numpy gets it
"""


@pytest.mark.parametrize(("code", "env"), [(GATE_CHECKS, {}), (WORKER_GATE, {}), (NUMPY_GATE, {}),
                                           (GATE_OFF, {"TRAJLAB_IMPORT_GATE": "0"})],
                         ids=["gate", "scan-worker", "numpy", "off-switch"])
def test_import_gate(code: str, env: dict[str, str], tmp_path: Path) -> None:
    """Under the gate pyarrow converts without pandas (or numpy, where asked), Python code importing them still
    gets them, scan workers are gated, and ``TRAJLAB_IMPORT_GATE=0`` turns the gate off."""
    got = run_steps(tmp_path, [{"label": "gate", "code": code}], watch=(), env=env)
    assert got["rcs"] == {"gate": 0}, got["stderr"][-3000:]

"""Packaging: the wheel carries every subpackage and the rule packs; the CLI starts without torch."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "trajlab").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk <= listed, f"add to pyproject [tool.setuptools] packages: {sorted(on_disk - listed)}"


@pytest.mark.slow
def test_wheel_ships_rules(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = tmp_path.glob("trajlab-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    rule_files = {f"trajlab/rules/{p.relative_to(ROOT / 'rules').as_posix()}" for p in (ROOT / "rules").rglob("*.yaml")}
    assert rule_files and rule_files <= names, sorted(rule_files - names)
    assert "trajlab/cli.py" in names and "trajlab/py.typed" in names  # PEP 561: user code sees trajlab's types
    # verl's agent-loop registry files (actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert {"trajlab/verl/agent_loops.yaml", "trajlab/verl/agent_loops_as_verl_names.yaml"} <= names
    guide = (ROOT / "docs" / "guides" / "reward-plugin.md").read_text(encoding="utf-8")
    assert f"pip install dist/{whl.name}" in guide  # the install line the reward-plugin guide gives


def test_lazy_exports_have_typed_re_exports():
    """Every name ``trajlab`` exports lazily is also imported under ``TYPE_CHECKING`` from the same module, so a
    type checker sees ``trajlab.scan`` as the function (not the module ``trajlab/_callable.py`` makes callable)."""
    import ast

    import trajlab

    tree = ast.parse((ROOT / "trajlab" / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {(a.asname, n.module) for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names
             if a.asname == a.name}
    assert typed == {(k, v) for k, v in trajlab._API.items()}


def test_cli_help_does_not_import_torch():
    code = (
        "import sys; from trajlab.cli import main; rc = main(['--help']); "
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'matplotlib') if m in sys.modules]; "
        "print('HEAVY', heavy); sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY []" in r.stdout
    assert "scan" in r.stdout


def test_library_api_mirrors_commands():
    import trajlab

    for name in ("scan", "analyze_turn", "rescore", "build_sft_pool", "connect", "sql", "report", "show"):
        assert callable(getattr(trajlab, name)), name

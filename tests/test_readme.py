"""The README documents every table and column trajlab writes, and its set-up commands name the real entry points."""

from __future__ import annotations

import re
from pathlib import Path

from trajlab.table_registry import all_specs

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _tables_section() -> str:
    start = README.index("\n## Tables\n")
    end = README.index("\n## ", start + 5)
    return README[start:end]


def test_every_table_and_column_is_documented():
    section = _tables_section()
    for name, spec in all_specs().items():
        m = re.search(rf"^#+ `{re.escape(name)}`$", section, flags=re.MULTILINE)
        assert m, f"README Tables section lacks table {name}"
        block = section[m.end():].split("\n#", 1)[0]
        for col in spec.columns:
            assert f"| `{col.name}` | `{col.type}` |" in block, f"{name}.{col.name} ({col.type}) not documented"


def test_setup_commands_install_pinned_torch_and_run_the_tests():
    assert "pip install -q torch==2.13.0" in README
    assert "python -m pytest -q -n 2" in README
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "python -m pytest -q -n 2" in ci and "torch==2.13.0" in ci

"""The documentation's library example (docs/howto/library.md) runs as written (scan, SQL, classifier, rescore, SFT
pool, report, show), and the table reference holds every row `trajlab schema --markdown` prints."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_readme_library_example_runs(tmp_path, capsys):
    page = (ROOT / "docs" / "howto" / "library.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", page, re.S).group(1)
    shutil.copytree(ROOT / "sample_data" / "qwen35_xml_run", tmp_path / "sample_data" / "qwen35_xml_run")
    shutil.copytree(ROOT / "sample_data" / "demo_checkpoints", tmp_path / "sample_data" / "demo_checkpoints")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(block, "docs/howto/library.md", "exec"), {})  # noqa: S102 - our own documentation
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "garbled_function_name" in out and "search_web" in out
    for p in ("out/trajectories.parquet", "out/rescore/compare.parquet", "out/pool/train.parquet", "out/report.html"):
        assert (tmp_path / p).is_file(), p


def test_table_reference_is_what_trajlab_schema_prints():
    """Every row of ``trajlab schema --markdown`` stands in the docs' table reference (no drift)."""
    from trajlab.table_registry import all_specs, tables_markdown

    page = (ROOT / "docs" / "reference" / "tables.md").read_text(encoding="utf-8")
    rows = [ln for ln in tables_markdown(list(all_specs().values())).splitlines() if ln.startswith("| `")]
    assert len(rows) > 100
    assert [ln for ln in rows if ln not in page] == []

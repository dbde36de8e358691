"""A scan that replaces a directory's tables retires what trajlab derived from the old ones (``OUT/rescore/``), so
a report never shows one run beside another run's drift page; a file of the user's there stays. The summary
says what was retired, where the tables are and what to run next, and defines the category shares it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab import scan
from trajlab.ownfiles import own_output, parquet_metadata
from trajlab.rescore.outputs import write_drift_json
from trajlab.scan.options import ScanOptions
from trajlab.scan.view import render_summary
from trajlab.tables import CATEGORY_SHARE

ROOT = Path(__file__).resolve().parents[1]


def _old_rescore(out: Path) -> tuple[Path, Path]:
    """A rescore's own marked outputs (drift.json, a checkpoint table) and a note the user keeps beside them."""
    write_drift_json(out, "global_step_20", 0.999, [])
    table = out / "rescore" / "global_step_20" / "tokens.parquet"
    table.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"x": [1]}).replace_schema_metadata(parquet_metadata("rescore_tokens")), table)
    assert own_output(table) and own_output(out / "rescore" / "drift.json")
    note = out / "rescore" / "global_step_20" / "my_notes.txt"
    note.write_text("mine")
    return table, note


def test_rescanning_another_run_retires_the_old_rescore_and_keeps_user_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    opts = ScanOptions(jobs=1)
    scan([ROOT / "sample_data" / "qwen35_xml_run"], out, opts, progress=False)
    table, note = _old_rescore(out)
    same = scan([ROOT / "sample_data" / "qwen35_xml_run"], out, opts, progress=False)
    assert same.retired == [] and table.is_file()  # the same tables: the rescore still belongs to them
    other = scan([ROOT / "sample_data" / "qwen3_hermes_run"], out, opts, progress=False)
    assert other.retired == [str(out / "rescore")]
    assert not table.exists() and not (out / "rescore" / "drift.json").exists()
    assert note.read_text() == "mine"  # never a user's file
    from rich.console import Console

    con = Console(width=200, record=True, color_system=None)
    con.print(render_summary(other, width=200))
    raw = con.export_text()
    printed = " ".join(raw.split())
    assert f"retired {out / 'rescore'}" in printed
    flat = re.sub(r"[\s│]", "", raw)  # a long tmp path wraps inside the panel
    assert f"tables:{out}/*.parquet" in flat and f"trajlabreport{out}" in flat
    assert " ".join(CATEGORY_SHARE.split()) in printed.replace("│ ", "").replace(" │", "")

"""What the sql / report / show tests rely on in the scan of the synthetic run of ``tests/helpers/query_run.py``
(verl dumps through the real scanner): offsets point at their text, each kind of breakage is found where it was
written, the cut line is an ingest error, and the run rots after ``ROT_STEP``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from helpers.query_run import PER_STEP, ROT_STEP, build_run


def test_turns_tile_output_and_offsets_point_at_their_text(tmp_path: Path) -> None:
    out = build_run(tmp_path / "run")
    trajs = {r["trajectory_id"]: r for r in pq.read_table(out / "trajectories.parquet").to_pylist()}
    for t in pq.read_table(out / "turns.parquet").to_pylist():
        assert trajs[t["trajectory_id"]]["output"][t["char_start"]:t["char_end"]] == t["text"]
    for c in pq.read_table(out / "calls.parquet").to_pylist():
        assert trajs[c["trajectory_id"]]["output"][c["char_start"]:c["char_end"]] == c["raw"]
    spans = Counter()
    for f in pq.read_table(out / "findings.parquet").to_pylist():
        span = trajs[f["trajectory_id"]]["output"][f["char_start"]:f["char_end"]]
        assert span
        spans[f["category"]] += 1
        if f["category"] == "garbled_function_name":
            assert span.startswith(("search_web", "fetch_page")) and span not in ("search_web", "fetch_page")
        if f["category"] == "stray_attribute":
            assert span == '</parameter v2="">'
    assert spans["garbled_function_name"] > 0 and spans["stray_attribute"] > 0
    errors = pq.read_table(out / "ingest_errors.parquet").to_pylist()
    assert [(e["source_path"], e["line"]) for e in errors] == [("5.jsonl", PER_STEP + 1)]


def test_the_run_rots_after_rot_step(tmp_path: Path) -> None:
    out = build_run(tmp_path / "run")
    steps = pq.read_table(out / "steps.parquet").to_pylist()
    early = [s["malformed_rate"] for s in steps if s["step"] <= ROT_STEP]
    late = [s["malformed_rate"] for s in steps if s["step"] >= ROT_STEP + 30]
    assert max(early) < min(late)
    ew = json.loads((out / "manifest.json").read_text())["summary"]["early_warning"]
    assert ew is not None and ROT_STEP < ew["step"] <= ROT_STEP + 30

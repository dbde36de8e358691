"""The collapsing sample run's shipped reward records (``sample_data/qwen35_xml_run/trajlab_records/``, written by
``sample_data/generate_records.py``): real files read back by the real ``read_records``, ``scan``, ``report`` and
``watch``, every expectation taken from the dumps and the records themselves; the generator reproduces the
shipped rows (on a slice: the whole run takes minutes of rescoring; ``python sample_data/generate_records.py
--check`` checks all of it)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import polars as pl
import pytest

from trajlab.control_trip import control_trip
from trajlab.verl.records import is_record_file, output_sha1, read_records, step_figures

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_data" / "qwen35_xml_run"


def _generator() -> ModuleType:
    name = "sample_generate_records_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "sample_data" / "generate_records.py")
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[name] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return sys.modules[name]


GEN = _generator()
RECORDS_DIR = SAMPLE / GEN.RECORDS_DIR_NAME
SHIPPED = RECORDS_DIR / GEN.RECORD_FILE_NAME


def _dump_rows() -> list[dict]:
    """Every train dump line of the run (``rollout/<step>.jsonl``)."""
    rows = []
    for p in sorted((SAMPLE / "rollout").glob("*.jsonl")):
        rows += [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def _checkpoint_of(step: int) -> int:
    """The demo checkpoint that scored ``step``: the latest at or before it, the first one before that."""
    ckpts = sorted(int(p.name.removeprefix("global_step_")) for p in (REPO / "sample_data" / "demo_checkpoints")
                   .glob("global_step_*"))
    return max([c for c in ckpts if c <= step] or ckpts[:1])


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return read_records(RECORDS_DIR)


@pytest.fixture(scope="module")
def figures(records: list[dict]) -> dict[int, dict]:
    return {f["step"]: f for f in step_figures(records)}


def test_one_record_per_train_trajectory_joined_to_its_dump_row(records: list[dict]) -> None:
    assert is_record_file(SHIPPED) and [p.name for p in RECORDS_DIR.iterdir()] == [GEN.RECORD_FILE_NAME]
    assert len(SHIPPED.read_bytes().splitlines()) == len(records)  # every line is read back
    dump = {(d["step"], d["uid"]): d for d in _dump_rows()}
    assert len(records) == len(dump)
    keys = {(r["step"], f"{r['uid']}_{r['session_id']}_0") for r in records}
    assert keys == set(dump)  # one record per dump row, none twice
    for r in records:
        d = dump[(r["step"], f"{r['uid']}_{r['session_id']}_0")]
        assert r["output_sha1"] == output_sha1(d["output"]) and r["score"] == d["score"] and r["split"] == "train"
        assert r["exact_tokens"] == 1.0 and 0 < r["control_tokens"] <= r["generated_tokens"] == r["response_tokens"]
        assert r["control_logprob_min"] <= r["control_logprob_mean"] <= 0 and 0 <= r["control_low_prob_share"] <= 1
        assert all(round(r[k], GEN.DECIMALS) == r[k] for k in GEN.STAT_KEYS)
        assert r["logprobs_from"] == f"teacher forcing: demo_checkpoints/global_step_{_checkpoint_of(r['step'])}"
    order = [(r["step"], r["uid"], r["session_id"]) for r in records]
    assert [s for s, _, _ in order] == sorted(s for s, _, _ in order)  # sorted by step


def test_scan_fills_the_train_steps_from_the_records(sample_xml_scan, figures: dict[int, dict]) -> None:
    steps = pl.read_parquet(sample_xml_scan.out / "steps.parquet")
    train, val = steps.filter(pl.col("split") == "train"), steps.filter(pl.col("split") == "val")
    assert sorted(train["step"].to_list()) == sorted(figures) and val.height > 0
    assert val.select(pl.col("control_logprob_mean").is_null().all()).item()
    for r in train.iter_rows(named=True):
        f = figures[r["step"]]
        assert r["generated_tokens"] == int(f["generated_tokens"])
        assert r["control_logprob_mean"] == pytest.approx(f["control_logprob_mean"], abs=1e-9)
        assert r["control_low_prob_share"] == pytest.approx(f["control_low_prob_share"], abs=1e-9)


def test_the_report_of_the_scan_has_the_exact_token_section(sample_xml_scan, tmp_path: Path) -> None:
    from trajlab.report import report

    html = report(sample_xml_scan.out, tmp_path / "report.html").read_text(encoding="utf-8")
    assert '<h2 id="exact-tokens">' in html and '<figure class="chart" data-chart="exact_tokens">' in html


def test_watch_with_the_records_beside_the_run(sample_xml_scan, figures: dict[int, dict], tmp_path: Path) -> None:
    from trajlab.watch import WatchOptions, watch

    copy = tmp_path / SAMPLE.name
    shutil.copytree(SAMPLE, copy)
    res = watch(WatchOptions(paths=[copy], out=tmp_path / "watch", interval=0.05, idle_exit=0.5, keep_watching=True))
    trips = {t.reason: t for t in res.trips}
    ew = json.loads((sample_xml_scan.out / "manifest.json").read_text())["summary"]["early_warning"]
    assert trips["early_warning"].step == ew["step"]
    expected = control_trip([figures[s] for s in sorted(figures)])  # what the records say, by the same rule
    if expected is None:
        assert "control_tokens" not in trips
    else:
        assert trips["control_tokens"].step == expected["step"]
    got = pl.read_parquet(tmp_path / "watch" / "steps.parquet").filter(pl.col("split") == "train")
    assert got.height == len(figures)
    for r in got.iter_rows(named=True):
        assert r["control_logprob_mean"] == pytest.approx(figures[r["step"]]["control_logprob_mean"], abs=1e-9)


def test_the_generator_reproduces_the_shipped_rows(sample_xml_scan, records: list[dict], tmp_path: Path) -> None:
    """Two short slices, one per checkpoint at each end of the run, computed afresh from a copy of the session's
    scan: the same rows, byte for byte, as the shipped file holds for those steps; written whole."""
    segments = ((20, 1, 2), (140, 150, 150))
    scan_copy = tmp_path / "scan"
    shutil.copytree(sample_xml_scan.out, scan_copy)
    rows = GEN.control_records(scan_copy, segments)
    want = [r for r in records if any(lo <= r["step"] <= hi for _, lo, hi in segments)]
    assert rows and GEN.records_bytes(rows) == GEN.records_bytes(want)
    assert not (scan_copy / "rescore").exists()
    dest = GEN.write_records(rows, tmp_path / "d" / GEN.RECORD_FILE_NAME)
    assert dest.read_bytes() == GEN.records_bytes(want) and [p.name for p in dest.parent.iterdir()] == [dest.name]
    assert dest.stat().st_mode & 0o777 == 0o644

"""W&B run files read without wandb: files written by wandb's own writers (0.16.6's Python writer, the wandb-core
writer of 0.31.0 through verl's Tracking, 0.31's typed values; ``tests/data/wandb/generate.py``) agree row for row
with what ``wandb leet inspect --json`` printed for them (committed beside them, and re-run live where the verl
venv has wandb); a torn file is read to the tear and says so; a bad checksum costs its block only."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from trajlab.metrics.wandbfile import BLOCK, is_wandb_file, read_wandb

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "wandb"
SAMPLE_WANDB = ROOT / "sample_data" / "wandb"
GENERATIONS = ("py016", "core", "typed")
VERL_PY = Path(os.environ.get("VERLSFT_VENV", os.path.join(os.environ.get("TMPDIR", "/tmp"), "verlsft-venv"))) / "bin" / "python"
WANDB_EXE = VERL_PY.parent / "wandb"


def _file(gen: str) -> Path:
    (f,) = sorted((DATA / gen).glob("wandb/offline-run-*/run-*.wandb"))
    return f


def _flat(prefix: str, v: Any, out: dict[str, Any]) -> None:
    if isinstance(v, dict) and v:
        for k, x in v.items():
            _flat(f"{prefix}.{k}" if prefix else k, x, out)
    else:
        out[prefix] = v


def _same(a: Any, b: Any) -> bool:
    """One value as our reader has it (a) and as leet printed it (b: NaN/inf as strings)."""
    if isinstance(a, float) and (math.isnan(a) or math.isinf(a)):
        return b in ("NaN", "Infinity", "-Infinity") and float(b.replace("Infinity", "inf")) == a or (
            math.isnan(a) and b == "NaN")
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def _leet_lines(lines: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run: dict[str, Any] = {}
    rows = []
    for ln in lines:
        d = json.loads(ln)
        if d["type"] == "run":
            run = d["run"]
        elif d["type"] == "history":
            row: dict[str, Any] = {}
            _flat("", d["history"]["item"], row)
            rows.append(row)
    return run, rows


def _agree(path: Path, leet_lines: list[str]) -> int:
    """Assert our reader's rows equal leet's, key for key; returns the number of rows compared."""
    raw: list[tuple[int | None, dict[str, Any]]] = []
    wf = read_wandb(path, raw_rows=raw)
    run, rows = _leet_lines(leet_lines)
    assert len(raw) == len(rows) and rows
    for (step, ours), theirs in zip(raw, rows, strict=True):
        assert step == theirs["_step"] and set(ours) == set(theirs), (step, set(ours) ^ set(theirs))
        bad = [k for k in ours if not _same(ours[k], theirs[k])]
        assert not bad, (step, [(k, ours[k], theirs[k]) for k in bad])
    if run:
        assert (wf.run_id, wf.project, wf.name) == (run["run_id"], run["project"], run.get("display_name", ""))
        assert wf.group == run.get("run_group", "") and wf.job_type == run.get("job_type", "")
        cfg = dict(run.get("config", {}).get("update", {}))
        cfg.pop("_wandb", None)
        assert {k: v for k, v in wf.config.items() if k != "_wandb"} == cfg
    return len(rows)


@pytest.mark.parametrize("gen", GENERATIONS)
def test_reader_agrees_with_leet_row_for_row(gen: str) -> None:
    f = _file(gen)
    leet = f.with_name(f.name.replace(".wandb", ".leet.jsonl")).read_text(encoding="utf-8").splitlines()
    assert _agree(f, leet) == 12
    wf = read_wandb(f)
    assert wf.complete and wf.problems == [] and sorted(wf.history) == list(range(1, 13))
    assert wf.producer.startswith("0.31.0+") if gen != "py016" else wf.producer == ""
    row = wf.history[12]
    assert not any(k.startswith(("val/generations", "_", "note")) for k in row)  # a table, W&B's keys, text
    assert row["nested.b.c"] == 18.0 and row["val/flag"] == 1.0 and row["training/global_step"] == 12.0
    assert math.isnan(wf.history[5]["actor/grad_norm"]) and wf.history[6]["actor/grad_norm"] == math.inf
    assert wf.skipped == {"not a number": 12, "table or media": 1}
    assert wf.config["trainer"] == {"total_training_steps": 12}


def test_sample_runs_are_w_and_b_files_and_name_the_experiment() -> None:
    files = sorted(SAMPLE_WANDB.glob("offline-run-*/run-*.wandb"))
    assert len(files) == 2 and all(is_wandb_file(f) for f in files)
    heads = [read_wandb(f, history=False) for f in files]
    assert {h.name for h in heads} == {"qwen35_xml_run"} and {h.project for h in heads} == {"trajlab-samples"}
    assert len({h.run_id for h in heads}) == 2 and not is_wandb_file(ROOT / "README.md")


def _torn(tmp_path: Path, at: int) -> Path:
    (src,) = [f for f in SAMPLE_WANDB.glob("offline-run-*/run-*.wandb") if read_wandb(f).history.get(1)]
    dest = tmp_path / src.parent.name / src.name
    dest.parent.mkdir(parents=True)
    dest.write_bytes(src.read_bytes()[:at])
    return dest


def test_torn_file_is_read_up_to_the_tear_and_says_so(tmp_path: Path) -> None:
    full = read_wandb(next(f for f in SAMPLE_WANDB.glob("offline-run-*/run-*.wandb") if read_wandb(f).history.get(1)))
    assert full.complete and sorted(full.history) == list(range(1, 101))
    cut = 60_001  # inside block 1, mid-record
    wf = read_wandb(_torn(tmp_path, cut))
    assert not wf.complete and len(wf.problems) == 1 and "cut off" in wf.problems[0]
    assert f"read {wf.records} records, {wf.bytes_read} bytes" in wf.problems[0] and wf.bytes_read <= cut
    n = len(wf.history)
    assert 10 < n < 100 and sorted(wf.history) == list(range(1, n + 1))
    assert all(wf.history[s] == full.history[s] for s in wf.history)  # what was read is whole
    header_only = read_wandb(_torn(tmp_path / "h", 5))
    assert header_only.history == {} and "no complete header" in header_only.problems[0]


def test_bad_checksum_costs_its_block_and_is_reported(tmp_path: Path) -> None:
    src = _torn(tmp_path / "a", 10 ** 9)
    full = read_wandb(src)
    data = bytearray(src.read_bytes())
    data[BLOCK + 500] ^= 0xFF  # one byte in block 1
    bad = tmp_path / "bad.wandb"
    bad.write_bytes(bytes(data))
    wf = read_wandb(bad)
    assert any("checksum mismatch" in p for p in wf.problems)
    lost = set(full.history) - set(wf.history)
    assert lost and len(lost) < 40 and max(lost) - min(lost) == len(lost) - 1  # one 32 KiB block: ~28 steps
    assert max(wf.history) == 100  # the rest of the file is still read
    assert all(wf.history[s] == full.history[s] for s in wf.history if s not in lost)


@pytest.mark.slow  # two runs of wandb-core (~5 s each on 2 cores)
@pytest.mark.skipif(not WANDB_EXE.is_file(), reason=f"no wandb at {WANDB_EXE} (CI builds the verl venv)")
def test_reader_agrees_with_leet_live(tmp_path: Path) -> None:
    """``wandb leet inspect --json`` run now on the Python writer's file and on a torn wandb-core file: the same
    rows (the committed leet outputs cover the others)."""
    files = [_file("py016"), _torn(tmp_path, 60_001)]
    counts = []
    for f in files:
        got = subprocess.run([str(WANDB_EXE), "leet", "inspect", "--json", str(f)], capture_output=True, text=True,
                             timeout=120)
        lines = [ln for ln in got.stdout.splitlines() if ln.startswith("{")
                 and json.loads(ln).get("type") in ("run", "history")]
        counts.append(_agree(f, lines))
    assert counts[0] == 12 and 10 < counts[1] < 100


def test_w_and_b_run_folders_are_never_read_as_dumps(tmp_path: Path) -> None:
    from trajlab.ingest.discover import find_inputs

    run = tmp_path / "exp" / "rollout"
    run.mkdir(parents=True)
    shutil.copy(ROOT / "sample_data" / "qwen35_xml_run" / "rollout" / "1.jsonl", run / "1.jsonl")
    src = _file("py016")
    wdir = tmp_path / "exp" / "wandb" / src.parent.name
    (wdir / "files" / "media" / "table").mkdir(parents=True)
    shutil.copy(src, wdir / src.name)
    (wdir / "files" / "wandb-summary.json").write_text('{"critic/score/mean": 0.5}')  # what 0.16 left there
    (wdir / "files" / "media" / "table" / "g.table.json").write_text('{"columns": ["a"], "data": [["x"]]}')
    files, errors, skipped = find_inputs([tmp_path / "exp"])
    assert [f.path.name for f in files] == ["1.jsonl"] and errors == []
    assert any("W&B run director" in s for s in skipped)

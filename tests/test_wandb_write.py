"""W&B files written live by wandb's own writers in the verl venv (skipped with a reason where it is absent; CI
builds it): verl's ``Tracking`` with the wandb backend, offline (``tests/data/wandb/generate.py``), reads back
as the committed fixture; trajlab's own W&B run (``scan --wandb``) is written, accepted by
``wandb sync --dry-run`` and read back by trajlab's reader with its group, job type and ``trajlab/`` keys."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trajlab.metrics.wandbfile import read_wandb

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
VERL_PY = Path(os.environ.get("VERLSFT_VENV", os.path.join(os.environ.get("TMPDIR", "/tmp"), "verlsft-venv"))) / "bin" / "python"
needs_verl = pytest.mark.skipif(not (VERL_PY.parent / "wandb").is_file(),
                                reason=f"no verl venv with wandb at {VERL_PY} (CI builds it)")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WANDB_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.slow  # one offline W&B run through verl's Tracking (~10 s)
@needs_verl
def test_verl_tracking_writes_what_the_fixture_holds(tmp_path: Path) -> None:
    """verl's ``Tracking(default_backend=["wandb"])`` with ``WANDB_MODE=offline``, run now: the file reads back as
    the committed fixture (same seeded values; a new id and clock)."""
    gen = ROOT / "tests" / "data" / "wandb" / "generate.py"
    subprocess.run([str(VERL_PY), str(gen), "--write", "core", "--into", str(tmp_path)], check=True, env=_env(),
                   timeout=300, capture_output=True)
    (live,) = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    (committed,) = (ROOT / "tests" / "data" / "wandb" / "core").glob("wandb/offline-run-*/run-*.wandb")
    a, b = read_wandb(live), read_wandb(committed)
    assert a.complete and a.name == b.name == "fixture-core" and a.run_id != b.run_id
    assert json.dumps(a.history, sort_keys=True) == json.dumps(b.history, sort_keys=True)  # NaN-safe equality
    assert a.skipped == b.skipped and a.config == b.config


@pytest.mark.slow  # a scan of 30 steps and one offline W&B run (~15 s)
@needs_verl
def test_trajlab_run_is_written_and_accepted_by_wandb_sync(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from trajlab.scan import ScanOptions, scan

    work = tmp_path / "work"
    (work / "qwen35_xml_run" / "rollout").mkdir(parents=True)
    for step in range(1, 31):
        shutil.copy(SAMPLE / "qwen35_xml_run" / "rollout" / f"{step}.jsonl", work / "qwen35_xml_run" / "rollout")
    shutil.copytree(SAMPLE / "wandb", work / "wandb")
    s = scan([work / "qwen35_xml_run"], tmp_path / "out", ScanOptions(jobs=1), progress=False)
    rows = pq.read_table(tmp_path / "out" / "steps.parquet").to_pylist()
    job = {"steps": rows, "warnings": {r["run"]: r["early_warning"] for r in s.runs},
           "sources": s.metrics["wandb"], "dir": str(tmp_path / "exp")}
    (tmp_path / "job.json").write_text(json.dumps(job, default=str))
    code = ("import json, sys; from pathlib import Path\n"
            "from trajlab.metrics.wandb_out import WandbExportOptions, write_wandb_runs\n"
            "j = json.load(open(sys.argv[1]))\n"
            "print(json.dumps([str(p) for p in write_wandb_runs(j['steps'], j['warnings'], "
            "WandbExportOptions(Path(j['dir'])), j['sources'])]))")
    got = subprocess.run([str(VERL_PY), "-c", code, str(tmp_path / "job.json")], env=_env(), timeout=300,
                         capture_output=True, text=True, check=True)
    (f,) = [Path(p) for p in json.loads(got.stdout.strip().splitlines()[-1])]
    sync = subprocess.run([str(VERL_PY.parent / "wandb"), "sync", "--dry-run", str(f.parent)], env=_env(),
                          timeout=120, capture_output=True, text=True)
    assert sync.returncode == 0 and "Would sync 1 run" in sync.stdout + sync.stderr
    w = read_wandb(f)
    assert w.complete and (w.project, w.group, w.job_type, w.name) == (
        "trajlab-samples", "qwen35_xml_run", "trajlab", "qwen35_xml_run-trajlab")
    assert len(w.config["source_run_ids"]) == 2
    want = {r["step"]: r for r in rows if r["split"] == "train"}
    assert sorted(w.history) == sorted(want)  # step = the verl step
    for step, r in want.items():
        h = w.history[step]
        assert all(k.startswith("trajlab/") for k in h)
        assert h["trajlab/calls"] == r["calls"] and h["trajlab/early_warning"] == 0.0
        if r["calls"]:
            assert h["trajlab/malformed_rate"] == r["malformed_calls"] / r["calls"]

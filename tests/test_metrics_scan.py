"""The trainer's metrics in a scan: the sample runs' logs (written by verl 0.9.1's Tracking) found in verl's default
layout, never read as dumps; the metrics table joined to steps in SQL; the lead time on the sample runs against a
hand computation; the report's training panel, in headless Chromium."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.report_html import CHROMIUM, js_problems, parse_page, run_chromium

from trajlab.scan import ScanOptions, scan

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"
RUNS = ("qwen35_xml_run", "qwen35_xml_sft_run")


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("metrics") / "out"
    tb = out.parent / "tb"
    summary = scan([SAMPLE / r for r in RUNS], out, ScanOptions(jobs=1, tensorboard=tb), progress=False)
    return out, summary


def _reward(run: str) -> dict[int, float]:
    """critic/score/mean as verl's file logger wrote it, read with json (not trajlab)."""
    lines = (SAMPLE / "trajlab-samples" / f"{run}.jsonl").read_text().splitlines()
    return {d["step"]: d["data"]["critic/score/mean"] for d in map(json.loads, lines)}


def _falls(win: list[float], m0: float, s0: float, n: int, alpha: float, drop: float) -> bool:
    """This window's mean is significantly and clearly below a baseline of ``n`` steps."""
    mean = sum(win) / len(win)
    z = (m0 - mean) / (s0 * math.sqrt(1 / len(win) + 1 / n))
    return m0 - mean >= drop * max(abs(m0), s0) and 0.5 * math.erfc(z / math.sqrt(2)) < alpha


def _hand_breakdown(values: dict[int, float], window: int = 5, alpha: float = 1e-3, drop: float = 0.2) -> int | None:
    steps = sorted(values)
    for i, s in enumerate(steps):
        if i < 5:
            continue
        base = [values[x] for x in steps[:i]]
        m0 = sum(base) / i
        s0 = math.sqrt(sum((x - m0) ** 2 for x in base) / (i - 1))
        win = [values[x] for x in steps[i:i + window]]
        confirm = [values[x] for x in steps[i + window:i + 2 * window]]  # and it stays down after the window
        if values[s] < m0 and confirm and all(_falls(w, m0, s0, i, alpha, drop) for w in (win, confirm)):
            return s
    return None


@pytest.mark.slow  # scans two sample runs (270 steps)
def test_sample_runs_metrics_found_matched_and_lead_time(scanned) -> None:
    out, summary = scanned
    assert summary.ingest_errors == 0 and {r["run"] for r in summary.runs} == set(RUNS)  # logs are not dumps
    logs = summary.metrics["logs"]
    assert sorted((x["run"], x["logger"], x["rule"]) for x in logs) == sorted(
        [(r, k, "experiment name") for r in RUNS for k in ("file", "tensorboard")]
        + [("qwen35_xml_run", "wandb", "experiment name")] * 2)  # sample_data/wandb: one run resumed once
    assert summary.metrics["problems"] == [] and summary.metrics["names"] == {"qwen35_xml_run": 15, "qwen35_xml_sft_run": 14}  # no validation dumps in the SFT run
    lead = {x["run"]: x for x in summary.lead_times}
    main = lead["qwen35_xml_run"]
    hand = _hand_breakdown(_reward("qwen35_xml_run"))
    assert hand == 108 and main["breakdown_step"] == hand and main["metric"] == "critic/score/mean"
    assert main["warning_step"] == 88 == summary.runs[0]["early_warning"]["step"]
    assert main["lead_steps"] == 20 and main["sentence"].startswith("warned 20 steps before the reward fell")
    sft = lead["qwen35_xml_sft_run"]
    assert _hand_breakdown(_reward("qwen35_xml_sft_run")) is None and sft["breakdown_step"] is None
    assert sft["warning_step"] is None and sft["lead_steps"] is None
    m = json.loads((out / "manifest.json").read_text())
    assert m["summary"]["lead_times"][0]["lead_steps"] == 20
    # trajlab's scalars for TensorBoard, one file per run, next to where verl's would be
    assert sorted(Path(p).relative_to(out.parent / "tb").as_posix() for p in summary.tensorboard) == [
        f"{r}/trajlab/events.out.tfevents.trajlab" for r in RUNS]


@pytest.mark.slow
def test_metrics_table_joins_steps_in_sql_and_rescan_keeps_it(scanned) -> None:
    from trajlab.query import connect

    out, _ = scanned
    con = connect(out)
    try:
        rows = con.execute("""
            SELECT s.step, s.malformed_rate, m.value FROM steps s
            JOIN metrics m ON m.run = s.run AND m.step = s.step
            WHERE m.name = 'critic/score/mean' AND m.logger = 'file' AND s.run = 'qwen35_xml_run'
              AND s.split = 'train' ORDER BY s.step""").fetchall()
        loggers = con.execute("SELECT logger, count(*) FROM metrics GROUP BY 1 ORDER BY 1").fetchall()
    finally:
        con.close()
    reward = _reward("qwen35_xml_run")
    assert len(rows) == 150 and all(v == reward[s] for s, _, v in rows)
    assert loggers == [("file", 3795), ("tensorboard", 3795), ("wandb", 2115)]  # W&B: qwen35_xml_run, as many as its file log
    before = (out / "metrics.parquet").stat().st_mtime_ns
    scan([SAMPLE / r for r in RUNS], out, ScanOptions(jobs=1), progress=False)
    assert (out / "metrics.parquet").stat().st_mtime_ns == before  # unchanged logs: not rewritten


def test_named_metrics_and_a_log_beside_the_dumps(tmp_path: Path) -> None:
    run = tmp_path / "exp" / "rollout"
    run.mkdir(parents=True)
    for step in (1, 2):
        shutil.copy(SAMPLE / "qwen35_xml_run" / "rollout" / f"{step}.jsonl", run / f"{step}.jsonl")
    (tmp_path / "exp" / "train_metrics.jsonl").write_text(
        '{"step":1,"data":{"critic/score/mean":0.5}}\n{"step":2,"data":{"critic/score/mean":0.25}}\n{"step":3,')
    other = tmp_path / "elsewhere.jsonl"
    other.write_text('{"step":1,"data":{"x":1.0}}\n')
    s = scan([tmp_path / "exp"], tmp_path / "out", ScanOptions(jobs=1, metrics=(f"exp={other}",)), progress=False)
    assert s.ingest_errors == 0 and [r["run"] for r in s.runs] == ["exp"]
    assert any("training-metrics log" in x for x in s.skipped)
    assert sorted((x["path"], x["rule"], x["rows"]) for x in s.metrics["logs"]) == [
        ("elsewhere.jsonl", "named", 1), ("exp/train_metrics.jsonl", "directory", 2)]
    assert s.metrics["problem_count"] == 1 and "cut-off" in s.metrics["problems"][0]


@pytest.mark.slow
def test_report_shows_the_training_panel(scanned, tmp_path: Path) -> None:
    from trajlab.report import ReportOptions, report

    out, _ = scanned
    page = report(out, tmp_path / "r.html", ReportOptions(run="qwen35_xml_run"))
    p = parse_page(page)
    assert {"training_0", "training_1"} <= set(p.charts)
    text = " ".join(p.svg_text["training_0"])
    for label in ("critic/score/mean", "actor/entropy", "response_length/mean", "training/num_turns/mean",
                  "rollout_probs_diff_mean", "early warning", "fell at step 108"):
        assert re.sub(r"[/\s]", "", label) in re.sub(r"[/\s]", "", text), label
    html = page.read_text()
    assert 'data-lead-steps="20"' in html and "warned 20 steps before the reward fell" in html
    picked = report(out, tmp_path / "p.html", ReportOptions(metrics=("actor/entropy",)))
    assert " ".join(parse_page(picked).svg_text["training_0"]).count("critic/score/mean") == 0
    if CHROMIUM is None:
        pytest.skip("chromium not installed (apt-get install chromium)")
    shot = tmp_path / "shot.png"
    r = run_chromium(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", "--hide-scrollbars")
    assert r.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    d = run_chromium(page, tmp_path, "--dump-dom")
    ready = re.search(r'data-charts-ready="(\d+)"', d.stdout)
    assert ready and int(ready.group(1)) == len(p.charts) and js_problems(d, d.stdout) == []


def test_watch_writes_trajlab_scalars_for_tensorboard(tmp_path: Path) -> None:
    from helpers.scan_runs import make_run

    from trajlab.metrics.tfevents import read_scalars
    from trajlab.watch import WatchOptions, watch

    run = make_run(tmp_path / "in" / "exp", steps=24, rot_from=14)
    tb = tmp_path / "tb"
    result = watch(WatchOptions(paths=[run.parent], out=tmp_path / "out", interval=0.1, publish_every=0.0,
                                idle_exit=0.3, keep_watching=True, tensorboard=tb))
    warn = result.summary.runs[0]["early_warning"]["step"]
    (f,) = (tb / "exp" / "trajlab").iterdir()
    got = {(x.step, x.tag): x.value for x in read_scalars(f)}
    assert [got[(s, "trajlab/early_warning")] for s in (warn - 1, warn)] == [0.0, 1.0]
    steps = {r["step"]: r for r in result.summary.steps if r["split"] == "train"}
    assert all(abs(got[(s, "trajlab/malformed_rate")] - r["malformed_rate"]) < 1e-6 for s, r in steps.items()
               if r["malformed_rate"] is not None)


@pytest.mark.slow  # scans one sample run (150 steps)
def test_a_run_with_only_w_and_b_files_scans_like_its_file_logger(tmp_path: Path) -> None:
    """verl's default logger: the run's metrics exist only in W&B's offline files (two runs, the second resumed
    from step 90 over steps 91..100). Merged by step, the later run winning, they give one value per step, the
    file logger's values, and the same lead time."""
    from trajlab.query import connect

    work = tmp_path / "work"  # verl's working directory: the dumps and wandb/, no file logger, no TensorBoard
    shutil.copytree(SAMPLE / "qwen35_xml_run", work / "qwen35_xml_run")
    shutil.copytree(SAMPLE / "wandb", work / "wandb")
    out = tmp_path / "out"
    s = scan([work / "qwen35_xml_run"], out, ScanOptions(jobs=1), progress=False)
    assert s.ingest_errors == 0 and [r["run"] for r in s.runs] == ["qwen35_xml_run"]
    assert [(x["logger"], x["rule"]) for x in s.metrics["logs"]] == [("wandb", "experiment name")] * 2
    assert s.metrics["problems"] == []
    (w,) = s.metrics["wandb"]
    assert [(x["first"], x["last"], x["steps"], x["kept"]) for x in w["merged"]] == [(1, 100, 100, 90),
                                                                                     (91, 150, 60, 60)]
    assert w["overlap_steps"] == 10 and w["skipped"] == {"table or media": 1}
    con = connect(out)
    try:
        dup = con.execute("SELECT count(*) FROM (SELECT step, name FROM metrics GROUP BY 1, 2 HAVING count(*) > 1)"
                          ).fetchone()
        got = con.execute("SELECT step, name, value, source FROM metrics").fetchall()
    finally:
        con.close()
    assert dup == (0,)
    logged = {(d["step"], k): v for d in map(json.loads, (SAMPLE / "trajlab-samples" / "qwen35_xml_run.jsonl")
                                              .read_text().splitlines()) for k, v in d["data"].items()}
    assert {(st, n): v for st, n, v, _ in got} == logged  # the later run's values on 91..100: the file logger's
    later = w["merged"][1]["file"]
    assert {src for st, _, _, src in got if st > 90} == {later}
    (lead,) = s.lead_times
    assert (lead["warning_step"], lead["breakdown_step"], lead["lead_steps"]) == (88, 108, 20)


def test_metrics_table_follows_the_reader_code_and_full_scans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The metrics table is kept across unchanged re-scans, but read again by ``scan --full`` and when the code
    that reads logs changes (the key holds its source, not only the inputs)."""
    run = tmp_path / "exp" / "rollout"
    run.mkdir(parents=True)
    shutil.copy(SAMPLE / "qwen35_xml_run" / "rollout" / "1.jsonl", run / "1.jsonl")
    (tmp_path / "exp" / "train_metrics.jsonl").write_text('{"step":1,"data":{"critic/score/mean":0.5}}\n')
    out = tmp_path / "out"
    table = out / "metrics.parquet"

    def scan_mtime(**kw: object) -> int:
        scan([tmp_path / "exp"], out, ScanOptions(jobs=1, **kw), progress=False)  # type: ignore[arg-type]
        return table.stat().st_mtime_ns

    first = scan_mtime()
    os.utime(table, ns=(1, 1))
    assert scan_mtime() == 1  # unchanged: kept
    assert scan_mtime(incremental=False) != 1  # --full: read again
    os.utime(table, ns=(1, 1))
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes",
                        lambda self: real(self) + (b"\n# edited" if self.name == "filelog.py" else b""))
    assert scan_mtime() != 1  # the log reader changed: read again
    assert first and pq.read_table(table).num_rows == 1

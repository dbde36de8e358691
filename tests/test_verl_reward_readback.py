"""The plugin's keys read back: a legacy verl dump whose lines carry compute_score's keys (as verl's legacy trainer
writes them beside input/output/gts/score/step) is scanned, the keys are averaged per step, and the report plots
task vs. format reward."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajlab.report import report
from trajlab.scan import ScanOptions, scan
from trajlab.verl.readback import reward_steps
from trajlab.verl.reward import compute_score

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "qwen35_xml_run" / "rollout"
STEPS = (20, 60, 100, 120, 140, 150)


def _legacy_dump(d: Path) -> dict[int, list[dict]]:
    (d / "rollout").mkdir(parents=True)
    written = {}
    for s in STEPS:
        rows = []
        for line in (SAMPLE / f"{s}.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            res = compute_score("searchqa", r["output"], r["gts"], {"raw_prompt": r["input"]}, task_fn="none")
            row = {"input": r["input"], "output": r["output"], "gts": r["gts"], "score": res["score"], "step": s,
                   **{k: v for k, v in res.items() if k != "score"}}
            rows.append(row)
        (d / "rollout" / f"{s}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows), encoding="utf-8")
        written[s] = rows
    return written


@pytest.mark.slow
def test_scan_reads_the_plugin_keys_back_and_the_report_plots_them(tmp_path: Path) -> None:
    rows = _legacy_dump(tmp_path / "run")
    out = tmp_path / "out"
    summary = scan([tmp_path / "run"], out, ScanOptions(jobs=1), progress=False)
    assert summary.reward_plugin is not None and summary.reward_plugin["trajectories"] == 8 * len(STEPS)
    got = reward_steps(out)
    assert [g["step"] for g in got] == list(STEPS)
    for g in got:
        want = rows[g["step"]]
        assert g["trajectories"] == len(want)
        assert abs(g["format_reward"] - sum(r["format_reward"] for r in want) / len(want)) < 1e-9
        assert g["malformed_calls"] == sum(r["malformed_calls"] for r in want) / len(want)
        # score is the dump's own column (scan maps it to trajectories.score), averaged like the extras
        assert abs(g["score"] - sum(r["score"] for r in want) / len(want)) < 1e-9
    assert got[0]["format_reward"] > got[-1]["format_reward"]
    html = report(out, tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'data-chart="reward"' in html and "from the keys trajlab's verl reward plugin wrote" in html


def test_no_plugin_keys_no_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert scan([SAMPLE.parent / "validation"], out, ScanOptions(jobs=1), progress=False).reward_plugin is None
    assert reward_steps(out) == []

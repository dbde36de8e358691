"""The reward plugin on the Seed-OSS, MiniMax-M2 and Gemma 4 sample runs: with the format detected from the
prompt (no ``tool_format`` given), each response's call and malformed-call counts are scan's, a clean rollout
earns the format reward and a broken one loses it, and verl's dropped calls are counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajlab.ingest.verl_jsonl import to_trajectory
from trajlab.trajectory import analyze_trajectory
from trajlab.verl.reward import compute_score

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
RUNS = {"seed": "seed_oss_run", "minimax": "minimax_m2_run", "gemma4": "gemma4_run"}


@pytest.mark.parametrize("fmt", sorted(RUNS))
def test_plugin_scores_the_family_run_as_scan_reads_it(fmt: str) -> None:
    rows = [json.loads(line) for s in (28, 29, 30)
            for line in (SAMPLE / RUNS[fmt] / "rollout" / f"{s}.jsonl").read_text(encoding="utf-8").splitlines()]
    clean = broken = dropped = 0
    for i, rec in enumerate(rows):
        traj, _ = to_trajectory(rec, source_path="x.jsonl", line=i + 1, file_step=None, file_split="train")
        assert traj is not None
        an = analyze_trajectory(traj)
        assert an.tool_format == fmt
        out = compute_score(data_source="s", solution_str=rec["output"], ground_truth=rec["gts"],
                            extra_info={"raw_prompt": rec["input"]}, task_fn="none")
        assert (out["tool_calls"], out["malformed_calls"]) == (an.n_calls, an.n_malformed), rec["output"]
        if an.n_malformed:
            broken += 1
            assert out["format_reward"] < 1.0
        elif an.n_calls:
            clean += 1
            assert out["format_reward"] > 0.0
        dropped += int(out["verl_dropped_calls"])
    assert clean and broken and dropped

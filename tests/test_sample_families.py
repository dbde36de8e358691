"""The per-family sample runs (``sample_data/generate_families.py``): reproducible byte for byte, small, in each
family's own rendering, and ``trajlab scan`` detects the family, flags the labelled calls and warns near the step
where the run starts to rot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data"


def _load():
    spec = importlib.util.spec_from_file_location("sample_families_under_test", SAMPLE / "generate_families.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RUNS: dict[str, str] = _load().RUN_DIRS


@pytest.fixture(scope="module")
def gen():
    return _load()


def test_regenerates_committed_files_byte_for_byte(gen, tmp_path):
    written = gen.write_all(tmp_path)
    rels = {p.relative_to(tmp_path).as_posix() for p in written}
    committed = {p.relative_to(SAMPLE).as_posix() for fam in gen.FAMILIES
                 for p in (SAMPLE / gen.RUN_DIRS[fam]).rglob("*") if p.is_file()}
    assert rels == committed, "sample_data/ differs from what generate_families.py writes (re-run it)"
    for rel in sorted(rels):
        assert (tmp_path / rel).read_bytes() == (SAMPLE / rel).read_bytes(), rel


@pytest.mark.parametrize("family", list(RUNS))
def test_each_run_is_small(family):
    size = sum(p.stat().st_size for p in (SAMPLE / RUNS[family]).rglob("*.jsonl"))
    assert 100_000 < size < 600_000


@pytest.mark.slow
@pytest.mark.parametrize("family", list(RUNS))
def test_scan_detects_the_family_flags_its_defects_and_warns_near_the_rot(gen, family, tmp_path):
    import polars as pl

    import trajlab

    summary = trajlab.scan([SAMPLE / RUNS[family]], tmp_path / "out", progress=False)
    warn = summary.early_warning
    assert warn is not None and gen.ONSET <= warn["step"] <= gen.ONSET + 5, warn
    trajs = pl.read_parquet(tmp_path / "out/trajectories.parquet")
    assert set(trajs["tool_format"]) == {family}
    assert trajs["n_turns"].max() >= 3  # the family's tool-response wrapper was split out
    calls = pl.read_parquet(tmp_path / "out/calls.parquet").join(
        trajs.select("trajectory_id", "step", "source_line"), on="trajectory_id")
    got: dict[tuple[int, int], list[bool]] = {}
    for step, line, status in calls.sort("step", "source_line", "turn_index", "call_index").select(
            "step", "source_line", "status").iter_rows():
        got.setdefault((step, line), []).append(status == "malformed")
    agree = total = 0
    for step in range(1, gen.STEPS + 1):
        for line, (_rec, labels) in enumerate(gen.iter_step(family, step), 1):
            want = [bool(x) for x in labels]
            have = got.get((step, line), [])
            total += len(want)
            agree += sum(a == b for a, b in zip(want, have, strict=True)) if len(want) == len(have) else 0
    assert agree / total >= 0.97, (agree, total)
    cats = set(calls.filter(pl.col("status") == "malformed")["categories"].explode().drop_nulls())
    assert len(cats) >= 4, cats  # it rots in several of the family's ways


@pytest.mark.parametrize("family", ["deepseek_v32", "deepseek_v4", "llama3_json"])
def test_reward_plugin_scores_the_family_run_as_scan_reads_it(family):
    """The verl reward plugin, given the dump's response text, counts the calls and the malformed ones as scan does
    (the format is detected from the markup; no tool schemas reach it, so only names the schema would catch differ)."""
    import json

    from trajlab.ingest.verl_jsonl import to_trajectory
    from trajlab.trajectory import analyze_trajectory
    from trajlab.verl.reward import compute_score

    recs = [json.loads(line) for s in (24, 30)
            for line in (SAMPLE / f"{family}_run/rollout/{s}.jsonl").read_text(encoding="utf-8").splitlines()]
    got = [compute_score("weather", r["output"], r["gts"], {}, task_fn="none") for r in recs]
    assert sum(g["tool_calls"] for g in got) > len(recs) and sum(g["malformed_calls"] for g in got) > 0
    for i, (r, g) in enumerate(zip(recs, got, strict=True)):
        traj, _ = to_trajectory(r, source_path="x.jsonl", line=i + 1, file_step=None, file_split="train")
        an = analyze_trajectory(traj)
        assert g["tool_calls"] == an.n_calls
        assert g["malformed_calls"] <= an.n_malformed

"""Runs: a root of several experiments is kept apart (run derivation, several roots, --run, per-run warning,
per-run --fail-above, the JSON ``runs`` list)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from helpers.scan_runs import make_run
from helpers.verl_lines import output_of, qwen35_prompt, v1_line, write_jsonl, xml_call

from trajlab.cli import main
from trajlab.errors import InputError
from trajlab.ingest import find_inputs
from trajlab.ingest.runs import parse_run_specs, run_of
from trajlab.scan import ScanOptions, scan


@pytest.mark.parametrize(("rel", "label", "want"), [
    ("exp_a/rollout/12.jsonl", "outputs", "exp_a"),
    ("exp_a/validation/10.jsonl", "outputs", "exp_a"),
    ("exp_a/rollouts/3.jsonl", "outputs", "exp_a"),
    ("team/exp_b/train/3.jsonl", "outputs", "team/exp_b"),
    ("exp_c/val/3.jsonl", "outputs", "exp_c"),
    ("rollout/3.jsonl", "exp_d", "exp_d"),
    ("3.jsonl", "exp_d", "exp_d"),
    ("verl_tool_run/verl_step_records/run1/fcl-step-3.json", "sample_data", "verl_tool_run/run1"),
    ("verl_step_records/run7/x-step-1.json", "root", "run7"),
    ("exp_e/step_dumps/3.jsonl", "outputs", "exp_e/step_dumps"),
])
def test_run_follows_the_layout(rel: str, label: str, want: str) -> None:
    assert run_of(rel, label) == want


def test_sibling_runs_each_warn_near_their_own_rot_step(tmp_path: Path) -> None:
    root = tmp_path / "outputs"
    make_run(root / "exp_a", steps=30, rot_from=12)
    make_run(root / "exp_b", steps=40, rot_from=28)
    s = scan([root], tmp_path / "out", ScanOptions(jobs=1), progress=False)
    runs = {r["run"]: r for r in s.runs}
    assert set(runs) == {"exp_a", "exp_b"}
    wa, wb = runs["exp_a"]["early_warning"], runs["exp_b"]["early_warning"]
    assert 12 <= wa["step"] <= 14, wa
    assert 28 <= wb["step"] <= 30, wb
    assert s.early_warning == {**wa, "run": "exp_a"}  # the earliest of the runs' warnings, naming its run
    steps = pl.read_parquet(tmp_path / "out" / "steps.parquet")
    assert steps.select("run", "split", "step").is_unique().all()
    assert steps.filter(pl.col("run") == "exp_a", pl.col("split") == "train")["step"].to_list() == list(range(1, 31))
    trajs = pl.read_parquet(tmp_path / "out" / "trajectories.parquet")
    assert dict(trajs.group_by("run").len().iter_rows()) == {"exp_a": 30 * 8 + 1, "exp_b": 40 * 8 + 1}
    # validation files (exp_x/validation/10.jsonl) are folded into their run, and stay val
    assert trajs.filter(pl.col("split") == "val")["run"].sort().to_list() == ["exp_a", "exp_b"]
    assert runs["exp_a"]["early_rate"] == 0 and runs["exp_a"]["late_rate"] == 0.5


def test_fail_above_and_json_are_per_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "outputs"
    make_run(root / "exp_a", steps=30, rot_from=12)  # last 20 steps: 19 rotten
    make_run(root / "exp_b", steps=40, rot_from=28)  # last 20 steps: 13 rotten
    argv = ["scan", str(root), "-o", str(tmp_path / "o"), "--json", "--fail-above", "0.4", "--window", "20"]
    assert main(argv) == 3
    d = json.loads(capsys.readouterr().out)
    assert [r["run"] for r in d["runs"]] == ["exp_a", "exp_b"]
    assert [t["run"] for t in d["fail_above"]["tripped"]] == ["exp_a"]
    assert d["fail_above"]["tripped"][0]["rate"] == pytest.approx(19 / 40)
    assert {r["run"]: r["early_warning"]["step"] for r in d["runs"]} == {"exp_a": 12, "exp_b": 28}
    assert d["trajectories"] == sum(r["trajectories"] for r in d["runs"])
    assert main(argv[:4] + ["--fail-above", "0.49", "--window", "20", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "runs compared" in out and "exp_a" in out and "exp_b" in out


def test_one_run_json_only_adds_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "exp", steps=25, rot_from=15)
    assert main(["scan", str(run), "-o", str(tmp_path / "o"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(d["runs"]) == 1 and d["runs"][0]["run"] == "exp"
    assert d["runs"][0]["early_warning"] == d["early_warning"] and d["early_warning"]["step"] == 15
    assert "fail_above" not in d and "run" not in d["early_warning"] and "run" not in d["steps"][0]
    assert {"trajectories", "calls", "malformed_calls", "malformed_rate", "steps", "top_categories"} <= set(d)


def _one_step(root: Path, digit: str) -> Path:
    rows = [v1_line(1, qwen35_prompt(f"question {i}"), output_of(
        [xml_call("search_web", queries=[f"q{digit}{i}"]), f"answer {digit}"], ["r"], "0.9"), 1.0, uid=f"u{i}")
        for i in range(3)]
    return write_jsonl(root / "rollout" / "1.jsonl", rows)


def test_two_roots_with_the_same_file_names_keep_every_record(tmp_path: Path) -> None:
    a, b = _one_step(tmp_path / "a" / "exp", "1"), _one_step(tmp_path / "b" / "exp", "2")
    assert a.stat().st_size == b.stat().st_size and a.read_bytes() != b.read_bytes()
    os.utime(a, ns=(1_700_000_000_000_000_000,) * 2)
    os.utime(b, ns=(1_700_000_000_000_000_000,) * 2)
    out = tmp_path / "out"
    for _ in range(2):  # the second scan reuses the parts: still two files, not one cache entry
        scan([tmp_path / "a" / "exp", tmp_path / "b" / "exp"], out, ScanOptions(jobs=1), progress=False)
        t = pl.read_parquet(out / "trajectories.parquet")
        assert t.height == 6 and t["trajectory_id"].n_unique() == 6
        assert sorted(set(t["source_path"])) == ["a/exp/rollout/1.jsonl", "b/exp/rollout/1.jsonl"]
        assert sorted(set(t["run"])) == ["a/exp", "b/exp"]
        assert {o.split("answer ")[-1][:1] for o in t["output"]} == {"1", "2"}
        assert pl.read_parquet(out / "calls.parquet").height == 6


def test_named_runs(tmp_path: Path) -> None:
    make_run(tmp_path / "x" / "exp1", steps=6, rot_from=99)
    make_run(tmp_path / "y" / "exp2", steps=6, rot_from=99)
    s = scan([], tmp_path / "o", ScanOptions(jobs=1, runs={"baseline": tmp_path / "x" / "exp1", "sft": tmp_path / "y" / "exp2"}), progress=False)
    assert [r["run"] for r in s.runs] == ["baseline", "sft"]
    t = pl.read_parquet(tmp_path / "o" / "trajectories.parquet")
    assert t["source_path"].str.starts_with("baseline/").sum() == 6 * 8 + 1
    # a --run PATH under a scanned root: that root's files keep their paths, the named ones get the name
    files, _, _ = find_inputs([tmp_path / "x"], {"base": tmp_path / "x" / "exp1" / "validation"})
    assert {(f.rel.split("/")[1], f.run) for f in files} == {("rollout", "exp1"), ("validation", "base")}
    assert main(["scan", "--run", f"baseline={tmp_path / 'x' / 'exp1'}", "-o", str(tmp_path / "o2"), "--json"]) == 0
    assert main(["scan", "-o", str(tmp_path / "o3")]) == 2  # nothing to scan: one line, exit 2
    with pytest.raises(InputError):
        parse_run_specs(["no-equals-sign"])
    with pytest.raises(InputError):
        parse_run_specs(["a=x", "a=y"])


def test_a_root_named_like_validation_does_not_make_its_files_val(tmp_path: Path) -> None:
    make_run(tmp_path / "eval_runs" / "exp", steps=3, rot_from=99)
    make_run(tmp_path / "other", steps=3, rot_from=99)
    files, _, _ = find_inputs([tmp_path / "eval_runs", tmp_path / "other"])
    s = scan([tmp_path / "eval_runs", tmp_path / "other"], tmp_path / "o", ScanOptions(jobs=1), progress=False)
    t = pl.read_parquet(tmp_path / "o" / "trajectories.parquet")
    assert t.filter(pl.col("split") == "train").height == 2 * 3 * 8
    assert {f.run for f in files} == {"eval_runs/exp", "other"} == {r["run"] for r in s.runs}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs") / "outputs"
    make_run(root / "exp_a", steps=12, rot_from=6)
    make_run(root / "exp_b", steps=12, rot_from=9)
    out = root.parent / "out"
    scan([root], out, ScanOptions(jobs=1), progress=False)
    return out


def test_show_picks_the_run_of_a_step(two_runs: Path) -> None:
    from trajlab.errors import TrajlabError
    from trajlab.show import load

    with pytest.raises(TrajlabError, match="2 runs: exp_a, exp_b"):
        load(two_runs, step=7)
    got = load(two_runs, step=7, run="exp_b", index=0)
    assert got.trajectory["run"] == "exp_b" and got.trajectory["step"] == 7 and got.position == (0, 8)
    assert load(two_runs, step=7, run="exp_a").trajectory["n_malformed_calls"] == 1  # exp_a rots from step 6
    with pytest.raises(TrajlabError, match="no run 'exp_c'"):
        load(two_runs, step=7, run="exp_c")


def test_sft_pool_from_chosen_runs(two_runs: Path, tmp_path: Path) -> None:
    from trajlab.curate import PoolOptions, build_sft_pool

    build_sft_pool(two_runs, tmp_path / "pool", PoolOptions(ratio="1:1:0", val_fraction=0.0, runs=["exp_b"]),
                   progress=False)
    runs = dict(pl.read_parquet(two_runs / "trajectories.parquet").select("trajectory_id", "run").iter_rows())
    ids = pl.concat([pl.read_parquet(tmp_path / "pool" / f"{k}.parquet").select("trajectory_id")
                     for k in ("positive", "error_demo")])["trajectory_id"].to_list()
    assert ids and {runs[i] for i in ids} == {"exp_b"}
    assert json.loads((tmp_path / "pool" / "manifest.json").read_text())["options"]["runs"] == ["exp_b"]
    with pytest.raises(Exception, match="no run 'nope'"):
        build_sft_pool(two_runs, tmp_path / "pool2", PoolOptions(ratio="1:1:0", runs=["nope"]), progress=False)


def test_run_steps_view_keeps_runs_apart(two_runs: Path) -> None:
    from trajlab.query import sql

    t = sql(two_runs, "SELECT run, step, malformed_rate, rolling_rate, cumulative_rate FROM run_steps "
                      "WHERE split = 'train' AND step IN (6, 9) ORDER BY run, step").to_pylist()
    assert [(r["run"], r["step"], r["malformed_rate"]) for r in t] == [
        ("exp_a", 6, 0.5), ("exp_a", 9, 0.5), ("exp_b", 6, 0.0), ("exp_b", 9, 0.5)]
    assert t[0]["rolling_rate"] == pytest.approx(0.5 / 3) and t[0]["cumulative_rate"] == pytest.approx(0.5 / 6)


def test_report_compares_the_runs(two_runs: Path, tmp_path: Path) -> None:
    from trajlab.report import ReportOptions, report

    html = report(two_runs, tmp_path / "r.html").read_text(encoding="utf-8")
    section = html[html.index('<h2 id="runs">'):html.index('<h2 id="overview">')]
    assert 'data-run="exp_a"' in section and 'data-run="exp_b"' in section
    assert 'data-chart="runs"' in section and "Categories by run" in section
    assert "step 6" in section and "step 9" in section  # each run's own warning step
    # the per-step sections show one run (the largest that warned), named in their heading
    assert 'Run overview: <code>exp_' in html
    only_b = report(two_runs, tmp_path / "b.html", ReportOptions(run="exp_b")).read_text(encoding="utf-8")
    assert "Run overview: <code>exp_b</code>" in only_b and "Early warning at step 9" in only_b

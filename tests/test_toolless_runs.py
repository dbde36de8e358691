"""Tool-less and think/answer runs (issue 22, items 1-3): truncation and final answers that mean what they say,
prompt groups you can trust, and a summary that says what was not evaluated. Fixtures are shaped on real
published dumps (:mod:`helpers.toolless_runs`); the numbers asserted are the ones written down there."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers.toolless_runs import make_gsm8k_runs, make_svg_run, make_thinking_template_run

from trajlab.cli import main
from trajlab.ending import END_REASONS, output_ending
from trajlab.scan import ScanOptions, scan
from trajlab.scan.engines import ENGINES
from trajlab.tables import SCAN_TABLES
from trajlab.toolcalls.think import repair_think


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("toolless")
    make_svg_run(root)
    make_gsm8k_runs(root)
    make_thinking_template_run(root)
    return root


@pytest.fixture(scope="module")
def scanned(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One scan per engine; every table byte-identical; the ``auto`` output."""
    outs = {}
    for engine in ENGINES:
        out = tmp_path_factory.mktemp(f"out_{engine}")
        scan([runs], out, ScanOptions(incremental=False, engine=engine, jobs=1), progress=False)
        outs[engine] = {n: (out / f"{n}.parquet").read_bytes() for n in SCAN_TABLES}, out
    for engine in ENGINES[1:]:
        assert outs[engine][0] == outs[ENGINES[0]][0], engine
    return outs["auto"][1]


def per_run(out: Path) -> dict[str, dict[str, object]]:
    t = pl.read_parquet(out / "trajectories.parquet")
    agg = t.group_by("run").agg(pl.len().alias("n"), pl.col("truncated").sum().alias("truncated"),
                                pl.col("has_final_answer").sum().alias("final"))
    reasons = t.drop_nulls("end_reason").group_by("run", "end_reason").len()
    got: dict[str, dict[str, object]] = {r["run"]: dict(r) for r in agg.iter_rows(named=True)}
    for run, reason, n in reasons.iter_rows():
        got[run][reason] = n
    return got


def test_truncated_only_inside_a_structure(scanned: Path) -> None:
    got = per_run(scanned)
    # SVG: per step 16 = 10 clean + 3 unclosed <think> before a complete answer + 1 reopened + 2 cut
    assert got["svg_run"] == {"run": "svg_run", "n": 32, "truncated": 4, "final": 28, "open_think": 2,
                              "open_answer": 2}
    # GSM8K with <think>: per step 2 prompts × (2 answers, 1 cut in the reasoning, 1 nothing after </think>)
    assert got["gsm8k_think"] == {"run": "gsm8k_think", "n": 16, "truncated": 4, "final": 8, "open_think": 4,
                                  "empty_answer": 4}
    assert got["gsm8k_plain"] == {"run": "gsm8k_plain", "n": 16, "truncated": 0, "final": 16}
    # the prompt opened <think>: an output without </think> never left the reasoning, unless an answer follows
    # (a short one: it stopped on its own inside the reasoning, far from the run's longest output)
    assert got["gsm8k_open_think"] == {"run": "gsm8k_open_think", "n": 8, "truncated": 0, "final": 6,
                                       "stopped_in_think": 2}


def test_unbalanced_think_is_its_own_finding(scanned: Path) -> None:
    f = pl.read_parquet(scanned / "findings.parquet")
    t = pl.read_parquet(scanned / "trajectories.parquet").select("trajectory_id", "output", "has_final_answer")
    ub = f.filter(pl.col("category") == "unbalanced_think").join(t, on="trajectory_id")
    assert ub.group_by("rule_id").len().sort("rule_id").rows() == [
        ("none/unbalanced_think/reopened", 2), ("none/unbalanced_think/unclosed", 6)]
    assert ub["has_final_answer"].all() and set(ub["severity"]) == {"warning"}
    # each points at the <think> that is unbalanced, and says the repair
    for r in ub.iter_rows(named=True):
        assert r["output"][r["char_start"]:r["char_end"]] == "<think>"
        assert "Repair:" in r["message"]


def test_repair_of_an_unclosed_think() -> None:
    assert repair_think("<think>\nA\n<answer>\nB\n</answer>") == "<think>\nA\n</think>\n<answer>\nB\n</answer>"
    assert repair_think("<think>A<think>B</think><answer>x</answer>") == "<think>AB</think><answer>x</answer>"
    assert repair_think("<think>\ncut in the middle") is None
    assert repair_think("<think>a</think><answer>x</answer>") is None


def test_ending_reasons_for_calls_and_tool_blocks() -> None:
    assert output_ending("x", n_calls=1, truncated_call=True, final_role="assistant").reason == "open_call"
    e = output_ending("<think>\nplan", n_calls=1, truncated_call=False, final_role="assistant")
    assert (e.truncated, e.has_final_answer, e.reason) == (False, False, "call_pending")
    assert output_ending("a", n_calls=1, truncated_call=False, final_role="tool",
                         final_text="\nuser\n<tool_response>\nok").reason == "open_tool_response"
    assert output_ending(None, n_calls=0, truncated_call=False, final_role=None).reason == "no_assistant_turn"
    # gpt-oss: the last message on the analysis channel (special tokens stripped or kept) is the reasoning, cut
    cut = "assistantanalysisI have what I need.assistantfinalIt rains.assistantanalysisLet me check"
    assert output_ending(cut, n_calls=0, truncated_call=False, final_role="assistant",
                         tool_format="gpt_oss").reason == "open_think"
    done = "<|channel|>analysis<|message|>ok<|end|><|start|>assistant<|channel|>final<|message|>It rains."
    assert output_ending(done, n_calls=0, truncated_call=False, final_role="assistant",
                         tool_format="gpt_oss").has_final_answer
    assert output_ending(cut, n_calls=0, truncated_call=False, final_role="assistant").has_final_answer  # not harmony
    assert set(END_REASONS) >= {"open_call", "open_think", "open_answer", "empty_answer", "call_pending"}


def test_summary_of_a_toolless_run_says_what_was_not_evaluated(runs: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["scan", str(runs / "svg_run"), "-o", str(out), "--no-progress", "--fail-above", "0.2"]) == 0
    cap = capsys.readouterr()
    text = " ".join((cap.out + cap.err).split())
    assert "no step rises significantly" not in text and "pass --tools" not in text
    assert "early warning: not evaluated" in text and "tool-less run" in text
    assert "--fail-above: not evaluated" in text
    assert "open_think 2" in text and "open_answer 2" in text
    assert main(["scan", str(runs / "svg_run"), "-o", str(out), "--json", "--fail-above", "0.2"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["fail_above"]["evaluated"] is False and s["fail_above"]["tripped"] == []
    assert (s["calls"], s["trajectories_with_tools"], s["truncated"]) == (0, 0, 4)
    assert s["final_answer_rate"] == 28 / 32
    assert s["end_reasons"] == {"open_answer": 2, "open_think": 2}
    assert [g["kind"] for g in s["grouping"]] == ["one_group_per_step"]
    assert "image" in s["grouping"][0]["message"] and "--rollout-n" in s["grouping"][0]["message"]


def test_rollout_n_forms_the_groups(runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    assert main(["scan", str(runs / "svg_run"), "-o", str(out), "--json", "--rollout-n", "8"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["grouping"] == []
    t = pl.read_parquet(out / "trajectories.parquet")
    sizes = t.group_by("group_id").len()["len"].to_list()
    assert len(sizes) == 4 and set(sizes) == {8}  # 2 steps × 2 images × 8 samples
    assert json.loads((out / "manifest.json").read_text())["options"]["rollout_n"] == 8
    # a wrong n on a text-only run: groups of consecutive records that hold different prompts are named
    assert main(["scan", str(runs / "gsm8k_plain"), "-o", str(tmp_path / "g"), "--json", "--rollout-n", "3"]) == 0
    kinds = [g["kind"] for g in json.loads(capsys.readouterr().out)["grouping"]]
    assert "rollout_n_mixes_prompts" in kinds
    assert main(["scan", str(runs / "svg_run"), "-o", str(tmp_path / "z"), "--rollout-n", "0"]) == 2


def test_fail_above_with_declared_tools_but_no_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Tools declared, never called: there is no rate to judge, and that is not a pass (exit 2, the right words)."""
    from helpers.verl_lines import qwen35_prompt

    d = tmp_path / "run"
    d.mkdir()
    line = {"input": qwen35_prompt("q"), "output": "I will not call anything.", "score": 0.0, "step": 1}
    (d / "1.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert main(["scan", str(d), "-o", str(tmp_path / "o"), "--no-progress", "--fail-above", "0.2"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "declare tools but no output makes a call" in err and "Traceback" not in err


def test_pool_of_a_toolless_run_uses_rollout_groups_and_no_tool_hints(runs: Path, tmp_path: Path) -> None:
    from trajlab.curate import PoolOptions, build_sft_pool

    out = tmp_path / "o"
    scan([runs / "svg_run"], out, ScanOptions(jobs=1), progress=False)
    base = dict(ratio="5:0:2", min_score="any", val_fraction=0.25, seed=0)
    # without --rollout-n: one group per step (identical inputs), so the per-group cap keeps 2 positives a step
    # and no prompt can be held out; the card says why
    plain = build_sft_pool(out, tmp_path / "p0", PoolOptions(**base), progress=False)
    card0 = (tmp_path / "p0" / "README.md").read_text()
    assert "one prompt group" in card0 and "--rollout-n" in card0
    # (legacy text groups also span steps: the whole run is one group, capped at 2)
    assert plain.candidates["positive"] == 2 and plain.val_rows == 0
    s = build_sft_pool(out, tmp_path / "p1", PoolOptions(**base, rollout_n=8), progress=False)
    # per step: records 1-8 (8 clean) and 9-16 (2 clean, 6 failed) are the groups; 2 positives each
    assert s.candidates["positive"] == 8
    val = pl.read_parquet(tmp_path / "p1" / "val.parquet")
    assert val.height > 0  # groups are prompts now: some are held out
    hints = pl.read_parquet(tmp_path / "p1" / "hint.parquet")
    assert hints.height == 4  # the kept positives of the groups with failures (the second group of each step)
    text = json.dumps(hints.to_dicts(), default=str)
    assert "<tool_call>" not in text and "declared tools" not in text and "no tools declared" not in text
    card = (tmp_path / "p1" / "README.md").read_text()
    assert "tool-less prompts" in card and "--rollout-n 8" in card and "one prompt group" not in card


def test_report_of_a_toolless_run(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    scan([runs / "svg_run"], out, ScanOptions(jobs=1), progress=False)
    dest = tmp_path / "r.html"
    assert main(["report", str(out), "-o", str(dest)]) == 0
    html = dest.read_text(encoding="utf-8")
    assert "Early warning not evaluated" in html and "No early warning" not in html
    assert "No call used a function name outside the declared tools" not in html
    assert "Prompt groups." in html and "--rollout-n" in html


def test_group_sizes_that_differ_across_steps(tmp_path: Path) -> None:
    """A prompt dumped twice in a step (two batches) merges two text groups: sizes 8 among 4s, in two steps."""
    from trajlab.groups import grouping_warnings

    rows = []
    for step in (1, 2, 3):
        for prompt, n in (("A", 8 if step > 1 else 4), ("B", 4)):
            rows += [{"run": "r", "split": "train", "step": step, "group_id": "p:" + prompt, "input": prompt}] * n
    got = grouping_warnings(pl.DataFrame(rows))
    assert [(g["kind"], g["usual_size"], g["odd_groups"], g["odd_sizes"]) for g in got] == [
        ("group_sizes_differ", 4, 2, [8])]


def test_show_says_why_an_output_is_truncated(scanned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = pl.read_parquet(scanned / "trajectories.parquet")
    cut = t.filter((pl.col("run") == "svg_run") & (pl.col("end_reason") == "open_answer"))["trajectory_id"][0]
    assert main(["show", str(scanned), cut]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "an answer block (<answer>) is opened and never closed" in text
    whole = t.filter(pl.col("has_final_answer") & (pl.col("run") == "svg_run"))["trajectory_id"][0]
    assert main(["show", str(scanned), whole]) == 0
    assert "truncated:" not in capsys.readouterr().out


def test_pool_card_words_for_an_empty_val_and_the_achieved_mix() -> None:
    from trajlab.curate.card import val_prompts_line
    from trajlab.curate.mix import achieved_ratio

    kinds = {"positive": {"val": 0}, "error_demo": {"val": 0}, "hint": {"val": 0}}
    assert val_prompts_line({"split": {"val_prompts": 1}, "kinds": kinds}) == (
        "1 held-out prompt, but none of the selected samples is from them: `val.parquet` is empty")
    assert val_prompts_line({"split": {"val_prompts": 0}, "kinds": kinds}) == (
        "no validation prompts (`val.parquet` is empty)")
    kinds["hint"]["val"] = 3
    assert val_prompts_line({"split": {"val_prompts": 2}, "kinds": kinds}) == "2 validation prompts"
    assert achieved_ratio({"positive": 12, "error_demo": 0, "hint": 12}, (5, 0, 2)) == "1:0:1 (12:0:12 samples)"
    assert achieved_ratio({"positive": 50, "error_demo": 21, "hint": 29}, (5, 3, 2)) == "2.38:1:1.38 (50:21:29 samples)"


def test_hostile_answer_and_think_tags_stay_linear() -> None:
    """200,000 unclosed openers: one pass each, not one pass per opener (the regex reading was quadratic)."""
    import time

    from trajlab.model import TurnContext
    from trajlab.toolcalls import analyze_turn

    t0 = time.perf_counter()
    e = output_ending("<think>" + "<answer>x" * 200_000, n_calls=0, truncated_call=False, final_role="assistant")
    assert e.reason == "open_think"
    assert output_ending("<answer>" * 200_000, n_calls=0, truncated_call=False,
                         final_role="assistant").reason == "open_answer"
    ta = analyze_turn("<think>" * 50_000 + "</think><answer>1</answer>", tool_format="none", tools=None,
                      context=TurnContext())
    assert [(f.category, f.start) for f in ta.findings] == [("unbalanced_think", 7)]  # one per block
    assert repair_think("<think>" * 50_000 + "</think><answer>1</answer>") == "<think></think><answer>1</answer>"
    assert time.perf_counter() - t0 < 20  # (seconds on a loaded 2-core machine; quadratic took hours)


def test_mixed_scan_names_the_toolless_run_and_no_tools_hint_for_it(runs: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A tool run with schemas next to a tool-less run: the tool-less run is 'not evaluated', and --tools is not
    suggested (every call already had its schema)."""
    from helpers.scan_inputs import make_messy

    tool_run = make_messy(tmp_path / "tools") / "rollout"
    assert main(["scan", str(tool_run / "1.jsonl"), str(runs / "svg_run"), "-o", str(tmp_path / "o"),
                 "--no-progress"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "not evaluated for svg_run" in text and "pass --tools" not in text


def test_identical_inputs_that_mention_an_image() -> None:
    from trajlab.groups import grouping_warnings

    rows = []
    for step in (1, 2):
        for prompt in ("<image>\nDescribe the picture.", "What is 2 + 2?"):
            rows += [{"run": "vl", "split": "train", "step": step, "group_id": "p:" + prompt[:3], "input": prompt}] * 8
    got = grouping_warnings(pl.DataFrame(rows))
    assert [(g["kind"], g["groups"]) for g in got] == [("identical_vision_inputs", 2)]
    # a uid run is grouped by verl's uid: identical text is not suspicious there
    assert grouping_warnings(pl.DataFrame([{**r, "group_id": "u" + str(i // 8)} for i, r in enumerate(rows)])) == []

"""trajlab's reward plugin run by verl 0.9.1's own code, in the verl venv (tests/helpers/verl_reward_check.py).

verl's loader (``get_custom_reward_fn``) reads a config written as a user writes it; the reward-loop naive manager,
the legacy naive and batch managers and trajlab's own reward-loop manager score a ``DataProto`` whose responses are
real Qwen3 token ids of multi-turn trajectories of the sample run (they decode back to the dump's exact text).
Kimi-K2's markers are special tokens: its sample is tokenised with Qwen3's BPE plus Kimi's special tokens added (a
real ``tokenizers`` tokenizer; no offline Kimi tokenizer exists), and trajlab's manager must agree with scan's
reading of the un-stripped text while verl's stripped decode loses the markers.
The checkout reaches the venv through ``PYTHONPATH`` (nothing is installed into the shared venv).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.harmony_kept import HARMONY_SPECIALS, kept_records, strip_specials
from helpers.verl_venv import SKIP, TASK, run_helper, verl_python

from trajlab.ingest.verl_jsonl import to_trajectory
from trajlab.trajectory import analyze_trajectory
from trajlab.verl.exact import EXACT_KEYS
from trajlab.verl.reward import compute_score, reward_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
HELPER = ROOT / "tests" / "helpers" / "verl_reward_check.py"
KIMI_SPECIALS = ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
                 "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                 "<|tool_call_argument_begin|>", "<|tool_call_end|>"]


def _records(run: str, steps: tuple[int, ...]) -> list[dict]:
    return [json.loads(line) for s in steps
            for line in (SAMPLE / run / "rollout" / f"{s}.jsonl").read_text(encoding="utf-8").splitlines()]


def _scan_verdict(rec: dict, line: int) -> tuple[int, int]:
    """What scan reads in this dump line (ingest + the trajectory classifier, as the records engine runs them)."""
    traj, _ = to_trajectory(rec, source_path="x.jsonl", line=line, file_step=None, file_split="train")
    assert traj is not None
    an = analyze_trajectory(traj)
    return an.n_calls, an.n_malformed


@pytest.fixture(scope="module")
def verl_results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    py = verl_python()
    if py is None:
        pytest.skip(SKIP)
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir

    d = tmp_path_factory.mktemp("verl_reward")
    (d / "task.py").write_text(TASK)
    tools = [{"type": "function", "function": {"name": n, "description": "", "parameters": {
        "type": "object", "properties": {p: {"type": "array", "items": {"type": "string"}}}, "required": [p]}}}
        for n, p in (("search_web", "queries"), ("fetch_web", "urls"))]
    (d / "tools.json").write_text(json.dumps(tools))
    gpt_oss = [r for s in (29, 30) for r in kept_records(s)]
    assert [strip_specials(r["output"]) for r in gpt_oss] == [r["output"] for r in _records("gpt_oss_run", (29, 30))]
    # (steps 60 and 140: clean calls and malformed ones; step 120's broken calls are warnings, which run)
    spec = {"qwen3": _records("qwen35_xml_run", (60, 140))[4:], "kimi": _records("kimi_k2_run", (28, 30)),
            "gpt_oss": gpt_oss, "special_families": {"kimi": KIMI_SPECIALS, "gpt_oss": HARMONY_SPECIALS},
            "task_file": str(d / "task.py"), "tools_file": str(d / "tools.json"),
            "tokenizer_dir": str(qwen3_tokenizer_dir())}
    out = run_helper(py, HELPER, spec, d)
    out["_spec"] = spec
    return out


@pytest.mark.slow
@pytest.mark.verl
def test_verl_managers_score_real_qwen3_token_ids(verl_results: dict) -> None:
    r, spec = verl_results, verl_results["_spec"]
    recs = spec["qwen3"]
    assert all(r["qwen3_decode_equal"]), "the token ids must decode to exactly the dump's text"
    # nested settings reach the plugin as OmegaConf containers through verl's config
    kw = {"task_fn": spec["task_file"], "tools": spec["tools_file"], "mode": "additive",
          "weights": {"valid_call": 0.15}, "groups": {"fmt_names_only": ["garbled_function_name"]}}
    keys = set(reward_keys(**kw))
    assert "fmt_names_only" in keys
    expected = [compute_score("searchqa", rec["output"], rec["gts"], {}, **kw) for rec in recs]
    assert any(e["malformed_calls"] > 0 for e in expected) and any(e["task_score"] == 1.0 for e in expected)
    for name in ("direct", "loop_naive"):
        got = r[name]
        assert all(set(g) - {"reward_score"} == keys for g in got), name
        for g, e in zip(got, expected, strict=True):
            assert {k: g[k] for k in keys} == pytest.approx(e), name
    assert [g["reward_score"] for g in r["loop_naive"]] == pytest.approx([e["score"] for e in expected])
    for name in ("legacy_naive", "legacy_batch"):
        assert set(r[name]["extra"]) == keys, name
        assert r[name]["rewards"] == pytest.approx([e["score"] for e in expected], abs=1e-6), name
        assert r[name]["extra"]["malformed_calls"] == [e["malformed_calls"] for e in expected]
    # verl's GDPO advantage takes task_score and format_reward as its reward components
    assert r["gdpo"]["finite"] and r["gdpo"]["shape"][0] == len(recs) and r["gdpo"]["rows_with_advantage"] > 0
    # trajlab's manager also reads the prompt (tool schemas, the "NO suffix" rule): it judges as scan does
    for i, (g, rec) in enumerate(zip(r["trajlab_manager_qwen3"], recs, strict=True)):
        assert set(g) == keys | set(EXACT_KEYS)  # (no trajlab agent loop here: judged from text)
        assert g["exact_tokens"] == 0.0
        assert (g["tool_calls"], g["malformed_calls"]) == _scan_verdict(rec, i + 1)
        assert g["task_score"] == expected[i]["task_score"]


@pytest.mark.slow
@pytest.mark.verl
@pytest.mark.parametrize("family, marker", [("kimi", "<|tool_call_begin|>"), ("gpt_oss", "<|channel|>")])
def test_special_token_manager_judges_as_scan_reads_the_unstripped_text(verl_results: dict, family: str,
                                                                        marker: str) -> None:
    r, recs = verl_results, verl_results["_spec"][family]
    assert all(r[f"{family}_decode_kept_equal"])  # the ids are the model's text, special tokens included
    assert all(marker not in s for s in r[f"{family}_stripped"])  # what verl's own managers decode
    scan = [_scan_verdict(rec, i + 1) for i, rec in enumerate(recs)]
    assert 0 < sum(m for _, m in scan) < sum(c for c, _ in scan)  # valid and malformed calls
    got = r[f"trajlab_manager_{family}"]
    assert [(g["tool_calls"], g["malformed_calls"]) for g in got] == scan
    assert all(g["classified"] == 1.0 and g["plugin_errors"] == 0.0 for g in got)
    if family == "kimi":  # judged on the stripped text, Kimi's valid calls vanish or look broken
        assert [(g["tool_calls"], g["malformed_calls"]) for g in r["loop_naive_kimi"]] != scan

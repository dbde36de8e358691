"""Who wrote a tool turn in verl's stripped text (``trajlab.provenance``): a realistic multi-turn Hermes dump
(GSM8K calculator tool, verl 0.9 separators) with turns the model wrote itself, through scan (both engines)
and through the reward plugin's ``compute_score``."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from trajlab.provenance import env_turns_from_num_turns

TOOL = {"type": "function", "function": {
    "name": "calc_gsm8k_reward",
    "description": "A tool for calculating the reward of gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed "
                   "answer is incorrect or not correctly parsed)",
    "parameters": {"type": "object", "properties": {"answer": {
        "type": "string", "description": "The model's answer to the GSM8K math problem, must be a digits"}},
        "required": ["answer"]}}}


def prompt(question: str, thinking: bool = True) -> str:
    gen = "assistant\n" if thinking else "assistant\n<think>\n\n</think>\n\n"
    return ("system\nYou are a math expert. You are given a question and you need to solve it step by step. "
            "Reasoning step by step before any tool call. You should use the `calc_gsm8k_reward` tool after step by "
            "step solving the question, before generate final answer at least once and refine your answer if "
            "necessary. Put your final answer in the format of `#### <answer>`.\n\n# Tools\n\nYou may call one or "
            "more functions to assist with the user query.\n\nYou are provided with function signatures within "
            f"<tools></tools> XML tags:\n<tools>\n{json.dumps(TOOL)}\n</tools>\n\nFor each function call, return a "
            "json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>\n'
            f"user\n{question} Let's think step by step and output the final answer after `####`.\n{gen}")


def call(answer: str) -> str:
    return f'<tool_call>\n{{"name": "calc_gsm8k_reward", "arguments": {{"answer": "{answer}"}}}}\n</tool_call>'


def env(text: str, thinking: bool = True) -> str:  # what verl 0.9's tool agent loop appends (stripped)
    return f"\nuser\n<tool_response>\n{text}\n</tool_response>\nassistant\n" + ("" if thinking else "<think>\n\n</think>\n\n")


Q = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips " \
    "did Natalia sell altogether in April and May?"
REWARD1 = "Current parsed answer='72' reward=1.0"

CASES: dict[str, tuple[str, str]] = {
    # a clean two-turn rollout: call, the environment's reply, the answer
    "clean": (prompt(Q), "<think>\n48 / 2 = 24, 48 + 24 = 72\n</think>\n\n" + call("72") + env(REWARD1)
              + "<think>\n\n</think>\n\n#### 72"),
    # no call, then the model "confirms" its own reward in an invented tool turn
    "self_reward": (prompt(Q), "48 + 24 = 72\n\n#### 72" + env(REWARD1) + "The reward is 1.0, so #### 72"),
    # a call, then a bare user turn the model wrote, with a degenerate loop
    "user_line": (prompt(Q), "48 + 24 = 72\n" + call("72") + "\nuser\n" + "的" * 300),
    # two tool responses for one call
    "two_responses": (prompt(Q), call("72") + "\nuser\n<tool_response>\n" + REWARD1
                      + "\n</tool_response>\n<tool_response>\nCurrent parsed answer='72' reward=1.0\n</tool_response>"
                        "\nassistant\n#### 72"),
    # thinking off: the environment writes 'assistant\n<think>\n\n</think>\n\n'; this turn closes bare
    "bare_header": (prompt(Q, thinking=False), call("72") + env(REWARD1, thinking=True) + "#### 72"),
    # the same text with the environment's own header: not flagged
    "real_header": (prompt(Q, thinking=False), call("72") + env(REWARD1, thinking=False) + "#### 72"),
}
FLAGGED = {"self_reward": "no_call_answered", "user_line": "role_line", "two_responses": "extra_response",
           "bare_header": "generation_prompt"}


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("prov") / "rollout"
    d.mkdir()
    with open(d / "3.jsonl", "w", encoding="utf-8") as f:
        for i, (inp, out) in enumerate(CASES.values()):
            f.write(json.dumps({"input": inp, "output": out, "gts": "72", "score": 1.0, "step": 3,
                                "uid": f"u{i}_0_0"}, ensure_ascii=False) + "\n")
    return d


@pytest.mark.parametrize("engine", ["records", "columnar"])
def test_scan_flags_model_written_turns(dump: Path, tmp_path: Path, engine: str) -> None:
    from trajlab.scan import ScanOptions, scan

    out = tmp_path / engine
    scan([dump], out, ScanOptions(incremental=False, engine=engine, jobs=1), progress=False)
    traj = pl.read_parquet(out / "trajectories.parquet").with_row_index("i")
    f = pl.read_parquet(out / "findings.parquet").filter(pl.col("category") == "fabricated_tool_response")
    got = {}
    for name, tid in zip(CASES, traj["trajectory_id"], strict=True):
        rows = f.filter(pl.col("trajectory_id") == tid)
        got[name] = sorted(r.split("/")[-1] for r in rows["rule_id"])
    assert got == {n: ([FLAGGED[n]] if n in FLAGGED else []) for n in CASES}
    msg = f.filter(pl.col("rule_id").str.ends_with("role_line"))["message"][0]
    assert "degenerate loop" in msg and "'的' x 300" in msg
    msg = f.filter(pl.col("rule_id").str.ends_with("no_call_answered"))["message"][0]
    assert "writes a tool turn only to answer a parsed call" in msg


def test_engines_agree(dump: Path, tmp_path: Path) -> None:
    from trajlab.scan import ScanOptions, scan

    for e in ("records", "columnar"):
        scan([dump], tmp_path / e, ScanOptions(incremental=False, engine=e, jobs=1), progress=False)
    for t in ("trajectories", "turns", "calls", "findings"):
        assert (tmp_path / "records" / f"{t}.parquet").read_bytes() == (tmp_path / "columnar" / f"{t}.parquet").read_bytes(), t


def test_num_turns() -> None:
    assert [env_turns_from_num_turns(n) for n in (2, 4, 5, 1, None, "x", True)] == [0, 1, 1, None, None, None, None]


def _score(out: str, inp: str, **info: object) -> float:
    from trajlab.verl.reward import compute_score

    return compute_score("openai/gsm8k", out, "72", {"raw_prompt": inp, **info}, task_fn="none")["score"]


def test_reward_does_not_pay_invented_turns() -> None:
    inp = prompt(Q)
    cut = "48 + 24 = 72\n" + call("72")
    invented = cut + env(REWARD1) + "So the answer is 72.\n" + call("72") + env(REWARD1) + "#### 72"
    # text alone cannot tell this invented turn from a real one; verl's num_turns can (one generation: 2)
    assert _score(invented, inp, num_turns=2) < _score(cut, inp, num_turns=2)
    assert _score(invented, inp, num_turns=6) > _score(cut, inp, num_turns=2)  # when the turns were real
    # decidable from text alone: a tool turn answering no call, a bare role line after a call
    assert _score("#### 72" + env(REWARD1) + "#### 72", inp) < _score("#### 72", inp)
    assert _score(cut + "\nuser\nThanks! Now solve another one.\nassistant\n" + call("5"), inp) < _score(cut, inp)


def test_manager_path_reads_the_stop_token() -> None:
    """What ``TrajlabRewardManager.run_single`` hands the scorer: the response decoded with special tokens kept
    (``judged_text``) and verl's ``num_turns``. A real tool turn follows the generation's ``<|im_end|>``; one the
    model wrote inside its generation cannot (``<|im_end|>`` stops generation)."""
    from trajlab.verl.reward import scorer_for

    sc, _ = scorer_for({"task_fn": "none"})
    inp = prompt(Q)
    cut = "48 + 24 = 72\n" + call("72")
    real = (cut + "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + REWARD1 + "\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n#### 72<|im_end|>")
    typed = (cut + "\n<|im_start|>user\n<tool_response>\n" + REWARD1 + "\n</tool_response><|im_end|>\n"
             "<|im_start|>assistant\n#### 72<|im_end|>")

    def score(kept: str, num_turns: int | None) -> float:
        stripped = kept.replace("<|im_end|>", "").replace("<|im_start|>", "")
        return sc.score(data_source="openai/gsm8k", solution_str=stripped, ground_truth="72",
                        extra_info={"num_turns": num_turns}, judged_text=kept, prompt=inp)["score"]

    assert score(typed, None) < score(cut + "<|im_end|>", 2) <= score(real, 4)


def test_columnar_prefilter_matches_the_judge() -> None:
    """The columnar engine's whole-column prefilter (``model_written_rows(prefilter=True)``) picks exactly the
    rollouts the judge flags when it reads every rollout (the reference), over random mixes of the cases' pieces
    and random counts of the calls verl runs per assistant turn."""
    import random

    from trajlab.ingest.turns import split_turns_frame
    from trajlab.scan.columnar import model_written_rows

    rnd = random.Random(7)
    pieces = [call("72"), "48 + 24 = 72", env(REWARD1), env(REWARD1, thinking=False), "#### 72",
              "\nuser\n<tool_response>\nx\n</tool_response>\n<tool_response>\ny\n</tool_response>\nassistant\n",
              "<|im_end|>\n<|im_start|>user\n<tool_response>\nz\n</tool_response>\n<|im_start|>assistant\n",
              "\nuser\n<tool_response>\nw\n</tool_response>\n<|im_start|>assistant\n"]
    outputs = ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 6))) for _ in range(600)]
    prompts = [prompt(Q, thinking=rnd.random() < 0.5) for _ in outputs]
    fast = pl.DataFrame({"row": range(len(outputs)), "input": prompts, "output": outputs},
                        schema_overrides={"row": pl.UInt32})
    turns, _ = split_turns_frame(fast.select("row", "output"))
    stats = turns.filter(pl.col("role") == "assistant").select(
        "row", "turn_index", pl.Series("n_exec", [rnd.randint(0, 2) for _ in range(
            turns.filter(pl.col("role") == "assistant").height)], pl.Int64))
    fast_rows = model_written_rows(fast, turns, stats).to_list()
    assert fast_rows == model_written_rows(fast, turns, stats, prefilter=False).to_list()
    assert 30 < len(fast_rows) < len(outputs) - 30  # both kinds of rollout are in the mix

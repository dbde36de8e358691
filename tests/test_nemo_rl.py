"""NeMo-RL train-data dumps: ingest from exact token ids, ``rollout_tokens``, the per-step exact-token figures and
``fabricated_tool_response`` (exact tokens, OpenAI messages, verl-tool records).

Fixtures: two real rows cut from the published step (``tests/data/nemo_rl``), and synthetic rows encoded with the
real offline Qwen3.5 tokenizer for every branch (fabricated turn, a generated role header with no call, padding,
several samples per line, a damaged sample, a known train-inference mismatch).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import polars as pl
import pytest

from trajlab.errors import InputError
from trajlab.ingest import detect_format
from trajlab.scan import ScanOptions, scan

DATA = Path(__file__).parent / "data" / "nemo_rl" / "train_data_step1.jsonl"
PAD = 248044  # Qwen3.5's <|endoftext|>, NeMo-RL's pad id in the real file

@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    from trajlab.ingest import token_text

    return token_text.load("qwen3.5")


def _real_rows() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines()]


def _scan(tmp_path: Path, rows: list[dict], name: str = "train_data_step3.jsonl", **kw) -> Path:  # type: ignore[no-untyped-def]
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    (d / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    scan([d], out, ScanOptions(jobs=1, **kw))
    return out


def _sample(tok, segments: list[tuple[str, bool]], *, gen_lp: float = -0.25, delta: float = 0.0,  # type: ignore[no-untyped-def]
            pad: int = 0, reward: float = 1.0) -> dict:
    """One synthetic sample: ``segments`` of (text, generated); every generated token gets inference log-prob
    ``gen_lp`` and training log-prob ``gen_lp + delta``; ``pad`` pad ids after the sample."""
    ids: list[int] = []
    mask: list[int] = []
    for text, gen in segments:
        enc = tok.encode(text, add_special_tokens=False)
        ids += enc
        mask += [int(gen)] * len(enc)
    n = len(ids)
    g = [gen_lp if m else 0.0 for m in mask]
    p = [0.0] + [(gen_lp + delta) if m else -1.5 for m in mask[1:]]
    return {
        "content": [[t for t, _ in segments]], "rewards": [reward], "input_lengths": [n],
        "token_ids": [ids + [PAD] * pad], "token_loss_mask": [mask + [0] * pad], "sample_loss_mask": [1.0],
        "advantages": [[0.5] * (n + pad)], "generation_logprobs": [g + [0.0] * pad],
        "prev_logprobs": [p + [0.0] * pad], "idx": 0,
    }


PROMPT = ("<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
          '{"type": "function", "function": {"name": "search", "description": "Search.", "parameters": '
          '{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}\n</tools>\n\n'
          "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
          "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n"
          "</tool_call><|im_end|>\n<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n<think>\n")
CALL = "<tool_call>\n<function=search>\n<parameter=query>\nHamlet author\n</parameter>\n</function>\n</tool_call>"
ENV = "<|im_end|>\n<|im_start|>user\n<tool_response>\nDoc 1: Hamlet by Shakespeare\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
FABRICATED = ("<|im_end|>\n<|im_start|>user\n<tool_response>\nDoc 1: Hamlet was written by Marlowe\n</tool_response>"
              "<|im_end|>\n<|im_start|>assistant\n<think>\nMarlowe.\n</think>\n\n<answer>Marlowe</answer><|im_end|>")


# ------------------------------------------------------------------------------------------------- real rows
@pytest.mark.slow
def test_real_rows_detected_and_read_from_ids(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    assert detect_format(DATA) == ("nemo_rl_jsonl", "")
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(DATA, d / DATA.name)
    out = tmp_path / "out"
    s = scan([d], out, ScanOptions(jobs=1, engine="columnar"))  # columnar asked: this format falls back, and says so
    assert s.trajectories == 2 and s.ingest_errors == 0
    assert s.engines[0]["engine"] == "records" and "nemo_rl_jsonl" in s.engines[0]["fallback"]
    traj = pl.read_parquet(out / "trajectories.parquet").sort("source_line")
    turns = pl.read_parquet(out / "turns.parquet")
    toks = pl.read_parquet(out / "rollout_tokens.parquet")
    rows = _real_rows()
    for r, t in zip(rows, traj.iter_rows(named=True), strict=True):
        n = r["input_lengths"][0]
        ids, mask = r["token_ids"][0][:n], r["token_loss_mask"][0][:n]
        assert t["step"] == 1 and t["split"] == "train" and t["source_format"] == "nemo_rl_jsonl"
        assert t["score"] == pytest.approx(r["rewards"][0])
        assert t["tool_format"] == "qwen3_coder" and t["schema_checked"]
        # the text is the ids decoded: prompt + output is the whole sequence; content (minus specials) agrees
        assert t["input"] + t["output"] == tok.decode(ids, skip_special_tokens=False)
        extra = json.loads(t["extra"])
        assert extra["generated_tokens"] == sum(mask) and extra["tokenizer"] == "qwen3.5"
        assert extra["advantage"] == pytest.approx(r["advantages"][0][0])
        mine = toks.filter(pl.col("trajectory_id") == t["trajectory_id"]).sort("position")
        assert mine.height == n and mine["token_id"].to_list() == ids
        assert mine["generated"].sum() == sum(mask)
        # each assistant turn is exactly one generated span
        tt = turns.filter(pl.col("trajectory_id") == t["trajectory_id"]).sort("turn_index")
        for row in tt.iter_rows(named=True):
            span = mine.filter(pl.col("turn") == row["turn_index"])
            assert span["generated"].all() == (row["role"] == "assistant")
            assert tok.decode(span["token_id"].to_list(), skip_special_tokens=False) == row["text"]
    # the documented exact-token queries answer on this scan (the sample scan of test_query has no exact tokens)
    from helpers.docs import doc_queries

    from trajlab.query import sql

    documented = [q for q in doc_queries() if "rollout_tokens" in q]
    assert documented, "the docs should show a rollout_tokens query"
    for q in documented:
        assert sql(out, q).num_rows > 0, q
    # per-step figures: checked by hand from the ids
    st = pl.read_parquet(out / "steps.parquet").row(0, named=True)
    gen = [(g, p) for r in rows for g, p, m in zip(r["generation_logprobs"][0], r["prev_logprobs"][0],
                                                   r["token_loss_mask"][0], strict=True) if m]
    assert st["generated_tokens"] == sum(sum(r["token_loss_mask"][0]) for r in rows) == len(gen)
    assert st["logprob_mismatch"] == pytest.approx(sum(abs(g - p) for g, p in gen) / len(gen), rel=1e-12)
    ctrl = toks.filter(pl.col("generated") & pl.col("control"))
    assert ctrl.height > 0 and {"<tool_call>", "</tool_call>", "<|im_end|>"} <= set(ctrl["token"].to_list())
    assert st["control_logprob_mean"] == pytest.approx(ctrl["logprob"].mean())
    low = sum(1 for v in ctrl["logprob"].to_list() if math.exp(v) < 0.5) / ctrl.height
    assert st["control_low_prob_share"] == pytest.approx(low)
    assert st["control_logprob_mismatch"] == pytest.approx(
        (ctrl["logprob"] - ctrl["train_logprob"]).abs().mean())
    # no environment token was generated in these real rows, and nothing is fabricated
    assert toks.filter(pl.col("generated") & pl.col("environment")).height == 0
    assert pl.read_parquet(out / "findings.parquet").filter(
        pl.col("category") == "fabricated_tool_response").height == 0
    # show --tokens draws the logged probabilities of the call's tokens (no rescore needed)
    from rich.console import Console

    from trajlab.show import ShowOptions, show

    con = Console(record=True, width=120, color_system=None)
    show(out, traj["trajectory_id"][0], ShowOptions(tokens=True), console=con)
    text = con.export_text()
    assert "logged (inference) · " in text and " call tokens · mean p " in text and "lowest p" in text


# ----------------------------------------------------------------------------------------------- synthetic
@pytest.mark.slow
def test_fabricated_turn_from_exact_tokens(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    row = _sample(tok, [(PROMPT, False), ("I will search.\n</think>\n\n" + CALL + FABRICATED, True)])
    out = _scan(tmp_path, [row])
    f = pl.read_parquet(out / "findings.parquet").filter(pl.col("category") == "fabricated_tool_response")
    assert f.height == 1 and f["severity"][0] == "error"
    assert f["rule_id"][0] == "qwen3_coder/fabricated_tool_response/role_marker"
    calls = pl.read_parquet(out / "calls.parquet")
    assert calls["status"].to_list() == ["malformed"] and calls["categories"][0].to_list() == ["fabricated_tool_response"]
    assert calls["repaired"][0] == CALL  # the repair cuts the generation after the call
    toks = pl.read_parquet(out / "rollout_tokens.parquet")
    env = toks.filter(pl.col("generated") & pl.col("environment"))
    assert set(env["token"].to_list()) >= {"<|im_start|>", "<tool_response>"}
    # one assistant turn: the model generated it all, the made-up reply included
    assert pl.read_parquet(out / "turns.parquet")["role"].to_list() == ["assistant"]


@pytest.mark.slow
def test_generated_role_header_without_call(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    gen = "Let me think.\n</think>\n\nI do not know.<|im_end|>\n<|im_start|>user\nAre you sure?<|im_end|>"
    out = _scan(tmp_path, [_sample(tok, [(PROMPT, False), (gen, True)])])
    f = pl.read_parquet(out / "findings.parquet").filter(pl.col("category") == "fabricated_tool_response")
    assert f["rule_id"].to_list() == ["qwen3_coder/fabricated_tool_response/generated_tokens"]
    assert "<|im_start|>" in f["message"][0]


@pytest.mark.slow
def test_real_tool_turn_is_not_fabricated_and_mismatch_is_exact(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    segs = [(PROMPT, False), ("Search.\n</think>\n\n" + CALL, True), (ENV, False),
            ("<think>\nShakespeare.\n</think>\n\n<answer>Shakespeare</answer><|im_end|>", True)]
    rows = [_sample(tok, segs, gen_lp=-0.25, delta=0.125, pad=7)]
    out = _scan(tmp_path, rows, control_prob=0.9)
    assert pl.read_parquet(out / "findings.parquet").filter(
        pl.col("category") == "fabricated_tool_response").height == 0
    roles = pl.read_parquet(out / "turns.parquet").sort("turn_index")["role"].to_list()
    assert roles == ["assistant", "tool", "assistant"]
    st = pl.read_parquet(out / "steps.parquet").row(0, named=True)
    assert st["step"] == 3
    assert st["generated_tokens"] == sum(rows[0]["token_loss_mask"][0])
    assert st["logprob_mismatch"] == pytest.approx(0.125)
    assert st["control_logprob_mismatch"] == pytest.approx(0.125)
    assert st["control_logprob_mean"] == pytest.approx(-0.25)
    assert st["control_low_prob_share"] == 1.0  # exp(-0.25) = 0.78 < 0.9
    assert pl.read_parquet(out / "rollout_tokens.parquet").height == rows[0]["input_lengths"][0]  # padding dropped
    out2 = tmp_path / "out"
    scan([tmp_path / "run"], out2, ScanOptions(jobs=1))  # the default threshold (0.5) re-aggregates the steps
    assert pl.read_parquet(out2 / "steps.parquet")["control_low_prob_share"][0] == 0.0


@pytest.mark.slow
def test_several_samples_per_line_and_a_damaged_sample(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    a = _sample(tok, [(PROMPT, False), ("A.\n</think>\n\n<answer>x</answer><|im_end|>", True)], reward=0.0)
    b = _sample(tok, [(PROMPT, False), ("B.\n</think>\n\n<answer>y</answer><|im_end|>", True)], reward=1.0)
    both = {k: (a[k] + b[k] if isinstance(a[k], list) else a[k]) for k in a}
    bad = json.loads(json.dumps(both))
    bad["token_ids"][1] = ["x"] * len(bad["token_ids"][1])
    out = _scan(tmp_path, [both, bad])
    traj = pl.read_parquet(out / "trajectories.parquet")
    assert traj.height == 3 and traj["trajectory_id"].n_unique() == 3
    assert sorted(traj["score"].to_list()) == [0.0, 0.0, 1.0]
    errs = pl.read_parquet(out / "ingest_errors.parquet")
    assert errs.height == 1 and errs["line"][0] == 2 and "sample 1" in errs["reason"][0]


def test_text_only_dumps_have_null_token_figures(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    (d / "1.jsonl").write_text(json.dumps({"input": "user\nhi\nassistant\n", "output": "hello", "score": 1.0,
                                           "step": 1}) + "\n")
    out = tmp_path / "out"
    scan([d], out, ScanOptions(jobs=1))
    st = pl.read_parquet(out / "steps.parquet").row(0, named=True)
    assert st["generated_tokens"] is None and st["logprob_mismatch"] is None
    assert pl.read_parquet(out / "rollout_tokens.parquet").height == 0


def test_control_prob_is_checked() -> None:
    for bad in (0, 1.5, -0.1, True):
        with pytest.raises(InputError, match="control_prob"):
            ScanOptions(control_prob=bad)


# ------------------------------------------------------------------------------- the other kinds of input
def test_fabricated_in_openai_messages(tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}}}}]
    content = ('<tool_call>\n{"name": "search", "arguments": {"query": "Hamlet"}}\n</tool_call>\n'
               "user\n<tool_response>\nShakespeare\n</tool_response>\nassistant\nShakespeare.")
    rec = {"messages": [{"role": "user", "content": "Who wrote Hamlet?"},
                        {"role": "assistant", "content": content}], "tools": tools}
    d = tmp_path / "msgs"
    d.mkdir()
    (d / "data.jsonl").write_text(json.dumps(rec) + "\n")
    out = tmp_path / "out"
    scan([d], out, ScanOptions(jobs=1))
    assert pl.read_parquet(out / "turns.parquet")["role"].to_list() == ["assistant"]  # the message is one turn
    f = pl.read_parquet(out / "findings.parquet")
    assert f.filter(pl.col("category") == "fabricated_tool_response")["rule_id"].to_list() == [
        "hermes/fabricated_tool_response/response_tag"]


def test_fabricated_in_verl_tool_record(tmp_path: Path) -> None:
    prompt = PROMPT.replace("<think>\n", "")
    resp = (CALL + "\n<tool_response>\nDoc 1: made up\n</tool_response>\n<answer>Marlowe</answer><|im_end|>")
    d = tmp_path / "verl_step_records" / "run1"
    d.mkdir(parents=True)
    (d / "fcl-step-5.json").write_text(json.dumps([{"id": 1, "traj_ids": "a_0", "prompt": prompt, "response": resp,
                                                     "score": 0.0}]))
    out = tmp_path / "out"
    scan([tmp_path / "verl_step_records"], out, ScanOptions(jobs=1))
    f = pl.read_parquet(out / "findings.parquet").filter(pl.col("category") == "fabricated_tool_response")
    assert f["rule_id"].to_list() == ["qwen3_coder/fabricated_tool_response/response_tag"]
    assert pl.read_parquet(out / "calls.parquet")["repaired"][0] == CALL


@pytest.mark.slow
def test_sft_pool_error_demo_and_hint_for_fabricated(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    from trajlab.curate import PoolOptions, build_sft_pool

    bad = _sample(tok, [(PROMPT, False), ("I will search.\n</think>\n\n" + CALL + FABRICATED, True)], reward=1.0)
    good = _sample(tok, [(PROMPT, False), ("Search.\n</think>\n\n" + CALL, True), (ENV, False),
                         ("<think>\nShakespeare.\n</think>\n\n<answer>Shakespeare</answer><|im_end|>", True)])
    out = _scan(tmp_path, [bad, good])
    pool = tmp_path / "pool"
    build_sft_pool(out, pool, PoolOptions(val_fraction=0.0, ratio="1:1:1"), progress=False)
    rows = pl.read_parquet(pool / "train.parquet")
    demos = rows.filter(pl.col("kind") == "error_demo")
    assert demos.height == 1
    msgs = demos["messages"][0].to_list()
    assert msgs[-1]["role"] == "assistant" and CALL in msgs[-1]["content"] and "Marlowe" not in msgs[-1]["content"]
    assert "fabricated_tool_response" in msgs[-2]["content"]
    hints = rows.filter(pl.col("kind") == "hint")
    assert hints.height >= 1 and any("stop and wait" in m["content"] for m in hints["messages"][0].to_list())


@pytest.mark.slow
def test_report_shows_exact_token_curves(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    from trajlab.report import report

    rows = [_sample(tok, [(PROMPT, False), ("S.\n</think>\n\n" + CALL, True), (ENV, False),
                          ("<think>\nA.\n</think>\n\n<answer>A</answer><|im_end|>", True)], delta=0.01 * k)
            for k in range(1, 3)]
    d = tmp_path / "run"
    d.mkdir()
    for k, r in enumerate(rows, start=1):
        (d / f"train_data_step{k}.jsonl").write_text(json.dumps(r) + "\n")
    out = tmp_path / "out"
    scan([d], out, ScanOptions(jobs=1))
    steps = pl.read_parquet(out / "steps.parquet").sort("step")
    assert steps["step"].to_list() == [1, 2]
    assert steps["logprob_mismatch"].to_list() == pytest.approx([0.01, 0.02])
    html = report(out, tmp_path / "r.html").read_text()
    assert 'id="exact-tokens"' in html and "train–inference mismatch" in html


@pytest.mark.parametrize("mutate, kept, reason", [
    (lambda r: r["token_ids"][0].__setitem__(500, 10**12), 0, "outside the vocabulary"),
    (lambda r: r["token_ids"][0].__setitem__(500, True), 0, "not integers"),
    (lambda r: r.__setitem__("token_loss_mask", [[1, 0]]), 0, "token_loss_mask"),
    (lambda r: r.__setitem__("token_ids", [[]]), 0, "no token ids"),
    (lambda r: r.__setitem__("generation_logprobs", ["x"]), 1, "inference log-probs left null"),
    (lambda r: r.__setitem__("rewards", [float("nan")]), 1, "not finite"),
    (lambda r: r.__setitem__("token_loss_mask", [[0] * len(r["token_ids"][0])]), 1, "no generated token"),
])
@pytest.mark.slow
def test_hostile_samples_cost_only_themselves(mutate, kept, reason) -> None:  # type: ignore[no-untyped-def]
    from trajlab.ingest import nemo_rl

    row = _real_rows()[1]
    mutate(row)
    recs, notes = nemo_rl.to_trajectories(row, source_path="x/train_data_step7.jsonl", line=3, file_step=None,
                                          file_split=None)
    assert len(recs) == kept
    assert any(reason in n.reason for n in notes), [n.reason for n in notes]
    assert all(n.line == 3 for n in notes)
    if recs:
        assert recs[0].step == 7 and recs[0].tokens is not None


@pytest.mark.slow
def test_sft_pool_positive_from_exact_tokens_has_no_literal_end_token(tmp_path: Path, tok) -> None:  # type: ignore[no-untyped-def]
    from trajlab.curate import PoolOptions, build_sft_pool

    good = _sample(tok, [(PROMPT, False), ("Search.\n</think>\n\n" + CALL + "<|im_end|>", True), (ENV, False),
                         ("<think>\nShakespeare.\n</think>\n\n<answer>Shakespeare</answer><|im_end|>", True)])
    out = _scan(tmp_path, [good])
    pool = tmp_path / "pool"
    build_sft_pool(out, pool, PoolOptions(val_fraction=0.0, ratio="1:0:0", min_score="any", style="openai"),
                   progress=False)
    msgs = pl.read_parquet(pool / "train.parquet")["messages"][0].to_list()
    asst = [m for m in msgs if m["role"] == "assistant"]
    assert len(asst) == 2 and not any("<|im_end|>" in (m["content"] or "") for m in msgs)
    assert asst[0]["tool_calls"][0]["function"]["name"] == "search"
    assert asst[0]["content"].endswith("</think>")  # the call cut out of the text, nothing else
    assert asst[1]["content"].endswith("<answer>Shakespeare</answer>")


def test_malformed_numbers_and_shapes_cost_only_their_sample() -> None:
    """A 400-digit integer log-prob or reward is null (no OverflowError); a loss mask of nested lists or strings
    skips its sample instead of reading every token as generated; a line mixing a bad sample with a good one keeps
    the good one."""
    from trajlab.ingest import nemo_rl

    def read(row: dict) -> tuple[list, list[str]]:
        recs, notes = nemo_rl.to_trajectories(row, source_path="x/train_data_step2.jsonl", line=1, file_step=None,
                                              file_split=None)
        return recs, [n.reason for n in notes]

    recs, notes = read({"token_ids": [[9707, 11, 1879]], "token_loss_mask": [[0, 1, 1]], "input_lengths": [3],
                        "generation_logprobs": [[0.0, 10**400, -0.5]], "rewards": [10**400]})
    assert len(recs) == 1 and recs[0].tokens.logprob == [None, None, -0.5] and recs[0].score is None
    assert any("too large" in n for n in notes)
    for mask in ([[1], [0], [1]], ["0", "1", "1"]):
        recs, notes = read({"token_ids": [[9707, 11, 1879]], "token_loss_mask": [mask], "input_lengths": [3]})
        assert recs == [] and any("not numbers" in n for n in notes), notes
    recs, notes = read({"token_ids": [[9707, 11, 1879], 5], "token_loss_mask": [[0, 1, 1], [1]],
                        "input_lengths": [3, 1]})
    assert [r.sample for r in recs] == [0] and any("sample 1: no token ids" in n for n in notes), notes

"""trajlab.verl.exact and trajlab.verl.records on real Qwen3 token ids (the real Qwen3 tokenizer), without verl.

The payload round trip, turns cut by the response mask (a generated ``<|im_start|>user`` / ``<tool_response>`` is a
fabricated turn, decided from the mask even where the text alone cannot tell), the control-token statistics
computed by hand from the sampler's log-probs, per kind, and the record files: one per process, appended, a torn
last line skipped, per-step figures weighted by token counts. The reward_kwargs keys are checked at start-up.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
from pathlib import Path

import pytest

from trajlab.errors import TrajlabError
from trajlab.verl.exact import (
    EXACT_KEYS,
    PAYLOAD_KEY,
    control_stats,
    decode_mask,
    encode_mask,
    exact_sample,
    make_payload,
    read_payload,
    tokenizer_marks,
)
from trajlab.verl.records import RecordLog, read_records, record_files, record_row, step_figures
from trajlab.verl.reward import scorer_for

CALL = '<tool_call>\n{"name": "search_web", "arguments": {"queries": ["capital of France"]}}\n</tool_call>'
ENV = ("\n<|im_start|>user\n<tool_response>\nParis is the capital.\n</tool_response><|im_end|>\n"
       "<|im_start|>assistant\n")
# the model's own imitation of that turn, after its call, with the stop token it should have stopped at
MIMIC = "<|im_end|>" + ENV + "<answer>Paris</answer><|im_end|>"


@pytest.fixture(scope="module")
def tok():
    transformers = pytest.importorskip("transformers")
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir

    return transformers.AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())


def _sample(tok, parts: list[tuple[str, int]]) -> tuple[list[int], list[int]]:
    ids: list[int] = []
    mask: list[int] = []
    for text, m in parts:
        enc = tok.encode(text, add_special_tokens=False)
        ids += enc
        mask += [m] * len(enc)
    return ids, mask


def test_mask_run_length_round_trip() -> None:
    for mask in ([], [1], [0], [1, 1, 0, 0, 0, 1], [0, 1, 0, 1], [1] * 1000 + [0] * 7):
        assert decode_mask(encode_mask(mask)) == mask
    assert encode_mask([1, 1, 0, 0, 0, 1]) == [1, 2, 3, 1]


def test_payload_round_trip_and_mismatch(tok) -> None:
    ids, mask = _sample(tok, [("I will search.\n" + CALL + "<|im_end|>", 1), (ENV, 0), ("<answer>x</answer>", 1)])
    lp = [-0.1] * len(ids)
    p = make_payload(mask, lp, 12)
    assert json.loads(json.dumps(p)) == p  # plain JSON-able values (verl moves it through Ray)
    got = read_payload({PAYLOAD_KEY: p}, len(ids))
    assert got is not None and (got.mask, got.logprobs, got.step) == (mask, lp, 12)
    assert read_payload({PAYLOAD_KEY: p}, len(ids) + 1) is None  # shorter than the response: not this sample's
    assert read_payload({}, len(ids)) is None and read_payload(None, 3) is None
    assert read_payload({PAYLOAD_KEY: make_payload(mask, None, None)}, len(ids)).logprobs is None


def test_turns_from_the_mask_find_a_fabricated_turn_the_text_reads_as_real(tok) -> None:
    ids, mask = _sample(tok, [("I will search.\n" + CALL, 1), (MIMIC, 1)])
    text = tok.decode(ids, skip_special_tokens=False)
    stripped = tok.decode(ids, skip_special_tokens=True)
    sc, _ = scorer_for({"task_fn": "none"})
    by_text = sc.score(data_source="x", solution_str=stripped, ground_truth="Paris", extra_info={}, judged_text=text,
                       exact_keys=True)
    assert by_text["malformed_calls"] == 0.0 and by_text["exact_tokens"] == 0.0  # the text is a perfect imitation
    payload = read_payload({PAYLOAD_KEY: make_payload(mask, [-0.05] * len(ids), 3)}, len(ids))
    ex = exact_sample(ids, payload, tok)
    assert [t.role for t in ex.turns.turns] == ["assistant", "tool"]
    assert ex.turns.text == text and ex.turns.fabricated == [(1, "<|im_start|>", ids.index(151644))]
    got = sc.score(data_source="x", solution_str=stripped, ground_truth="Paris", extra_info={}, judged_text=text,
                   exact=ex, exact_keys=True)
    assert got["exact_tokens"] == 1.0 and got["fabricated_turns"] == 1.0
    assert got["malformed_calls"] == 1.0 and got["format_reward"] < 0  # the call that got a made-up answer
    # the same tokens with the environment's mask: no finding
    ids2, mask2 = _sample(tok, [("I will search.\n" + CALL + "<|im_end|>", 1), (ENV, 0),
                                ("<answer>Paris</answer><|im_end|>", 1)])
    assert ids2 == ids
    ex2 = exact_sample(ids2, read_payload({PAYLOAD_KEY: make_payload(mask2, None, 3)}, len(ids2)), tok)
    clean = sc.score(data_source="x", solution_str=stripped, ground_truth="Paris", extra_info={}, judged_text=text,
                     exact=ex2, exact_keys=True)
    assert [t.role for t in ex2.turns.turns] == ["assistant", "tool", "assistant"]
    assert clean["fabricated_turns"] == 0.0 and clean["malformed_calls"] == 0.0 and clean["tool_calls"] == 1.0
    assert clean["exact_logprobs"] == 0.0 and clean["control_tokens"] == 0.0  # no log-probs: no statistics
    assert set(got) == set(clean) == set(by_text) and set(EXACT_KEYS) <= set(got)


def test_control_stats_by_hand(tok) -> None:
    ids, mask = _sample(tok, [("I will search.\n" + CALL + "<|im_end|>", 1), (ENV, 0),
                              ("<answer>Paris</answer><|im_end|>", 1)])
    lp = [-(k % 4) * 0.4 for k in range(len(ids))]  # probabilities 1, 0.67, 0.45, 0.30
    kinds = tokenizer_marks(tok).control.kinds_for("hermes")
    got = control_stats(ids, mask, lp, kinds, control_prob=0.5)
    picked = {"scaffold": [], "call": [], "other": []}
    for i, m, v in zip(ids, mask, lp, strict=True):
        if m and i in kinds:
            picked[kinds[i]].append(v)
    assert picked["scaffold"] and picked["call"]  # <|im_end|> x2; <tool_call>, </tool_call>, the JSON's braces
    assert tok.convert_ids_to_tokens([i for i, m in zip(ids, mask, strict=True) if m and kinds.get(i) == "scaffold"]) == ["<|im_end|>"] * 2
    every = [v for vs in picked.values() for v in vs]
    assert got["control_tokens"] == len(every)
    assert got["control_logprob_mean"] == pytest.approx(sum(every) / len(every))
    assert got["control_logprob_min"] == min(every)
    assert got["control_low_prob_share"] == pytest.approx(sum(v < math.log(0.5) for v in every) / len(every))
    for k, vs in picked.items():
        assert got[f"{k}_tokens"] == len(vs)
        if vs:
            assert got[f"{k}_logprob_mean"] == pytest.approx(sum(vs) / len(vs))
    # environment positions never count, whatever their log-prob (verl writes 0.0 there)
    env_lp = [v if m else -9.0 for v, m in zip(lp, mask, strict=True)]
    assert control_stats(ids, mask, env_lp, kinds, 0.5) == got


def test_reward_kwargs_new_keys_checked_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(TrajlabError, match="did you mean 'record_dir'"):
        scorer_for({"task_fn": "none", "record_dirs": str(tmp_path)})
    with pytest.raises(TrajlabError, match="did you mean 'control_prob'"):
        scorer_for({"task_fn": "none", "control_probs": 0.5})
    with pytest.raises(TrajlabError, match="control_prob"):
        scorer_for({"task_fn": "none", "control_prob": 1.5})
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(TrajlabError, match="record_dir"):
        scorer_for({"task_fn": "none", "record_dir": str(f)})
    sc, _ = scorer_for({"task_fn": "none", "control_prob": "0.25", "record_dir": str(tmp_path / "r")})
    assert sc.options.control_prob == 0.25 and sc.options.record_dir == str(tmp_path / "r")


def _child(d: str) -> None:
    RecordLog(d).append([record_row({"score": 1.0}, step=2)])


def test_record_log_one_file_per_process_appended_and_read_back(tmp_path: Path) -> None:
    d = tmp_path / "rec"
    log = RecordLog(d)
    res = {"score": 0.5, "tool_calls": 2.0, "malformed_calls": 1.0, "exact_tokens": 1.0, "control_tokens": 4.0,
           "control_logprob_mean": -0.5, "control_logprob_min": -2.0, "control_low_prob_share": 0.25,
           "call_tokens": 4.0, "call_logprob_mean": -0.5, "call_logprob_min": -2.0, "call_low_prob_share": 0.25,
           "fabricated_turns": 1.0}
    assert log.append([record_row(res, step=1, uid="u1", stripped_text="a"),
                       record_row({**res, "control_tokens": 12.0, "control_logprob_mean": -0.1,
                                   "control_logprob_min": -0.3, "control_low_prob_share": 0.0,
                                   "fabricated_turns": 0.0}, step=1, uid="u2", stripped_text="b")]) == 2
    RecordLog(d).append([record_row(res, step=3)])  # a second log in the same process: the same file, appended
    ctx = mp.get_context("fork")
    p = ctx.Process(target=_child, args=(str(d),))
    p.start()
    p.join(60)
    assert p.exitcode == 0
    files = record_files(d)
    assert len(files) == 2  # one per process
    with files[0].open("a") as fh:
        fh.write('{"v": 1, "step": 9, "sco')  # a crash in mid-line
    rows = read_records(d)
    assert sorted(r["step"] for r in rows) == [1, 1, 2, 3]
    assert {r["output_sha1"] for r in rows if r["step"] == 1} == {
        "86f7e437faa5a7fce15d1ddcb9eaeaea377667b8", "e9d71f5ee7c92d6dc9e92ffdad17b8bd49418f98"}
    figs = {f["step"]: f for f in step_figures(rows)}
    s1 = figs[1]
    assert s1["samples"] == s1["exact_samples"] == 2 and s1["samples_with_fabricated"] == 1
    assert s1["malformed_rate"] == pytest.approx(0.5)
    assert s1["control_tokens"] == 16.0
    assert s1["control_logprob_mean"] == pytest.approx((4 * -0.5 + 12 * -0.1) / 16)  # weighted by tokens
    assert s1["control_low_prob_share"] == pytest.approx(1 / 16) and s1["control_logprob_min"] == -2.0
    assert figs[2]["exact_samples"] == 0 and figs[2]["control_logprob_mean"] is None
    with pytest.raises(TrajlabError, match="no such directory"):
        read_records(tmp_path / "missing")


def test_scan_never_reads_record_files_as_dumps(tmp_path: Path) -> None:
    from trajlab.ingest.discover import find_inputs

    run = tmp_path / "run"
    (run / "rollout").mkdir(parents=True)
    (run / "rollout" / "1.jsonl").write_text(json.dumps({"input": "q", "output": "a", "gts": "a", "score": 1.0,
                                                         "step": 1}) + "\n")
    RecordLog(run / "trajlab_records").append([record_row({"score": 1.0}, step=1)])
    (run / "trajlab_records" / "trajlab-records-other-1.jsonl").write_text("")  # a worker that wrote nothing yet
    files, errors, skipped = find_inputs([run])
    assert [f.rel for f in files] == ["rollout/1.jsonl"] and not errors
    assert any("2 trajlab reward record files" in s for s in skipped), skipped


def test_scan_fills_the_exact_token_step_columns_from_the_records(tmp_path: Path) -> None:
    """A verl run directory with the reward's records beside its dumps: scan fills the ``steps`` exact-token
    columns of its train steps from them (weighted by tokens), and a later scan sees records added since."""
    import shutil

    import pyarrow.parquet as pq

    import trajlab
    from trajlab.scan.options import ScanOptions
    from trajlab.tables import table_path

    src = Path(__file__).resolve().parents[1] / "sample_data" / "qwen35_xml_run" / "rollout"
    run = tmp_path / "run"
    (run / "rollout").mkdir(parents=True)
    for s in (60, 120):
        shutil.copy(src / f"{s}.jsonl", run / "rollout" / f"{s}.jsonl")
    log = RecordLog(run / "records")

    def rec(step: int, n: float, mean: float, low: float, split: str | None = "train") -> dict:
        return record_row({"score": 0.0, "exact_tokens": 1.0, "generated_tokens": 100.0, "control_tokens": n,
                           "control_logprob_mean": mean, "control_logprob_min": mean - 1,
                           "control_low_prob_share": low}, step=step, split=split)

    log.append([rec(60, 10, -0.1, 0.0), rec(60, 30, -0.5, 0.5), rec(60, 50, -9.0, 1.0, split="test")])
    out = tmp_path / "out"
    trajlab.scan([run], out, ScanOptions(jobs=1))

    def steps() -> dict[int, dict]:
        return {r["step"]: r for r in pq.ParquetFile(table_path(out, "steps")).read().to_pylist()
                if r["split"] == "train"}

    got = steps()
    assert got[60]["generated_tokens"] == 200  # the validation sample (split test) is not a training step's
    assert got[60]["control_logprob_mean"] == pytest.approx((10 * -0.1 + 30 * -0.5) / 40)
    assert got[60]["control_low_prob_share"] == pytest.approx(30 * 0.5 / 40)
    assert got[120]["control_logprob_mean"] is None  # no records for that step
    log.append([rec(120, 4, -2.0, 1.0)])
    trajlab.scan([run], out, ScanOptions(jobs=1))
    assert steps()[120]["control_logprob_mean"] == pytest.approx(-2.0)


def test_tensorboard_scalars_carry_the_record_figures(tmp_path: Path) -> None:
    from trajlab.metrics.tensorboard_out import scalar_rows

    steps = [{"run": "r", "split": "train", "step": 1, "calls": 2, "malformed_calls": 0, "category_counts": [],
              "control_logprob_mean": -0.25, "control_low_prob_share": 0.125, "logprob_mismatch": None,
              "control_logprob_mismatch": float("nan")},
             {"run": "r", "split": "train", "step": 2, "calls": 2, "malformed_calls": 1, "category_counts": []}]
    tags = {(s, t): v for s, t, v in scalar_rows(steps, None)}
    assert tags[(1, "trajlab/control/logprob_mean")] == -0.25
    assert tags[(1, "trajlab/control/low_prob_share")] == 0.125
    assert not any(t.endswith("mismatch") for _, t in tags) and (2, "trajlab/control/logprob_mean") not in tags

"""TRL, SkyRL and slime runs: the readers on the shipped sample runs (written with the frameworks' own writers:
pandas' to_parquet as TRL's GRPOTrainer.log calls it, SkyRL's json.dumps lines, torch.save of slime's
Sample.to_dict), checked against counts made from the files themselves; a hostile .pt; the TRL reward function
through the call TRL makes (trl/trainer/grpo_trainer.py, _calculate_rewards)."""

from __future__ import annotations

import collections
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from trajlab.scan import ScanOptions, scan

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_data"
torch = pytest.importorskip("torch")


def _scan(src: Path, out: Path):
    return scan([src], out, ScanOptions(jobs=1), progress=False)


def _q(out: Path, sql: str):
    con = duckdb.connect()
    for t in ("trajectories", "calls", "steps", "ingest_errors", "rollout_tokens"):
        p = out / f"{t}.parquet"
        if p.exists():
            con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{p}')")
    return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    base = tmp_path_factory.mktemp("peers")
    out = {}
    for run in ("trl_run", "skyrl_run", "slime_run", "qwen3_hermes_run"):
        out[run] = base / run
        _scan(SAMPLES / run, out[run])
    return out


def test_trl_completions_match_the_files(scans):
    files = sorted((SAMPLES / "trl_run" / "completions").glob("completions_*.parquet"))
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    out = scans["trl_run"]
    assert _q(out, "SELECT count(*) FROM trajectories")[0][0] == len(rows) == 320
    assert _q(out, "SELECT count(DISTINCT source_format), min(source_format) FROM trajectories")[0] == (1, "trl_completions")
    # calls: every <tool_call> opener the completions hold (hand count over the files)
    assert _q(out, "SELECT count(*) FROM calls")[0][0] == sum(r["completion"].count("<tool_call>") for r in rows)
    # score = the reward column; steps from the step column
    by_step = collections.defaultdict(list)
    for r in rows:
        by_step[r["step"]].append(r["correctness_reward"])
    got = dict(_q(out, "SELECT step, mean_score FROM steps WHERE split = 'train'"))
    assert set(got) == set(by_step)
    for s, v in by_step.items():
        assert got[s] == pytest.approx(math.fsum(v) / len(v))
    assert _q(out, "SELECT count(*) FROM ingest_errors")[0][0] == 0


def test_trl_and_slime_read_the_same_run_as_verl(scans):
    """The three dumps hold the text of qwen3_hermes_run: the same calls and malformed calls step by step."""
    ref = _q(scans["qwen3_hermes_run"], "SELECT step, calls, malformed_calls FROM steps WHERE split='train' ORDER BY step")
    trl = _q(scans["trl_run"], "SELECT step, calls, malformed_calls FROM steps WHERE split='train' ORDER BY step")
    slime = _q(scans["slime_run"], "SELECT step + 1, calls, malformed_calls FROM steps WHERE split='train' ORDER BY step")
    assert trl == ref
    assert slime == ref
    assert sum(r[2] for r in ref) > 40


def test_skyrl_evals_are_one_run_of_validation_steps(scans):
    out = scans["skyrl_run"]
    dirs = sorted((SAMPLES / "skyrl_run" / "dumped_evals").iterdir())
    lines = {int(d.name.split("_")[2]): [json.loads(x) for x in (d / "search.jsonl").read_text().splitlines()]
             for d in dirs}
    assert _q(out, "SELECT count(DISTINCT run), count(*) FROM trajectories") == [(1, sum(map(len, lines.values())))]
    steps = _q(out, "SELECT step, trajectories, mean_score FROM steps WHERE split = 'val' ORDER BY step")
    assert [s for s, _, _ in steps] == sorted(lines)
    for s, n, mean in steps:
        assert n == len(lines[s]) and mean == pytest.approx(math.fsum(x["score"] for x in lines[s]) / n)
    assert _q(out, "SELECT count(*) FROM calls")[0][0] == sum(
        x["output_response"].count("<tool_call>") for v in lines.values() for x in v)
    assert _q(out, "SELECT count(*) FROM ingest_errors")[0][0] == 0  # aggregated_results.jsonl is skipped, not an error


def test_slime_exact_tokens(scans):
    out = scans["slime_run"]
    files = sorted((SAMPLES / "slime_run" / "rollout_data").glob("*.pt"), key=lambda p: int(p.stem))
    dumps = {int(p.stem): torch.load(p, weights_only=True) for p in files}
    gen = dict(_q(out, "SELECT step, generated_tokens FROM steps WHERE split = 'train'"))
    for rid, d in dumps.items():
        assert gen[rid] == sum(sum(s["loss_mask"]) for s in d["samples"])
    # control_logprob_mean: the logged rollout_log_probs at the generated control tokens, computed from the files
    control_ids = {r[0] for r in _q(out, "SELECT DISTINCT token_id FROM rollout_tokens WHERE control")}
    assert control_ids
    got = dict(_q(out, "SELECT step, control_logprob_mean FROM steps WHERE split = 'train'"))
    for rid, d in dumps.items():
        vals = []
        for s in d["samples"]:
            resp = s["tokens"][len(s["tokens"]) - s["response_length"]:]
            vals += [lp for t, m, lp in zip(resp, s["loss_mask"], s["rollout_log_probs"], strict=True) if m and t in control_ids]
        assert got[rid] == pytest.approx(math.fsum(vals) / len(vals), rel=1e-9)
    first, last = got[min(got)], got[max(got)]
    assert last < first  # the synthetic sampler's control-token log-probs fall after the onset


def test_hostile_pt_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    run = tmp_path / "exp" / "rollout_data"
    run.mkdir(parents=True)
    torch.save({"rollout_id": 3, "samples": [{"tokens": [1, 2], "response_length": 1, "x": Evil()}]}, run / "3.pt")
    good = SAMPLES / "slime_run" / "rollout_data" / "0.pt"
    (run / "0.pt").write_bytes(good.read_bytes())
    (run / "train_data.pt").write_bytes(b"not a dump name: never read")
    out = tmp_path / "out"
    _scan(tmp_path / "exp", out)
    assert not marker.exists()
    errs = _q(out, "SELECT source_path, reason FROM ingest_errors")
    assert len(errs) == 1 and errs[0][0].endswith("3.pt") and errs[0][1].startswith("refused:")
    assert _q(out, "SELECT count(*) FROM trajectories")[0][0] == len(torch.load(good, weights_only=True)["samples"])


def test_slime_train_dump_is_named_not_read(tmp_path):
    d = tmp_path / "dump" / "train_data"
    d.mkdir(parents=True)
    torch.save({"format_version": 2, "rollout_id": 0, "samples": [{"rollout_position": 0, "rollout_log_probs": torch.zeros(3)}]},
               d / "0.pt")
    out = tmp_path / "out"
    _scan(tmp_path / "dump", out)
    errs = _q(out, "SELECT reason FROM ingest_errors")
    assert len(errs) == 1 and "train-side dump" in errs[0][0]


def _trl_call(fn, prompts, completions, completion_ids, **columns):
    """The call GRPOTrainer._calculate_rewards makes, with its hooks collecting as TRL's do."""
    from transformers import TrainerState

    extra, metrics = collections.defaultdict(list), collections.defaultdict(list)
    kwargs = dict(columns, trainer_state=TrainerState(), log_extra=lambda c, v: extra[c].extend(v),
                  log_metric=lambda n, v: metrics[n].append(v))
    out = fn(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
    return out, extra, metrics


def test_trl_reward_through_trls_call():
    from trajlab.rescore.tokenizers import load_tokenizer
    from trajlab.trl.reward import make_reward

    tok = load_tokenizer("qwen3")
    rows = pq.read_table(SAMPLES / "trl_run" / "completions" / "completions_00036.parquet").to_pylist()
    prompts = [r["prompt"] for r in rows]
    comps = [[{"role": "assistant", "content": r["completion"]}] for r in rows]  # conversational, as TRL passes it
    ids = [tok.encode(r["completion"], add_special_tokens=False) for r in rows]
    fn = make_reward(tokenizer=tok)
    assert fn.__name__ == "trajlab_format"
    out, extra, metrics = _trl_call(fn, prompts, comps, ids, answer=["x"] * len(rows))
    assert len(out) == len(rows) and all(isinstance(x, float) and math.isfinite(x) for x in out)
    bad = extra["trajlab/malformed_calls"]
    assert len(bad) == len(rows) and len(extra["trajlab/broken"]) == len(rows)
    calls = sum(r["completion"].count("<tool_call>") for r in rows)
    assert metrics["trajlab/tool_calls"] == [pytest.approx(calls / len(rows))]
    assert metrics["trajlab/malformed_rate"] == [pytest.approx(sum(bad) / calls)]
    assert all((o < 0) == (b > 0) for o, b in zip(out, bad, strict=True))  # broken calls cost, valid ones pay
    # the same scan verdicts: malformed calls per completion equal scan's for this step's file
    assert sum(bad) > 0


def test_trl_reward_never_raises_on_model_text():
    from trajlab.trl.reward import make_reward

    fn = make_reward()
    junk = ["<tool_call>" * 5000, "\x00\ud800<tool_call>{\"name\": 1}", None, b"\xff\xfe", 12, [{"role": "tool"}],
            "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}\n</tool_call>"]
    out, extra, metrics = _trl_call(fn, ["p"] * 3, junk, None)
    assert len(out) == len(junk) and all(isinstance(x, float) and math.isfinite(x) for x in out)
    assert out[-1] > 0
    assert len(extra["trajlab/broken"]) == len(junk)


@pytest.mark.slow
def test_generator_rewrites_the_same_bytes(tmp_path):
    subprocess.run([sys.executable, str(SAMPLES / "generate_peers.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    for run in ("trl_run", "skyrl_run", "slime_run"):
        shipped = {p.relative_to(SAMPLES): hashlib.sha256(p.read_bytes()).hexdigest()
                   for p in (SAMPLES / run).rglob("*") if p.is_file()}
        made = {p.relative_to(tmp_path): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in (tmp_path / run).rglob("*") if p.is_file()}
        assert shipped == made, run


@pytest.mark.slow
def test_trl_grpo_trainer_calls_the_reward_and_its_log_is_read(tmp_path):
    """TRL's own GRPOTrainer (CPU, the tiny demo checkpoint) calls the reward function for two steps; its metrics
    reach the trainer's log history, its log_extra columns the completions Parquet TRL writes, and trajlab reads
    that Parquet without counting its own columns as rewards."""
    trl = pytest.importorskip("trl", reason="trl is in the test extra: pip install -e '.[rescore,test]'")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trajlab.trl.reward import make_reward

    ck = SAMPLES / "demo_checkpoints" / "global_step_20" / "actor" / "huggingface"
    tok = AutoTokenizer.from_pretrained(ck)
    model = AutoModelForCausalLM.from_pretrained(ck)
    prompt = "system\nYou may call search_web.\nuser\nWho built the Zeller Bridge?\nassistant\n"
    args = trl.GRPOConfig(output_dir=str(tmp_path / "run"), per_device_train_batch_size=4, num_generations=4,
                          max_completion_length=24, max_steps=2, logging_steps=1, log_completions=True, report_to=[],
                          use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0)
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[make_reward(tokenizer=tok)], args=args,
                              train_dataset=Dataset.from_dict({"prompt": [prompt] * 4}), processing_class=tok)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "trajlab/malformed_rate" in h]
    assert len(logged) == 2 and all("rewards/trajlab_format/mean" in h for h in logged)
    files = sorted((tmp_path / "run" / "completions").glob("completions_*.parquet"))
    assert len(files) == 2
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert {"trajlab_format", "trajlab/malformed_calls", "trajlab/broken"} <= set(rows[0])
    out = tmp_path / "scan"
    _scan(tmp_path / "run", out)
    got = _q(out, "SELECT step, score FROM trajectories ORDER BY step, source_line")
    assert [s for s, _ in got] == [r["step"] for r in sorted(rows, key=lambda r: r["step"])]
    assert [x for _, x in got] == pytest.approx([r["trajlab_format"] for r in sorted(rows, key=lambda r: r["step"])])
    # the reward it paid per completion is what a scan of TRL's own log finds broken
    n_bad = dict(_q(out, "SELECT source_line + 1000 * step, n_malformed_calls FROM trajectories"))
    for f in files:
        for i, r in enumerate(pq.read_table(f).to_pylist(), start=1):
            assert n_bad[i + 1000 * r["step"]] == r["trajlab/malformed_calls"]


def test_bad_records_cost_only_themselves(tmp_path):
    import pyarrow as pa

    good = torch.load(SAMPLES / "slime_run" / "rollout_data" / "5.pt", weights_only=True)
    samples = list(good["samples"])
    samples[1] = {**samples[1], "loss_mask": samples[1]["loss_mask"][:-3]}  # shorter than the response
    samples[2] = {**samples[2], "tokens": ["x", 1]}
    samples.insert(3, "not a dict")
    (tmp_path / "slime" / "rollout_data").mkdir(parents=True)
    torch.save({"rollout_id": 5, "samples": samples}, tmp_path / "slime" / "rollout_data" / "5.pt")
    sky = tmp_path / "sky" / "dumped_evals" / "global_step_8_evals"
    sky.mkdir(parents=True)
    lines = (SAMPLES / "skyrl_run" / "dumped_evals" / "global_step_8_evals" / "search.jsonl").read_text().splitlines()
    sky.joinpath("search.jsonl").write_text("\n".join([lines[0], lines[1][:50], '{"input_prompt": "p"}', *lines[2:]]) + "\n")
    trl_dir = tmp_path / "trl" / "completions"
    trl_dir.mkdir(parents=True)
    rows = pq.read_table(SAMPLES / "trl_run" / "completions" / "completions_00003.parquet").to_pylist()
    rows[2]["completion"] = None
    pq.write_table(pa.Table.from_pylist(rows), trl_dir / "completions_00003.parquet")
    for name, n_ok, n_err in (("slime", len(good["samples"]) - 2, 3), ("sky", len(lines) - 1, 2),
                              ("trl", len(rows) - 1, 1)):
        out = tmp_path / f"out-{name}"
        _scan(tmp_path / name, out)
        assert _q(out, "SELECT count(*) FROM trajectories")[0][0] == n_ok, name
        errs = _q(out, "SELECT line FROM ingest_errors ORDER BY line")
        assert len(errs) == n_err and all(line is not None for (line,) in errs), (name, errs)


def test_slime_without_torch_says_how_to_install(tmp_path):
    code = ("import sys; sys.modules['torch'] = None\n"
            "from trajlab.scan import scan, ScanOptions\n"
            f"scan([{str(SAMPLES / 'slime_run' / 'rollout_data')!r}], {str(tmp_path / 'out')!r}, ScanOptions(jobs=1), progress=False)\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    errs = _q(tmp_path / "out", "SELECT DISTINCT reason FROM ingest_errors")
    assert len(errs) == 1 and "needs torch: pip install torch==2.13.0" in errs[0][0]

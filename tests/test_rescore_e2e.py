"""`trajlab rescore` end to end on CPU: a real verl dump scanned by the real scanner, two tiny checkpoints with
the real Qwen3 tokenizer, every output table checked against an independent full-logits computation,
selection, --tokens calls, --resume after an interruption, the CLI (summary, --json, --fail-above exit 4)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers.rescore_scan_data import checkpoints, scan_run  # noqa: E402

from trajlab.cli import main  # noqa: E402
from trajlab.errors import TableError, TrajlabError  # noqa: E402
from trajlab.rescore import RescoreOptions, rescore  # noqa: E402
from trajlab.rescore.outputs import PER_CHECKPOINT, parts_dir  # noqa: E402

TABLES = [k for k, _ in PER_CHECKPOINT]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rescore_e2e")
    out = scan_run(tmp)
    a, b = checkpoints(tmp)
    summary = rescore(out, [a, b], RescoreOptions(progress=False, block_size=5))
    return {"tmp": tmp, "out": out, "a": a, "b": b, "summary": summary}


def _read(out, label, table):
    return pq.read_table(out / "rescore" / label / f"{table}.parquet")


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_tables_and_summary(run):
    out, s = run["out"], run["summary"]
    assert [c.label for c in s.checkpoints] == ["ckpt_a", "ckpt_b"]
    n_traj = pq.read_table(out / "trajectories.parquet").num_rows
    assert s.trajectories_selected == n_traj == 12
    for c in s.checkpoints:
        for t in TABLES:
            assert (out / "rescore" / c.label / f"{t}.parquet").exists()
        assert not parts_dir(out, c.label).exists()  # merged and cleaned up
        ts = _read(out, c.label, "trajectory_scores")
        tok = _read(out, c.label, "tokens")
        assert ts.num_rows == c.trajectories == n_traj
        assert tok.num_rows == sum(ts.column("n_scored").to_pylist()) == c.scored_tokens
        assert all(ts.column("roundtrip_ok").to_pylist()) and c.roundtrip_mismatches == 0
        assert set(tok.column("checkpoint").to_pylist()) == {c.label}
        regions = set(tok.column("region").to_pylist())
        assert {"structural", "function_name", "param_name", "param_value", "think", "text"} <= regions
        manifest = json.loads((out / "rescore" / c.label / "manifest.json").read_text())
        assert manifest["summary"]["trajectories"] == n_traj and manifest["thresholds"]["intrusion"] == 0.5
        # control stats: every scored position counted once per control token
        cs = _read(out, c.label, "control_stats").to_pylist()
        per_token = {}
        for r in cs:
            per_token[r["control_token"]] = per_token.get(r["control_token"], 0) + r["n_positions"]
        assert set(per_token.values()) == {c.scored_tokens}
        # the summary's spike rate, from the per-trajectory counts of the written table
        rows = ts.to_pylist()
        spikes = sum(r["n_intrusions"] + r["n_dropouts"] for r in rows)
        eligible = sum(r["n_intrusion_positions"] + r["n_dropout_positions"] for r in rows)
        assert spikes == _read(out, c.label, "spikes").num_rows and eligible > 0
        assert c.spike_rate == pytest.approx(spikes / eligible)
    assert (out / "rescore" / "compare.parquet").exists()


def test_token_values_match_full_logits(run):
    """Recompute one trajectory's logprobs from the model's full logits over the rebuilt stream."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = run["out"]
    tok_t = _read(out, "ckpt_b", "tokens").to_pandas()
    tid = tok_t["trajectory_id"].iloc[0]
    rows = tok_t[tok_t.trajectory_id == tid].sort_values("position")
    tokenizer = AutoTokenizer.from_pretrained(run["b"])
    model = AutoModelForCausalLM.from_pretrained(run["b"]).eval()
    traj = pq.read_table(out / "trajectories.parquet").to_pandas().set_index("trajectory_id").loc[tid]
    # the logged tokens, decoded in order, are exactly the assistant text of the output
    text = "".join(traj.output[a:b] for a, b in zip(rows.char_start, rows.char_end, strict=True))
    assert text == "".join(tokenizer.decode([i], skip_special_tokens=True) for i in rows.token_id)
    from trajlab.rescore.select import load_texts
    from trajlab.rescore.stream import build_streams

    st = build_streams(load_texts(out, [tid]), tokenizer, lambda tr, ti, t: [])[0]
    assert st.positions.tolist() == rows.position.tolist()
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.from_numpy(st.ids)[None]).logits[0].double(), -1)
    p = torch.from_numpy(st.positions)
    ref = lp[p - 1, torch.from_numpy(st.ids)[p]].numpy()
    np.testing.assert_allclose(rows.logprob.to_numpy(), ref, atol=1e-4)
    ent = (-(lp.exp() * lp).sum(-1))[p - 1].numpy()
    np.testing.assert_allclose(rows.entropy.to_numpy(), ent, atol=1e-4)
    assert (rows.token_id.to_numpy() == st.ids[st.positions]).all()


def test_malformation_points(run):
    out = run["out"]
    mal = _read(out, "ckpt_a", "malformations").to_pylist()
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    # every call that is not ok: the malformed ones and the warnings (text after the call is a warning with a
    # repair: its departure is the control token that should have ended the turn)
    assert len(mal) == sum(1 for c in calls if c["status"] in ("malformed", "warning")) > sum(
        1 for c in calls if c["status"] == "malformed")
    by_cat = {tuple(r["categories"]): r for r in mal}
    stray = next(r for r in mal if "stray_attribute" in r["categories"])
    assert stray["context"].endswith("</parameter")
    assert stray["malformed_token"] == " v" and stray["repaired_token"] == ">\n"
    garbled = next(r for r in mal if "garbled_function_name" in r["categories"])
    assert garbled["context"].endswith("<function=search_web")
    assert garbled["malformed_token"] == "英文" and garbled["repaired_token"] == ">\n"
    chatty = next(r for r in mal if "text_after_call" in r["categories"])
    assert chatty["context"].endswith("</tool_call>") and chatty["repaired_token"] == "<|im_end|>"
    for r in mal:
        assert 0 < r["malformed_prob"] < 1 and 0 < r["repaired_prob"] < 1
        assert r["log_odds"] == pytest.approx(np.log(r["malformed_prob"]) - np.log(r["repaired_prob"]), abs=1e-6)
    # the malformed token's probability is the one in the tokens table at that position
    tok = _read(out, "ckpt_a", "tokens").to_pandas()
    row = tok[(tok.trajectory_id == stray["trajectory_id"]) & (tok.position == stray["position"])].iloc[0]
    assert np.exp(row.logprob) == pytest.approx(stray["malformed_prob"], rel=1e-5)
    assert by_cat


def test_compare_table(run):
    cmp = pq.read_table(run["out"] / "rescore" / "compare.parquet").to_pylist()
    assert {r["checkpoint"] for r in cmp} == {"ckpt_a", "ckpt_b"}
    firsts = [r for r in cmp if r["checkpoint"] == "ckpt_a"]
    seconds = [r for r in cmp if r["checkpoint"] == "ckpt_b"]
    assert all(r["previous_checkpoint"] is None for r in firsts)
    assert all(r["previous_checkpoint"] == "ckpt_a" for r in seconds)
    key = {(r["control_token"], r["region"]): r for r in firsts}
    for r in seconds:
        prev = key[(r["control_token"], r["region"])]
        assert r["previous_mean_prob"] == pytest.approx(prev["mean_prob"])
        assert r["delta_mean_prob"] == pytest.approx(r["mean_prob"] - prev["mean_prob"])
    assert any(r["region"] == "all" for r in cmp)
    ends = [r for r in seconds if r["control_token"] == "<|im_end|>" and r["region"] == "structural"]
    assert ends and ends[0]["n_positions"] > 0


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_selection_tokens_calls_and_thresholds(run, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(run["out"], out, ignore=shutil.ignore_patterns("rescore"))
    s = rescore(out, [run["a"]], RescoreOptions(steps="3-4", sample=2, seed=1, tokens="calls", tau_dropout=0.0,
                                                progress=False))
    c = s.checkpoints[0]
    ts = _read(out, "ckpt_a", "trajectory_scores").to_pylist()
    assert s.trajectories_selected == 4 and {r["step"] for r in ts} == {3, 4}
    assert sum(r["n_malformed_calls"] > 0 for r in ts) >= 2  # stratified: malformed ones first
    assert c.dropouts == c.dropout_positions  # tau 0: every logged control token is a dropout
    tok = _read(out, "ckpt_a", "tokens").to_pylist()
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    ranges = {}
    for cl in calls:
        ranges.setdefault(cl["trajectory_id"], []).append((cl["char_start"], cl["char_end"]))
    assert tok and all(
        any(a < r["char_end"] and r["char_start"] < b or r["char_start"] == b for a, b in ranges[r["trajectory_id"]])
        for r in tok
    )
    assert len(tok) < c.scored_tokens
    import trajlab  # the public API: trajlab.rescore is callable although it is also a package

    s2 = trajlab.rescore(out, [run["a"]], trajlab.RescoreOptions(where="score = 0", tokens="none", progress=False))
    assert s2.trajectories_selected == 4
    assert _read(out, "ckpt_a", "tokens").num_rows == 0


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_resume_after_interruption(run, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(run["out"], out, ignore=shutil.ignore_patterns("rescore"))
    from trajlab.rescore import scoring

    real = scoring.ChunkedScorer.score
    calls = {"n": 0}

    def flaky(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the run is killed while scoring the third block
        return real(self, *a, **kw)

    monkeypatch.setattr(scoring.ChunkedScorer, "score", flaky)
    with pytest.raises(KeyboardInterrupt):
        rescore(out, [run["b"]], RescoreOptions(block_size=4, progress=False))
    monkeypatch.setattr(scoring.ChunkedScorer, "score", real)
    pdir = parts_dir(out, "ckpt_b")
    assert len(list((pdir / "trajectory_scores").glob("*.parquet"))) == 2
    # a half-written part (tokens without trajectory_scores) must be dropped on resume
    shutil.copy(next((pdir / "tokens").glob("*.parquet")), pdir / "tokens" / "r000-000099.parquet")
    s = rescore(out, [run["b"]], RescoreOptions(block_size=4, resume=True, progress=False))
    c = s.checkpoints[0]
    assert c.skipped_resume == 8 and c.trajectories == 12
    fresh = _read(run["out"], "ckpt_b", "trajectory_scores").to_pandas().set_index("trajectory_id").sort_index()
    resumed = _read(out, "ckpt_b", "trajectory_scores").to_pandas().set_index("trajectory_id").sort_index()
    assert list(resumed.index) == list(fresh.index)
    np.testing.assert_allclose(resumed.mean_logprob, fresh.mean_logprob, atol=1e-5)
    tok_fresh = _read(run["out"], "ckpt_b", "tokens").num_rows
    assert _read(out, "ckpt_b", "tokens").num_rows == tok_fresh  # no duplicated part
    # resuming a finished run scores nothing new and keeps every row
    s = rescore(out, [run["b"]], RescoreOptions(resume=True, progress=False))
    assert s.checkpoints[0].skipped_resume == 12 and s.checkpoints[0].trajectories == 12
    assert _read(out, "ckpt_b", "tokens").num_rows == tok_fresh


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_cli_summary_json_and_fail_above(run, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(run["out"], out, ignore=shutil.ignore_patterns("rescore"))
    rc = main(["rescore", str(out), "--ckpt", str(run["a"]), "--limit", "3", "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "ckpt_a" in printed and "calibrated spikes" in printed and "against ckpt_a" in printed
    two = ["rescore", str(out), "--ckpt", str(run["a"]), "--ckpt", str(run["b"]), "--limit", "3", "--json"]
    assert main([*two, "--fail-above", "0"]) == 4  # ckpt_b is another model: beyond ckpt_a's thresholds
    data = json.loads(capsys.readouterr().out)
    assert data["exceeded"] is True and data["reference"] == "ckpt_a" and data["checkpoints"][0]["trajectories"] == 3
    rates = [c["calibrated_spike_rate"] for c in data["checkpoints"]]
    assert rates[0] <= 1 - data["calibration_quantile"] < rates[1]
    assert main([*two, "--fail-above", "1"]) == 0
    capsys.readouterr()
    # --fail-above reads the calibrated rate, not the absolute-tau one
    assert main([*two, "--reference", "ckpt_b", "--fail-above", str(rates[1] / 2)]) == 4
    data = json.loads(capsys.readouterr().out)
    assert data["reference"] == "ckpt_b" and data["checkpoints"][1]["calibrated_spike_rate"] <= 0.001
    assert main([*two, "--reference", "ckpt_c"]) == 2
    err = capsys.readouterr().err
    assert "--reference 'ckpt_c'" in err and "ckpt_a, ckpt_b" in err and "Traceback" not in err


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_copy_of_the_reference_and_drift_tables(run, tmp_path):
    """A copy of the reference checkpoint: calibrated rate at most 1 - q, every paired delta exactly 0."""
    out = tmp_path / "out"
    shutil.copytree(run["out"], out, ignore=shutil.ignore_patterns("rescore"))
    twin = shutil.copytree(run["a"], tmp_path / "twin")
    s = rescore(out, [run["a"], twin, run["b"]], RescoreOptions(progress=False, calibration_quantile=0.99))
    a, t, b = s.checkpoints
    assert s.reference == "ckpt_a" and a.calibrated_units > 1000
    assert t.calibrated_spike_rate == a.calibrated_spike_rate <= 0.01 < b.calibrated_spike_rate
    assert t.paired_drift == 0 and t.paired_drift_lo == 0 and t.paired_points == a.malformations > 0
    paired = pq.read_table(out / "rescore" / "paired.parquet").to_pylist()
    twin_rows = [r for r in paired if r["checkpoint"] == "twin"]
    assert twin_rows and all(r["median"] == 0 and r["mean"] == 0 for r in twin_rows)
    assert {r["scope"] for r in twin_rows} >= {"region", "intrusion", "dropout", "drift", "malformation"}
    for name in ("calibration", "paired", "discovered", "distribution"):
        assert pq.read_table(out / "rescore" / f"{name}.parquet").num_rows > 0, name
    disc = [r for r in pq.read_table(out / "rescore" / "discovered.parquet").to_pylist() if r["checkpoint"] == "ckpt_b"]
    assert disc and all(r["gained"] > 0 and r["token"] is not None for r in disc)
    # positions: every scored token once; control probabilities exactly where intrusion is possible
    pos = _read(out, "ckpt_a", "positions")
    assert pos.num_rows == a.scored_tokens
    assert pos.column("control_probs").null_count == pos.num_rows - a.intrusion_positions
    mass = _read(out, "ckpt_a", "token_mass").to_pandas()
    n_struct = int((pos.column("region").to_numpy(zero_copy_only=False) == "structural").sum())
    assert mass[mass.group == "structural"].mass.sum() == pytest.approx(n_struct, rel=1e-3)


def test_bad_input_is_one_line(run, tmp_path, capsys):
    with pytest.raises(TableError):
        rescore(tmp_path, [run["a"]])
    with pytest.raises(TrajlabError, match="where 'no_such_column = 1'"):
        rescore(run["out"], [run["a"]], RescoreOptions(where="no_such_column = 1"))
    assert main(["rescore", str(tmp_path), "--ckpt", str(run["a"])]) == 2
    err = capsys.readouterr().err
    assert "trajectories.parquet" in err and "Traceback" not in err
    assert main(["rescore", str(run["out"]), "--ckpt", str(tmp_path / "missing")]) == 2
    assert main(["rescore", str(run["out"]), "--ckpt", str(run["a"]), "--tokens", "some"]) == 2


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_torchrun_two_processes_merge_their_parts(run, tmp_path):
    """`torchrun --nproc-per-node 2 -m trajlab rescore` on CPU (gloo): each rank scores half, rank 0 merges."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    shutil.copytree(run["out"], out, ignore=shutil.ignore_patterns("rescore"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "trajlab", "rescore", str(out), "--ckpt", str(run["a"]), "--ckpt", str(run["b"]),
           "--no-progress", "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("ckpt_a", "ckpt_b"):
        manifest = json.loads((out / "rescore" / label / "manifest.json").read_text())
        assert manifest["world_size"] == 2
        assert {p.split("-")[0] for p in manifest["parts"]} == {"r000", "r001"}  # both ranks wrote parts
        assert not parts_dir(out, label).exists()
        dist = _read(out, label, "tokens").to_pandas().sort_values(["trajectory_id", "position"])
        single = _read(run["out"], label, "tokens").to_pandas().sort_values(["trajectory_id", "position"])
        assert len(dist) == len(single)
        assert (dist.token_id.to_numpy() == single.token_id.to_numpy()).all()
        np.testing.assert_allclose(dist.logprob.to_numpy(), single.logprob.to_numpy(), atol=1e-4)
        assert _read(out, label, "trajectory_scores").num_rows == 12
    assert (out / "rescore" / "compare.parquet").exists()
    data = json.loads(proc.stdout[proc.stdout.index("{"):])  # only rank 0 prints the summary
    assert data["world_size"] == 2 and [c["trajectories"] for c in data["checkpoints"]] == [12, 12]

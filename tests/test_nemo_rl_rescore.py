"""``rescore`` on NeMo-RL trajectories: the logged ids are scored as they are (no re-tokenisation), and the
checkpoint's log-probs sit beside the logged ones (``rescore_tokens.logged_logprob``, the summary's gap)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.helpers.rescore_fixtures import QWEN35_VOCAB, copy_tokenizer, qwen35_tokenizer_dir, save_tiny_model
from trajlab.rescore import RescoreOptions, rescore
from trajlab.scan import ScanOptions, scan

DATA = Path(__file__).parent / "data" / "nemo_rl" / "train_data_step1.jsonl"


@pytest.mark.slow
def test_rescore_uses_logged_ids_and_compares_logprobs(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(DATA, d / DATA.name)
    out = tmp_path / "scan"
    scan([d], out, ScanOptions(jobs=1))
    ckpt = save_tiny_model(tmp_path / "ckpt", "qwen3", vocab_size=QWEN35_VOCAB, seed=0)
    copy_tokenizer(qwen35_tokenizer_dir(), ckpt)
    s = rescore(out, [ckpt], RescoreOptions(progress=False, tokens="all"))
    c = s.checkpoints[0]
    rows = [json.loads(line) for line in DATA.read_text().splitlines()]
    n_gen = sum(sum(r["token_loss_mask"][0]) for r in rows)
    assert c.trajectories == 2 and c.roundtrip_mismatches == 0
    assert c.scored_tokens == n_gen  # exactly the generated tokens (none at position 0)
    tok = pl.read_parquet(out / "rescore" / c.label / "tokens.parquet")
    logged = pl.read_parquet(out / "rollout_tokens.parquet").filter(pl.col("generated"))
    j = tok.join(logged.select("trajectory_id", "position", "token_id", "logprob"),
                 on=["trajectory_id", "position"], how="inner")
    assert j.height == n_gen and (j["token_id"] == j["token_id_right"]).all()  # the logged ids, unchanged
    assert np.allclose(j["logged_logprob"].to_numpy(), j["logprob_right"].to_numpy(), atol=1e-6)
    gap = (j["logprob"].cast(pl.Float64) - j["logged_logprob"].cast(pl.Float64)).abs().mean()
    assert c.logged_tokens == n_gen and c.logged_logprob_gap == pytest.approx(gap, rel=1e-4)
    assert c.logged_logprob_gap > 1.0  # a random tiny model is far from the trained policy

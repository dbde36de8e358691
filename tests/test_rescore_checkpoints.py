"""Checkpoint resolution and loading for `trajlab rescore`: HF dirs, verl FSDP actors (real DTensor shards
written by a 2-process gloo group, merged back bit-exactly), Megatron actors, checkpoint roots, and the
one-line errors for every broken layout."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torch.distributed.tensor")  # registers the DTensor classes for weights_only loads

from helpers.rescore_fixtures import (  # noqa: E402
    QWEN3_VOCAB,
    FsdpJob,
    UntrustedStateDict,
    checkpoints_root,
    hf_actor,
    load_state_dict,
    megatron_actor,
    qwen3_tokenizer_dir,
    rewrite_shards,
    save_tiny_model,
    save_tiny_qwen35_vlm,
    write_fsdp_shards,
)

from trajlab.commands.options import flag_for  # noqa: E402
from trajlab.errors import CheckpointError, MissingDependencyError  # noqa: E402
from trajlab.rescore.checkpoints import (  # noqa: E402
    MERGED_CACHE_DIRNAME,
    CheckpointRef,
    check_tokenizer_matches,
    load_model,
    load_tokenizer,
    resolve_checkpoints,
    resolve_dtype,
)
from trajlab.rescore.fsdp_merge import find_shards, merge_fsdp_shards  # noqa: E402


def _logits(model, ids):
    with torch.inference_mode():
        return model(input_ids=ids, use_cache=False).logits.float()


def _ids(vocab: int, n: int = 40, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, n), generator=g)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """HF dirs of tiny models and their FSDP shard sets, written by one real 2-rank gloo group."""
    root = tmp_path_factory.mktemp("fsdp")
    q3 = save_tiny_model(root / "q3", "qwen3", tokenizer_dir=qwen3_tokenizer_dir())
    vlm = save_tiny_qwen35_vlm(root / "vlm", vocab_size=4096)
    q2 = save_tiny_model(root / "q2", "qwen2", vocab_size=1001, tie_word_embeddings=False)  # odd rows: uneven shards
    jobs = {
        "q3": FsdpJob(str(q3), str(root / "a_q3"), reference_out=str(root / "q3_ref.pt")),
        "vlm": FsdpJob(str(vlm), str(root / "a_vlm"), reference_out=str(root / "vlm_ref.pt")),
        "hsdp": FsdpJob(str(q2), str(root / "a_hsdp"), how="distribute", mesh=("ddp", "fsdp"),
                        plain_keys=("model.norm.weight",), reference_out=str(root / "q2_ref.pt")),
        "partial": FsdpJob(str(q2), str(root / "a_partial"), how="distribute", partial_key="model.norm.weight"),
    }
    write_fsdp_shards(list(jobs.values()), world_size=2)
    return {"root": root, "q3": q3, "vlm": vlm, "q2": q2, **{f"a_{k}": Path(j.actor_dir) for k, j in jobs.items()}}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ------------------------------------------------------------------------------------------ FSDP merge
@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_fsdp2_shards_merge_back_bit_exactly(run):
    ref = torch.load(run["root"] / "q3_ref.pt", weights_only=True)
    shard0 = torch.load(run["a_q3"] / "model_world_size_2_rank_0.pt", weights_only=True)
    from torch.distributed.tensor import DTensor, Shard

    assert isinstance(shard0["model.embed_tokens.weight"], DTensor)  # really what verl writes
    assert tuple(shard0["model.embed_tokens.weight"].placements) == (Shard(0),)
    merged = merge_fsdp_shards(run["a_q3"])
    assert set(merged) == set(ref)
    for k, v in ref.items():
        assert merged[k].dtype == v.dtype == torch.float32
        assert torch.equal(merged[k], v), k


def test_vlm_shards_merge_back_bit_exactly(run):
    ref = torch.load(run["root"] / "vlm_ref.pt", weights_only=True)
    merged = merge_fsdp_shards(run["a_vlm"])
    assert any(k.startswith("model.language_model.") for k in merged)
    assert any(k.startswith("model.visual.") for k in merged)
    assert set(merged) == set(ref) and all(torch.equal(merged[k], ref[k]) for k in ref)


def test_hsdp_mesh_uneven_shards_and_plain_tensors(run):
    ref = torch.load(run["root"] / "q2_ref.pt", weights_only=True)
    shard1 = torch.load(run["a_hsdp"] / "model_world_size_2_rank_1.pt", weights_only=True)
    emb = shard1["model.embed_tokens.weight"]
    assert emb.device_mesh.mesh_dim_names == ("ddp", "fsdp") and emb.to_local().shape[0] == 500  # 1001 = 501 + 500
    assert not hasattr(shard1["model.norm.weight"], "placements")  # a plain replicated tensor
    merged = merge_fsdp_shards(run["a_hsdp"])
    assert set(merged) == set(ref) and all(torch.equal(merged[k], ref[k]) for k in ref)


def test_partial_placement_is_refused(run):
    with pytest.raises(CheckpointError, match="model.norm.weight has a Partial placement"):
        merge_fsdp_shards(run["a_partial"])


def test_missing_rank_file_is_named(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "actor")
    (actor / "model_world_size_2_rank_1.pt").unlink()
    for call in (lambda: merge_fsdp_shards(actor), lambda: resolve_checkpoints([actor])):
        with pytest.raises(CheckpointError, match=r"missing model_world_size_2_rank_1\.pt \(1 of 2 ranks\)"):
            call()


def test_world_size_from_config_or_file_names(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "actor")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 4}))
    with pytest.raises(CheckpointError, match="world-size mismatch: fsdp_config.json says 4, shard files say 2"):
        merge_fsdp_shards(actor)
    (actor / "fsdp_config.json").unlink()  # older saves: fall back to the file names
    ws, files = find_shards(actor)
    assert ws == 2 and [f.name for f in files] == ["model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt"]
    assert torch.equal(merge_fsdp_shards(actor)["lm_head.weight"],
                       torch.load(run["root"] / "q3_ref.pt", weights_only=True)["lm_head.weight"])


def test_mesh_larger_than_rank_files(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "actor")
    for f in actor.glob("model_world_size_2_*.pt"):  # rename as if saved by a world of 1
        f.unlink()
    shutil.copy2(run["a_q3"] / "model_world_size_2_rank_0.pt", actor / "model_world_size_1_rank_0.pt")
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    with pytest.raises(CheckpointError, match=r"world-size mismatch: .* \(2,\) device mesh"):
        merge_fsdp_shards(actor)


def test_no_config_and_no_shards(tmp_path):
    actor = tmp_path / "global_step_5" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    with pytest.raises(CheckpointError, match="actor directory without model shards"):
        resolve_checkpoints([actor])
    with pytest.raises(CheckpointError, match="no fsdp_config.json and no model_world_size_W_rank_R.pt shards"):
        merge_fsdp_shards(actor)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 2}))
    with pytest.raises(CheckpointError, match="fsdp_config.json but no model_world_size"):
        resolve_checkpoints([actor])


def test_plain_tensors_one_copy_or_error_when_ranks_differ(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "same")

    def same(rank, sd):
        sd["model.extra_buffer"] = torch.arange(6.0).reshape(2, 3)
        return sd

    rewrite_shards(actor, same)
    assert torch.equal(merge_fsdp_shards(actor)["model.extra_buffer"], torch.arange(6.0).reshape(2, 3))
    actor2 = _copy(run["a_q3"], tmp_path / "diff")
    rewrite_shards(actor2, lambda rank, sd: {**sd, "model.extra_buffer": torch.full((3,), float(rank))})
    with pytest.raises(CheckpointError, match="model.extra_buffer is a plain tensor that differs between rank 0"):
        merge_fsdp_shards(actor2)


def test_unsafe_pickle_refused_unless_allowed(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "actor")
    rewrite_shards(actor, lambda rank, sd: UntrustedStateDict(sd))
    with pytest.raises(CheckpointError, match=r"refused to unpickle \(weights_only=True\)") as err:
        merge_fsdp_shards(actor)
    assert "allow_unsafe_pickle" in str(err.value) and "--allow-unsafe-pickle" in err.value.render(flag_for)
    merged = merge_fsdp_shards(actor, allow_unsafe_pickle=True)
    ref = torch.load(run["root"] / "q3_ref.pt", weights_only=True)
    assert all(torch.equal(merged[k], ref[k]) for k in ref)


def test_lora_shards_refused_with_merger_hint(run, tmp_path):
    actor = _copy(run["a_hsdp"], tmp_path / "actor")  # PEFT's naming, as verl's LoRA actors save it

    def peft_names(rank, sd):
        out = {f"base_model.model.{k}".replace("q_proj.weight", "q_proj.base_layer.weight"): v for k, v in sd.items()}
        out["base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight"] = torch.zeros(4, 64)
        return out

    rewrite_shards(actor, peft_names)
    with pytest.raises(CheckpointError, match="LoRA shards") as err:
        load_model(resolve_checkpoints([actor])[0])
    assert "verl.model_merger merge --backend fsdp" in str(err.value)


def test_truncated_shard(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "actor")
    f = actor / "model_world_size_2_rank_1.pt"
    f.write_bytes(f.read_bytes()[:4096])
    with pytest.raises(CheckpointError, match=r"rank_1\.pt: cannot load shard \(truncated"):
        merge_fsdp_shards(actor)


# -------------------------------------------------------------------------------------- model loading
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_load_model_from_shards_equals_original(run):
    from transformers import AutoModelForCausalLM

    (ref,) = resolve_checkpoints([run["a_q3"]])
    assert (ref.kind, ref.hf_dir, ref.world_size) == ("fsdp", None, 2)
    model = load_model(ref)
    orig = AutoModelForCausalLM.from_pretrained(run["q3"]).eval()
    ids = _ids(QWEN3_VOCAB)
    assert not model.training and next(model.parameters()).dtype == torch.float32
    assert torch.equal(_logits(model, ids), _logits(orig, ids))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # still tied
    tok = load_tokenizer(ref)  # from actor/huggingface/
    check_tokenizer_matches(model, tok)
    assert tok.convert_tokens_to_ids("<tool_call>") == 151657


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_merged_cache_written_reused_and_invalidated(run, tmp_path):
    from transformers import AutoModelForCausalLM

    actor = _copy(run["a_q3"], tmp_path / "actor")
    (ref,) = resolve_checkpoints([actor])
    model = load_model(ref, cache_merged=True)
    cache = actor / MERGED_CACHE_DIRNAME
    weights = cache / "model.safetensors"
    assert weights.is_file() and (cache / "config.json").is_file()
    assert not list(actor.glob(f"{MERGED_CACHE_DIRNAME}.tmp-*"))  # written atomically, no leftovers
    orig = AutoModelForCausalLM.from_pretrained(run["q3"]).eval()
    ids = _ids(QWEN3_VOCAB)
    assert torch.equal(_logits(model, ids), _logits(orig, ids))
    first = weights.stat().st_mtime_ns
    load_model(ref, cache_merged=True)
    assert weights.stat().st_mtime_ns == first  # reused
    shard = actor / "model_world_size_2_rank_0.pt"
    os.utime(shard, ns=(first + 10**9, first + 10**9))  # a newer shard (re-saved step) invalidates the cache
    load_model(ref, cache_merged=True)
    assert weights.stat().st_mtime_ns != first


def test_vlm_shards_load_as_causal_lm(run):
    from transformers import AutoModelForCausalLM

    (ref,) = resolve_checkpoints([run["a_vlm"]])
    model = load_model(ref)
    assert type(model).__name__ == "Qwen3_5ForCausalLM"
    orig = AutoModelForCausalLM.from_pretrained(run["vlm"]).eval()
    ids = _ids(4096)
    assert torch.equal(_logits(model, ids), _logits(orig, ids))
    (hf_ref,) = resolve_checkpoints([run["vlm"]])  # the VLM as an HF directory loads the same way
    assert torch.equal(_logits(load_model(hf_ref), ids), _logits(orig, ids))


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3", "qwen3_moe", "qwen3_5_text"])
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_hf_dir_tiny_models(model_type, tmp_path):
    from transformers import AutoModelForCausalLM

    d = save_tiny_model(tmp_path / f"tiny-{model_type}", model_type, tokenizer_dir=qwen3_tokenizer_dir())
    (ref,) = resolve_checkpoints([str(d)])
    assert ref == CheckpointRef(label=f"tiny-{model_type}", path=d, kind="hf", step=None, hf_dir=d, config_dir=d)
    model = load_model(ref, device="cpu", dtype="auto")
    check_tokenizer_matches(model, load_tokenizer(ref))
    orig = AutoModelForCausalLM.from_pretrained(d).eval()
    ids = _ids(QWEN3_VOCAB, 24)
    assert torch.equal(_logits(model, ids), _logits(orig, ids))
    assert model.config.model_type == model_type


def test_dtype_and_device_choices(run):
    (ref,) = resolve_checkpoints([run["q2"]])
    assert next(load_model(ref, dtype="bf16").parameters()).dtype == torch.bfloat16
    assert resolve_dtype("auto", "cpu") == torch.float32
    with pytest.raises(CheckpointError, match="dtype int8"):
        load_model(ref, dtype="int8")
    if not torch.cuda.is_available():
        with pytest.raises(CheckpointError, match="no CUDA device"):
            load_model(ref, device="cuda")
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        with pytest.raises(MissingDependencyError, match="accelerate"):
            load_model(ref, device_map="auto")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_auto_loads_bf16(run):
    (ref,) = resolve_checkpoints([run["a_q3"]])
    model = load_model(ref, device="auto")
    p = next(model.parameters())
    assert p.is_cuda and p.dtype in (torch.bfloat16, torch.float16)
    assert model.config._attn_implementation in ("sdpa", "flash_attention_2")


def test_missing_weights_refused(run, tmp_path):
    from safetensors.torch import save_file

    d = _copy(run["q2"], tmp_path / "broken")
    sd = load_state_dict(d)
    del sd["model.layers.1.mlp.up_proj.weight"]
    save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"1 weights missing \(model.layers.1.mlp.up_proj.weight\)"):
        load_model(resolve_checkpoints([d])[0])


def test_config_errors(run, tmp_path):
    d = _copy(run["q2"], tmp_path / "cfg")
    cfg = json.loads((d / "config.json").read_text())
    (ref,) = resolve_checkpoints([d])
    (d / "config.json").write_text(json.dumps({**cfg, "vocab_size": 2000}))
    with pytest.raises(CheckpointError, match="weights do not fit"):
        load_model(ref)
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "qwen_future_9"}))
    with pytest.raises(CheckpointError, match="does not know model_type 'qwen_future_9'"):
        load_model(ref)
    auto_map = {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM"}
    (d / "config.json").write_text(json.dumps({**cfg, "model_type": "xmodel", "auto_map": auto_map}))
    with pytest.raises(CheckpointError, match="needs its own code") as err:
        load_model(ref)
    assert "trust_remote_code" in str(err.value) and "--trust-remote-code" in err.value.render(flag_for)


# ------------------------------------------------------------------------------------------ resolving
@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
def test_verl_root_layouts_steps_and_labels(run, tmp_path):
    root = checkpoints_root(tmp_path / "ckpts" / "proj" / "exp", {
        40: lambda a: hf_actor(a, run["q2"]),                       # save_contents with hf_model
        60: lambda a: shutil.copytree(run["a_hsdp"], a, dirs_exist_ok=True),  # shards + huggingface/ config
        80: lambda a: megatron_actor(a, run["q2"], layout="v2"),    # 0.9 Megatron: model/huggingface
        100: lambda a: megatron_actor(a, run["q2"], layout="v1"),   # 0.7 Megatron: huggingface + dist_ckpt
    })
    refs = resolve_checkpoints([root])
    assert [(r.label, r.step, r.kind) for r in refs] == [
        ("global_step_40", 40, "fsdp"), ("global_step_60", 60, "fsdp"), ("global_step_80", 80, "megatron"),
        ("global_step_100", 100, "megatron")]
    assert refs[0].hf_dir == root / "global_step_40" / "actor" / "huggingface"
    assert refs[1].hf_dir is None and refs[1].config_dir == root / "global_step_60" / "actor" / "huggingface"
    assert refs[2].hf_dir == root / "global_step_80" / "actor" / "model" / "huggingface"
    assert refs[3].hf_dir == root / "global_step_100" / "actor" / "huggingface"
    assert [r.step for r in resolve_checkpoints([root], steps={100, 60})] == [60, 100]
    with pytest.raises(CheckpointError, match=r"no checkpoint for step\(s\) 70") as err:
        resolve_checkpoints([root], steps={60, 70})
    assert "available: 40, 60, 80, 100" in str(err.value)
    # a step dir descends into actor/; the actor dir and its huggingface/ resolve with the step's label
    for p in (root / "global_step_60", root / "global_step_60" / "actor"):
        (r,) = resolve_checkpoints([p])
        assert (r.label, r.step, r.kind, r.path) == ("global_step_60", 60, "fsdp", root / "global_step_60" / "actor")
    (r,) = resolve_checkpoints([root / "global_step_40" / "actor" / "huggingface"])
    assert (r.label, r.step, r.kind) == ("global_step_40", 40, "hf")
    # every layout loads to the same weights
    ids = _ids(1001, 16)
    expected = _logits(load_model(refs[0]), ids)
    for r in refs[1:]:
        assert torch.equal(_logits(load_model(r), ids), expected), r.label


def test_root_skips_a_step_still_being_written(run, tmp_path, capsys):
    root = checkpoints_root(tmp_path / "exp", {10: lambda a: hf_actor(a, run["q2"])})  # tracker says 10
    partial = root / "global_step_20" / "actor"
    partial.mkdir(parents=True)
    shutil.copy2(run["a_hsdp"] / "model_world_size_2_rank_0.pt", partial)  # rank 1 not written yet
    (partial / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 2}))
    assert [r.step for r in resolve_checkpoints([root])] == [10]
    assert "skipping global_step_20" in capsys.readouterr().err
    with pytest.raises(CheckpointError, match="missing model_world_size_2_rank_1.pt"):
        resolve_checkpoints([root], steps={20})  # asked for explicitly: an error
    (root / "latest_checkpointed_iteration.txt").write_text("20")  # the tracker claims it is complete
    with pytest.raises(CheckpointError, match="missing model_world_size_2_rank_1.pt"):
        resolve_checkpoints([root])


def test_labels_are_unique_across_runs(run, tmp_path):
    a = checkpoints_root(tmp_path / "runA", {40: lambda d: hf_actor(d, run["q2"])})
    b = checkpoints_root(tmp_path / "runB", {40: lambda d: hf_actor(d, run["q2"])})
    refs = resolve_checkpoints([a, b, run["q2"], run["q2"]])
    labels = [r.label for r in refs]
    parent = run["q2"].parent.name
    assert labels == ["runA-global_step_40", "runB-global_step_40", f"{parent}-q2", f"{parent}-q2-2"]
    assert len(set(labels)) == len(labels)


def test_megatron_without_hf_weights_names_the_merger(run, tmp_path):
    actor = megatron_actor(tmp_path / "global_step_7" / "actor", run["q3"], layout="v2", with_weights=False)
    with pytest.raises(CheckpointError, match="Megatron checkpoint without HF weights") as err:
        resolve_checkpoints([actor.parent])
    assert f"python -m verl.model_merger merge --backend megatron --local_dir {actor}" in str(err.value)


def test_sft_trainer_step_dir_without_actor(run, tmp_path):
    step = _copy(run["a_q3"], tmp_path / "global_step_12")  # verl's SFT trainer: no actor/ level
    (ref,) = resolve_checkpoints([step])
    assert (ref.label, ref.step, ref.kind, ref.world_size) == ("global_step_12", 12, "fsdp", 2)


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "nope", "no such checkpoint directory"),
    (lambda p: (p / "w.safetensors").write_bytes(b"x") and p / "w.safetensors", "must be a directory"),
    (lambda p: p, "not a checkpoint"),
    (lambda p: ((p / "config.json").write_text("{}"), p)[1], "config.json but no model weights"),
    (lambda p: ((p / "global_step_3").mkdir(), p / "global_step_3")[1], "step directory without actor/"),
])
def test_resolve_errors(tmp_path, make, message):
    with pytest.raises(CheckpointError, match=message):
        resolve_checkpoints([make(tmp_path)])


def test_fsdp_shards_without_hf_config(run, tmp_path):
    actor = _copy(run["a_q3"], tmp_path / "actor")
    shutil.rmtree(actor / "huggingface")
    with pytest.raises(CheckpointError, match="FSDP shards but no huggingface/config.json"):
        resolve_checkpoints([actor])


# ------------------------------------------------------------------------------------ demo checkpoints
DEMO = Path(__file__).resolve().parents[1] / "sample_data" / "demo_checkpoints"


@pytest.mark.skipif(not (DEMO / "global_step_140").is_dir(), reason="demo checkpoints not built")
@pytest.mark.slow  # > 5 s on 2 shared cores
def test_demo_checkpoints_drifted_prefers_malformed_continuations():
    """The committed demo series: healthy reference (HF weights) vs the last, drifted one (real FSDP shards)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_demo_checkpoints", DEMO.parent / "make_demo_checkpoints.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    refs = resolve_checkpoints([DEMO])
    assert [(r.label, r.step) for r in refs] == [(f"global_step_{s}", s) for s, *_ in demo.SERIES]
    for r, (_s, _seen, _n, _lr, layout) in zip(refs, demo.SERIES, strict=True):  # both verl layouts
        assert r.kind == "fsdp" and (r.hf_dir is not None) == (layout == "hf")
        assert layout == "hf" or r.world_size == 2
    healthy, drifted = refs[0], refs[-1]
    tok = load_tokenizer(healthy)
    models = [load_model(r) for r in (healthy, drifted)]
    for m in models:
        check_tokenizer_matches(m, tok)
    rows = demo.read_steps(range(141, 151))
    for _name, pattern, repair in demo.CASES:
        h, d = (demo.divergence_probs(m, tok, rows, pattern, repair, limit=4) for m in models)
        assert len(h) == len(d) == 4
        assert all(dd[0] > hh[0] for hh, dd in zip(h, d, strict=True))  # malformed token: more likely
        assert sum(dd[1] for dd in d) < sum(hh[1] for hh in h)  # well-formed token: less likely

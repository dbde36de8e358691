"""Build the series of tiny demo checkpoints that `trajlab rescore` compares in the README demo (seeded, CPU).

    python sample_data/make_demo_checkpoints.py            # rewrite sample_data/demo_checkpoints/ (~3 min, 2 cores)
    python sample_data/make_demo_checkpoints.py --verify   # only re-run the check on the committed checkpoints

What it does, from `sample_data/qwen35_xml_run` (written by `sample_data/generate.py`):

1. trains a small byte-level BPE tokenizer on the run's text, with Qwen3.5's pre-tokenizer regex and Qwen's
   special tokens appended in Qwen's order (`<|im_end|>`, `<tool_call>`, `<think>`, ... as added tokens;
   `<tool_call>`/`<think>` are not special, as in Qwen's own files);
2. trains a tiny Qwen3 model (hidden 96, 2 layers) on the ChatML streams of steps 1-20 (~1 % malformed calls)
   -> the "healthy" reference `global_step_20`, then continues it, checkpoint after checkpoint, on the steps
   each one has seen since the previous one (21-50, 51-80, 81-110, 111-140; the malformed-call share rises
   from ~2 % to ~45 % along the way) -> `global_step_50`, `_80`, `_110`, `_140`;
3. saves the series in both verl layouts: with `hf_model` (`global_step_N/actor/huggingface/` holds the
   weights: steps 20, 80, 110) and without (real FSDP DTensor shards
   `global_step_N/actor/model_world_size_2_rank_{0,1}.pt` written by a 2-process gloo group,
   `fsdp_config.json`, and `huggingface/` with config and tokenizer only: steps 50, 140);
4. verifies, by teacher forcing through trajlab's own loader, that the last checkpoint gives more probability
   than the first to the malformed continuations: ` v2` after `</parameter` and the suffix after `search_web`
   (e.g. `<function=search_web英文明确>`), and less to the well-formed token there.

The loss covers assistant tokens only (the model's own turns and their `<|im_end|>`), like RL on the actor.
Weights are stored in bf16 to keep the committed files small (~6 MB in all).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import re
import shutil
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUN = HERE / "qwen35_xml_run" / "rollout"
OUT = HERE / "demo_checkpoints"
# (checkpoint step, rollout steps trained on since the previous checkpoint, optimizer steps, lr, layout)
SERIES = (
    (20, range(1, 21), 80, 5e-3, "hf"),
    (50, range(21, 51), 40, 4e-3, "fsdp"),
    (80, range(51, 81), 40, 4e-3, "hf"),
    (110, range(81, 111), 40, 4e-3, "hf"),
    (140, range(111, 141), 40, 4e-3, "fsdp"),
)
HEALTHY_LABEL, DRIFTED_LABEL = SERIES[0][0], SERIES[-1][0]
VOCAB = 2048
SYSTEM_KEEP = 0.25  # share of training streams that keep the long system prompt (saves ~half the compute)
MODEL = dict(hidden_size=96, intermediate_size=288, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=24, max_position_embeddings=4096, tie_word_embeddings=True,
             rope_theta=10000.0, initializer_range=0.02, bos_token_id=None)
SEED = 20251129
_TOOL_TURN = re.compile(r"\n?user\n<tool_response>.*?</tool_response>\nassistant\n", re.S)
_ROLE = re.compile(r"(?:^|\n)(system|user|assistant)\n")


# ------------------------------------------------------------------------------------------------ data
def read_steps(steps: range) -> list[dict]:
    rows = []
    for s in steps:
        with open(RUN / f"{s}.jsonl", encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def chatml_prompt(decoded_input: str, keep_system: bool = True) -> str:
    """`system\\n...\\nuser\\n...\\nassistant\\n` (decoded with skip_special_tokens) back to ChatML."""
    parts = []
    matches = list(_ROLE.finditer(decoded_input))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(decoded_input)
        body = decoded_input[m.end():end]
        if m.group(1) == "system" and not keep_system:
            continue
        if m.group(1) == "assistant" and i == len(matches) - 1:
            parts.append("<|im_start|>assistant\n")
        else:
            parts.append(f"<|im_start|>{m.group(1)}\n{body}<|im_end|>\n")
    return "".join(parts)


def segments(row: dict, keep_system: bool = True) -> list[tuple[str, bool]]:
    """The trajectory as (text, is_assistant) pieces in ChatML: assistant turns end with `<|im_end|>`, tool
    turns become `\\n<|im_start|>user\\n<tool_response>...<|im_end|>\\n<|im_start|>assistant\\n`."""
    out: list[tuple[str, bool]] = [(chatml_prompt(row["input"], keep_system), False)]
    text, pos = row["output"], 0
    for m in _TOOL_TURN.finditer(text):
        out.append((text[pos:m.start()] + "<|im_end|>", True))
        body = m.group(0)
        nl = "\n" if body.startswith("\n") else ""
        resp = body[len(nl) + len("user\n"): -len("\nassistant\n")]
        out.append((f"{nl}<|im_start|>user\n{resp}<|im_end|>\n<|im_start|>assistant\n", False))
        pos = m.end()
    out.append((text[pos:] + "<|im_end|>", True))
    return out


# ------------------------------------------------------------------------------------------- tokenizer
def train_tokenizer(texts: list[str], out_dir: Path):
    from tokenizers import (
        AddedToken,
        Tokenizer,
        pre_tokenizers,
        trainers,
    )
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    from trajlab.rescore.qwen_tokenizers import (
        QWEN35_EXTRA_TOKENS,
        QWEN35_PATTERN,
        QWEN_ADDED_TOKENS,
        QWEN_NON_SPECIAL,
        set_qwen_pipeline,
    )

    added = QWEN_ADDED_TOKENS + QWEN35_EXTRA_TOKENS
    tk = Tokenizer(BPE(fuse_unk=False, byte_fallback=False))
    set_qwen_pipeline(tk, QWEN35_PATTERN)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(added), min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(texts, trainer=trainer)
    for content in added:  # Qwen's order, right after the BPE ids
        tok = AddedToken(content, special=content not in QWEN_NON_SPECIAL, normalized=False)
        (tk.add_tokens if content in QWEN_NON_SPECIAL else tk.add_special_tokens)([tok])
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None, model_max_length=4096,
                                   clean_up_tokenization_spaces=False)
    fast.save_pretrained(str(out_dir))
    return fast


def encode(tok, row: dict, keep_system: bool = True) -> tuple[list[int], list[int]]:
    ids: list[int] = []
    mask: list[int] = []
    for text, scored in segments(row, keep_system):
        piece = tok.encode(text, add_special_tokens=False)
        ids += piece
        mask += [int(scored)] * len(piece)
    return ids, mask


# ---------------------------------------------------------------------------------------------- training
def train(model, batches_src: list[tuple[list[int], list[int]]], *, steps: int, lr: float, batch: int, seed: int,
          pad_id: int, label: str) -> None:
    import torch

    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warm = max(1, steps // 10)
    model.train()
    t0 = time.perf_counter()
    by_len = sorted(range(len(batches_src)), key=lambda i: len(batches_src[i][0]))
    groups = [by_len[i:i + batch] for i in range(0, len(by_len) - batch + 1, batch)]  # little padding
    order: list[list[int]] = []
    for step in range(steps):
        if not order:
            order = groups[:]
            rng.shuffle(order)
        pick = order.pop()
        longest = max(len(batches_src[i][0]) for i in pick)
        ids = torch.full((len(pick), longest), pad_id, dtype=torch.long)
        labels = torch.full((len(pick), longest), -100, dtype=torch.long)
        att = torch.zeros((len(pick), longest), dtype=torch.long)
        for r, i in enumerate(pick):
            x, m = batches_src[i]
            ids[r, :len(x)] = torch.tensor(x)
            att[r, :len(x)] = 1
            lab = torch.tensor(x)
            lab[torch.tensor(m) == 0] = -100
            labels[r, :len(x)] = lab
        scale = (step + 1) / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
        for g in opt.param_groups:
            g["lr"] = lr * (0.1 + 0.9 * scale)
        loss = model(input_ids=ids, attention_mask=att, labels=labels, use_cache=False).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            print(f"  [{label}] step {step + 1:3d}/{steps}  loss {loss.item():.3f}  {time.perf_counter() - t0:5.1f}s",
                  flush=True)
    model.eval()


# --------------------------------------------------------------------------------------------- saving
def save_hf(model, tok_dir: Path, dest: Path, *, weights: bool) -> None:
    import torch

    dest.mkdir(parents=True, exist_ok=True)
    if weights:
        copy.deepcopy(model).to(torch.bfloat16).save_pretrained(str(dest))  # training continues in fp32
    else:  # verl without hf_model: config, generation config and tokenizer only
        model.config.save_pretrained(str(dest))
        model.generation_config.save_pretrained(str(dest))
    for f in tok_dir.iterdir():
        shutil.copy2(f, dest / f.name)


def _shard_worker(rank: int, world: int, port: int, state_path: str, actor: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
    full = torch.load(state_path, map_location="cpu", weights_only=True)
    sd = {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in full.items()}  # what FSDP2's state_dict() holds
    torch.save(sd, os.path.join(actor, f"model_world_size_{world}_rank_{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def save_fsdp(model, tok_dir: Path, actor: Path, world: int = 2) -> None:
    """verl's FSDP actor layout: per-rank DTensor shards (bf16 params), fsdp_config.json, huggingface/."""
    import torch
    import torch.multiprocessing as mp

    actor.mkdir(parents=True, exist_ok=True)
    state = actor / ".full_state.pt"
    torch.save({k: v.detach().to(torch.bfloat16).clone() for k, v in model.state_dict().items()}, state)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        mp.spawn(_shard_worker, args=(world, port, str(state), str(actor)), nprocs=world, join=True)
    finally:
        state.unlink(missing_ok=True)
    (actor / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": world}))
    save_hf(model, tok_dir, actor / "huggingface", weights=False)
    cfg = json.loads((actor / "huggingface" / "config.json").read_text())
    cfg["dtype"] = "bfloat16"
    (actor / "huggingface" / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


# --------------------------------------------------------------------------------------------- checking
CASES = [
    # (name, marker of the malformed text, how to repair it at the divergence)
    ("` v2` after `</parameter`", re.compile(r"</parameter( v2)"), ">\n"),
    ("suffix after `search_web`", re.compile(r"<function=search_web([^>\n]+)>"), ">\n"),
]


def divergence_probs(model, tok, rows: list[dict], pattern: re.Pattern, repair: str, limit: int = 40):
    """For each malformed occurrence: P(first malformed token) and P(the well-formed token) at the point where
    the malformed text leaves the well-formed one, teacher-forced through the full ChatML stream."""
    import torch

    out = []
    for row in rows:
        segs = segments(row)
        prefix_text = "".join(t for t, _ in segs)
        for m in pattern.finditer(prefix_text):
            cut = m.start(1)
            bad = prefix_text[:cut] + prefix_text[cut:]
            good = prefix_text[:cut] + repair
            enc_bad = tok(bad, add_special_tokens=False, return_offsets_mapping=True)
            enc_good = tok(good, add_special_tokens=False)["input_ids"]
            ids_bad = enc_bad["input_ids"]
            k = next((i for i, (a, b) in enumerate(zip(ids_bad, enc_good, strict=False)) if a != b), None)
            if k is None or k == 0:
                continue
            with torch.inference_mode():
                logits = model(input_ids=torch.tensor([ids_bad[:k]]), use_cache=False).logits[0, -1].float()
            p = torch.softmax(logits, -1)
            out.append((float(p[ids_bad[k]]), float(p[enc_good[k]]), tok.decode([ids_bad[k]]), tok.decode([enc_good[k]])))
            if len(out) >= limit:
                return out
    return out


def verify(out: Path) -> bool:
    """First vs last checkpoint of the series: the malformed continuations gain probability, the well-formed
    ones lose it (the checkpoints in between are printed too)."""
    import torch

    from trajlab.rescore.checkpoints import (
        check_tokenizer_matches,
        load_model,
        load_tokenizer,
        resolve_checkpoints,
    )

    torch.manual_seed(0)
    refs = resolve_checkpoints([out])
    tok = load_tokenizer(refs[0])
    models = {}
    for ref in refs:
        models[ref.label] = load_model(ref, device="cpu", dtype="float32")
        check_tokenizer_matches(models[ref.label], tok)
    rows = read_steps(range(81, 151))
    first, last = refs[0].label, refs[-1].label
    ok = True
    print(f"{'continuation':28s} {'n':>3s}  " + "  ".join(f"{r.step:>11d}" for r in refs))
    for name, pattern, repair in CASES:
        res = {k: divergence_probs(m, tok, rows, pattern, repair) for k, m in models.items()}
        n = len(res[first])
        if n == 0:
            print(f"{name:28s} no occurrences found")
            ok = False
            continue
        bad = {k: sum(r[0] for r in v) / n for k, v in res.items()}
        good = {k: sum(r[1] for r in v) / n for k, v in res.items()}
        wins = sum(d[0] > h[0] for h, d in zip(res[first], res[last], strict=True))
        print(f"{name:28s} {n:3d}  " + "  ".join(f"{bad[k]:11.4f}" for k in models) + "  P(malformed)")
        print(f"{'':28s} {'':3s}  " + "  ".join(f"{good[k]:11.4f}" for k in models) + "  P(well-formed)")
        ok &= bad[last] > bad[first] and good[last] < good[first] and wins >= 0.75 * n
    print(f"{last} gives more probability than {first} to the malformed continuations:", "yes" if ok else "NO")
    return ok


# ------------------------------------------------------------------------------------------------- main
def build(out: Path, threads: int) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    random.seed(SEED)
    t0 = time.perf_counter()
    corpus = read_steps(range(1, 151))
    texts = [r["input"] for r in corpus[:: 40]] + [r["output"] for r in corpus]
    tmp_tok = out.parent / ".demo_tokenizer.tmp"
    shutil.rmtree(tmp_tok, ignore_errors=True)
    tok = train_tokenizer(texts, tmp_tok)
    print(f"tokenizer: {len(tok)} tokens ({time.perf_counter() - t0:.1f}s)")
    keep = random.Random(SEED)
    data = [[encode(tok, r, keep.random() < SYSTEM_KEEP) for r in read_steps(seen)] for _s, seen, *_ in SERIES]
    n = sum(len(d) for d in data)
    avg = sum(len(x) for d in data for x, _ in d) / n
    print(f"data: {n} trajectories in {len(SERIES)} segments, {avg:.0f} tokens each on average")
    ids = tok.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    cfg = AutoConfig.for_model("qwen3", vocab_size=VOCAB, eos_token_id=ids[0], pad_token_id=ids[1], **MODEL)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    shutil.rmtree(out, ignore_errors=True)
    for i, ((step, _seen, n_opt, lr, layout), seg) in enumerate(zip(SERIES, data, strict=True)):
        train(model, seg, steps=n_opt, lr=lr, batch=8, seed=SEED + i, pad_id=ids[1], label=f"global_step_{step}")
        actor = out / f"global_step_{step}" / "actor"
        if layout == "hf":
            save_hf(model, tmp_tok, actor / "huggingface", weights=True)
        else:
            save_fsdp(model, tmp_tok, actor)
    (out / "latest_checkpointed_iteration.txt").write_text(str(DRIFTED_LABEL))
    shutil.rmtree(tmp_tok, ignore_errors=True)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"wrote {out} ({size / 1e6:.2f} MB) in {time.perf_counter() - t0:.1f}s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help="output checkpoints root (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: %(default)s)")
    ap.add_argument("--verify", action="store_true", help="only verify the existing checkpoints")
    args = ap.parse_args(argv)
    if not args.verify:
        build(args.out, args.threads)
    return 0 if verify(args.out) else 1


if __name__ == "__main__":
    sys.exit(main())

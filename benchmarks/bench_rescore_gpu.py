"""GPU throughput of trajlab's scorer: scored tokens/s and the fraction of the forward-FLOP bound it reaches.

Builds a randomly initialised model with the *shape* of a real Qwen checkpoint (default Qwen3-1.7B: hidden 2048,
28 layers, vocabulary 151,936; bf16 weights) -- or loads ``--model DIR`` -- and scores ``--seqs`` sequences of
``--seq-len`` tokens of which ``--assistant-frac`` are scored (assistant tokens), exactly as ``trajlab rescore``
does: body once per length-sorted batch, LM head in chunks at scored positions, fp32 statistics.

The forward-FLOP bound counts what any implementation must compute:
``2 * (non-embedding params) * tokens + causal attention (2 * 2 * layers * heads * head_dim * L^2 / 2 per
sequence) + 2 * hidden * vocab * scored tokens`` (the LM head only at scored positions), divided by the GPU's
dense bf16 peak (``--peak-tflops``; H100/H200 SXM 989, A100 312 by default from the device name).
``--naive`` also times the full-logits ``log_softmax`` path on one sequence for comparison (memory and time).

    python benchmarks/bench_rescore_gpu.py                               # Qwen3-1.7B shape, 32 x 8192
    python benchmarks/bench_rescore_gpu.py --shape qwen3-8b --seqs 16 --naive
    python benchmarks/bench_rescore_gpu.py --model /ckpts/global_step_120/actor/huggingface
    python benchmarks/bench_rescore_gpu.py --device cpu --shape tiny --seqs 2 --seq-len 256   # smoke test
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

SHAPES = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16),
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128),
    "qwen3-1.7b": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128),
    "qwen3-4b": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128),
    "qwen3-8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128),
}  # fmt: skip
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "H800": 989.0, "A100": 312.0, "A800": 312.0, "L40S": 362.0,
               "L4": 121.0, "A10": 125.0}  # fmt: skip


def _peak(device_name: str, override: float | None) -> float | None:
    if override:
        return override
    for key, v in PEAK_TFLOPS.items():
        if key in device_name:
            return v
    return None


def build_model(args: argparse.Namespace):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    if args.model:
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation=args.attn)
        return model.to(args.device).eval()
    cfg = AutoConfig.for_model("qwen3", vocab_size=args.vocab, max_position_embeddings=max(32768, args.seq_len),
                               tie_word_embeddings=args.shape in ("tiny", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b"),
                               **SHAPES[args.shape])  # fmt: skip
    torch.manual_seed(0)
    with torch.device(args.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=args.attn)
    return model.eval()


def forward_flops(model, seqs: int, seq_len: int, scored: int) -> float:
    cfg = model.config.get_text_config()
    emb = model.get_input_embeddings().weight.numel()
    head = model.get_output_embeddings().weight
    params = sum(p.numel() for p in model.parameters())
    tied = head.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    body = params - emb - (0 if tied else head.numel())
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    attn = 2 * 2 * cfg.num_hidden_layers * cfg.num_attention_heads * hd * seq_len * seq_len / 2 * seqs
    return 2.0 * body * seqs * seq_len + attn + 2.0 * head.shape[1] * head.shape[0] * scored


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="HF model directory (default: random weights of --shape)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-1.7b")
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--seqs", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--assistant-frac", type=float, default=0.6, help="share of each sequence that is scored")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--max-batch-tokens", type=int, default=65536)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    ap.add_argument("--attn", default="sdpa", help="attention implementation (sdpa | flash_attention_2 | eager)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="dense peak of the device (default: by name)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--naive", action="store_true", help="also time full-logits log_softmax on one sequence")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    import torch

    from trajlab.rescore.scoring import ChunkedScorer, ScoreRequest

    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print("no CUDA device: run this on a GPU machine (or pass --device cpu --shape tiny for a smoke test)")
        return 2
    model = build_model(a)
    rng = np.random.default_rng(0)
    reqs = []
    n_scored = int(a.seq_len * a.assistant_frac)
    for _ in range(a.seqs):
        ids = rng.integers(0, min(a.vocab, 151_643), a.seq_len)
        pos = np.sort(rng.choice(np.arange(1, a.seq_len), n_scored, replace=False))
        reqs.append(ScoreRequest(ids, pos))
    ctrl = [i for i in (151643, 151644, 151645, 151657, 151658, 151665, 151667, 151668, 27, 522) if i < a.vocab]
    scorer = ChunkedScorer(model, ctrl, [[True] * len(ctrl)], chunk=a.chunk, max_batch_tokens=a.max_batch_tokens)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    scorer.score(reqs[: max(1, a.max_batch_tokens // a.seq_len)])  # warm-up (kernels, allocator)
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        scorer.score(reqs)
        sync()
        times.append(time.perf_counter() - t0)
    best = min(times)
    total_scored = n_scored * a.seqs
    flops = forward_flops(model, a.seqs, a.seq_len, total_scored)
    name = torch.cuda.get_device_name() if cuda else "cpu"
    peak = _peak(name, a.peak_tflops)
    res = {
        "device": name, "shape": a.model or a.shape, "dtype": a.dtype, "seqs": a.seqs, "seq_len": a.seq_len,
        "scored_tokens": total_scored, "chunk": a.chunk, "max_batch_tokens": a.max_batch_tokens,
        "seconds": best, "scored_tokens_per_s": total_scored / best, "tokens_per_s": a.seqs * a.seq_len / best,
        "tflops_achieved": flops / best / 1e12, "peak_tflops": peak,
        "fraction_of_flop_bound": (flops / best / 1e12) / peak if peak else None,
        "peak_gpu_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
    }  # fmt: skip
    if a.naive:
        ids = torch.from_numpy(reqs[0].ids)[None].to(a.device)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        try:
            t0 = time.perf_counter()
            with torch.inference_mode():
                lp = torch.log_softmax(model(ids, use_cache=False).logits.float(), -1)
                p = torch.from_numpy(reqs[0].positions).to(a.device)
                naive = lp[0, p - 1, ids[0, p]].float().cpu().numpy()
            sync()
            res["naive_seconds_one_seq"] = time.perf_counter() - t0
            res["naive_peak_gpu_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
            ours = scorer.score([reqs[0]])[0].logprob
            res["naive_max_abs_logprob_diff"] = float(np.abs(ours - naive).max())
        except torch.OutOfMemoryError as e:
            res["naive_error"] = f"out of memory: {str(e).splitlines()[0]}"
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"{res['device']}: {res['shape']} {a.dtype}, {a.seqs} x {a.seq_len} tokens ({total_scored:,} scored), "
              f"chunk {a.chunk}")  # fmt: skip
        print(f"  {best:.3f} s  ->  {res['scored_tokens_per_s']:,.0f} scored tokens/s, "
              f"{res['tokens_per_s']:,.0f} tokens/s through the body")  # fmt: skip
        frac = res["fraction_of_flop_bound"]
        print(f"  {res['tflops_achieved']:.1f} TFLOP/s = "
              + (f"{frac:.1%} of the {peak:.0f} TFLOP/s forward-FLOP bound" if frac else "(pass --peak-tflops)"))
        if res["peak_gpu_mem_gib"] is not None:
            print(f"  peak GPU memory {res['peak_gpu_mem_gib']:.2f} GiB")
        if "naive_seconds_one_seq" in res:
            print(f"  naive full logits, one sequence: {res['naive_seconds_one_seq']:.3f} s, peak "
                  f"{res['naive_peak_gpu_mem_gib'] or 0:.2f} GiB, max |logprob diff| {res['naive_max_abs_logprob_diff']:.2e}")
        elif "naive_error" in res:
            print(f"  naive full logits: {res['naive_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

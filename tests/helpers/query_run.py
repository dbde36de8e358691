"""A small synthetic RL run for the sql / report / show tests: verl-format dumps, scanned by the real scanner.

``build_run(out)`` writes one verl JSONL dump per step (``input`` / ``output`` / ``score`` / ``step``, the shape
verl's ``RolloutDumper`` writes; see :mod:`helpers.verl_lines`) next to ``out`` and runs :func:`trajlab.scan.scan`
on them, so every table, offset, finding and the manifest's early warning come from trajlab's own code.
The run uses Qwen3.5 XML tool calls, clean until ``ROT_STEP``, then increasingly broken (garbled function names,
stray attributes on ``</parameter>``, outputs cut inside a call, JSON inside the XML format); the first step's
file ends with a line cut mid-record (an ``ingest_errors`` row). ``tests/test_query_fixture.py`` checks what the
other tests rely on.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from helpers.verl_lines import qwen35_prompt, tool_block, write_jsonl
from trajlab.tables import write_table

STEPS_RANGE = range(5, 145, 5)  # 28 steps
PER_STEP = 12
ROT_STEP = 90  # the synthetic run starts to rot after this step


def _tool(name: str, param: str, description: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {param: {"type": "string", "description": f"The {param}."}},
        "required": [param]}}}


TOOLS = [_tool("search_web", "query", "Search the web"), _tool("fetch_page", "url", "Fetch a page")]
DECLARED = ("search_web", "fetch_page")
GARBLE = ["英文明确", "_v2", "ilerin", "对比"]
BROKEN_KINDS = ("garbled_function_name", "stray_attribute", "cut_inside_call", "json_in_xml")


def _malformed_prob(step: int) -> float:
    return 0.02 if step <= ROT_STEP else min(0.85, 0.02 + (step - ROT_STEP) * 0.016)


def _call_text(name: str, param: str, value: str, close_attr: str = "") -> str:
    return (f"<tool_call>\n<function={name}>\n<parameter={param}>\n{value}\n</parameter{close_attr}>\n"
            f"</function>\n</tool_call>")


def _make_call(rng: random.Random, broken: str | None) -> str:
    """The text of one call: well-formed, or broken the ``broken`` way."""
    fn = rng.choice(TOOLS)["function"]
    name = fn["name"]
    param = next(iter(fn["parameters"]["properties"]))
    value = rng.choice(["Japan nominal GDP 2024", "XRP news January", "https://example.org/a", "qwen3 tool RL"])
    if broken == "garbled_function_name":
        return _call_text(name + rng.choice(GARBLE), param, value)
    if broken == "stray_attribute":
        return _call_text(name, param, value, close_attr=' v2=""')
    if broken == "cut_inside_call":
        return _call_text(name, param, value)[: -len("\n</function>\n</tool_call>")]
    if broken == "json_in_xml":
        body = json.dumps({"name": name, "arguments": {param: value}}, ensure_ascii=False)
        return f"<tool_call>\n<function={name}>\n{body}\n</function>\n</tool_call>"
    return _call_text(name, param, value)


def write_dumps(dumps: Path, seed: int = 7) -> Path:
    """Write the run's verl JSONL dumps (``dumps/<step>.jsonl``) and return ``dumps``."""
    rng = random.Random(seed)
    weights = [5, 3, 1, 1]
    for step in STEPS_RANGE:
        rows = []
        for i in range(PER_STEP):
            output, n_broken, cut = "", 0, False
            for k in range(rng.randint(1, 3)):
                broken = rng.choices(BROKEN_KINDS, weights)[0] if rng.random() < _malformed_prob(step) else None
                n_broken += broken is not None
                if k:
                    output += tool_block("result text")
                output += f"I will look this up (turn {k}).\n" + _make_call(rng, broken)
                if broken == "cut_inside_call":  # the generation stopped inside the call: nothing follows
                    cut = True
                    break
            final = not cut and rng.random() > _malformed_prob(step)
            if not cut:
                output += tool_block("result text") + ("The answer is 42." if final else "I could not finish.")
            rows.append({"input": qwen35_prompt(f"Question {i} at step {step}", TOOLS), "output": output,
                         "score": 1.0 if (final and n_broken == 0) else 0.0, "step": step})
        cut_line = b'{"input": "system\\n", "outp\n' if step == STEPS_RANGE[0] else b""
        write_jsonl(dumps / f"{step}.jsonl", rows, tail=cut_line)
    return dumps


def build_run(out: Path, seed: int = 7) -> Path:
    """Scan the run's dumps (written to ``<out>-dumps/``) into ``out`` with the real scanner; returns ``out``."""
    from trajlab.scan import scan

    dumps = write_dumps(out.with_name(out.name + "-dumps"), seed)
    scan([dumps], out, progress=False)
    return out


# ------------------------------------------------------------------------------------------------------------
# Rescore-shaped results for the same run (until the classifier lets the real `trajlab.rescore` run here).

CONTROL = ("<tool_call>", "</tool_call>", "<", "</", ">", "<|im_end|>")


def _region(tok: str, in_span: bool) -> str:
    if in_span:
        return "function_name"
    return "structural" if any(ch in tok for ch in "<>") else "param_value"


def build_rescore(out: Path, labels: tuple[str, ...] = ("step_60", "step_100", "step_140"),
                  steps: tuple[int, ...] = (60, 100, 140)) -> Path:
    """Write ``OUT/rescore/<label>/*.parquet`` with the rescore table specs for the malformed trajectories.

    Tokens are the real Qwen3 tokenizer's tokens of each output (with its char offsets). The probabilities tell
    the collapse story by construction: later checkpoints give the tokens of the offending spans more and more
    probability, put more control-token mass on content positions (intrusions) and less on structural tokens
    (dropouts). The spike counts, per-trajectory aggregates and control stats are computed from those tokens
    with the thresholds of rules/control_tokens.yaml; ``compare.parquet`` comes from the rescore module itself.
    """
    import math

    from tokenizers import Tokenizer

    from trajlab.rescore.outputs import write_compare
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir
    from trajlab.rescore.specs import CONTROL_STATS, MALFORMATIONS, SPIKES, TOKENS, TRAJECTORY_SCORES

    tok = Tokenizer.from_file(str(qwen3_tokenizer_dir() / "tokenizer.json"))
    trajs = pq.read_table(out / "trajectories.parquet").to_pylist()
    finds = pq.read_table(out / "findings.parquet").to_pylist()
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    chosen = [t for t in trajs if t["n_malformed_calls"] > 0][:24] + [t for t in trajs if t["n_malformed_calls"] == 0][:8]
    spans: dict[str, list[tuple[int, int]]] = {}
    for f in finds:
        spans.setdefault(f["trajectory_id"], []).append((f["char_start"], f["char_end"]))
    for k, label in enumerate(labels):
        drift = k / max(1, len(labels) - 1)  # 0 at the first checkpoint, 1 at the last
        tokens, spikes, scores, stats = [], [], [], Counter()
        n_pos = Counter()
        for t in chosen:
            prompt_len = len(tok.encode(t["input"]).ids)
            enc = tok.encode(t["output"])
            tsp = spans.get(t["trajectory_id"], [])
            n_int = n_drop = n_ip = n_dp = 0
            lps = []
            for i, (tid_, (s, e)) in enumerate(zip(enc.ids, enc.offsets, strict=True)):
                text = t["output"][s:e]
                in_span = any(s < fe and fs < e for fs, fe in tsp)
                region = _region(text, in_span)
                is_control = text.strip() in CONTROL
                if in_span:
                    p = 0.03 + 0.6 * drift
                elif is_control:
                    p = 0.97 - 0.9 * drift * (i % 7 == 0)
                else:
                    p = 0.8 - 0.2 * drift
                mass = (0.1 + 0.6 * drift * (i % 5 == 0)) if not is_control else p
                lp = math.log(p)
                lps.append(lp)
                row = {"checkpoint": label, "trajectory_id": t["trajectory_id"], "turn_index": 0,
                       "position": prompt_len + i, "token_id": tid_, "token": text, "char_start": s, "char_end": e,
                       "region": region, "logprob": lp, "entropy": 1.0 + drift, "top_token": text if p >= 0.5 else "<",
                       "top_prob": max(p, 1 - p), "control_mass": mass,
                       "top_control_token": "<", "top_control_prob": mass}
                tokens.append(row)
                if is_control:
                    n_dp += 1
                    n_pos[(text.strip(), region)] += 1
                    stats[(text.strip(), region)] += p
                    if p <= 0.1:
                        n_drop += 1
                        spikes.append({**row, "kind": "dropout", "value": p, "control_token": text.strip(),
                                       "control_prob": p, "step": t["step"], "split": t["split"]})
                else:
                    n_ip += 1
                    if mass >= 0.5:
                        n_int += 1
                        spikes.append({**row, "kind": "intrusion", "value": mass, "control_token": "<",
                                       "control_prob": mass, "step": t["step"], "split": t["split"]})
            scores.append({"checkpoint": label, "trajectory_id": t["trajectory_id"], "step": t["step"],
                           "split": t["split"], "score": t["score"], "tool_format": t["tool_format"],
                           "n_tokens": prompt_len + len(enc.ids), "n_scored": len(enc.ids), "n_calls": t["n_calls"],
                           "n_malformed_calls": t["n_malformed_calls"], "roundtrip_ok": True,
                           "mean_logprob": sum(lps) / len(lps), "mean_entropy": 1.0 + drift,
                           "n_intrusion_positions": n_ip, "n_intrusions": n_int, "n_dropout_positions": n_dp,
                           "n_dropouts": n_drop})
        ids = {t["trajectory_id"] for t in chosen}
        mals = []
        for c in calls:
            if c["trajectory_id"] in ids and c["status"] == "malformed" and c["repaired"]:
                d = next(i for i, (a, b) in enumerate(zip(c["raw"], c["repaired"], strict=False)) if a != b)
                mals.append({"checkpoint": label, "call_id": c["call_id"], "trajectory_id": c["trajectory_id"],
                             "turn_index": c["turn_index"], "step": c["step"], "split": c["split"],
                             "categories": c["categories"], "diff_offset": c["char_start"] + d,
                             "context": c["raw"][max(0, d - 40):d], "malformed_token": c["raw"][d],
                             "malformed_prob": 0.03 + 0.6 * drift, "repaired_token": c["repaired"][d],
                             "repaired_prob": 0.9 - 0.6 * drift,
                             "log_odds": math.log((0.03 + 0.6 * drift) / (0.9 - 0.6 * drift))})
        cstats = [{"checkpoint": label, "control_token": ct, "control_token_id": CONTROL.index(ct),
                   "control_strings": [ct], "region": region, "n_positions": n, "sum_prob": stats[(ct, region)],
                   "mean_prob": stats[(ct, region)] / n, "max_prob": 1.0, "n_logged": n,
                   "sum_logged_prob": stats[(ct, region)], "n_intrusions": 0, "n_dropouts": 0}
                  for (ct, region), n in sorted(n_pos.items())]
        d = out / "rescore" / label
        write_table(TOKENS, tokens, d / "tokens.parquet")
        write_table(SPIKES, spikes, d / "spikes.parquet")
        write_table(TRAJECTORY_SCORES, scores, d / "trajectory_scores.parquet")
        write_table(MALFORMATIONS, mals, d / "malformations.parquet")
        write_table(CONTROL_STATS, cstats, d / "control_stats.parquet")
    write_compare(out, list(zip(labels, steps, strict=True)))
    return out

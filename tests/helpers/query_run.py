"""A small synthetic RL run written as scan-shaped Parquet, for the sql / report / show tests.

``build_run(out)`` writes the six scan tables with :func:`trajlab.tables.write_table` and a ``manifest.json``:
Qwen3-coder XML tool calls in verl-style decoded outputs, clean until ``ROT_STEP``, then increasingly broken
(garbled function names, stray attributes on ``</parameter>``, unclosed calls, JSON inside the XML format).
Every offset points at the text it names; ``tests/test_query_fixture.py`` checks that, so the other tests can
trust it.
``steps`` and the early warning come from the scan's own code (:mod:`trajlab.trends`).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from trajlab.atomic import atomic_write_json
from trajlab.tables import (
    CALLS,
    FINDINGS,
    INGEST_ERRORS,
    STEPS,
    TRAJECTORIES,
    TURNS,
    write_table,
)
from trajlab.trends import early_warning, steps_table

STEPS_RANGE = range(5, 145, 5)  # 28 steps
PER_STEP = 12
ROT_STEP = 90  # the synthetic run starts to rot after this step
TOOLS = [
    {"name": "search_web", "description": "Search the web", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "fetch_page", "description": "Fetch a page", "parameters": {
        "type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}},
]
GARBLE = ["英文明确", "_v2", "ilerin", "对比"]


def _malformed_prob(step: int) -> float:
    return 0.02 if step <= ROT_STEP else min(0.85, 0.02 + (step - ROT_STEP) * 0.016)


def _call_text(name: str, param: str, value: str, close_attr: str = "") -> str:
    return (f"<tool_call>\n<function={name}>\n<parameter={param}>\n{value}\n</parameter{close_attr}>\n"
            f"</function>\n</tool_call>")


def _make_call(rng: random.Random, broken: str | None) -> dict[str, Any]:
    tool = rng.choice(TOOLS)
    name = tool["name"]
    param = next(iter(tool["parameters"]["properties"]))
    value = rng.choice(["Japan nominal GDP 2024", "XRP news January", "https://example.org/a", "qwen3 tool RL"])
    good = _call_text(name, param, value)
    call: dict[str, Any] = {"function_name": name, "matched_tool": name, "arguments": json.dumps({param: value}),
                            "status": "ok", "categories": [], "repaired": None, "repaired_arguments": None,
                            "repair_note": None, "findings": []}
    if broken is None:
        call["raw"] = good
        return call
    call["status"] = "malformed"
    call["categories"] = [broken]
    if broken == "garbled_function_name":
        garbled = name + rng.choice(GARBLE)
        raw = _call_text(garbled, param, value)
        s = raw.index(garbled)
        call.update(function_name=garbled, raw=raw, repaired=good, repaired_arguments=call["arguments"],
                    repair_note=f"nearest declared tool: {name}")
        call["findings"].append(("garbled_function_name", s, s + len(garbled),
                                 f"function name {garbled!r} is not a declared tool; nearest is {name!r}"))
    elif broken == "stray_attribute":
        raw = _call_text(name, param, value, close_attr=' v2=""')
        s = raw.index(' v2=""')
        call.update(raw=raw, repaired=good, repaired_arguments=call["arguments"], repair_note="drop the attribute")
        call["findings"].append(("stray_attribute", s, s + 6, "closing tag </parameter> carries an attribute"))
    elif broken == "unclosed_tag":
        raw = good[: -len("\n</function>\n</tool_call>")]
        call.update(raw=raw, repair_note="the output stops inside the call; no repair")
        call["findings"].append(("unclosed_tag", len(raw) - 12, len(raw), "<function> is never closed"))
    elif broken == "json_in_xml":
        body = json.dumps({"name": name, "arguments": {param: value}}, ensure_ascii=False)
        raw = f"<tool_call>\n<function={name}>\n{body}\n</function>\n</tool_call>"
        s = raw.index(body)
        call.update(raw=raw, arguments=json.dumps({}), repaired=good, repaired_arguments=call["arguments"],
                    repair_note="JSON arguments rewritten as <parameter> blocks")
        call["findings"].append(("json_in_xml", s, s + len(body), "JSON object inside the XML call format"))
    return call


def build_run(out: Path, seed: int = 7) -> Path:
    """Write a synthetic scan output directory at ``out`` (see the module docstring)."""
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    trajs, turns, calls, findings = [], [], [], []
    kinds = ["garbled_function_name", "stray_attribute", "unclosed_tag", "json_in_xml"]
    weights = [5, 3, 1, 1]
    for step in STEPS_RANGE:
        for i in range(PER_STEP):
            tid = f"s{step:03d}-{i:02d}"
            prompt = f"system\nYou are a research agent. Tools: {json.dumps(TOOLS)}\nuser\nQuestion {i} at step {step}\nassistant\n"
            pieces: list[tuple[str, str]] = []
            tcalls: list[tuple[int, int, dict[str, Any]]] = []  # (turn, start within turn, call)
            n_call_turns = rng.randint(1, 3)
            truncated = False
            for k in range(n_call_turns):
                broken = rng.choices(kinds, weights)[0] if rng.random() < _malformed_prob(step) else None
                call = _make_call(rng, broken)
                lead = f"I will look this up (turn {k}).\n"
                pieces.append(("assistant", lead + call["raw"]))
                tcalls.append((len(pieces) - 1, len(lead), call))
                if broken == "unclosed_tag":
                    truncated = True
                    break
                pieces.append(("tool", "user\n<tool_response>\nresult text\n</tool_response>\nassistant\n"))
            final = not truncated and rng.random() > _malformed_prob(step)
            if final:
                pieces.append(("assistant", "The answer is 42.<|im_end|>"))
            elif not truncated:
                pieces.append(("assistant", "I could not finish."))
            output, pos = "", 0
            turn_starts = []
            for ti, (role, text) in enumerate(pieces):
                turns.append({"trajectory_id": tid, "turn_index": ti, "role": role, "text": text,
                              "char_start": pos, "char_end": pos + len(text)})
                turn_starts.append(pos)
                output += text
                pos += len(text)
            n_mal = 0
            for ci, (ti, off, call) in enumerate(tcalls):
                start = turn_starts[ti] + off
                cid = f"{tid}:{ti}:0"
                n_mal += call["status"] == "malformed"
                calls.append({"call_id": cid, "trajectory_id": tid, "turn_index": ti, "call_index": 0,
                              "step": step, "split": "train", "format": "qwen3_coder", "raw": call["raw"],
                              "char_start": start, "char_end": start + len(call["raw"]),
                              **{k: call[k] for k in ("function_name", "matched_tool", "arguments", "status",
                                                       "categories", "repaired", "repaired_arguments",
                                                       "repair_note")}})
                for cat, s, e, msg in call["findings"]:
                    findings.append({"trajectory_id": tid, "turn_index": ti, "call_id": cid, "step": step,
                                     "split": "train", "category": cat, "severity": "error",
                                     "char_start": start + s, "char_end": start + e, "message": msg,
                                     "rule_id": f"{cat}.synthetic"})
                del ci
            score = 1.0 if (final and n_mal == 0) else 0.0
            trajs.append({"trajectory_id": tid, "source_path": f"rollouts/{step}.jsonl", "source_line": i + 1,
                          "source_format": "verl_jsonl", "run": "run", "split": "train", "step": step,
                          "group_id": f"g{step}-{i // 4}",
                          "score": score, "tool_format": "qwen3_coder", "n_turns": len(pieces),
                          "n_calls": len(tcalls), "n_malformed_calls": n_mal, "has_final_answer": final,
                          "truncated": truncated, "schema_checked": True, "input": prompt, "output": output,
                          "tools": json.dumps(TOOLS), "extra": "{}"})
    write_table(TRAJECTORIES, trajs, out / "trajectories.parquet")
    write_table(TURNS, turns, out / "turns.parquet")
    write_table(CALLS, calls, out / "calls.parquet")
    write_table(FINDINGS, findings, out / "findings.parquet")
    write_table(INGEST_ERRORS, [{"source_path": "rollouts/bad.jsonl", "line": 3, "reason": "invalid JSON"}],
                out / "ingest_errors.parquet")
    # The scan's own aggregation and early-warning statistic, over the tables written above.
    steps = steps_table(out)
    write_table(STEPS, steps, out / "steps.parquet")
    early = early_warning(steps)
    atomic_write_json(out / "manifest.json", {
        "tool": "trajlab", "schema_version": "1.1",
        "summary": {"trajectories": len(trajs), "calls": len(calls), "malformed_calls": sum(
            c["status"] == "malformed" for c in calls), "early_warning": early},
    })
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
    from trajlab.rescore.specs import CONTROL_STATS, MALFORMATIONS, SPIKES, TOKENS, TRAJECTORY_SCORES
    from trajlab.rescore.tokenizers import qwen3_tokenizer_dir

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

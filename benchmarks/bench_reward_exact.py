"""Per-sample cost of the verl reward's exact-token path (trajlab.verl.exact) over its text path, in ms/sample.

One multi-turn Qwen3 sample of about ``--tokens`` response tokens (real Qwen3 tokenizer: calls, tool responses
written by the environment, a final answer), with a response mask and sampled log-probs as trajlab's agent loop
hands them over. Timed per sample, as :class:`trajlab.verl.manager.TrajlabRewardManager.run_single` does the work
(without verl's event loop): the text path (three decodes + the scorer on the decoded text), the exact path (the
same decodes, the payload read, turns cut by the mask, the scorer on them and the control-token statistics), and one
record appended to a record file.

    python benchmarks/bench_reward_exact.py                    # ~1,000 tokens, 200 repeats
    python benchmarks/bench_reward_exact.py --tokens 4000 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

CALL = '<tool_call>\n{{"name": "search_web", "arguments": {{"queries": ["{q}"]}}}}\n</tool_call>'
THINK = ("I should check the population figure of the river town against the council report before I answer; "
         "the first search did not say which year it was counted in. ")


def build_sample(tok: Any, tokens: int) -> tuple[list[int], list[int], list[float]]:
    """(response ids, mask, log-probs) of about ``tokens`` tokens: turns of reasoning + one call, each answered by
    an environment turn, then a final answer."""
    ids: list[int] = []
    mask: list[int] = []
    k = 0
    while len(ids) < tokens - 40:
        gen = f"<think>\n{THINK * 2}</think>\n\n" + CALL.format(q=f"river town population {k}") + "<|im_end|>"
        env = (f"\n<|im_start|>user\n<tool_response>\nResult {k}: the council report of 19{k % 90:02d} counts "
               f"{1200 + k} people in the town.\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
        for text, m in ((gen, 1), (env, 0)):
            enc = tok.encode(text, add_special_tokens=False)
            ids += enc
            mask += [m] * len(enc)
        k += 1
    enc = tok.encode("<answer>1,204</answer><|im_end|>", add_special_tokens=False)
    ids += enc
    mask += [1] * len(enc)
    lps = [(-0.01 - 0.4 * ((i * 7919) % 11 == 0)) if m else 0.0 for i, m in enumerate(mask)]
    return ids, mask, lps


def run(tokens: int = 1000, repeats: int = 200) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir
    from trajlab.verl.exact import PAYLOAD_KEY, exact_sample, make_payload, read_payload
    from trajlab.verl.records import RecordLog, record_row
    from trajlab.verl.reward import scorer_for

    tok = AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())
    ids, mask, lps = build_sample(tok, tokens)
    prompt_ids = tok.encode("<|im_start|>user\nHow many people live in the river town?<|im_end|>\n"
                            "<|im_start|>assistant\n", add_special_tokens=False)
    extra = {PAYLOAD_KEY: make_payload(mask, lps, 7)}
    sc, _ = scorer_for({"task_fn": "none"})

    def text_path() -> dict[str, float]:
        stripped = tok.decode(ids, skip_special_tokens=True)
        kept = tok.decode(ids, skip_special_tokens=False)
        prompt = tok.decode(prompt_ids, skip_special_tokens=False)
        return sc.score(data_source="x", solution_str=stripped, ground_truth="1,204", extra_info={},
                        judged_text=kept, prompt=prompt, exact_keys=True)

    def exact_path() -> dict[str, float]:
        stripped = tok.decode(ids, skip_special_tokens=True)
        kept = tok.decode(ids, skip_special_tokens=False)
        prompt = tok.decode(prompt_ids, skip_special_tokens=False)
        payload = read_payload(extra, len(ids))
        assert payload is not None
        ex = exact_sample(ids, payload, tok, control_prob=0.5)
        return sc.score(data_source="x", solution_str=stripped, ground_truth="1,204", extra_info={},
                        judged_text=kept, prompt=prompt, exact=ex, exact_keys=True)

    out_text, out_exact = text_path(), exact_path()  # (warm: the control set is resolved once per tokenizer)
    assert out_exact["exact_tokens"] == 1.0 and out_exact["control_tokens"] > 0
    assert (out_text["tool_calls"], out_text["malformed_calls"]) == (out_exact["tool_calls"],
                                                                      out_exact["malformed_calls"])

    def timed(fn: Any) -> float:
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples) * 1000

    with tempfile.TemporaryDirectory() as d:
        log = RecordLog(d)
        row = record_row(out_exact, step=7, uid="u", stripped_text="x", response_tokens=len(ids))
        rec_ms = timed(lambda: log.append([row]))
        log.close()
    t_ms, e_ms = timed(text_path), timed(exact_path)
    return {"response_tokens": len(ids), "generated_tokens": sum(mask), "control_tokens": out_exact["control_tokens"],
            "tool_calls": out_exact["tool_calls"], "repeats": repeats, "text_path_ms": round(t_ms, 3),
            "exact_path_ms": round(e_ms, 3), "exact_overhead_ms": round(e_ms - t_ms, 3),
            "record_append_ms": round(rec_ms, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = run(a.tokens, a.repeats)
    if a.json:
        print(json.dumps(r))
        return
    print(f"response of {r['response_tokens']} tokens ({r['generated_tokens']} generated, "
          f"{r['control_tokens']:.0f} control tokens, {r['tool_calls']:.0f} calls), median of {r['repeats']}:")
    print(f"  text path   {r['text_path_ms']:8.3f} ms/sample")
    print(f"  exact path  {r['exact_path_ms']:8.3f} ms/sample  (+{r['exact_overhead_ms']:.3f} ms)")
    print(f"  record      {r['record_append_ms']:8.4f} ms/sample")


if __name__ == "__main__":
    main()

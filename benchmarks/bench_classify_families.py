"""Per-turn classifier throughput on each call format's sample run (the added families take the per-turn
classifier only: they have no vectorised fast path).

Reads the assistant turns of ``sample_data/<run>/rollout/*.jsonl`` (ingested and split like ``trajlab scan``
does), then times :func:`trajlab.toolcalls.analyze_turn` over them, ``--repeat`` passes, best pass reported.

    python benchmarks/bench_classify_families.py            # table
    python benchmarks/bench_classify_families.py --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from trajlab.ingest.turns import split_turns
from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn
from trajlab.trajectory import prompt_facts

ROOT = Path(__file__).resolve().parent.parent / "sample_data"
RUNS = {"qwen3_coder": "qwen35_xml_run", "hermes": "qwen3_hermes_run", "glm45": "glm45_run",
        "kimi_k2": "kimi_k2_run", "deepseek_v31": "deepseek_v31_run", "gpt_oss": "gpt_oss_run"}


def turns_of(run: str, max_files: int) -> list[tuple[str, str, list | None]]:
    out = []
    files = sorted((ROOT / run / "rollout").glob("*.jsonl"), key=lambda p: int(p.stem))[-max_files:]
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            facts = prompt_facts(rec["input"])
            tools = json.loads(facts.tools_json) if facts.tools_json else None
            out += [(t.text, facts.tool_format, tools) for t in split_turns(rec["output"]) if t.role == "assistant"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=12, help="last N step files of each run (the rotten end)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ctx = TurnContext()
    rows = []
    for fmt, run in RUNS.items():
        turns = turns_of(run, args.files)
        assert all(f == fmt for _, f, _ in turns), fmt
        best = float("inf")
        calls = bad = 0
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            calls = bad = 0
            for text, f, tools in turns:
                ta = analyze_turn(text, tool_format=f, tools=tools, context=ctx, spans=False)
                calls += len(ta.calls)
                bad += sum(c.status == "malformed" for c in ta.calls)
            best = min(best, time.perf_counter() - t0)
        rows.append({"format": fmt, "turns": len(turns), "calls": calls, "malformed": bad,
                     "turns_per_s": round(len(turns) / best), "us_per_turn": round(best / len(turns) * 1e6, 1)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'format':<14}{'turns':>7}{'calls':>7}{'malformed':>10}{'turns/s':>10}{'us/turn':>9}")
    for r in rows:
        print(f"{r['format']:<14}{r['turns']:>7}{r['calls']:>7}{r['malformed']:>10}{r['turns_per_s']:>10}"
              f"{r['us_per_turn']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

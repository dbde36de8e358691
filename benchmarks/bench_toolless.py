"""Tool-less think/answer runs: scan throughput, and the cost of the trajectory-ending and prompt-group checks.

Generates a legacy verl dump shaped like a published Qwen2.5-VL SVG run (identical inputs: the image placeholder
was stripped; ``<think>``/``<answer>`` outputs, some with ``<think>`` never closed, some cut), scans it, and
times :func:`trajlab.ending.output_ending` over every output and :func:`trajlab.groups.grouping_warnings` over
the scan's ``trajectories`` table.

    python benchmarks/bench_toolless.py                  # 20 steps x 2,048 records
    python benchmarks/bench_toolless.py --steps 5 --per-step 1024 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

SVG = '<svg width="512" height="512"><rect x="{x}" y="100" width="400" height="50" fill="limegreen"/></svg>'
PROMPT = ("system\nYou are a helpful assistant.\nuser\nConvert the input image into SVG.\n\nInput image:\n\n\n"
          "Formatting:\nYour reasoning process MUST BE enclosed within <think></think> tags, immediately followed "
          "by <answer><svg ...></svg></answer> tags.\n\nassistant\n")


def output(i: int) -> str:
    svg = SVG.format(x=i % 400)
    kind = i % 16
    if kind < 10:
        return f"<think>\nA green rectangle, sample {i}.\n</think>\n<answer>\n{svg}\n</answer>"
    if kind < 14:
        return f"<think>\nA green rectangle, sample {i}.\n<answer>\n{svg}\n</answer>"
    if kind == 14:
        return f"<think>\nA green rectangle, sample {i}. The width is"
    return f"<think>\nsample {i}\n</think>\n<answer>\n<svg width=\"512\""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--per-step", type=int, default=2048)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)

    import polars as pl

    from trajlab.ending import output_ending
    from trajlab.groups import grouping_warnings
    from trajlab.scan import ScanOptions, scan

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "svg_run"
        run.mkdir()
        size = 0
        outs = []
        for step in range(1, a.steps + 1):
            lines = []
            for i in range(a.per_step):
                o = output(step * a.per_step + i)
                outs.append(o)
                lines.append(json.dumps({"input": PROMPT, "output": o, "score": 0.5, "step": step}))
            data = ("\n".join(lines) + "\n").encode()
            size += len(data)
            (run / f"{step}.jsonl").write_bytes(data)
        t0 = time.perf_counter()
        s = scan([run], Path(tmp) / "out", ScanOptions(jobs=1, incremental=False), progress=False)
        t_scan = time.perf_counter() - t0
        t0 = time.perf_counter()
        for o in outs:
            output_ending(o, n_calls=0, truncated_call=False, final_role="assistant")
        t_end = time.perf_counter() - t0
        t0 = time.perf_counter()
        warnings = grouping_warnings(pl.scan_parquet(Path(tmp) / "out" / "trajectories.parquet"))
        t_groups = time.perf_counter() - t0
    res = {
        "records": len(outs), "mb": round(size / 1e6, 1), "scan_s": round(t_scan, 2),
        "scan_records_per_s": round(len(outs) / t_scan), "ending_us_per_output": round(t_end / len(outs) * 1e6, 2),
        "grouping_s": round(t_groups, 3), "truncated": s.truncated, "final_answer_rate": s.final_answer_rate,
        "end_reasons": s.end_reasons, "grouping": [w["kind"] for w in warnings],
    }
    if a.json:
        print(json.dumps(res, indent=2))
    else:
        for k, v in res.items():
            print(f"{k:>22}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

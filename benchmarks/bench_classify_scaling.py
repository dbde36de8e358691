#!/usr/bin/env python3
"""How the per-turn classifier's time grows with the size of a turn.

    python benchmarks/bench_classify_scaling.py            # 400 and 1,600 calls per turn, 1 MB turns
    python benchmarks/bench_classify_scaling.py --calls 1000 --repeat 5

For each kind of call (well-formed XML, well-formed Hermes, malformed XML with a garbled name and stray
attributes) it classifies one turn of ``--calls`` calls and one of 4x as many, and prints the time per call of
each and the ratio of the two totals: linear work gives ~4x, quadratic ~16x. It also times 1 MB turns without
call markup (plain prose; a long ``<think>`` block full of ``<`` and ``>``), which should cost next to
nothing. Exit status 1 when growth is not linear (ratio above 8) or a 1 MB turn without calls takes more than
50 ms (prose) / 500 ms (reasoning): the checks that catch quadratic loops and per-character Python.
"""

from __future__ import annotations

import argparse
import sys
import time

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn

TOOLS = [{"name": "search_web", "parameters": {"type": "object", "properties": {"queries": {"type": "array"}},
                                              "required": ["queries"]}}]
UNITS = {
    "xml, well-formed": ('<tool_call>\n<function=search_web>\n<parameter=queries>\n["a b c"]\n</parameter>\n'
                         '</function>\n</tool_call>\n', "qwen3_coder"),
    "hermes, well-formed": ('<tool_call>\n{"name": "search_web", "arguments": {"queries": ["a b c"]}}\n'
                            '</tool_call>\n', "hermes"),
    "xml, malformed": ('<tool_call>\n<function=search_web英文>\n<parameter=queries>\n["a"]\n'
                       '</parameter v2="">\n</function>\n', "qwen3_coder"),
}
PLAIN = {
    "1 MB prose, no markup": ("The bridge was completed in 1887, according to the council report. " * 15000, 0.05),
    "1 MB <think> with < and >": ("<think>\n" + "compare a < b and b > c; " * 40000 + "\n</think>\nThe answer is 4.",
                                  0.5),
}


def best_time(text: str, fmt: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400, help="calls in the small turn (the big one has 4x)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions; the best is reported")
    a = ap.parse_args(argv)
    ok = True
    print(f"{'turn':<24} {'calls':>6} {'µs/call':>9} {'calls':>6} {'µs/call':>9} {'ratio':>6}  (linear ~4, quadratic ~16)")
    for name, (unit, fmt) in UNITS.items():
        small = best_time(unit * a.calls, fmt, a.repeat)
        large = best_time(unit * (4 * a.calls), fmt, a.repeat)
        ratio = large / max(small, 1e-9)
        ok &= ratio <= 8
        print(f"{name:<24} {a.calls:>6} {small / a.calls * 1e6:>9.1f} {4 * a.calls:>6} "
              f"{large / (4 * a.calls) * 1e6:>9.1f} {ratio:>6.1f}")
    print()
    for name, (text, limit) in PLAIN.items():
        t = best_time(text, "qwen3_coder", a.repeat)
        ok &= t <= limit
        print(f"{name:<28} {t * 1e3:8.2f} ms   (limit {limit * 1e3:.0f} ms)")
    print("\nscaling:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

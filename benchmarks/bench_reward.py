"""Per-sample cost of the verl reward plugin (``trajlab.verl.reward.compute_score``) on the sample runs' real
responses, on one core, beside verl's own ``default_compute_score`` on the same batch.

Batches: every response of ``qwen35_xml_run`` (collapsing, multi-turn XML calls), ``qwen3_hermes_run``, the four
family runs, and "10 KB" responses: real multi-turn responses of ``qwen35_xml_run`` chained with verl 0.9's
tool-response scaffolding until they pass 10,000 characters. Each sample is timed alone (``perf_counter_ns``) after
one warm-up pass over the batch (so the per-prompt caches of a GRPO group are warm, as in training).

verl's ``default_compute_score`` needs verl: when it is not importable here and the verl venv of
``../shared/tools/verl-sft-check`` exists, the benchmark re-runs itself there with this checkout on PYTHONPATH.

    python benchmarks/bench_reward.py            # table
    python benchmarks/bench_reward.py --json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
RUNS = ("qwen35_xml_run", "qwen3_hermes_run", "glm45_run", "kimi_k2_run", "deepseek_v31_run", "gpt_oss_run")


def _records(run: str) -> list[dict[str, Any]]:
    out = []
    for f in sorted((SAMPLE / run / "rollout").glob("*.jsonl"), key=lambda p: int(p.stem)):
        for line in f.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _ten_kb(recs: list[dict[str, Any]], n: int = 200) -> list[dict[str, Any]]:
    multi = [r for r in recs if "<tool_response>" in r["output"]]
    out, i = [], 0
    while len(out) < n and multi:
        text = multi[i % len(multi)]["output"]
        j = i + 1
        while len(text) < 10_000:
            text += "\nuser\n<tool_response>\n(more)\n</tool_response>\nassistant\n" + multi[j % len(multi)]["output"]
            j += 1
        out.append({**multi[i % len(multi)], "output": text})
        i += 7
    return out


def _time(fn: Any, recs: list[dict[str, Any]]) -> dict[str, float]:
    """Wall and CPU (this thread's) milliseconds per sample: on a shared machine the wall p99 is the scheduler's
    (a preempted sample waits a whole time slice), the CPU p99 is the plugin's."""
    for r in recs:  # warm-up
        fn(r)
    wall, cpu = [], []
    for r in recs:
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        fn(r)
        cpu.append((time.thread_time_ns() - c0) / 1e6)
        wall.append((time.perf_counter_ns() - t0) / 1e6)
    return {"n": len(recs), **_stats(wall, "wall"), **_stats(cpu, "cpu")}


def _stats(ts: list[float], kind: str) -> dict[str, float]:
    s = sorted(ts)
    return {f"{kind}_median_ms": statistics.median(s), f"{kind}_p99_ms": s[min(len(s) - 1, int(0.99 * len(s)))],
            f"{kind}_mean_ms": statistics.fmean(s)}


def run() -> dict[str, Any]:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    from trajlab.verl.reward import compute_score

    try:
        from verl.utils.reward_score import default_compute_score
    except Exception:
        default_compute_score = None

    def ours(r: dict[str, Any]) -> Any:
        return compute_score("searchR1_nq", r["output"], r.get("gts"), {"raw_prompt": r.get("input", "")},
                             task_fn="none")

    def verls(r: dict[str, Any]) -> Any:
        with contextlib.redirect_stdout(io.StringIO()):  # verl's search_r1 scorer prints 1 sample in 64
            return default_compute_score("searchR1_nq", r["output"], {"target": [str(r.get("gts"))]})

    batches = {run: _records(run) for run in RUNS}
    batches["10kb_multiturn"] = _ten_kb(batches["qwen35_xml_run"])
    out: dict[str, Any] = {"verl_default_compute_score": default_compute_score is not None, "batches": {}}
    for name, recs in batches.items():
        row = {"chars_median": statistics.median(len(r["output"]) for r in recs), "trajlab": _time(ours, recs)}
        if default_compute_score is not None:
            row["verl_default"] = _time(verls, recs)
        out["batches"][name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--here", action="store_true", help="never re-run in the verl venv")
    a = ap.parse_args(argv)
    try:
        import verl  # noqa: F401
        has_verl = True
    except Exception:
        has_verl = False
    venv_py = Path(os.environ.get("VERLSFT_VENV", "/tmp/verlsft-venv")) / "bin" / "python"
    if not has_verl and not a.here and venv_py.is_file():
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.call([str(venv_py), __file__, "--here", *(["--json"] if a.json else [])], env=env)
    res = run()
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print("ms per sample, one core; wall (cpu): median, p99")
    print(f"{'batch':<18}{'n':>6}{'chars':>8}  {'trajlab median':>16}{'p99':>16}  {'verl median':>16}{'p99':>16}")

    def cell(t: dict[str, float], q: str) -> str:
        return f"{t[f'wall_{q}_ms']:.3f} ({t[f'cpu_{q}_ms']:.3f})"

    for name, row in res["batches"].items():
        t, v = row["trajlab"], row.get("verl_default")
        vs = f"{cell(v, 'median'):>16}{cell(v, 'p99'):>16}" if v else f"{'-':>16}{'-':>16}"
        print(f"{name:<18}{t['n']:>6}{row['chars_median']:>8.0f}  {cell(t, 'median'):>16}{cell(t, 'p99'):>16}  {vs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

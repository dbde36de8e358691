#!/usr/bin/env python3
"""Write a large, realistic verl 0.9.x rollout dump (default >= 1 GB) for benchmarking ``trajlab scan``.

It reuses the trajectory builder of ``sample_data/generate.py`` (same Qwen3.5 XML tool run, same malformation
story) with a bigger batch per step (``--prompts`` x ``--rollouts``, default 64 x 8 = 512 lines a step) and
as many ``{step}.jsonl`` files as it takes to reach ``--size-gb``; the malformation schedule is stretched over
the whole run. Output is deterministic for a given set of options, steps are generated in parallel
(``--jobs``), and a finished dump is reused when asked for again with the same options.

    python benchmarks/gen_large_dump.py --out /tmp/trajlab_bench --size-gb 1

Layout: ``OUT/rollout/{step}.jsonl`` (scan that directory) and ``OUT/dump_info.json`` (options, file count,
bytes; written last, so its presence marks a complete dump).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "sample_data" / "generate.py"
INFO_NAME = "dump_info.json"
_GEN: ModuleType | None = None


def load_generator() -> ModuleType:
    """Import ``sample_data/generate.py`` by path (it is not part of the installed package)."""
    global _GEN
    if _GEN is None:
        spec = importlib.util.spec_from_file_location("trajlab_sample_generate", GENERATOR)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {GENERATOR}")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _GEN = mod
    return _GEN


#: ``--shape small-files``: think blocks and tool responses are lengthened to about this many characters
LONG_THINK, LONG_RESPONSE = 1500, 2500
_THINK = re.compile(r"<think>\n(.*?)\n</think>", re.DOTALL)
_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)


def _lengthen(m: re.Match[str], tag: str, n: int) -> str:
    body = m.group(1)
    if body:
        body = " ".join([body] * max(1, n // (len(body) + 1)))
    return f"<{tag}>\n{body}\n</{tag}>"


def _long_blocks(record: dict[str, Any]) -> dict[str, Any]:
    """The record with every closed think block and tool response repeated to ~LONG_THINK / LONG_RESPONSE
    characters (the agent runs of long-context models: long reasoning, long tool output)."""
    out = _THINK.sub(lambda m: _lengthen(m, "think", LONG_THINK), record["output"])
    out = _RESPONSE.sub(lambda m: _lengthen(m, "tool_response", LONG_RESPONSE), out)
    return {**record, "output": out}


def _write_step(args: tuple[str, int, int, int, int, str]) -> int:
    """Worker: generate and write one ``{step}.jsonl``; returns its size in bytes."""
    out_dir, step, prompts, rollouts, total_steps, shape = args
    gen = load_generator()
    recs = gen.step_records(step, run="qwen35_xml", prompts_per_step=prompts, rollouts=rollouts,
                            total_steps=total_steps)
    text = "".join(gen.dump_line(_long_blocks(r) if shape == "small-files" else r) for r in recs)
    data = text.encode("utf-8")
    path = Path(out_dir) / f"{step}.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return len(data)


#: the two dump shapes: ``big-files`` (64 x 8 trajectories per step file, ~1.6 MB files) and ``small-files``
#: (4 x 7 per file, long think blocks and tool responses: ~300 KB files)
SHAPES = {"big-files": (64, 8), "small-files": (4, 7)}


def _options(size_gb: float, prompts: int, rollouts: int, shape: str = "big-files") -> dict[str, Any]:
    opts = {"size_gb": size_gb, "prompts": prompts, "rollouts": rollouts, "generator": "qwen35_xml",
            "seed": load_generator().SEED}
    if shape != "big-files":
        opts["shape"] = shape
    return opts


def existing_dump(out: Path, size_gb: float, prompts: int = 64, rollouts: int = 8,
                  shape: str = "big-files") -> dict[str, Any] | None:
    """The info of a complete dump with the same options under ``out``, else None."""
    info_path = out / INFO_NAME
    if not info_path.is_file():
        return None
    try:
        info = json.loads(info_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if info.get("options") != _options(size_gb, prompts, rollouts, shape):
        return None
    files = [out / "rollout" / f"{s}.jsonl" for s in range(1, info["steps"] + 1)]
    if not all(p.is_file() for p in files) or sum(p.stat().st_size for p in files) != info["bytes"]:
        return None
    return info


def generate(out: Path, size_gb: float = 1.0, *, prompts: int | None = None, rollouts: int | None = None,
             jobs: int = 0, quiet: bool = False, shape: str = "big-files") -> dict[str, Any]:
    """Write (or reuse) a dump of at least ``size_gb`` GB (10^9 bytes) under ``out``; returns its info.

    ``shape`` picks the default batch per step file (:data:`SHAPES`); ``small-files`` also lengthens think
    blocks and tool responses."""
    prompts = prompts or SHAPES[shape][0]
    rollouts = rollouts or SHAPES[shape][1]
    info = existing_dump(out, size_gb, prompts, rollouts, shape)
    if info is not None:
        if not quiet:
            print(f"reusing {info['bytes'] / 1e9:.2f} GB dump in {out}/rollout ({info['steps']} steps)")
        return info
    target = int(size_gb * 1e9)
    roll = out / "rollout"
    roll.mkdir(parents=True, exist_ok=True)
    (out / INFO_NAME).unlink(missing_ok=True)
    for old in roll.glob("*.jsonl*"):
        old.unlink()
    t0 = time.perf_counter()
    # size one step to plan the run length (the schedule stretches over the planned steps)
    probe = _write_step((str(roll), 1, prompts, rollouts, 1000, shape))
    planned = max(2, math.ceil(target / probe * 1.03))
    jobs = jobs or (os.cpu_count() or 1)
    sizes: dict[int, int] = {}
    step = 1
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        while sum(sizes.values()) < target:
            need = target - sum(sizes.values())
            batch = range(step, step + max(1, min(planned - step + 1, math.ceil(need / probe))))
            work = [(str(roll), s, prompts, rollouts, planned, shape) for s in batch]
            for s, n in zip(batch, pool.map(_write_step, work, chunksize=4), strict=True):
                sizes[s] = n
            step = batch[-1] + 1
            if not quiet:
                done = sum(sizes.values())
                print(f"  {len(sizes)} steps, {done / 1e9:.2f} GB, {done / 1e6 / (time.perf_counter() - t0):.0f} MB/s",
                      file=sys.stderr)
    info = {"options": _options(size_gb, prompts, rollouts, shape), "steps": len(sizes), "planned_steps": planned,
            "bytes": sum(sizes.values()), "lines": len(sizes) * prompts * rollouts,
            "seconds": round(time.perf_counter() - t0, 1)}
    tmp = out / (INFO_NAME + ".tmp")
    tmp.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(tmp, out / INFO_NAME)
    if not quiet:
        print(f"wrote {info['bytes'] / 1e9:.2f} GB ({info['lines']} lines, {info['steps']} steps) to {roll} "
              f"in {info['seconds']} s")
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="output directory (the dump goes to OUT/rollout/)")
    ap.add_argument("--size-gb", type=float, default=1.0, help="minimum dump size in GB (10^9 bytes); default 1")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="big-files",
                    help="big-files (64 x 8 per step, ~1.6 MB files; default) or small-files (4 x 7 per step, long "
                         "think blocks and tool responses, ~300 KB files)")
    ap.add_argument("--prompts", type=int, default=None, help="prompts per step (default: the shape's)")
    ap.add_argument("--rollouts", type=int, default=None, help="rollouts per prompt (default: the shape's)")
    ap.add_argument("--jobs", type=int, default=0, help="worker processes (default: all CPUs)")
    a = ap.parse_args(argv)
    generate(a.out, a.size_gb, prompts=a.prompts, rollouts=a.rollouts, jobs=a.jobs, shape=a.shape)
    return 0


if __name__ == "__main__":
    sys.exit(main())

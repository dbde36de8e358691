"""Write the training-metrics logs of the sample runs with verl's own logger class (verl 0.9.1).

Run it with a Python that has verl 0.9.1, torch and tensorboard (the venv ``shared/tools/verl-sft-check/``
builds, ``/tmp/verlsft-venv``):

    /tmp/verlsft-venv/bin/python sample_data/generate_metrics.py            # rewrite in place
    /tmp/verlsft-venv/bin/python sample_data/generate_metrics.py --out DIR  # or elsewhere

For ``qwen35_xml_run`` and ``qwen35_xml_sft_run`` it calls ``verl.utils.tracking.Tracking(project_name=
"trajlab-samples", experiment_name=<run>, default_backend=["file", "tensorboard"]).log(data, step)`` once per
step, from ``sample_data/`` as verl's working directory, so the files land where verl puts them by default:

* ``trajlab-samples/<run>.jsonl`` (``FileLogger``: one ``{"step": N, "data": {...}}`` line per step);
* ``tensorboard_log/trajlab-samples/<run>/events.out.tfevents.*`` (``torch.utils.tensorboard.SummaryWriter``).

What is logged, per step, derived from the run's own dump files where they hold it:

* ``critic/score/mean|max|min`` and ``critic/rewards/mean``: the step's dumped ``score`` values (no KL penalty
  in the reward, so rewards equal scores);
* ``response_length/mean|max``: the outputs' length in characters / 4 (an estimate of tokens: the sample
  data has no tokenizer) and ``response_length/clip_ratio`` (share of outputs with no final answer);
* ``training/num_turns/mean|min|max``: user turns + assistant turns + 1, counted in each output (V1 naming);
* ``val-core/search_qa/acc/mean@1``: the validation dump's ``acc`` at every 10th step;
* ``actor/entropy``, ``actor/grad_norm``, ``training/rollout_probs_diff_mean|max``: **synthetic** (the dumps do not
  hold them): a smooth curve from the step's share of outputs without a final answer plus fixed-seed noise.

Deterministic: the writer's clock, host name and process id are fixed (one minute per step from 2026-01-01),
so the event file's name and bytes are the same on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = "trajlab-samples"
RUNS = ("qwen35_xml_run", "qwen35_xml_sft_run")
EPOCH = 1767225600  # 2026-01-01T00:00:00Z
SEP = "\nuser\n<tool_response>"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def step_metrics(rows: list[dict], step: int, rng: random.Random) -> dict[str, float]:
    """The metrics of one training step from its dump rows."""
    scores = [float(r["score"]) for r in rows]
    lengths = [len(r["output"]) / 4.0 for r in rows]
    unanswered = sum(1 for r in rows if "<answer>" not in r["output"]) / len(rows)
    turns = []
    for r in rows:
        tool_rounds = r["output"].count(SEP)
        assistant = tool_rounds + (1 if "<answer>" in r["output"] or not tool_rounds else 0)
        turns.append(1 + tool_rounds + assistant + 1)  # user turns (prompt + tool responses) + assistant + 1
    drift = max(0, step - 80) / 70.0
    return {
        "critic/score/mean": sum(scores) / len(scores),
        "critic/score/max": max(scores),
        "critic/score/min": min(scores),
        "critic/rewards/mean": sum(scores) / len(scores),
        "response_length/mean": sum(lengths) / len(lengths),
        "response_length/max": max(lengths),
        "response_length/clip_ratio": unanswered,
        "training/num_turns/mean": sum(turns) / len(turns),
        "training/num_turns/min": float(min(turns)),
        "training/num_turns/max": float(max(turns)),
        "actor/entropy": round(0.62 - 0.0012 * step + 0.35 * unanswered + 0.05 * drift + rng.gauss(0, 0.012), 6),
        "actor/grad_norm": round(0.18 + 0.4 * unanswered + abs(rng.gauss(0, 0.03)), 6),
        "training/rollout_probs_diff_mean": round(0.004 + 0.02 * unanswered + 0.002 * drift
                                                  + abs(rng.gauss(0, 0.0006)), 6),
        "training/rollout_probs_diff_max": round(0.35 + 0.5 * unanswered + abs(rng.gauss(0, 0.05)), 6),
    }


def write_run(run: str, sample: Path, out: Path) -> None:
    from verl.utils.tracking import Tracking

    rollout = sample / run / "rollout"
    val = sample / run / "validation"
    steps = sorted(int(p.stem) for p in rollout.glob("*.jsonl"))
    rng = random.Random(f"trajlab-metrics:{run}")
    clock = [float(EPOCH)]
    real_time = time.time
    time.time = lambda: clock[0]  # type: ignore[assignment]  # the writer's wall clock: one minute per step
    cwd = os.getcwd()
    os.chdir(out)  # verl's working directory: both loggers write relative to it by default
    try:
        for var in ("VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT", "TENSORBOARD_DIR"):
            os.environ.pop(var, None)
        tracker = Tracking(project_name=PROJECT, experiment_name=run, default_backend=["file", "tensorboard"])
        for step in steps:
            clock[0] = EPOCH + 60.0 * step
            data = step_metrics(_lines(rollout / f"{step}.jsonl"), step, rng)
            vf = val / f"{step}.jsonl"
            if vf.is_file():
                accs = [float(r["acc"]) for r in _lines(vf)]
                data["val-core/search_qa/acc/mean@1"] = sum(accs) / len(accs)
            tracker.log(data=data, step=step)
        for backend in tracker.logger.values():
            if hasattr(backend, "finish"):
                backend.finish()
    finally:
        os.chdir(cwd)
        time.time = real_time  # type: ignore[assignment]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE, help="where to write (default: sample_data/ itself)")
    args = ap.parse_args()
    out = args.out.resolve()
    socket.gethostname = lambda: "trajlab-sample"  # type: ignore[assignment]  # part of the event file's name
    os.getpid = lambda: 1  # type: ignore[assignment]
    for run in RUNS:
        shutil.rmtree(out / "tensorboard_log" / PROJECT / run, ignore_errors=True)
        (out / PROJECT / f"{run}.jsonl").unlink(missing_ok=True)
        write_run(run, HERE, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

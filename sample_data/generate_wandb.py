"""Write ``qwen35_xml_run``'s training metrics as verl's W&B backend does by default, offline, resumed once.

Run it with the verl 0.9.1 venv (verl depends on wandb; ``shared/tools/verl-sft-check/`` builds it):

    /tmp/verlsft-venv/bin/python sample_data/generate_wandb.py            # rewrite sample_data/wandb/
    /tmp/verlsft-venv/bin/python sample_data/generate_wandb.py --out DIR  # or elsewhere

It replays the file logger's lines (``trajlab-samples/qwen35_xml_run.jsonl``, written by ``generate_metrics.py``)
through ``verl.utils.tracking.Tracking(project_name="trajlab-samples", experiment_name="qwen35_xml_run",
default_backend=["wandb"])`` with ``WANDB_MODE=offline``, twice, the way a resumed verl run logs:

* the first W&B run logs steps 1..100, and steps 91..100 with other values (the stretch the crash abandoned:
  every value scaled by a seeded factor in 0.8..1.2);
* the second, a new W&B run with a new id and the same name (verl passes no id, so a resume is a new run),
  resumes from the step-90 checkpoint and logs steps 91..150 with the file logger's values, and a
  ``val/generations`` table at step 150 (W&B's usual validation table; trajlab skips it).

Merged by step, the later run winning on 91..100, the W&B series equal the file logger's. Only each run's
``run-<id>.wandb`` is kept, under ``wandb/offline-run-*/`` (where W&B leaves it in verl's working directory,
``sample_data/``). The values are seeded; the bytes are not reproducible (wandb-core stamps its own clock and a
random run id).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROJECT = "trajlab-samples"
RUN = "qwen35_xml_run"
CRASH, RESUME_FROM = 100, 90


def _log(lines: list[dict], out: Path, with_table: bool) -> Path:
    import wandb
    from verl.utils.tracking import Tracking

    before = set(out.glob("wandb/offline-run-*"))
    tracker = Tracking(project_name=PROJECT, experiment_name=RUN, default_backend=["wandb"],
                       config={"trainer": {"project_name": PROJECT, "experiment_name": RUN}})
    for x in lines:
        tracker.log(data=x["data"], step=x["step"])
    if with_table:
        table = wandb.Table(columns=["input", "output", "score"], data=[["q", "a", 1.0]])
        tracker.log(data={"val/generations": table}, step=lines[-1]["step"])
    tracker.finish()
    (new,) = set(out.glob("wandb/offline-run-*")) - before
    (f,) = new.glob("run-*.wandb")
    return f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE, help="where to write wandb/ (default: sample_data/)")
    args = ap.parse_args()
    lines = [json.loads(x) for x in (HERE / PROJECT / f"{RUN}.jsonl").read_text(encoding="utf-8").splitlines()
             if x.strip()]
    rng = random.Random(f"trajlab-wandb:{RUN}")
    first = []
    for x in lines:
        if x["step"] > CRASH:
            break
        data = dict(x["data"])
        if x["step"] > RESUME_FROM:  # the abandoned stretch: other rollouts, other values
            data = {k: round(v * rng.uniform(0.8, 1.2), 6) for k, v in data.items()}
        first.append({"step": x["step"], "data": data})
    second = [x for x in lines if x["step"] > RESUME_FROM]
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        del os.environ[k]
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_X_DISABLE_STATS="true")
    dest = args.out.resolve() / "wandb"
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # verl's working directory: W&B writes wandb/ relative to it
        try:
            files = [_log(first, Path(tmp), False), _log(second, Path(tmp), True)]
        finally:
            os.chdir(cwd)
        shutil.rmtree(dest, ignore_errors=True)
        for f in files:
            (dest / f.parent.name).mkdir(parents=True)
            shutil.copy2(f, dest / f.parent.name / f.name)
            print(f"{dest / f.parent.name / f.name}: {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Write the W&B run files the reader's tests read, with wandb's own writers (offline), and what wandb's own
reader (``wandb leet inspect --json``) makes of them.

    python tests/data/wandb/generate.py --old /tmp/wandb-old-016/bin/python --core /tmp/verlsft-venv/bin/python

* ``py016/``: wandb 0.16.6, the last release whose writer is pure Python (``HistoryItem.key``, a nested dict as
  one JSON object); make its venv with ``python -m venv /tmp/wandb-old-016 && /tmp/wandb-old-016/bin/pip install
  wandb==0.16.6``;
* ``core/``: the wandb-core (Go) writer of the verl venv's wandb (0.31.0: ``nested_key``), written through verl's
  own ``Tracking(default_backend=["wandb"])`` with ``WANDB_MODE=offline``;
* ``typed/``: the same writer with ``x_history_value_encoding="json,typed"`` (0.31's typed values).

Each keeps only ``wandb/offline-run-*/run-<id>.wandb`` (the file the reader reads) and writes
``run-<id>.leet.jsonl`` beside it: the run and history records ``wandb leet inspect --json`` printed (the test compares
the reader with it row for row). The values are seeded (``random.Random("trajlab-wandb:<name>")``); the bytes are
not reproducible (W&B stamps its own clock and a random run id into the file).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STEPS = 12


def values(name: str) -> list[tuple[int, dict]]:
    """The seeded rows every writer logs: flat verl-style keys, an int, a bool, NaN/inf, a string, and a nested
    dict (the Python writer sends it as one JSON object, wandb-core as key paths)."""
    rng = random.Random(f"trajlab-wandb:{name}")
    rows = []
    for step in range(1, STEPS + 1):
        d: dict = {
            "critic/score/mean": round(rng.uniform(0, 1), 6),
            "actor/entropy": round(0.6 - 0.01 * step + rng.gauss(0, 0.01), 6),
            "perf/total_num_tokens": rng.randrange(1000, 5000),
            "training/global_step": step,
            "val/flag": step % 2 == 0,
            "note": f"step {step}",
            "nested": {"a": round(rng.random(), 6), "b": {"c": step * 1.5}},
        }
        if step == 5:
            d["actor/grad_norm"] = float("nan")
        if step == 6:
            d["actor/grad_norm"] = float("inf")
        rows.append((step, d))
    return rows


def write(kind: str, out: Path) -> None:
    """Write one run with the writer of the running interpreter into ``out`` (its working directory)."""
    import wandb

    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_SILENT"] = "true"
    os.chdir(out)
    rows = values(kind)
    if kind == "core":
        from verl.utils.tracking import Tracking

        os.environ["WANDB_X_DISABLE_STATS"] = "true"
        tracker = Tracking(project_name="trajlab-fixtures", experiment_name="fixture-core",
                           default_backend=["wandb"], config={"trainer": {"total_training_steps": STEPS}})
        for step, d in rows:
            tracker.log(data=d, step=step)
        table = wandb.Table(columns=["input", "output"], data=[["q", "a"]])
        tracker.log(data={"val/generations": table}, step=STEPS)
        tracker.finish()
        return
    settings: dict = {}
    if kind == "typed":
        settings = {"x_history_value_encoding": "json,typed", "x_disable_stats": True}
    else:
        settings = {"_disable_stats": True, "_disable_meta": True}
    run = wandb.init(project="trajlab-fixtures", name=f"fixture-{kind}", group="fixtures", job_type="test",
                     config={"lr": 1e-6, "trainer": {"total_training_steps": STEPS}},
                     settings=wandb.Settings(**settings))
    for step, d in rows:
        run.log(d, step=step)
    run.log({"val/generations": wandb.Table(columns=["input", "output"], data=[["q", "a"]])}, step=STEPS)
    run.finish()


def leet(core_python: str, wandb_file: Path) -> None:
    """Keep the run and history records ``wandb leet inspect --json`` prints for ``wandb_file``."""
    exe = Path(core_python).parent / "wandb"
    got = subprocess.run([str(exe), "leet", "inspect", "--json", str(wandb_file)], capture_output=True, text=True,
                         check=True, timeout=120)
    lines = [ln for ln in got.stdout.splitlines() if ln.strip() and json.loads(ln).get("type") in ("run", "history")]
    (wandb_file.parent / wandb_file.name.replace(".wandb", ".leet.jsonl")).write_text(
        "\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", help="a Python with wandb 0.16.6")
    ap.add_argument("--core", help="a Python with verl 0.9.1 and wandb >= 0.31")
    ap.add_argument("--leet-only", action="store_true", help="only rewrite the leet outputs of the files here")
    ap.add_argument("--write", choices=("py016", "core", "typed"), help=argparse.SUPPRESS)
    ap.add_argument("--into", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.write:
        write(a.write, a.into)
        return 0
    if a.leet_only:
        for f in sorted(HERE.glob("*/wandb/*/run-*.wandb")):
            leet(a.core, f)
        return 0
    for kind, py in (("py016", a.old), ("core", a.core), ("typed", a.core)):
        if not py:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
            env["PYTHONPATH"] = str(HERE.parents[2])
            subprocess.run([py, str(Path(__file__).resolve()), "--write", kind, "--into", tmp], check=True, env=env,
                           timeout=600)
            (src,) = Path(tmp).glob("wandb/offline-run-*/run-*.wandb")
            dest = HERE / kind / "wandb" / src.parent.name
            shutil.rmtree(HERE / kind, ignore_errors=True)
            dest.mkdir(parents=True)
            shutil.copy2(src, dest / src.name)
            if a.core:
                leet(a.core, dest / src.name)
            print(f"{kind}: {dest / src.name} ({src.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

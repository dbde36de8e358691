"""The emergency-SFT hand-over after a circuit-breaker trip: the SFT pool built from the run so far, and the
commands that train it and resume RL.

When ``trajlab watch`` trips (its trip file, :mod:`trajlab.tripfile`), :func:`handoff` builds the interleaved SFT
pool from the watch's output with the cut at the trip: positives only from the steps before the warning (the run
while it was healthy), error demonstrations and hints only from the warning on (what broke), in verl's
``MultiTurnSFTDataset`` layout (:func:`trajlab.curate.build_sft_pool` with ``split_step``). It returns the
commands a user runs next, in order: merge the last saved actor checkpoint to a Hugging Face model (verl's model
merger; nothing to merge where verl saved HF weights), SFT on the pool from it with verl's SFT trainer, then
resume RL from the SFT model. ``trajlab handoff OUT`` prints them; each is filled in with what is known and keeps
a placeholder (``CKPT``, ``BASE_MODEL``) where it is not.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param
from trajlab.tripfile import read_trip_file

#: where the pool goes by default, under the watch's output directory
DEFAULT_POOL_DIR = "emergency_sft"


@dataclass(frozen=True)
class HandoffOptions:
    """What ``trajlab handoff`` is asked to do (the CLI maps its flags onto this)."""

    #: the run to hand over (default: the run of the trip file's first trip)
    run: str | None = None
    #: the cut: positives before it, error demonstrations and hints from it on (default: the trip's step)
    split_step: int | None = None
    #: the pool directory (default: ``OUT/emergency_sft``; a pool trajlab wrote there is rebuilt, a directory of
    #: anything else is refused, as ``build-sft-pool`` does)
    pool: Path | None = None
    #: the verl checkpoint root of the run (``trainer.default_local_dir``): its latest ``global_step_N`` is the
    #: SFT's starting point (default: a ``CKPT`` placeholder in the commands)
    checkpoint_root: Path | None = None
    #: positive:error_demo:hint
    ratio: str = "5:3:2"
    #: share of prompts held out for ``val.parquet``
    val_fraction: float = 0.05
    #: seeds every choice (same input and seed, same bytes)
    seed: int = 0
    #: ``data.max_length`` of the SFT command
    max_length: int = 8192


@dataclass
class Handoff:
    """The hand-over: where the pool is, what it holds, and the commands to run next."""

    run: str
    split_step: int
    pool: Path
    samples: dict[str, int]  # kind -> samples in train.parquet + val.parquet
    checkpoint: Path | None  # the latest global_step_N of checkpoint_root, when given
    commands: list[str] = field(default_factory=list)
    trip: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "split_step": self.split_step, "pool": str(self.pool), "samples": self.samples,
                "checkpoint": str(self.checkpoint) if self.checkpoint else None, "commands": self.commands,
                "trip": self.trip}


def latest_checkpoint(root: Path) -> Path:
    """The newest ``global_step_N`` under a verl checkpoint root (its tracker file first, else the highest N;
    :func:`trajlab.rescore.checkpoints.resolve.latest_step_dir`).

    Raises :class:`~trajlab.errors.InputError` when there is none."""
    from trajlab.rescore.checkpoints.resolve import latest_step_dir

    found = latest_step_dir(root)
    if found is None:
        raise InputError(f"{root}: no global_step_N checkpoint directory",
                         hint=f"give {param('checkpoint_root', metavar='DIR')} the run's trainer.default_local_dir")
    return found


def handoff_commands(pool: Path, checkpoint: Path | None, max_length: int) -> list[str]:
    """The commands after a trip, in order: merge the checkpoint's actor to HF weights, SFT on ``pool`` from it,
    resume RL from the SFT model."""
    q = shlex.quote
    ckpt = q(str(checkpoint)) if checkpoint is not None else "CKPT"
    hf = f"{ckpt}/actor/huggingface_merged"
    sft_dir = q(str(pool / "sft_checkpoints"))
    return [
        f"python -m verl.model_merger merge --backend fsdp --local_dir {ckpt}/actor --target_dir {hf}",
        f"torchrun --nproc_per_node=8 -m verl.trainer.sft_trainer data.train_files={q(str(pool / 'train.parquet'))} "
        f"data.val_files={q(str(pool / 'val.parquet'))} data.messages_key=messages "
        f"data.ignore_input_ids_mismatch=True data.max_length={max_length} model.path={hf} "
        f"trainer.default_local_dir={sft_dir}",
        f"python -m verl.trainer.main_ppo ... actor_rollout_ref.model.path=<the HF model of the last "
        f"{sft_dir}/global_step_N> trainer.resume_mode=disable",
    ]


def handoff(out: str | Path, options: HandoffOptions | None = None, *, progress: bool = False) -> Handoff:
    """Build the emergency SFT pool of ``out`` (a ``trajlab watch`` or ``scan`` output) cut at the trip, and the
    commands that come next (:func:`handoff_commands`).

    The cut and the run come from ``options`` or else from ``out``'s trip file; without either, a one-line
    :class:`~trajlab.errors.InputError` says what to pass."""
    from trajlab.curate import PoolOptions, build_sft_pool

    opts = options or HandoffOptions()
    out = Path(out)
    if not out.is_dir():
        raise InputError(f"{out}: no such directory",
                         hint="give the -o directory of `trajlab watch` (or of `trajlab scan`, with a step to cut at)")
    trip = read_trip_file(out)
    first = trip["trips"][0] if trip and trip["trips"] else {}
    run = opts.run or first.get("run")
    step = opts.split_step or first.get("step")
    if step is None:
        raise InputError(f"{out}: no trip file (trip.json) and no step to cut at",
                         hint=f"give the step, e.g. {param('split_step', 88)} (the early-warning step of `trajlab scan`)")
    pool = opts.pool or out / DEFAULT_POOL_DIR
    checkpoint = latest_checkpoint(opts.checkpoint_root) if opts.checkpoint_root is not None else None
    summary = build_sft_pool(out, pool, PoolOptions(ratio=opts.ratio, val_fraction=opts.val_fraction, seed=opts.seed,
                                                    runs=(run,) if run else (), split_step=int(step)),
                             progress=progress)
    samples = {k: int(v) for k, v in summary.selected.items()}
    return Handoff(run=run or "", split_step=int(step), pool=Path(pool), samples=samples, checkpoint=checkpoint,
                   commands=handoff_commands(Path(pool).resolve(), checkpoint, opts.max_length), trip=first or None)

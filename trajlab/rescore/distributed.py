"""Run ``trajlab rescore`` under ``torchrun``: one process per GPU (and per node), trajectories sharded by rank.

``torchrun --nproc-per-node N -m trajlab rescore OUT --ckpt ...`` sets ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``.
Every rank makes the same selection, keeps the trajectories whose index (in a length-balanced order) is
congruent to its rank, and writes its own part files; a gloo process group is used only for barriers, so rank 0
merges once every rank has finished a checkpoint. Without those variables everything runs in one process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in a (possibly single-process) run."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False  # this module created the process group (and destroys it)

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(timeout_hours: float = 12.0) -> DistInfo:
    """Join the torchrun process group when ``WORLD_SIZE > 1`` (gloo: barriers only)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return DistInfo()
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    import torch.distributed as dist

    owns = False
    if not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(hours=timeout_hours))
        owns = True
    return DistInfo(rank, world, local, owns)


def barrier(info: DistInfo) -> None:
    if info.world_size > 1:
        import torch.distributed as dist

        dist.barrier()


def shard(items: Sequence[T], info: DistInfo) -> list[T]:
    """This rank's share: every ``world_size``-th item starting at ``rank``."""
    return list(items[info.rank :: info.world_size])


def finalize(info: DistInfo) -> None:
    if info.owns_group:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()

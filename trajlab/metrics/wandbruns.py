"""One experiment, several W&B runs: the ``.wandb`` files matched to one trajlab run merged by step.

verl passes no run id to ``wandb.init``, so a run resumed from a checkpoint starts a new W&B run (a new id, the
same display name) that logs again from the checkpoint's step. :func:`merge_wandb` orders the files by the run's
start time (the run record's ``start_time``; the file's path when a file has none) and takes each step from the
last run that logged it: on an overlap the resumed run's values stand (training continued from them), the
abandoned run's are dropped. A file that cannot be read, or is damaged, costs only itself (its intact records are
used) and is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trajlab.metrics.sources import MatchedLog
from trajlab.metrics.wandbfile import WandbFile, read_wandb


@dataclass(frozen=True)
class MergedRow:
    """One metric value of the merged series and the file it came from."""

    step: int
    name: str
    value: float
    source: str


def merge_wandb(logs: Sequence[MatchedLog]) -> tuple[list[MergedRow], dict[str, Any], list[str]]:
    """The merged rows of the W&B files of one run, a summary (``run``, ``merged``: one record per W&B run in
    order with ``id``, ``name``, ``project``, ``file``, ``steps`` logged, ``kept`` steps, ``first``/``last`` step;
    ``overlap_steps``: steps logged by more than one run; ``skipped``: non-numeric values by reason) and problems
    (one line each)."""
    problems: list[str] = []
    read: list[tuple[MatchedLog, WandbFile]] = []
    for m in logs:
        try:
            wf = read_wandb(m.log.path)
        except OSError as e:
            problems.append(f"{m.log.rel}: cannot read: {e.strerror or e}")
            continue
        problems += [f"{m.log.rel}: {p}" for p in wf.problems]
        if wf.problems and wf.bytes_read < wf.size:
            problems.append(f"{m.log.rel}: read {wf.bytes_read} of {wf.size} bytes ({wf.records} records, "
                            f"{len(wf.history)} steps)")
        read.append((m, wf))
    read.sort(key=lambda x: (x[1].start_time if x[1].start_time is not None else float("inf"), x[0].log.rel))
    owner: dict[int, int] = {}
    seen: dict[int, int] = {}
    for i, (_, wf) in enumerate(read):
        for step in wf.history:
            owner[step] = i
            seen[step] = seen.get(step, 0) + 1
    rows = [MergedRow(step, name, value, read[i][0].log.rel)
            for step, i in sorted(owner.items()) for name, value in sorted(read[i][1].history[step].items())]
    skipped: dict[str, int] = {}
    for _, wf in read:
        for k, n in wf.skipped.items():
            skipped[k] = skipped.get(k, 0) + n
    kept = [sum(1 for o in owner.values() if o == i) for i in range(len(read))]
    summary = {
        "run": logs[0].run if logs else "",
        "merged": [{"id": wf.run_id, "name": wf.name, "project": wf.project, "file": m.log.rel,
                    "steps": len(wf.history), "kept": kept[i], "first": min(wf.history, default=None),
                    "last": max(wf.history, default=None), "complete": wf.complete}
                   for i, (m, wf) in enumerate(read)],
        "overlap_steps": sum(1 for n in seen.values() if n > 1),
        "skipped": dict(sorted(skipped.items())),
    }
    return rows, summary, problems

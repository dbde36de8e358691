"""trajlab's per-step numbers as TensorBoard scalars, beside the training curves.

``scan --tensorboard DIR`` (and ``watch``, at every publish) writes one event file per run,
``DIR/<run>/trajlab/events.out.tfevents.trajlab``, with the tags

* ``trajlab/malformed_rate``, ``trajlab/malformed_calls``, ``trajlab/calls`` (the run's main split: ``train``,
  else the split with most steps);
* ``trajlab/category/<category>``: the share of the step's calls flagged with the category;
* ``trajlab/early_warning``: 0 before the run's early-warning step, 1 from it on;
* ``trajlab/<split>/malformed_rate`` for each other split (e.g. ``val``);
* for steps with exact-token figures (:data:`CONTROL_KEYS`: dumps with exact tokens, or a verl run's reward record
  files), ``trajlab/control/logprob_mean``, ``trajlab/control/low_prob_share``,
  ``trajlab/control/logprob_mismatch`` and ``trajlab/logprob_mismatch``.

Point DIR at verl's ``tensorboard_log/<project>`` and a run named like its experiment lands at
``<project>/<experiment>/trajlab``, a TensorBoard run next to the trainer's own. (Not *in* the trainer's
directory: TensorBoard drops earlier points of a run when a later file starts again at a lower step.)

The file is trajlab's own (its first event names ``trajlab`` as its writer); an existing file there that trajlab
did not write is never replaced. The bytes are the same for the same steps: the wall time of every event is the
one of the file being replaced, else ``$SOURCE_DATE_EPOCH``, else now.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param

FILE_NAME = "events.out.tfevents.trajlab"
SUBDIR = "trajlab"
#: ``steps`` columns logged as control-token figures, and their tags (null columns are not logged)
CONTROL_KEYS = {
    "control_logprob_mean": "trajlab/control/logprob_mean",
    "control_low_prob_share": "trajlab/control/low_prob_share",
    "control_logprob_mismatch": "trajlab/control/logprob_mismatch",
    "logprob_mismatch": "trajlab/logprob_mismatch",
}


def _safe(run: str) -> Path:
    parts = [p for p in run.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    return Path(*parts) if parts else Path("_")


def run_file(dest: Path | str, run: str) -> Path:
    """Where the scalars of ``run`` go under ``dest``."""
    return Path(dest) / _safe(run) / SUBDIR / FILE_NAME


def scalar_rows(steps: Sequence[dict[str, Any]], warning: dict[str, Any] | None) -> list[tuple[int, str, float]]:
    """``(step, tag, value)`` of one run's ``steps`` rows (with ``category_counts`` as pairs or a dict)."""
    stepped = [r for r in steps if r.get("step") is not None]
    counts: dict[str, int] = {}
    for r in stepped:
        counts[r["split"]] = counts.get(r["split"], 0) + 1
    if not counts:
        return []
    main = "train" if "train" in counts else max(sorted(counts), key=lambda s: counts[s])
    warn_step = warning.get("step") if warning and warning.get("split", main) == main else None
    out: list[tuple[int, str, float]] = []
    for r in sorted(stepped, key=lambda r: (r["step"], r["split"])):
        step, calls = int(r["step"]), int(r.get("calls") or 0)
        if r["split"] != main:
            if calls:
                out.append((step, f"trajlab/{r['split']}/malformed_rate", r["malformed_calls"] / calls))
            continue
        out.append((step, "trajlab/calls", float(calls)))
        out.append((step, "trajlab/malformed_calls", float(r["malformed_calls"])))
        if calls:
            out.append((step, "trajlab/malformed_rate", r["malformed_calls"] / calls))
            cc = r.get("category_counts") or []
            for cat, n in sorted(cc.items() if isinstance(cc, dict) else cc):
                out.append((step, f"trajlab/category/{cat}", n / calls))
        out.append((step, "trajlab/early_warning", 1.0 if warn_step is not None and step >= warn_step else 0.0))
        for col, tag in CONTROL_KEYS.items():
            v = r.get(col)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:  # (NaN is not logged)
                out.append((step, tag, float(v)))
    return out


def _wall_time(existing: Path) -> float:
    if existing.is_file():
        from trajlab.metrics.tfevents import decode_event
        from trajlab.metrics.tfrecord import read_records

        with open(existing, "rb") as f:
            rec = next(read_records(f.read(4096)), None)
        if rec is not None:
            return decode_event(rec, {})[1]
    env = os.environ.get("SOURCE_DATE_EPOCH")
    if env and env.strip().isdigit():
        return float(env)
    return time.time()


def write_scalars(dest: Path | str, steps: Sequence[dict[str, Any]],
                  warnings: dict[str, dict[str, Any] | None]) -> list[Path]:
    """Write the event file of every run in ``steps`` (``steps`` table rows) under ``dest``; returns the files
    written or left as they were (same content). Raises :class:`~trajlab.errors.InputError` before writing
    anything when a target exists and is not trajlab's."""
    from trajlab.atomic import atomic_write_bytes
    from trajlab.metrics.tfevents import TRAJLAB_WRITER, event_file_bytes, file_writer

    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{param('tensorboard', str(dest))}: exists and is not a directory", hint="name a directory")
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in steps:
        by_run.setdefault(r.get("run") or "", []).append(r)
    targets = {run: run_file(dest, run or dest.name) for run in sorted(by_run)}
    for path in targets.values():
        if path.exists() and (not path.is_file() or path.is_symlink() or file_writer(path) != TRAJLAB_WRITER):
            raise InputError(f"{param('tensorboard')}: {path} exists and was not written by trajlab; not replacing it",
                             hint=f"move that file away or name another {param('tensorboard', metavar='DIR')}")
    written = []
    for run, path in targets.items():
        data = event_file_bytes(scalar_rows(by_run[run], warnings.get(run)), _wall_time(path))
        if not (path.is_file() and path.read_bytes() == data):
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        written.append(path)
    return written

"""trajlab's per-step numbers as an offline W&B run in the user's project, beside verl's own run.

``scan --wandb DIR`` (or :func:`write_wandb_runs`) writes, per scanned run, one **separate** offline W&B run with
the ``wandb`` package (the optional extra ``trajlab[wandb]``): ``DIR/wandb/offline-run-*/run-<id>.wandb``, ready
for ``wandb sync DIR/wandb/offline-run-*``. The run is

* in the verl run's project (read from its ``.wandb`` file when the scan found one, else
  :attr:`WandbExportOptions.project`, else ``trajlab``), ``group`` = the experiment (the trajlab run name, which
  is verl's ``experiment_name``), ``job_type="trajlab"``, named ``<experiment>-trajlab``; its config names the
  W&B runs and files it was made from, and ``trainer.experiment_name`` as verl's config has it (so W&B's
  "group by trainer.experiment_name" joins verl's runs, which verl starts with no group);
* logged with ``step`` = the verl step, keys under ``trajlab/``: the keys of :mod:`trajlab.metrics.tensorboard_out`
  (``trajlab/malformed_rate``, ``trajlab/calls``, ``trajlab/malformed_calls``, ``trajlab/category/<name>``,
  ``trajlab/early_warning``, ``trajlab/<split>/malformed_rate``) and, for dumps with exact tokens,
  ``trajlab/control/logprob_mean``, ``trajlab/control/low_prob_share``, ``trajlab/control/logprob_mismatch`` and
  ``trajlab/logprob_mismatch``.

In W&B's group view the two runs share the step axis. Appending to verl's own run cannot work: W&B drops every row
whose step is below the run's current step ("Steps must be monotonically increasing"), and a resumed run continues
from its last step, so trajlab's rows at steps 1..N would all be dropped.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param

JOB_TYPE = "trajlab"
DEFAULT_PROJECT = "trajlab"


@dataclass(frozen=True)
class WandbExportOptions:
    """Where and as what trajlab's W&B runs are written.

    Attributes:
        dir: W&B's directory (``wandb.init(dir=...)``): the runs land in ``dir/wandb/offline-run-*/``.
        project: the W&B project when the scan found no W&B file of the run (else that file's project is used).
        entity: the W&B entity (None: W&B's default, ``$WANDB_ENTITY``).
    """

    dir: Path
    project: str | None = None
    entity: str | None = None


def step_rows(steps: Sequence[dict[str, Any]], warning: dict[str, Any] | None) -> dict[int, dict[str, float]]:
    """``{step: {key: value}}`` of one run's ``steps`` rows: the TensorBoard scalars' keys plus the control-token
    figures where the step has them (the run's main split; :data:`trajlab.metrics.tensorboard_out.CONTROL_KEYS`)."""
    from trajlab.metrics.tensorboard_out import scalar_rows

    out: dict[int, dict[str, float]] = {}
    for step, tag, value in scalar_rows(steps, warning):
        out.setdefault(step, {})[tag] = value
    return dict(sorted(out.items()))


def _wandb() -> Any:
    try:
        import wandb
    except ImportError:
        raise InputError(f"{param('wandb')}: the wandb package is not installed",
                         hint="pip install -e '.[wandb]' (in the checkout)") from None
    return wandb


def write_wandb_runs(steps: Sequence[dict[str, Any]], warnings: dict[str, dict[str, Any] | None],
                     opts: WandbExportOptions, sources: Sequence[dict[str, Any]] = ()) -> list[Path]:
    """Write one offline W&B run per run in ``steps`` (``steps`` table rows) under ``opts.dir``; returns the
    ``.wandb`` files. ``warnings``: the early warning per run; ``sources``: the scan's W&B merge records
    (:func:`trajlab.metrics.wandbruns.merge_wandb`, ``run`` and ``merged``), which give the project and the
    source run ids. Raises :class:`~trajlab.errors.InputError` when wandb is not installed or ``opts.dir`` is
    a file."""
    wandb = _wandb()
    dest = Path(opts.dir)
    if dest.exists() and not dest.is_dir():
        raise InputError(f"{param('wandb', str(dest))}: exists and is not a directory", hint="name a directory")
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in steps:
        by_run.setdefault(r.get("run") or "", []).append(r)
    src = {s["run"]: s for s in sources}
    dest.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    saved = {k: os.environ.get(k) for k in ("WANDB_MODE", "WANDB_SILENT")}
    os.environ["WANDB_MODE"] = "offline"  # never uploads: the user runs `wandb sync`
    os.environ.setdefault("WANDB_SILENT", "true")  # trajlab's summary says where the run is
    try:
        for run, rows in sorted(by_run.items()):
            experiment = run.rsplit("/", 1)[-1] or dest.name
            merged = (src.get(run) or {}).get("merged") or []
            project = next((m["project"] for m in reversed(merged) if m.get("project")), None)
            wr = wandb.init(project=project or opts.project or DEFAULT_PROJECT, entity=opts.entity,
                            name=f"{experiment}-trajlab", group=experiment, job_type=JOB_TYPE, dir=str(dest),
                            mode="offline",
                            config={"trajlab_run": run, "source_run_ids": [m["id"] for m in merged],
                                    "source_wandb_files": [m["file"] for m in merged],
                                    # as in verl's own config: "group by trainer.experiment_name" in W&B's UI
                                    # puts verl's runs and this one together even when verl's have no group
                                    "trainer": {"experiment_name": experiment}})
            try:
                for step, values in step_rows(rows, warnings.get(run)).items():
                    wr.log(values, step=step)
            finally:
                wr.finish()
            written.append(Path(wr.dir).parent / f"run-{wr.id}.wandb")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return written

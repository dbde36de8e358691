"""Resolve ``--ckpt`` paths into the checkpoints that ``trajlab rescore`` teacher-forces trajectories through.

:func:`resolve_checkpoints` turns ``--ckpt`` paths into :class:`CheckpointRef` records. Accepted layouts:

* an HF model directory (``config.json`` + ``*.safetensors``/``pytorch_model*.bin``);
* a verl FSDP/FSDP2 actor directory ``global_step_N/actor/``: HF weights in ``huggingface/`` when the run
  saved ``hf_model``, otherwise the ``model_world_size_W_rank_R.pt`` shards (merged in-process by
  :mod:`trajlab.rescore.fsdp_merge` when loaded, config and tokenizer from ``huggingface/``);
* ``global_step_N/`` itself (descends into ``actor/``; verl's SFT trainer layout without ``actor/`` too);
* a verl Megatron actor directory with HF weights in ``huggingface/`` (0.7 layout) or
  ``model/huggingface/`` (0.9 layout); without them the error names verl's merger command;
* a checkpoints root holding ``global_step_*`` directories (``steps`` picks some; default all, by step).

Every expected problem is a :class:`~trajlab.errors.CheckpointError` with a one-line message. Loading a
resolved checkpoint is :mod:`trajlab.rescore.checkpoints.load`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab.errors import CheckpointError, param
from trajlab.rescore.fsdp_merge import SHARD_RE, find_shards

__all__ = ["CheckpointRef", "resolve_checkpoints", "STEP_RE", "WEIGHT_GLOBS"]

STEP_RE = re.compile(r"^(?:global_step_|checkpoint-)(\d+)$")
WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors.index.json")


@dataclass(frozen=True)
class CheckpointRef:
    """One checkpoint to score.

    ``kind``: ``hf`` | ``fsdp`` | ``megatron``. ``hf_dir``: a directory with loadable HF weights, or ``None``
    when the weights must be merged from FSDP shards. ``config_dir``: where ``config.json`` and the tokenizer
    live (``hf_dir`` or verl's ``actor/huggingface/``). ``shard_files``/``world_size``: the FSDP shards.
    ``label`` is unique among the refs of one :func:`resolve_checkpoints` call and safe as a directory name.
    """

    label: str
    path: Path
    kind: str
    step: int | None
    hf_dir: Path | None
    config_dir: Path | None = None
    shard_files: tuple[Path, ...] = field(default=(), repr=False)
    world_size: int | None = None


# ------------------------------------------------------------------------------------------- resolving
def _has_weights(d: Path) -> bool:
    return d.is_dir() and any(next(d.glob(g), None) is not None for g in WEIGHT_GLOBS)


def _is_hf_dir(d: Path) -> bool:
    return (d / "config.json").is_file() and _has_weights(d)


def _has_shards(d: Path) -> bool:
    return d.is_dir() and any(SHARD_RE.match(f.name) for f in d.iterdir())


def _step_of(p: Path) -> tuple[int | None, Path | None]:
    """Step number and the ``global_step_N``/``checkpoint-N`` directory among ``p`` and its 3 parents."""
    for q in [p, *list(p.parents)[:3]]:
        m = STEP_RE.match(q.name)
        if m:
            return int(m.group(1)), q
    return None, None


def _step_children(d: Path) -> list[tuple[int, Path]]:
    out = []
    for c in d.iterdir():
        m = STEP_RE.match(c.name)
        if m and c.is_dir():
            out.append((int(m.group(1)), c))
    return sorted(out)


def _tracked_step(root: Path) -> int | None:
    """The step in verl's ``latest_checkpointed_iteration.txt`` (written after a save completes), if any."""
    try:
        return int((root / "latest_checkpointed_iteration.txt").read_text().strip())
    except (OSError, ValueError):
        return None


def latest_step_dir(root: Path) -> Path | None:
    """The newest ``global_step_N`` (or ``checkpoint-N``) directory of a checkpoint root: the one verl's tracker
    file names when it exists, else the highest N; None when there is none."""
    children = _step_children(root) if root.is_dir() else []
    tracked = _tracked_step(root)
    named = [d for n, d in children if n == tracked]
    return named[0] if named else (children[-1][1] if children else None)


def _is_megatron(d: Path) -> bool:
    if (d / "dist_ckpt").is_dir() or (d / "ckpt_contents.json").is_file() or (d / "transformer_config.json").is_file():
        return True
    return (d / "model" / "huggingface").is_dir() or (d / "model" / "dist_ckpt").is_dir()


def _megatron_ref(d: Path) -> dict[str, Any]:
    for hf in (d / "huggingface", d / "model" / "huggingface"):
        if _is_hf_dir(hf):
            return {"kind": "megatron", "hf_dir": hf, "config_dir": hf}
    raise CheckpointError(
        f"{d}: Megatron checkpoint without HF weights (no *.safetensors in huggingface/ or model/huggingface/)",
        hint=f"convert it first: python -m verl.model_merger merge --backend megatron --local_dir {d} "
        f"--target_dir {d}/huggingface_merged, then pass {param('ckpts', metavar=f'{d}/huggingface_merged')}")


def _fsdp_ref(d: Path) -> dict[str, Any]:
    hf = d / "huggingface"
    if _is_hf_dir(hf):
        return {"kind": "fsdp", "hf_dir": hf, "config_dir": hf}
    ws, files = find_shards(d)  # raises on missing/partial shards
    if not (hf / "config.json").is_file():
        raise CheckpointError(
            f"{d}: FSDP shards but no huggingface/config.json to build the model from",
            hint="verl writes huggingface/ on rank 0 at every save; copy it from another step of the run")
    return {"kind": "fsdp", "hf_dir": None, "config_dir": hf, "shard_files": tuple(files), "world_size": ws}


def _classify(p: Path) -> dict[str, Any] | list[tuple[int, Path]]:
    """A ref's fields for a single checkpoint directory, or the step children of a checkpoints root."""
    if _is_hf_dir(p):
        return {"kind": "hf", "hf_dir": p, "config_dir": p}
    if (p / "actor").is_dir() and STEP_RE.match(p.name):
        return _classify_actor(p / "actor")
    if (_has_shards(p) or (p / "fsdp_config.json").is_file() or _is_megatron(p)
            or (p / "huggingface" / "config.json").is_file() or p.name == "actor"):
        return _classify_actor(p)
    children = _step_children(p)
    if children:
        return children
    if (p / "config.json").is_file():
        raise CheckpointError(f"{p}: config.json but no model weights (*.safetensors or pytorch_model*.bin)")
    if STEP_RE.match(p.name):
        raise CheckpointError(f"{p}: step directory without actor/, model shards or HF weights")
    raise CheckpointError(
        f"{p}: not a checkpoint: expected an HF model directory, a verl global_step_N[/actor] directory or a "
        "checkpoints root holding global_step_* directories")


def _classify_actor(d: Path) -> dict[str, Any]:
    if _has_shards(d) or (d / "fsdp_config.json").is_file():
        return {**_fsdp_ref(d), "path": d}
    if _is_megatron(d):
        return {**_megatron_ref(d), "path": d}
    if _is_hf_dir(d / "huggingface"):
        return {"kind": "fsdp", "hf_dir": d / "huggingface", "config_dir": d / "huggingface", "path": d}
    raise CheckpointError(
        f"{d}: actor directory without model shards (model_world_size_W_rank_R.pt) or HF weights in huggingface/",
        hint="the run saved no model (checkpoint.save_contents lacked 'model'/'hf_model')")


_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_GENERIC = {"huggingface", "actor", "model", "hf", "merged", "huggingface_merged"}


def _base_label(path: Path, step_dir: Path | None) -> str:
    if step_dir is not None:
        return step_dir.name
    q = path
    while q.name in _GENERIC and q.parent != q:
        q = q.parent
    return q.name or "checkpoint"


def _unique_labels(items: list[dict[str, Any]]) -> None:
    counts = Counter(it["label"] for it in items)
    for it in items:
        if counts[it["label"]] > 1:
            anchor = it["_step_dir"] or it["path"]
            run = anchor.parent.name
            if run:
                it["label"] = f"{run}-{it['label']}"
    seen: Counter[str] = Counter()
    for it in items:
        seen[it["label"]] += 1
        if seen[it["label"]] > 1:
            it["label"] = f"{it['label']}-{seen[it['label']]}"
    for it in items:
        it["label"] = _SAFE.sub("_", it["label"]).strip("._") or "checkpoint"


def resolve_checkpoints(paths: list[str | Path], steps: set[int] | None = None) -> list[CheckpointRef]:
    """Resolve ``--ckpt`` paths into :class:`CheckpointRef` records, in the order given (a checkpoints root
    expands to its ``global_step_*`` directories sorted by step).

    ``steps`` keeps only those steps (refs without a step, e.g. a plain HF directory, are always kept); a
    requested step that no path provides is an error. Raises :class:`CheckpointError` for missing paths,
    unknown layouts, incomplete FSDP shard sets and Megatron checkpoints without HF weights.
    """
    if not paths:
        raise CheckpointError("no checkpoint given", hint=f"pass {param('ckpts', metavar='PATH')} (repeatable)")
    items: list[dict[str, Any]] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise CheckpointError(f"{p}: no such checkpoint directory")
        if not p.is_dir():
            raise CheckpointError(f"{p}: a checkpoint must be a directory, not a file",
                                  hint="pass the directory that holds config.json or the global_step_N folders")
        got = _classify(p)
        if isinstance(got, list):
            available = [s for s, _ in got]
            latest = _tracked_step(p)
            for s, sd in got:
                if steps is not None and s not in steps:
                    continue
                try:
                    fields = _classify(sd)
                except CheckpointError as exc:
                    if steps is None and latest is not None and s > latest:  # still being written
                        from trajlab.console import warn

                        warn(f"skipping {sd.name}: newer than latest_checkpointed_iteration.txt ({latest}) and "
                             f"incomplete ({str(exc).splitlines()[0]})")
                        continue
                    raise
                if isinstance(fields, list):  # pragma: no cover - a step dir holding step dirs
                    raise CheckpointError(f"{sd}: nested global_step_* directories")
                items.append({"path": sd, **fields, "step": s, "_step_dir": sd, "label": sd.name,
                              "_available": available})
            continue
        step, step_dir = _step_of(p)
        if steps is not None and step is not None and step not in steps:
            continue
        items.append({"path": p, **got, "step": step, "_step_dir": step_dir, "label": _base_label(p, step_dir)})
    if steps is not None:
        have = {it["step"] for it in items}
        missing = sorted(set(steps) - have)
        if missing:
            avail = sorted({s for it in items for s in it.get("_available", [])} | {
                it["step"] for it in items if it["step"] is not None})
            raise CheckpointError(
                f"no checkpoint for step(s) {', '.join(map(str, missing))}",
                hint=f"available: {', '.join(map(str, avail)) or 'none'}")
    if not items:
        raise CheckpointError("no checkpoints found in " + ", ".join(str(p) for p in paths))
    _unique_labels(items)
    return [
        CheckpointRef(label=it["label"], path=it["path"], kind=it["kind"], step=it["step"], hf_dir=it["hf_dir"],
                      config_dir=it.get("config_dir"), shard_files=it.get("shard_files", ()),
                      world_size=it.get("world_size"))
        for it in items
    ]

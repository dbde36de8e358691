"""Merge a verl FSDP/FSDP2 actor's ``model_world_size_W_rank_R.pt`` shards into one full state dict,
in-process, without Ray and without importing verl.

verl saves ``model.state_dict()`` per rank under a sharded state-dict type, so each value is a pickled
``DTensor`` whose ``placements`` say how the global tensor was split over the device mesh (normally
``Shard(0)`` over a 1-D ``("fsdp",)`` mesh, or ``(Replicate(), Shard(0))`` over ``("ddp", "fsdp")`` for
HSDP); plain tensors (buffers, unwrapped parameters) are full copies on every rank.

Merging rule per key: ``Shard(d)`` → concatenate along ``d`` in mesh order; ``Replicate`` → take mesh
coordinate 0; ``Partial`` (pending reduction) → error; non-DTensor → one copy, error if ranks disagree.
The merged tensor keeps the shard dtype (verl's own merger casts everything to bf16; keeping the dtype makes
the round trip bit-exact and leaves the choice of compute dtype to the loader).

Loading is safe by default: ``torch.load(weights_only=True, mmap=True)`` with an explicit allow-list of the
DTensor classes; anything else in the pickle is refused unless ``allow_unsafe_pickle=True``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import CheckpointError, param

if TYPE_CHECKING:  # pragma: no cover
    import torch

SHARD_RE = re.compile(r"^model_world_size_(\d+)_rank_(\d+)\.pt$")


def find_shards(actor_dir: str | Path) -> tuple[int, list[Path]]:
    """World size and the rank-ordered ``model_world_size_W_rank_R.pt`` files of an FSDP actor directory.

    The world size comes from ``fsdp_config.json`` when present, else from the file names. Raises
    :class:`CheckpointError` when there are no shards, when file names disagree with each other or with
    ``fsdp_config.json``, or when rank files are missing (naming them)."""
    d = Path(actor_dir)
    found: dict[int, dict[int, Path]] = {}
    for f in d.iterdir() if d.is_dir() else ():
        m = SHARD_RE.match(f.name)
        if m:
            found.setdefault(int(m.group(1)), {})[int(m.group(2))] = f
    cfg_file = d / "fsdp_config.json"
    cfg_ws: int | None = None
    if cfg_file.is_file():
        try:
            cfg_ws = int(json.loads(cfg_file.read_text())["world_size"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{cfg_file}: unreadable fsdp_config.json ({exc!r})") from None
    if not found:
        what = "fsdp_config.json but no" if cfg_ws is not None else "no fsdp_config.json and no"
        raise CheckpointError(
            f"{d}: {what} model_world_size_W_rank_R.pt shards",
            hint="the run saved no model shards (checkpoint.save_contents lacked 'model'); "
            "use a step saved with 'model' or 'hf_model'")
    if len(found) > 1:
        raise CheckpointError(f"{d}: shards from several world sizes ({sorted(found)}): mixed or partial saves")
    (file_ws, ranks), = found.items()
    if cfg_ws is not None and cfg_ws != file_ws:
        raise CheckpointError(
            f"{d}: world-size mismatch: fsdp_config.json says {cfg_ws}, shard files say {file_ws}")
    ws = cfg_ws if cfg_ws is not None else file_ws
    missing = [r for r in range(ws) if r not in ranks]
    if missing:
        names = ", ".join(f"model_world_size_{ws}_rank_{r}.pt" for r in missing[:8])
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        raise CheckpointError(f"{d}: incomplete FSDP checkpoint: missing {names}{more} ({len(ranks)} of {ws} ranks)")
    extra = sorted(r for r in ranks if r >= ws)
    if extra:
        raise CheckpointError(f"{d}: rank files beyond world size {ws}: ranks {extra}")
    return ws, [ranks[r] for r in range(ws)]


def dtensor_safe_globals() -> list[Any]:
    """The classes a pickled DTensor state dict needs under ``torch.load(weights_only=True)``.

    Importing ``torch.distributed.tensor`` (done here) registers all of them process-wide in torch >= 2.5, so
    with torch 2.13 the list :func:`load_shard` adds on top is empty; the explicit list keeps older versions
    working and documents what is trusted: DTensor, its spec, tensor metadata and shard-order entries, the
    device mesh and its layout helpers, and the placement types."""
    import importlib

    names = [
        ("torch.distributed.tensor", "DTensor"),
        ("torch.distributed.tensor", "Shard"),
        ("torch.distributed.tensor", "Replicate"),
        ("torch.distributed.tensor", "Partial"),
        ("torch.distributed.tensor.placement_types", "_StridedShard"),
        ("torch.distributed.tensor._dtensor_spec", "DTensorSpec"),
        ("torch.distributed.tensor._dtensor_spec", "TensorMeta"),
        ("torch.distributed.tensor._dtensor_spec", "ShardOrderEntry"),
        ("torch.distributed.device_mesh", "DeviceMesh"),
        ("torch.distributed.device_mesh", "_FlatLayout"),
        ("torch.distributed.device_mesh", "_MeshLayout"),
        ("torch.distributed._mesh_layout", "_MeshLayout"),
    ]
    out: list[Any] = []
    for mod, attr in names:
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            continue
        if obj not in out:
            out.append(obj)
    return out


def load_shard(path: str | Path, *, allow_unsafe_pickle: bool = False) -> dict[str, Any]:
    """Load one rank's state dict on CPU (memory-mapped), refusing pickled objects outside the allow-list
    unless ``allow_unsafe_pickle``."""
    import pickle

    import torch

    path = Path(path)
    # Only add what is not registered yet: the context manager *removes* its globals on exit, which would
    # unregister the ones ``import torch.distributed.tensor`` added for the whole process (torch 2.13).
    registered = torch.serialization.get_safe_globals()
    extra = [g for g in dtensor_safe_globals() if g not in registered]
    try:
        with torch.serialization.safe_globals(extra):
            sd = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        if not allow_unsafe_pickle:
            detail = str(exc).strip().splitlines()
            why = next((ln.strip() for ln in detail if "GLOBAL" in ln or "Unsupported" in ln), detail[0] if detail
                       else "")
            raise CheckpointError(
                f"{path}: refused to unpickle (weights_only=True): {why}",
                hint=f"only if you trust this file: {param('allow_unsafe_pickle')}") from None
        try:
            sd = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as exc2:  # noqa: BLE001 - any failure of an untrusted pickle is reported, not raised
            raise CheckpointError(f"{path}: cannot load shard: {exc2}") from None
    except (RuntimeError, OSError, EOFError) as exc:
        first = (str(exc).strip().split(". ")[0] or type(exc).__name__).splitlines()[0]
        raise CheckpointError(f"{path}: cannot load shard (truncated or not a torch file?): {first}") from None
    if not isinstance(sd, dict):
        raise CheckpointError(f"{path}: expected a state dict, found {type(sd).__name__}")
    return sd


def _placement_kind(p: Any) -> tuple[str, int | None]:
    from torch.distributed.tensor import Partial, Replicate, Shard

    try:
        from torch.distributed.tensor.placement_types import _StridedShard
    except ImportError:  # pragma: no cover
        _StridedShard = ()  # noqa: N806
    if _StridedShard and isinstance(p, _StridedShard):
        return "strided", None
    if isinstance(p, Shard):
        return "shard", int(p.dim)
    if isinstance(p, Replicate):
        return "replicate", None
    if isinstance(p, Partial):
        return "partial", None
    return type(p).__name__, None


def merge_fsdp_shards(actor_dir: str | Path, *, allow_unsafe_pickle: bool = False) -> dict[str, torch.Tensor]:
    """Merge an FSDP actor directory's model shards into a full state dict (CPU tensors, shard dtype).

    Needs every ``model_world_size_W_rank_R.pt`` (see :func:`find_shards`); placements and the device mesh
    are read from the pickled DTensors. Raises :class:`CheckpointError` on missing ranks, a world-size
    mismatch, ``Partial``/strided placements, replicated plain tensors that differ between ranks, or a
    merged shape that disagrees with the DTensor's global shape."""
    import torch
    from torch.distributed.tensor import DTensor

    d = Path(actor_dir)
    ws, files = find_shards(d)
    shards = [load_shard(f, allow_unsafe_pickle=allow_unsafe_pickle) for f in files]
    keys = list(shards[0])
    for r, sd in enumerate(shards[1:], 1):
        if set(sd) != set(keys):
            diff = sorted(set(sd) ^ set(keys))[:3]
            raise CheckpointError(f"{files[r]}: its keys differ from rank 0's (e.g. {diff})")
    _check_rank_order(shards, files)
    merged: dict[str, torch.Tensor] = {}
    for key in keys:
        v0 = shards[0][key]
        if isinstance(v0, DTensor):
            mesh = v0.device_mesh.mesh
            if mesh.numel() != ws:
                raise CheckpointError(
                    f"{d}: world-size mismatch: {key} lives on a {tuple(mesh.shape)} device mesh "
                    f"({mesh.numel()} ranks) but the checkpoint has {ws} rank files")
            kinds = [_placement_kind(p) for p in v0.placements]
            for kind, _ in kinds:
                if kind == "partial":
                    raise CheckpointError(
                        f"{d}: {key} has a Partial placement (unreduced values); this cannot be merged")
                if kind not in ("shard", "replicate"):
                    raise CheckpointError(f"{d}: {key} has an unsupported placement {kind} ({v0.placements})")
            for r in range(1, ws):
                vr = shards[r][key]
                if not isinstance(vr, DTensor) or tuple(vr.placements) != tuple(v0.placements):
                    raise CheckpointError(f"{files[r]}: {key} is placed differently than on rank 0")
            mesh_ranks = mesh.tolist()

            def combine(sub: Any, dim: int, key: str = key, kinds: list = kinds) -> torch.Tensor:
                if dim == len(kinds):
                    return shards[int(sub)][key].to_local()
                kind, tdim = kinds[dim]
                if kind == "replicate":
                    return combine(sub[0], dim + 1)
                return torch.cat([combine(s, dim + 1) for s in sub], dim=tdim)

            full = combine(mesh_ranks, 0)
            if tuple(full.shape) != tuple(v0.shape):
                raise CheckpointError(
                    f"{d}: merged {key} has shape {tuple(full.shape)}, expected {tuple(v0.shape)}")
            merged[key] = full.contiguous()
        elif isinstance(v0, torch.Tensor):
            for r in range(1, ws):
                vr = shards[r][key]
                if (not isinstance(vr, torch.Tensor) or isinstance(vr, DTensor) or vr.shape != v0.shape
                        or vr.dtype != v0.dtype or not torch.equal(vr, v0)):
                    raise CheckpointError(
                        f"{d}: {key} is a plain tensor that differs between rank 0 and rank {r}; cannot tell "
                        "which copy is right")
            merged[key] = v0.clone()
        else:
            raise CheckpointError(f"{files[0]}: {key} holds a {type(v0).__name__}, not a tensor")
    return merged


def _check_rank_order(shards: list[dict[str, Any]], files: list[Path]) -> None:
    """Each rank file must hold its own rank's shards: a pickled DTensor's device mesh records the coordinate
    of the process that saved it, so swapped or renamed rank files (which would merge into scrambled weights
    of the right shape) are refused."""
    from torch.distributed.tensor import DTensor

    for r, sd in enumerate(shards):
        v = next((x for x in sd.values() if isinstance(x, DTensor)), None)
        if v is None:
            continue
        mesh = v.device_mesh
        try:
            coord = mesh.get_coordinate()
        except Exception:  # noqa: BLE001 - an older DeviceMesh without the saved coordinate: nothing to check
            continue
        if coord is None:
            continue
        saved_by = int(mesh.mesh[tuple(coord)])
        if saved_by != r:
            raise CheckpointError(
                f"{files[r]}: holds the shards saved by rank {saved_by}, not rank {r}: rank files swapped or renamed",
                hint=f"restore the original file names (this one is model_world_size_{len(files)}_rank_{saved_by}.pt)")

"""Find and load the checkpoints that ``trajlab rescore`` teacher-forces trajectories through.

:func:`resolve_checkpoints` turns ``--ckpt`` paths into :class:`CheckpointRef` records. Accepted layouts:

* an HF model directory (``config.json`` + ``*.safetensors``/``pytorch_model*.bin``);
* a verl FSDP/FSDP2 actor directory ``global_step_N/actor/``: HF weights in ``huggingface/`` when the run
  saved ``hf_model``, otherwise the ``model_world_size_W_rank_R.pt`` shards (merged in-process by
  :mod:`trajlab.rescore.fsdp_merge`, config and tokenizer from ``huggingface/``);
* ``global_step_N/`` itself (descends into ``actor/``; verl's SFT trainer layout without ``actor/`` too);
* a verl Megatron actor directory with HF weights in ``huggingface/`` (0.7 layout) or
  ``model/huggingface/`` (0.9 layout); without them the error names verl's merger command;
* a checkpoints root holding ``global_step_*`` directories (``steps`` picks some; default all, by step).

:func:`load_model` builds an eval-mode causal LM from a ref (Qwen3.5 VLM checkpoints load their text model
through ``AutoModelForCausalLM``); :func:`load_tokenizer` and :func:`check_tokenizer_matches` live in
:mod:`trajlab.rescore.tokenizers` and are re-exported here. Every expected problem is a
:class:`~trajlab.errors.CheckpointError` with a one-line message.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import CheckpointError, MissingDependencyError, param
from trajlab.rescore.fsdp_merge import SHARD_RE, find_shards, merge_fsdp_shards
from trajlab.rescore.remote_code import refuse_auto_map
from trajlab.rescore.tokenizers import check_tokenizer_matches, load_tokenizer

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

__all__ = [
    "CheckpointRef", "resolve_checkpoints", "load_model", "load_tokenizer", "check_tokenizer_matches",
    "merge_fsdp_shards", "resolve_device", "resolve_dtype", "MERGED_CACHE_DIRNAME",
]  # fmt: skip

STEP_RE = re.compile(r"^(?:global_step_|checkpoint-)(\d+)$")
WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin", "model*.safetensors.index.json")
MERGED_CACHE_DIRNAME = ".trajlab_merged"
MERGE_MARKER = "trajlab_merge.json"


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


# --------------------------------------------------------------------------------------------- loading
def resolve_device(device: str = "auto") -> str:
    """``auto`` → ``cuda`` when available, else ``cpu``; other values are checked and passed through."""
    import torch

    d = (device or "auto").lower()
    if d == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if d.startswith("cuda") and not torch.cuda.is_available():
        raise CheckpointError(f"{param('device')} {device}: no CUDA device is available", hint=f"use {param('device', 'cpu')}")
    if not (d == "cpu" or d.startswith("cuda") or d == "mps"):
        raise CheckpointError(f"{param('device')} {device}: expected auto, cuda, cuda:N or cpu")
    return d


_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16"}


def resolve_dtype(dtype: str = "auto", device: str = "cpu") -> torch.dtype:
    """``auto`` → bf16 on a GPU that supports it (fp16 otherwise), fp32 on CPU; or an explicit name
    (``float32``/``fp32``, ``bfloat16``/``bf16``, ``float16``/``fp16``)."""
    import torch

    d = (dtype or "auto").lower()
    if d == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    if d not in _DTYPES:
        raise CheckpointError(f"{param('dtype')} {dtype}: expected auto, float32, bfloat16 or float16")
    return getattr(torch, _DTYPES[d])


def _config_error(cfg_dir: Path, exc: Exception) -> CheckpointError:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[-1] if lines and "validation error" in lines[0].lower() else lines[0] if lines else type(
        exc).__name__
    try:
        raw = json.loads((cfg_dir / "config.json").read_text())
    except (OSError, ValueError):
        raw = {}
    mt = raw.get("model_type")
    if "trust_remote_code" in text or "auto_map" in raw:
        return CheckpointError(f"{cfg_dir}/config.json: the model needs its own code ({first})",
                               hint=f"pass {param('trust_remote_code')} if you trust this checkpoint's code")
    if mt is not None and ("does not recognize" in text or "Unrecognized model" in text or isinstance(exc, KeyError)):
        import transformers

        return CheckpointError(
            f"{cfg_dir}/config.json: transformers {transformers.__version__} does not know model_type {mt!r}",
            hint=f"upgrade transformers, or pass {param('trust_remote_code')} for a custom model that ships its code")
    if mt is not None:
        return CheckpointError(f"{cfg_dir}/config.json: invalid config for model_type {mt!r} ({first})")
    return CheckpointError(f"{cfg_dir}/config.json: cannot build a model config ({first})")


def load_config(config_dir: str | Path, *, trust_remote_code: bool = False) -> PretrainedConfig:
    """``AutoConfig.from_pretrained`` with one-line errors for missing files and unknown model types."""
    from transformers import AutoConfig

    d = Path(config_dir)
    if not (d / "config.json").is_file():
        raise CheckpointError(f"{d}: no config.json")
    if not trust_remote_code:
        refuse_auto_map(d / "config.json")
    try:
        return AutoConfig.from_pretrained(str(d), trust_remote_code=trust_remote_code)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types for a bad config
        raise _config_error(d, exc) from None


def _causal_lm_class(config: PretrainedConfig) -> type | None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        return None


def _shard_stats(files: tuple[Path, ...]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        st = f.stat()
        out.append({"name": f.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    return out


def _cache_is_fresh(cache: Path, ref: CheckpointRef) -> bool:
    marker = cache / MERGE_MARKER
    weights = cache / "model.safetensors"
    if not (marker.is_file() and weights.is_file() and (cache / "config.json").is_file()):
        return False
    try:
        meta = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    newest = max(f.stat().st_mtime_ns for f in ref.shard_files)
    return meta.get("shards") == _shard_stats(ref.shard_files) and weights.stat().st_mtime_ns >= newest


def _tied(config: PretrainedConfig) -> bool:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return bool(getattr(config, "tie_word_embeddings", False) or getattr(text, "tie_word_embeddings", False))


def _drop_tied_duplicates(sd: dict[str, torch.Tensor], config: PretrainedConfig) -> None:
    """FSDP state dicts hold both ends of tied embeddings; keep the input side, as ``save_pretrained`` does."""
    import torch

    if not _tied(config):
        return
    for head in [k for k in sd if k == "lm_head.weight" or k.endswith(".lm_head.weight")]:
        prefix = head[: -len("lm_head.weight")]
        for emb in (f"{prefix}model.embed_tokens.weight", f"{prefix}model.language_model.embed_tokens.weight"):
            if emb in sd and torch.equal(sd[emb], sd[head]):
                del sd[head]
                break


def _refuse_lora(sd: dict[str, torch.Tensor], ref: CheckpointRef) -> None:
    lora = [k for k in sd if ".lora_A." in k or ".lora_B." in k or k.startswith("base_model.model.")]
    if lora:
        raise CheckpointError(
            f"checkpoint {ref.label}: LoRA shards ({lora[0]}, ...); trajlab does not fold adapters into the base "
            "weights", hint=f"merge them first: python -m verl.model_merger merge --backend fsdp --local_dir "
            f"{ref.path} --target_dir {ref.path}/huggingface_merged, then load the base model with the adapter "
            "merged (peft merge_and_unload) and pass that directory")


def _write_merged_dir(ref: CheckpointRef, sd: dict[str, torch.Tensor], config_dir: Path, target: Path) -> None:
    """Write config + merged weights (+ marker) into ``target`` atomically (temp dir, then rename)."""
    from safetensors.torch import save_file

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}.tmp-", dir=target.parent))
    try:
        for name in ("config.json", "generation_config.json"):
            if (config_dir / name).is_file():
                shutil.copy2(config_dir / name, tmp / name)
        save_file({k: v.contiguous() for k, v in sd.items()}, str(tmp / "model.safetensors"),
                  metadata={"format": "pt"})
        (tmp / MERGE_MARKER).write_text(json.dumps({
            "source": str(ref.path), "world_size": ref.world_size, "shards": _shard_stats(ref.shard_files),
            "dtype": sorted({str(v.dtype) for v in sd.values()}),
        }, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def merged_weights_dir(ref: CheckpointRef, *, allow_unsafe_pickle: bool = False,
                       trust_remote_code: bool = False) -> Path:
    """Merge ``ref``'s FSDP shards once into ``actor/.trajlab_merged/`` (config + ``model.safetensors``) and
    return that directory; reused while it is newer than the shards and their sizes/mtimes are unchanged."""
    if ref.hf_dir is not None:
        return ref.hf_dir
    if ref.config_dir is None or not ref.shard_files:
        raise CheckpointError(f"{ref.path}: checkpoint {ref.label} has neither HF weights nor FSDP shards")
    cache = ref.path / MERGED_CACHE_DIRNAME
    if _cache_is_fresh(cache, ref):
        return cache
    config = load_config(ref.config_dir, trust_remote_code=trust_remote_code)
    sd = merge_fsdp_shards(ref.path, allow_unsafe_pickle=allow_unsafe_pickle)
    _refuse_lora(sd, ref)
    _drop_tied_duplicates(sd, config)
    try:
        _write_merged_dir(ref, sd, ref.config_dir, cache)
    except OSError as exc:
        raise CheckpointError(f"{cache}: cannot write the merged-weights cache ({exc.strerror or exc})",
                              hint=f"run without {param('cache_merged')}, or make the actor directory writable") from None
    return cache


def _attn_implementation(device: str, torch_dtype: torch.dtype) -> str:
    import importlib.util

    import torch

    if device.startswith("cuda") and torch_dtype in (torch.bfloat16, torch.float16) and importlib.util.find_spec(
            "flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def _quiet_transformers() -> Any:
    """Silence transformers' per-load progress bars and info logs (the rescorer has its own progress)."""
    from contextlib import contextmanager

    from transformers.utils import logging as hf_logging

    @contextmanager
    def ctx():  # type: ignore[no-untyped-def]
        level = hf_logging.get_verbosity()
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        try:
            yield
        finally:
            hf_logging.set_verbosity(level)
            if bars:
                hf_logging.enable_progress_bar()

    return ctx()


def load_model(
    ref: CheckpointRef,
    *,
    device: str = "cpu",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    allow_unsafe_pickle: bool = False,
    cache_merged: bool = False,
    device_map: str | None = None,
    attn_implementation: str | None = None,
) -> PreTrainedModel:
    """Load ``ref`` as an eval-mode causal LM on ``device`` (``auto`` → cuda when available).

    ``dtype``: ``auto`` (bf16 on GPU, fp32 on CPU) or an explicit name. FSDP shards are merged in memory
    (or, with ``cache_merged``, once into ``actor/.trajlab_merged/`` as safetensors). ``device_map``
    (e.g. ``auto``) spreads a large model over GPUs and needs ``accelerate``. Attention is SDPA, or
    FlashAttention-2 on GPU when ``flash_attn`` is installed (``attn_implementation`` overrides).
    """

    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if device_map is not None:
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:
            raise MissingDependencyError(f"{param('device_map')} needs the accelerate package", hint="pip install accelerate")
    attn = attn_implementation or _attn_implementation(dev, torch_dtype)
    config_dir = ref.hf_dir or ref.config_dir
    if config_dir is None:
        raise CheckpointError(f"{ref.path}: checkpoint {ref.label} has no config.json")
    config = load_config(config_dir, trust_remote_code=trust_remote_code)
    if attn == "sdpa" and attn_implementation is None:
        arch = _causal_lm_class(config)
        if arch is not None and getattr(arch, "_supports_sdpa", True) is False:
            attn = "eager"  # e.g. gpt-oss (its attention sinks have no SDPA kernel in transformers)
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "attn_implementation": attn,
                              "trust_remote_code": trust_remote_code, "output_loading_info": True}
    if device_map is not None:
        kwargs["device_map"] = device_map
    from transformers import AutoModelForCausalLM

    try:
        with _quiet_transformers():
            if ref.hf_dir is not None or cache_merged:
                model_dir = ref.hf_dir or merged_weights_dir(ref, allow_unsafe_pickle=allow_unsafe_pickle,
                                                             trust_remote_code=trust_remote_code)
                model = AutoModelForCausalLM.from_pretrained(str(model_dir), **kwargs)
            else:
                sd = merge_fsdp_shards(ref.path, allow_unsafe_pickle=allow_unsafe_pickle)
                _refuse_lora(sd, ref)
                _drop_tied_duplicates(sd, config)
                cls = _causal_lm_class(config)
                if cls is not None:
                    text_cls = getattr(config, "sub_configs", {}).get("text_config")
                    if text_cls is not None and getattr(cls, "config_class", None) is text_cls:
                        config = config.get_text_config()  # a VLM checkpoint loaded as its text model
                    model = cls.from_pretrained(None, config=config, state_dict=sd,
                                                **{k: v for k, v in kwargs.items() if k != "trust_remote_code"})
                else:  # remote-code model: go through a temporary HF directory
                    with tempfile.TemporaryDirectory(prefix="trajlab-merged-") as tmp:
                        _write_merged_dir(ref, sd, config_dir, Path(tmp) / "m")
                        model = AutoModelForCausalLM.from_pretrained(str(Path(tmp) / "m"), **kwargs)
                del sd
        model, info = model
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - any load failure becomes one line, not a traceback
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        if "size mismatch" in text or "shape" in first or "ignore_mismatched_sizes" in text:
            raise CheckpointError(f"checkpoint {ref.label}: weights do not fit {config_dir}/config.json "
                                  "(tensor shapes differ)",
                                  hint="the config and the weights come from different models") from None
        if "trust_remote_code" in text:
            raise CheckpointError(f"checkpoint {ref.label}: the model needs its own code ({first})",
                                  hint=f"pass {param('trust_remote_code')} if you trust it") from None
        raise CheckpointError(f"checkpoint {ref.label}: cannot load the model ({first})") from None
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise CheckpointError(
            f"checkpoint {ref.label}: {len(missing)} weights missing ({', '.join(missing[:3])}{more}); refusing "
            "to score with randomly initialised weights", hint="the checkpoint is incomplete or for another model")
    if info.get("mismatched_keys"):
        raise CheckpointError(f"checkpoint {ref.label}: weights with the wrong shape: {info['mismatched_keys'][:3]}")
    if device_map is None:
        model = model.to(dev)
    model.eval()
    model.requires_grad_(False)
    return model

"""Load a resolved checkpoint: the device and dtype to score on, its config, and an eval-mode causal LM.

:func:`load_model` builds the model of a :class:`~trajlab.rescore.checkpoints.resolve.CheckpointRef` (Qwen3.5
VLM checkpoints load their text model through ``AutoModelForCausalLM``); FSDP shards are merged once into a
cached HF directory (:func:`merged_weights_dir`, under :data:`MERGED_CACHE_DIRNAME`). Every expected problem is
a :class:`~trajlab.errors.CheckpointError` with a one-line message.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import CheckpointError, MissingDependencyError, param
from trajlab.rescore.checkpoints.resolve import CheckpointRef
from trajlab.rescore.fsdp_merge import merge_fsdp_shards
from trajlab.rescore.remote_code import refuse_auto_map

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

__all__ = ["MERGED_CACHE_DIRNAME", "load_config", "load_model", "merged_weights_dir", "resolve_device", "resolve_dtype"]

MERGED_CACHE_DIRNAME = ".trajlab_merged"
MERGE_MARKER = "trajlab_merge.json"


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

    mapping: Any = MODEL_FOR_CAUSAL_LM_MAPPING  # a lazy mapping of config classes to model classes
    try:
        return mapping[type(config)]
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

    loaded: Any  # (model, loading info): from_pretrained(..., output_loading_info=True)
    try:
        with _quiet_transformers():
            if ref.hf_dir is not None or cache_merged:
                model_dir = ref.hf_dir or merged_weights_dir(ref, allow_unsafe_pickle=allow_unsafe_pickle,
                                                             trust_remote_code=trust_remote_code)
                loaded = AutoModelForCausalLM.from_pretrained(str(model_dir), **kwargs)
            else:
                sd = merge_fsdp_shards(ref.path, allow_unsafe_pickle=allow_unsafe_pickle)
                _refuse_lora(sd, ref)
                _drop_tied_duplicates(sd, config)
                cls: Any = _causal_lm_class(config)
                if cls is not None:
                    text_cls = getattr(config, "sub_configs", {}).get("text_config")
                    if text_cls is not None and getattr(cls, "config_class", None) is text_cls:
                        config = config.get_text_config()  # a VLM checkpoint loaded as its text model
                    loaded = cls.from_pretrained(None, config=config, state_dict=sd,
                                                 **{k: v for k, v in kwargs.items() if k != "trust_remote_code"})
                else:  # remote-code model: go through a temporary HF directory
                    with tempfile.TemporaryDirectory(prefix="trajlab-merged-") as tmp:
                        _write_merged_dir(ref, sd, config_dir, Path(tmp) / "m")
                        loaded = AutoModelForCausalLM.from_pretrained(str(Path(tmp) / "m"), **kwargs)
                del sd
        model, info = loaded
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

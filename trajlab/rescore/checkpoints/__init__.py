"""Find and load the checkpoints that ``trajlab rescore`` teacher-forces trajectories through.

One module per step: :mod:`~trajlab.rescore.checkpoints.resolve` turns ``--ckpt`` paths into
:class:`CheckpointRef` records (every layout accepted is listed there), :mod:`~trajlab.rescore.checkpoints.load`
builds an eval-mode causal LM from one. :func:`load_tokenizer` and :func:`check_tokenizer_matches` live in
:mod:`trajlab.rescore.tokenizers`; they are re-exported here with the rest of the library API.
"""

from __future__ import annotations

from trajlab.rescore.checkpoints.load import (
    MERGED_CACHE_DIRNAME,
    load_config,
    load_model,
    merged_weights_dir,
    resolve_device,
    resolve_dtype,
)
from trajlab.rescore.checkpoints.resolve import CheckpointRef, resolve_checkpoints
from trajlab.rescore.fsdp_merge import merge_fsdp_shards
from trajlab.rescore.tokenizers import check_tokenizer_matches, load_tokenizer

__all__ = [
    "CheckpointRef", "resolve_checkpoints", "load_model", "load_tokenizer", "check_tokenizer_matches",
    "merge_fsdp_shards", "resolve_device", "resolve_dtype", "MERGED_CACHE_DIRNAME", "load_config",
    "merged_weights_dir",
]  # fmt: skip

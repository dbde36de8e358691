"""Checkpoints that bring their own code: refused unless ``--trust-remote-code`` is given."""

from __future__ import annotations

import json
from pathlib import Path

from trajlab.errors import CheckpointError, param


def refuse_auto_map(path: Path) -> None:
    """Refuse a ``config.json`` / ``tokenizer_config.json`` with an ``auto_map`` (the checkpoint names its own
    code) unless ``--trust-remote-code`` was given, whatever its ``model_type``: transformers would otherwise
    quietly use its built-in class for a known ``model_type``, which is not the model the checkpoint describes."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(raw, dict) and raw.get("auto_map"):
        names = ", ".join(sorted(raw["auto_map"]))[:120] if isinstance(raw["auto_map"], dict) else "auto_map"
        raise CheckpointError(f"{path}: needs its own code (auto_map: {names}); refusing without "
                              f"{param('trust_remote_code')}", hint=f"pass {param('trust_remote_code')} if you trust this checkpoint's code")

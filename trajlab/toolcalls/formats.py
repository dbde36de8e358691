"""Registry of the call formats trajlab classifies: one ``format_<name>.py`` module each."""

from __future__ import annotations

from trajlab.toolcalls.format_base import ToolFormat
from trajlab.toolcalls.format_hermes import HermesFormat
from trajlab.toolcalls.format_qwen3_coder import Qwen3CoderFormat

FORMATS: dict[str, ToolFormat] = {
    "qwen3_coder": Qwen3CoderFormat(),
    "hermes": HermesFormat(),
}

KNOWN_FORMATS: tuple[str, ...] = tuple(FORMATS)

__all__ = ["FORMATS", "KNOWN_FORMATS", "ToolFormat"]

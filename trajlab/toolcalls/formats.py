"""Registry of the call formats trajlab classifies: one ``format_<name>.py`` module each.

Each module in :data:`FORMAT_MODULES` defines ``FORMATS_PROVIDED``, a tuple of :class:`ToolFormat` instances (one
module may provide several layouts of one family, e.g. ``glm45`` and ``glm47``). The registry imports them by name,
so adding a format is one module plus one entry here and ``rules/formats/<name>.yaml``; the analyzer, detection,
turn splitting, ``--tool-format`` and ``trajlab rules list`` all read this registry.
"""

from __future__ import annotations

from importlib import import_module

from trajlab.toolcalls.format_base import ToolFormat

#: the format modules, in detection order (seed before qwen3_coder: its `<seed:tool_call>` wraps the same
#: `<function=` tags; qwen3_coder before hermes: `<function=` is the sharper marker; react, plain text, last: it never
#: takes a trajectory another family's markup claims)
FORMAT_MODULES: tuple[str, ...] = ("seed", "minimax", "qwen3_coder", "hermes", "glm", "kimi_k2", "deepseek_v31", "dsml",
                                   "gpt_oss", "gemma4", "llama3_json", "react")


def _load() -> dict[str, ToolFormat]:
    out: dict[str, ToolFormat] = {}
    for mod_name in FORMAT_MODULES:
        mod = import_module(f"trajlab.toolcalls.format_{mod_name}")
        for fmt in getattr(mod, "FORMATS_PROVIDED", ()):
            out[fmt.name] = fmt
    return out


FORMATS: dict[str, ToolFormat] = _load()

KNOWN_FORMATS: tuple[str, ...] = tuple(FORMATS)

#: formats whose arguments are one JSON object (undecodable JSON = no arguments)
JSON_ARGUMENT_FORMATS: frozenset[str] = frozenset(n for n, f in FORMATS.items() if f.json_arguments)

#: formats whose calls may give their arguments as plain text (react's Action Input)
TEXT_INPUT_FORMATS: frozenset[str] = frozenset(n for n, f in FORMATS.items() if f.text_input)

__all__ = ["FORMATS", "FORMAT_MODULES", "JSON_ARGUMENT_FORMATS", "KNOWN_FORMATS", "TEXT_INPUT_FORMATS", "ToolFormat"]

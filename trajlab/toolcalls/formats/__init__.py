"""Registry of the call formats trajlab classifies: the call grammars, one module each in this folder.

A call-format module (``trajlab/toolcalls/formats/<module>.py``, or a package for a reader in parts like
``qwen3_coder/``) defines ``FORMATS_PROVIDED``, a tuple of :class:`ToolFormat` instances (one module may provide
several layouts of one family's markup, e.g. ``glm45`` and ``glm47``). The registry imports every module of the
folder and keys the formats by name; their order is the order the families declare them
(:data:`trajlab.families.CALL_FORMATS`, detection order), and every format a family declares must be provided here
and every format provided must belong to a family, so the two registries cannot drift. Adding a format is one
module here plus ``rules/formats/<name>.yaml`` (prompt and output markers) and the name in its family's
``CALL_FORMATS``; the analyzer, detection, turn checks, verl's reading (:mod:`trajlab.toolcalls.verl_parser`),
the prompt's tool declarations, ``--tool-format`` and ``trajlab rules list`` read this registry (the hooks a format
may define are the attributes and methods of :class:`ToolFormat`). Modules without ``FORMATS_PROVIDED`` (:mod:`.base`, :mod:`.foreign`, :mod:`.toolcall_blocks`) are the
shared parts.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from trajlab.families import CALL_FORMATS, FamilyError
from trajlab.toolcalls.formats.base import ToolFormat


def _provided() -> tuple[dict[str, ToolFormat], dict[str, str]]:
    found: dict[str, ToolFormat] = {}
    module_of: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        mod = import_module(f"{__name__}.{info.name}")
        for fmt in getattr(mod, "FORMATS_PROVIDED", ()):
            if fmt.name in found:
                raise FamilyError(f"call format {fmt.name!r} is provided by both {module_of[fmt.name]} and {info.name}")
            found[fmt.name] = fmt
            module_of[fmt.name] = info.name
    return found, module_of


def _load() -> tuple[dict[str, ToolFormat], dict[str, str]]:
    found, module_of = _provided()
    missing = [f for f in CALL_FORMATS if f not in found]
    if missing:
        raise FamilyError(f"call formats {', '.join(missing)} are declared by a family (CALL_FORMATS) but no module "
                          "in trajlab/toolcalls/formats/ provides them (FORMATS_PROVIDED)")
    orphan = [f for f in found if f not in CALL_FORMATS]
    if orphan:
        raise FamilyError(f"call formats {', '.join(orphan)} are provided but no family declares them "
                          "(add them to a family's CALL_FORMATS in trajlab/families/)")
    sources: dict[str, str] = {}
    for f in CALL_FORMATS:
        src = found[f].tools_source
        if src is not None and src in sources:
            raise FamilyError(f"call formats {sources[src]} and {f} both claim the tool-list rendering {src!r} "
                              "(tools_source)")
        if src is not None:
            sources[src] = f
    return {f: found[f] for f in CALL_FORMATS}, module_of


FORMATS, MODULE_OF_FORMAT = _load()

KNOWN_FORMATS: tuple[str, ...] = tuple(FORMATS)

#: the format modules, in detection order of their first format
FORMAT_MODULES: tuple[str, ...] = tuple(dict.fromkeys(MODULE_OF_FORMAT[f] for f in KNOWN_FORMATS))

#: formats whose arguments are one JSON object (undecodable JSON = no arguments)
JSON_ARGUMENT_FORMATS: frozenset[str] = frozenset(n for n, f in FORMATS.items() if f.json_arguments)

#: formats whose calls may give their arguments as plain text (react's Action Input)
TEXT_INPUT_FORMATS: frozenset[str] = frozenset(n for n, f in FORMATS.items() if f.text_input)

#: the format a prompt's tool-list rendering implies: ``tools_source`` label -> format (:attr:`ToolFormat.tools_source`)
SOURCE_FORMATS: dict[str, str] = {f.tools_source: n for n, f in FORMATS.items() if f.tools_source}

__all__ = ["FORMATS", "FORMAT_MODULES", "JSON_ARGUMENT_FORMATS", "KNOWN_FORMATS", "MODULE_OF_FORMAT",
           "SOURCE_FORMATS", "TEXT_INPUT_FORMATS", "ToolFormat"]

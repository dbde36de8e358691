"""Registry of the model families: what each chat template wraps around turns, as plain data, one module each.

The bottom layer of the package (it imports nothing else of trajlab): ingest's turn splitting, scan, rescore's
token layouts, curate, the CLI's ``--tool-format`` choices and the generated docs all read it. A family module
(``trajlab/families/<name>.py``) states these facets as module constants (:data:`REQUIRED_FACETS`)::

    NAME              the family's name (``qwen``, ``glm``, ...): never a call format's name
    MODELS            the models it covers, for people
    CALL_FORMATS      the call formats its models write, in detection order (names of
                      :data:`trajlab.toolcalls.formats.FORMATS`, one module each under ``toolcalls/formats/``)
    ROLE_HEADERS      role -> the header the template writes before a message of that role
    SPECIAL_TOKENS    the template's special tokens (what ``skip_special_tokens=True`` drops from a dump)
    TOOL_BLOCKS       how a tool response is wrapped in a decoded dump (:class:`~trajlab.families.base.ToolBlock`)
    LAYOUT            where the dropped tokens go back for rescoring (:class:`~trajlab.families.base.TokenLayout`)
    CONTROL_TOKENS    its key under ``families:`` in ``rules/control_tokens.yaml``
    TOKENIZER_ALIASES ``--tokenizer`` alias -> built-in tokenizer (``{}`` where there is none)

and may set ``ALIASES`` (other spellings of ``NAME`` that users type). Adding a family is one module here, one
call-format module under ``trajlab/toolcalls/formats/`` and one line in :data:`FAMILY_MODULES` (the how-to:
``docs/development/add-a-family.md``). A module that lacks a facet fails the registry's load with the facet named.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

from trajlab.families.base import REBUILDS, TokenLayout, ToolBlock

#: the family modules, in detection order of their call formats (seed and minimax first: their wrappers hold
#: ``<function=`` / ``<parameter`` tags the others read too; qwen's ``<function=`` before hermes' ``<tool_call>``;
#: llama's bare JSON and react_agent, plain text, last: they never take a trajectory another family's markup claims)
FAMILY_MODULES: tuple[str, ...] = ("seed", "minimax", "qwen", "glm", "kimi", "deepseek", "harmony", "gemma", "llama",
                                   "react_agent")

#: facet -> the type its value must have
REQUIRED_FACETS: dict[str, type | tuple[type, ...]] = {
    "NAME": str, "MODELS": str, "CALL_FORMATS": tuple, "ROLE_HEADERS": dict, "SPECIAL_TOKENS": tuple,
    "TOOL_BLOCKS": tuple, "LAYOUT": TokenLayout, "CONTROL_TOKENS": str, "TOKENIZER_ALIASES": dict,
}


class FamilyError(ValueError):
    """A family module that lacks a facet or states one wrongly (the message names the module and the facet)."""


@dataclass(frozen=True)
class Family:
    """One model family's facets, read from its module (see the module docstring for each one's meaning)."""

    name: str
    models: str
    call_formats: tuple[str, ...]
    role_headers: dict[str, str]
    special_tokens: tuple[str, ...]
    tool_blocks: tuple[ToolBlock, ...]
    layout: TokenLayout
    control_tokens: str
    tokenizer_aliases: dict[str, str]
    aliases: tuple[str, ...] = ()


def family_from_module(mod: ModuleType | Any) -> Family:
    """The :class:`Family` a module states; :class:`FamilyError` naming the facet when one is missing or wrong."""
    where = getattr(mod, "__name__", repr(mod))
    values: dict[str, Any] = {}
    for facet, kind in REQUIRED_FACETS.items():
        if not hasattr(mod, facet):
            raise FamilyError(f"{where}: family module lacks the facet {facet}")
        v = getattr(mod, facet)
        if not isinstance(v, kind):
            raise FamilyError(f"{where}: facet {facet} must be a {getattr(kind, '__name__', kind)}, "
                              f"not {type(v).__name__}")
        values[facet.lower()] = v
    if not values["name"] or not values["call_formats"]:
        raise FamilyError(f"{where}: facet {'NAME' if not values['name'] else 'CALL_FORMATS'} is empty")
    if not values["tool_blocks"] or not all(isinstance(b, ToolBlock) for b in values["tool_blocks"]):
        raise FamilyError(f"{where}: facet TOOL_BLOCKS must hold at least one ToolBlock")
    if values["layout"].rebuild not in REBUILDS:
        raise FamilyError(f"{where}: facet LAYOUT.rebuild must be one of {', '.join(REBUILDS)}")
    if not {"system", "user", "assistant", "tool"} <= set(values["role_headers"]):
        raise FamilyError(f"{where}: facet ROLE_HEADERS must name system, user, assistant and tool")
    aliases = getattr(mod, "ALIASES", ())
    return Family(**values, aliases=tuple(aliases))


def load_families(modules: tuple[str, ...] = FAMILY_MODULES) -> dict[str, Family]:
    """Every family of ``modules`` (names under :mod:`trajlab.families`), by name, in order; a call format
    claimed by two families, or a family name that is also a call format's, is a :class:`FamilyError`."""
    out: dict[str, Family] = {}
    owner: dict[str, str] = {}
    for m in modules:
        fam = family_from_module(import_module(f"trajlab.families.{m}"))
        for fmt in fam.call_formats:
            if fmt in owner:
                raise FamilyError(f"call format {fmt!r} is claimed by families {owner[fmt]!r} and {fam.name!r}")
            owner[fmt] = fam.name
        out[fam.name] = fam
    clash = set(out) & set(owner)
    if clash:
        raise FamilyError(f"{', '.join(sorted(clash))}: a family's name must not be a call format's name")
    return out


FAMILIES: dict[str, Family] = load_families()

#: every call format the families declare, in detection order (``--tool-format``'s choices, auto aside)
CALL_FORMATS: tuple[str, ...] = tuple(f for fam in FAMILIES.values() for f in fam.call_formats)

#: call format -> the family whose models write it
FAMILY_OF_FORMAT: dict[str, Family] = {f: fam for fam in FAMILIES.values() for f in fam.call_formats}


def family_of(tool_format: str | None) -> Family | None:
    """The family of a call format (``None`` for ``none``, ``foreign`` or an unknown name)."""
    return FAMILY_OF_FORMAT.get(tool_format or "")


def family_named(name: str) -> Family | None:
    """A family by its name or one of its aliases."""
    fam = FAMILIES.get(name)
    if fam is None:
        fam = next((f for f in FAMILIES.values() if name in f.aliases), None)
    return fam


def tool_blocks() -> tuple[tuple[str, ToolBlock], ...]:
    """(family name, block) for every tool block a regex splits, in the order they are tried: each family's own
    markup in registry order, then the ``shared`` ones (markup other families' outputs may hold)."""
    blocks = [(fam.name, b) for fam in FAMILIES.values() for b in fam.tool_blocks if b.pattern is not None]
    return tuple([x for x in blocks if not x[1].shared] + [x for x in blocks if x[1].shared])


#: every tokenizer alias of every family -> the built-in tokenizer it loads
TOKENIZER_ALIASES: dict[str, str] = {a: t for fam in FAMILIES.values() for a, t in fam.tokenizer_aliases.items()}

__all__ = ["CALL_FORMATS", "FAMILIES", "FAMILY_MODULES", "FAMILY_OF_FORMAT", "REQUIRED_FACETS", "TOKENIZER_ALIASES",
           "Family", "FamilyError", "TokenLayout", "ToolBlock", "family_from_module", "family_named", "family_of",
           "load_families", "tool_blocks"]

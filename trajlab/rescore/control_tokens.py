"""Resolve the control-token strings of ``rules/control_tokens.yaml`` through a tokenizer.

The rule file lists control tokens as *strings* per tokenizer family and call format. A string is resolved to
the id of its first token (``resolve: first``, the default; ``"</parameter>"`` becomes ``"</"`` for Qwen3) or
must be a single token (``resolve: exact``). Ids are looked up through the tokenizer's vocabulary and added
tokens, so ``<tool_call>`` and ``<think>`` resolve even though they are not in ``all_special_ids``.

The result, :class:`ControlSet`, holds the union of ids over every format (the scorer computes probabilities
for the union once) and one boolean mask per format (which of those ids count for a trajectory of that format).

Every control token also has a *kind* (:data:`KINDS`), per format: ``call`` (the call grammar: a format's own
entries, and entries marked ``kind: call`` such as ``<tool_call>``), ``scaffold`` (the chat template's turn
tokens: the family's special tokens (:mod:`trajlab.families`) and its ``environment`` tokens, or entries marked
``kind: scaffold``) and ``other`` (the rest, e.g. ``<think>``). :func:`environment_ids` resolves the family's
environment tokens (one token each). This module is the one home of both classifications: rescore, scan's exact
tokens and the verl reward's exact-token statistics (:mod:`trajlab.verl.exact`) read them from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab.errors import TrajlabError
from trajlab.families import FAMILIES
from trajlab.rulepacks import load_rule_file, merge_rules

RULE_FILE = "control_tokens.yaml"
REGIONS: tuple[str, ...] = ("structural", "function_name", "param_name", "param_value", "text", "think")
FORMATS: tuple[str, ...] = ("qwen3_coder", "hermes", "none")
#: the kinds of control token (see the module docstring)
KINDS: tuple[str, ...] = ("scaffold", "call", "other")


@dataclass(frozen=True)
class SpikeThresholds:
    """τ values and the regions they apply to (see the rule file's header for the definitions)."""

    intrusion: float = 0.5
    dropout: float = 0.9
    intrusion_regions: tuple[str, ...] = ("function_name", "param_name", "param_value")
    dropout_regions: tuple[str, ...] = ("structural",)


@dataclass
class ControlSet:
    """Control-token ids of one tokenizer, for every call format."""

    family: str
    ids: list[int]  # union over formats, sorted
    labels: list[str]  # display string of each id (the decoded token)
    sources: list[list[str]]  # rule strings that resolved to each id
    format_masks: dict[str, list[bool]]  # format -> which of `ids` belong to it
    skipped: list[str] = field(default_factory=list)  # "string (format): reason"
    kinds: dict[str, dict[int, str]] = field(default_factory=dict)  # format -> id -> kind (KINDS)

    def format_index(self, fmt: str | None) -> int:
        """Row of :meth:`mask_rows` used for a trajectory of format ``fmt`` (unknown formats -> ``none``)."""
        names = list(self.format_masks)
        key = fmt if fmt in self.format_masks else "none"
        return names.index(key)

    def kinds_for(self, fmt: str | None) -> dict[int, str]:
        """Control id -> kind (:data:`KINDS`) for a trajectory of format ``fmt`` (unknown formats -> ``none``)."""
        return self.kinds.get(fmt if fmt in self.kinds else "none", {})

    def mask_rows(self) -> list[list[bool]]:
        return [self.format_masks[f] for f in self.format_masks]

    def ids_for(self, fmt: str | None) -> set[int]:
        mask = self.format_masks[fmt if fmt in self.format_masks else "none"]
        return {i for i, m in zip(self.ids, mask, strict=True) if m}


def load_control_rules(rules_dirs: Iterable[str | Path] = ()) -> dict[str, Any]:
    """The merged control-token rule file (built-in plus user packs)."""
    data = load_rule_file(RULE_FILE, rules_dirs)
    if not isinstance(data, dict) or not isinstance(data.get("families"), dict):
        raise TrajlabError(f"{RULE_FILE}: expected a mapping with a 'families' mapping")
    return _fold_old_names(data)


def _fold_old_names(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with a set a user pack spells by a family's old name (``ALIASES`` in :mod:`trajlab.families`, e.g.
    ``qwen_chatml`` for ``qwen``) merged into the family's set, as if it were spelled by the family's name."""
    fams = data["families"]
    old = {a: fam.control_tokens for fam in FAMILIES.values() for a in fam.aliases
           if a in fams and fam.control_tokens in fams}
    if not old:
        return data
    merged = {k: v for k, v in fams.items() if k not in old}
    for alias, key in old.items():
        merged[key] = merge_rules(merged[key], fams[alias])
    return {**data, "families": merged}


def thresholds_from_rules(
    rules: dict[str, Any], *, intrusion: float | None = None, dropout: float | None = None
) -> SpikeThresholds:
    """τ values from the rule file, overridden by the command line when given."""
    th = rules.get("thresholds") or {}
    ti = float(intrusion if intrusion is not None else th.get("intrusion", 0.5))
    td = float(dropout if dropout is not None else th.get("dropout", 0.9))
    for name, v in (("intrusion", ti), ("dropout", td)):
        if not 0.0 <= v <= 1.0:
            raise TrajlabError(f"spike threshold tau_{name}={v} must be between 0 and 1")
    regions = {}
    for key, default in (
        ("intrusion_regions", SpikeThresholds.intrusion_regions),
        ("dropout_regions", SpikeThresholds.dropout_regions),
    ):
        vals = tuple(dict.fromkeys(rules.get(key) or default))  # user packs append: keep order, drop repeats
        bad = [r for r in vals if r not in REGIONS]
        if bad:
            raise TrajlabError(f"{RULE_FILE}: {key} has unknown regions {bad}; known: {list(REGIONS)}")
        regions[key] = vals
    return SpikeThresholds(ti, td, regions["intrusion_regions"], regions["dropout_regions"])


def _single_token_id(tokenizer: Any, text: str) -> int | None:
    """Id of ``text`` when the tokenizer encodes it as exactly one token (vocabulary or added token)."""
    enc = tokenizer.encode(text, add_special_tokens=False)
    return int(enc[0]) if len(enc) == 1 else None


def _entries(values: Sequence[Any] | None, where: str) -> list[tuple[str, str, str | None]]:
    """(text, resolve mode, kind or None: the default of where the entry stands) per entry."""
    out: list[tuple[str, str, str | None]] = []
    for v in values or []:
        if isinstance(v, str):
            out.append((v, "first", None))
        elif isinstance(v, dict) and isinstance(v.get("text"), str):
            mode = v.get("resolve", "first")
            if mode not in ("first", "exact"):
                raise TrajlabError(f"{RULE_FILE}: {where}: resolve must be 'first' or 'exact', got {mode!r}")
            kind = v.get("kind")
            if kind is not None and kind not in KINDS:
                raise TrajlabError(f"{RULE_FILE}: {where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
            out.append((v["text"], mode, kind))
        else:
            raise TrajlabError(f"{RULE_FILE}: {where}: entries must be strings or {{text, resolve, kind}}, got {v!r}")
    return out


def environment_ids(tokenizer: Any, rules: dict[str, Any], family: str) -> frozenset[int]:
    """Ids of the family's ``environment`` tokens (role headers, tool-response wrappers) that are one token of
    ``tokenizer``: generated by the policy, one means the model wrote the environment's part itself."""
    out: set[int] = set()
    for text in (rules["families"].get(family) or {}).get("environment") or []:
        if isinstance(text, str):
            tid = _single_token_id(tokenizer, text)
            if tid is not None:
                out.add(tid)
    return frozenset(out)


def _scaffold_strings(rules: dict[str, Any], family: str) -> frozenset[str]:
    """The strings that are ``scaffold`` by default: the special tokens of every family registered under this
    control-token set, and the set's environment tokens."""
    specials = {t for fam in FAMILIES.values() if fam.control_tokens == family for t in fam.special_tokens}
    env = (rules["families"].get(family) or {}).get("environment") or []
    return frozenset(specials | {t for t in env if isinstance(t, str)})


def _pick_family(rules: dict[str, Any], tokenizer: Any) -> str:
    fams = rules["families"]
    for name, fam in fams.items():
        detect = (fam or {}).get("detect") or []
        if detect and all(_single_token_id(tokenizer, s) is not None for s in detect):
            return name
    for name, fam in fams.items():
        if not (fam or {}).get("detect"):
            return name
    raise TrajlabError(f"{RULE_FILE}: no family matches this tokenizer and there is no fallback family")


def resolve_control_set(tokenizer: Any, rules: dict[str, Any], family: str | None = None) -> ControlSet:
    """Resolve every control string of the matching family to token ids of ``tokenizer``."""
    fam_name = family or _pick_family(rules, tokenizer)
    fam = rules["families"].get(fam_name)
    if fam is None:
        raise TrajlabError(f"{RULE_FILE}: unknown tokenizer family {fam_name!r}")
    common = _entries(fam.get("common"), f"{fam_name}.common")
    formats = dict(fam.get("formats") or {})
    formats.setdefault("none", [])
    per_format: dict[str, set[int]] = {}
    sources: dict[int, list[str]] = {}
    skipped: list[str] = []
    scaffold = _scaffold_strings(rules, fam_name)
    rank = {k: r for r, k in enumerate(("other", "scaffold", "call"))}  # an id two strings share: the higher kind
    kinds: dict[str, dict[int, str]] = {}
    for fmt, values in formats.items():
        ids: set[int] = set()
        fkinds: dict[int, str] = {}
        own = [(t, m, k or "call") for t, m, k in _entries(values, f"{fam_name}.formats.{fmt}")]
        for text, mode, kind in [(t, m, k or ("scaffold" if t in scaffold else "other")) for t, m, k in common] + own:
            tid = _single_token_id(tokenizer, text)
            if tid is None:
                enc = tokenizer.encode(text, add_special_tokens=False)
                if mode == "exact" and len(enc) != 1:
                    skipped.append(f"{text!r} ({fmt}): not a single token ({len(enc)} tokens)")
                    continue
                if not enc:
                    skipped.append(f"{text!r} ({fmt}): encodes to no tokens")
                    continue
                tid = int(enc[0])
            ids.add(tid)
            if tid not in fkinds or rank[kind] > rank[fkinds[tid]]:
                fkinds[tid] = kind
            src = sources.setdefault(tid, [])
            if text not in src:
                src.append(text)
        per_format[fmt] = ids
        kinds[fmt] = fkinds
    union = sorted(set().union(*per_format.values())) if per_format else []
    labels = [tokenizer.decode([i], skip_special_tokens=False) for i in union]
    masks = {fmt: [i in ids for i in union] for fmt, ids in per_format.items()}
    return ControlSet(fam_name, union, labels, [sources[i] for i in union], masks, sorted(set(skipped)), kinds)

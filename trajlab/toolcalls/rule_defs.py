"""The entries of the rule packs, validated: taxonomy categories, their variants, and user regex rules.

:func:`parse_category`, :func:`merge_variants` and :func:`parse_regex_rules` turn the YAML of ``taxonomy.yaml``
and ``formats/*.yaml`` into :class:`CategoryDef` / :class:`RegexRule` records, or raise
:class:`~trajlab.errors.TrajlabError` naming the file and the entry; :func:`compile_regex` compiles a pack's pattern
with the same kind of error; :func:`category_origins` says which user pack added a category. :data:`SEVERITIES`,
:data:`SPAN_KINDS` and :data:`RULE_TARGETS` are the values an entry may use. :class:`~.ruleset.RuleSet` assembles
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trajlab.errors import TrajlabError
from trajlab.rulepacks import load_rule_file, safe_load_yaml

SEVERITIES = ("error", "warning", "info")
SPAN_KINDS = ("structural", "function_name", "param_name", "param_value", "text", "think")
#: what a user regex rule may apply to: a span kind, the raw text of each call, or the whole turn
RULE_TARGETS = (*SPAN_KINDS, "call", "turn")
@dataclass(frozen=True)
class CategoryDef:
    id: str
    severity: str
    description: str
    explanation: str
    generic: str
    repairable: bool
    variants: dict[str, dict[str, Any]]
    corpus_labels: tuple[str, ...]
    source: str  # "builtin" or the user pack directory that added it


@dataclass(frozen=True)
class RegexRule:
    """A user rule: report ``category`` wherever ``pattern`` matches inside spans of kind ``applies_to``."""

    id: str
    category: str
    applies_to: tuple[str, ...]
    pattern: re.Pattern[str]
    severity: str | None
    message: str | None
    params: tuple[str, ...] | None  # only values of these parameters (applies_to param_value)
    functions: tuple[str, ...] | None  # only calls to these functions
    formats: tuple[str, ...] | None
    source: str


def merge_variants(cats: dict[str, CategoryDef], spec: Any, where: str) -> None:
    """Add a format file's ``variants: {category: {variant: {...}}}`` to the taxonomy (existing ones are kept)."""
    if not spec:
        return
    if not isinstance(spec, dict):
        raise TrajlabError(f"rules {where}: 'variants' must be a mapping of category -> variants")
    for cid, vs in spec.items():
        if cid not in cats:
            raise TrajlabError(f"rules {where}: variants for unknown category {cid!r}")
        if not isinstance(vs, dict):
            raise TrajlabError(f"rules {where} variants {cid!r}: expected a mapping")
        for vid, v in vs.items():
            v = v or {}
            sev = v.get("severity") if isinstance(v, dict) else None
            if not isinstance(v, dict) or (sev is not None and sev not in SEVERITIES):
                raise TrajlabError(f"rules {where} variant {cid}/{vid}: expected a mapping with a valid severity")
            cats[cid].variants.setdefault(str(vid), v)


def compile_regex(pattern: Any, where: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(str(pattern), flags)
    except re.error as e:
        raise TrajlabError(f"rules {where}: invalid regex {pattern!r}: {e}") from None


def parse_category(cid: str, spec: Any, source: str) -> CategoryDef:
    where = f"taxonomy.yaml category {cid!r}"
    if not isinstance(spec, dict):
        raise TrajlabError(f"rules {where}: expected a mapping")
    sev = spec.get("severity")
    if sev not in SEVERITIES:
        raise TrajlabError(f"rules {where}: severity must be one of {', '.join(SEVERITIES)}, got {sev!r}")
    for key in ("description", "explanation"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise TrajlabError(f"rules {where}: missing '{key}'")
    variants = spec.get("variants") or {}
    if not isinstance(variants, dict):
        raise TrajlabError(f"rules {where}: 'variants' must be a mapping")
    clean: dict[str, dict[str, Any]] = {}
    for vid, v in variants.items():
        v = v or {}
        if not isinstance(v, dict):
            raise TrajlabError(f"rules {where} variant {vid!r}: expected a mapping")
        s = v.get("severity")
        bad = (isinstance(s, str) and s not in SEVERITIES) or (
            isinstance(s, dict) and any(x not in SEVERITIES for x in s.values())
        )
        if bad or (s is not None and not isinstance(s, (str, dict))):
            raise TrajlabError(f"rules {where} variant {vid!r}: bad severity {s!r}")
        clean[str(vid)] = v
    return CategoryDef(
        id=cid,
        severity=sev,
        description=spec["description"].strip(),
        explanation=spec["explanation"].strip(),
        generic=str(spec.get("generic") or spec["description"]).strip(),
        repairable=bool(spec.get("repairable", False)),
        variants=clean,
        corpus_labels=tuple(str(x) for x in spec.get("corpus_labels") or ()),
        source=source,
    )


def _user_taxonomies(dirs: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """``(dir, taxonomy.yaml contents)`` of each user pack that has one (unreadable ones are skipped here:
    ``load_rule_file`` already reported them)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for d in dirs:
        p = Path(d) / "taxonomy.yaml"
        if not p.exists():
            continue
        try:
            data = safe_load_yaml(p.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict):
            out.append((d, data))
    return out


def category_origins(dirs: tuple[str, ...]) -> dict[str, str]:
    """Which user pack first added each non-builtin category (for `trajlab rules list`)."""
    out: dict[str, str] = {}
    builtin = load_rule_file("taxonomy.yaml", ())
    known = set((builtin or {}).get("categories") or {})
    for d, data in _user_taxonomies(dirs):
        for cid in data.get("categories") or {}:
            if cid not in known and cid not in out:
                out[str(cid)] = d
    return out


def _rule_sources(dirs: tuple[str, ...]) -> list[str]:
    """Source directory of each entry of the merged ``rules:`` list, in merge order."""
    srcs: list[str] = ["builtin"] * len((load_rule_file("taxonomy.yaml", ()) or {}).get("rules") or [])
    for d, data in _user_taxonomies(dirs):
        srcs += [d] * len(data.get("rules") or [])
    return srcs


def _tuple_or_none(v: Any) -> tuple[str, ...] | None:
    if v is None:
        return None
    if isinstance(v, str):
        return (v,)
    return tuple(str(x) for x in v)


def parse_regex_rules(items: Any, cats: dict[str, CategoryDef], dirs: tuple[str, ...]) -> list[RegexRule]:
    if not isinstance(items, list):
        raise TrajlabError("rules taxonomy.yaml: 'rules' must be a list")
    srcs = _rule_sources(dirs)
    out: list[RegexRule] = []
    seen: set[str] = set()
    for i, r in enumerate(items):
        src = srcs[i] if i < len(srcs) else "builtin"
        where = f"{src}/taxonomy.yaml rules[{i}]"
        if not isinstance(r, dict):
            raise TrajlabError(f"rules {where}: expected a mapping")
        for key in ("id", "category", "pattern"):
            if not r.get(key):
                raise TrajlabError(f"rules {where}: missing '{key}'")
        rid = str(r["id"])
        if rid in seen:
            raise TrajlabError(f"rules {where}: duplicate rule id {rid!r}")
        seen.add(rid)
        if r["category"] not in cats:
            raise TrajlabError(
                f"rules {where} ({rid}): unknown category {r['category']!r}; declare it under 'categories:' first"
            )
        targets = _tuple_or_none(r.get("applies_to")) or ("text",)
        bad = [t for t in targets if t not in RULE_TARGETS]
        if bad:
            raise TrajlabError(f"rules {where} ({rid}): applies_to {bad[0]!r} is not one of {', '.join(RULE_TARGETS)}")
        sev = r.get("severity")
        if sev is not None and sev not in SEVERITIES:
            raise TrajlabError(f"rules {where} ({rid}): severity must be one of {', '.join(SEVERITIES)}")
        flags = re.IGNORECASE if r.get("ignore_case") else 0
        out.append(
            RegexRule(
                id=rid,
                category=str(r["category"]),
                applies_to=targets,
                pattern=compile_regex(r["pattern"], f"{where} ({rid})", flags | re.DOTALL),
                severity=sev,
                message=str(r["message"]) if r.get("message") else None,
                params=_tuple_or_none(r.get("params")),
                functions=_tuple_or_none(r.get("functions")),
                formats=_tuple_or_none(r.get("formats")),
                source=src,
            )
        )
    return out

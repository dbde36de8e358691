"""The taxonomy as plain data, explanations filled from templates, and the listing `trajlab rules list` shows."""

from __future__ import annotations

from typing import Any

from trajlab.toolcalls.ruleset import get_ruleset


def load_taxonomy(rules_dirs: Any = ()) -> dict[str, dict[str, Any]]:
    """Category id -> ``{severity, description, explanation, generic, repairable, variants, corpus_labels, source}``.

    Raises :class:`~trajlab.errors.TrajlabError` when a rule pack is missing or invalid.
    """
    rs = get_ruleset(rules_dirs)
    return {
        cid: {
            "severity": c.severity,
            "description": c.description,
            "explanation": c.explanation,
            "generic": c.generic,
            "repairable": c.repairable,
            "variants": {k: dict(v) for k, v in c.variants.items()},
            "corpus_labels": list(c.corpus_labels),
            "source": c.source,
        }
        for cid, c in rs.categories.items()
    }


def explain(category: str, **params: Any) -> str:
    """The explanation of ``category`` with its template filled from ``params``.

    ``variant=...`` selects a variant's wording (e.g. ``explain("unclosed_tag", variant="parameter_at_end",
    tag="<parameter=q>", closer="</parameter>")``). Missing parameters fall back to the category's generic
    sentence, so the result is always a complete sentence.
    """
    variant = params.pop("variant", None)
    return get_ruleset(()).message(category, variant, params)


def list_rules(rules_dirs: Any = ()) -> list[dict[str, Any]]:
    """Every loaded rule: taxonomy categories (with their variants), the call formats and user regex rules."""
    rs = get_ruleset(rules_dirs)
    out: list[dict[str, Any]] = []
    for cid, c in rs.categories.items():
        out.append({
            "kind": "category",
            "id": cid,
            "severity": c.severity,
            "description": c.description,
            "repairable": c.repairable,
            "variants": sorted(c.variants),
            "source": c.source,
        })
    from trajlab.families import FAMILY_OF_FORMAT
    from trajlab.toolcalls.formats import FORMATS

    for name, fmt in FORMATS.items():
        spec = rs.formats.get(name) or {}
        out.append({
            "kind": "format",
            "id": name,
            "family": FAMILY_OF_FORMAT[name].name,
            "models": fmt.models or name,
            "description": str(spec.get("description") or ""),
            "parser_notes": len(rs.parser_notes.get(name) or {}),
            "source": "builtin",
        })
    for r in rs.regex_rules:
        out.append({
            "kind": "regex",
            "id": r.id,
            "category": r.category,
            "severity": r.severity or rs.categories[r.category].severity,
            "description": r.message or rs.categories[r.category].description,
            "applies_to": list(r.applies_to),
            "pattern": r.pattern.pattern,
            "source": r.source,
        })
    return out

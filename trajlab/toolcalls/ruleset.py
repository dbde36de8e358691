"""The loaded, validated and compiled rule packs: taxonomy, per-format hints, garbling heuristics, user rules.

Everything the classifier knows as *data* lives in ``rules/`` (installed as ``trajlab.rules``) and in user
packs given with ``--rules DIR``. :func:`get_ruleset` loads and compiles it once per distinct tuple of user
directories (``lru_cache``), so the hot path never touches YAML. Invalid packs raise
:class:`~trajlab.errors.TrajlabError` with the file and the offending entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from trajlab.errors import TrajlabError
from trajlab.rulepacks import builtin_rules_dir, load_rule_file

SEVERITIES = ("error", "warning", "info")
SPAN_KINDS = ("structural", "function_name", "param_name", "param_value", "text", "think")
#: what a user regex rule may apply to: a span kind, the raw text of each call, or the whole turn
RULE_TARGETS = (*SPAN_KINDS, "call", "turn")
#: rules/formats/*.yaml that are not call formats
_NON_FORMAT_FILES = ("foreign", "garbling")


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


@dataclass(frozen=True)
class ForeignFamily:
    id: str
    pattern: re.Pattern[str]
    name: re.Pattern[str] | None
    params: re.Pattern[str] | None
    trigger: str | None  # literal every match contains (str.find prefilter)


class RuleSet:
    """Compiled rules for one combination of user packs."""

    def __init__(self, dirs: tuple[str, ...]) -> None:
        self.dirs = dirs
        tax = load_rule_file("taxonomy.yaml", dirs)
        if not isinstance(tax, dict) or not isinstance(tax.get("categories"), dict):
            raise TrajlabError("rules taxonomy.yaml: expected a mapping with a 'categories:' mapping")
        origin = _category_origins(dirs)
        cats: dict[str, CategoryDef] = {}
        for cid, spec in tax["categories"].items():
            cats[str(cid)] = _category(str(cid), spec, origin.get(str(cid), "builtin"))
        self.categories = cats
        self.regex_rules = tuple(_regex_rules(tax.get("rules") or [], cats, dirs))

        self.formats: dict[str, dict[str, Any]] = {}
        names = sorted(p.stem for p in (builtin_rules_dir() / "formats").glob("*.yaml") if p.stem not in _NON_FORMAT_FILES)
        for name in names:
            data = load_rule_file(f"formats/{name}.yaml", dirs)
            if not isinstance(data, dict):
                raise TrajlabError(f"rules formats/{name}.yaml: expected a mapping")
            self.formats[name] = data
        self.prompt_markers = {n: tuple(str(m) for m in d.get("prompt_markers") or ()) for n, d in self.formats.items()}
        # per format: literals its calls contain (prefilters), the foreign families that are its own markup (not
        # foreign when the trajectory uses it), and variants it adds to the taxonomy's categories
        self.format_literals = {n: tuple(str(x) for x in d.get("call_literals") or ()) for n, d in self.formats.items()}
        self.own_foreign = {n: tuple(str(x) for x in d.get("foreign_families") or ()) for n, d in self.formats.items()}
        for n, d in self.formats.items():
            _merge_variants(cats, d.get("variants"), f"formats/{n}.yaml")
        # per format: explanation templates that replace a category's (`messages`), and what the family's own
        # parsers do with such a call (`parser_notes`, appended); keys are `category` or `category/variant`
        self.format_messages = {n: {str(k): str(v) for k, v in (d.get("messages") or {}).items()}
                                for n, d in self.formats.items()}
        self.parser_notes = {n: {str(k): str(v).strip() for k, v in (d.get("parser_notes") or {}).items()}
                             for n, d in self.formats.items()}
        # per format: severities of shared variants (`category/variant: severity`), e.g. an unclosed call that
        # this family's verl parser drops
        self.format_severities = {n: {str(k): str(v) for k, v in (d.get("severities") or {}).items()}
                                  for n, d in self.formats.items()}
        for n, sevs in self.format_severities.items():
            bad = [k for k, v in sevs.items() if v not in SEVERITIES]
            if bad:
                raise TrajlabError(f"rules formats/{n}.yaml severities: {bad[0]!r} must be one of {', '.join(SEVERITIES)}")
        self.output_markers = {
            n: re.compile("|".join(f"(?:{p})" for p in d.get("output_markers") or ()) or r"(?!x)x")
            for n, d in self.formats.items()
        }
        q = self.formats["qwen3_coder"]
        self.close_tail_re = _compile(
            "|".join(f"(?:{p})" for p in q.get("close_tail_variants") or ()) or r"(?!x)x", "formats/qwen3_coder.yaml"
        )
        self.description_tags = tuple(str(t) for t in q.get("description_tags") or ())
        h = self.formats["hermes"]
        self.alt_name_keys = tuple(str(k) for k in h.get("alt_name_keys") or ())
        self.alt_arguments_keys = tuple(str(k) for k in h.get("alt_arguments_keys") or ())
        self.curly_double = str(h.get("curly_double_quotes") or "")
        self.curly_single = str(h.get("curly_single_quotes") or "")

        foreign = load_rule_file("formats/foreign.yaml", dirs) or {}
        fams = []
        for i, f in enumerate(foreign.get("families") or []):
            where = f"formats/foreign.yaml families[{i}]"
            if not isinstance(f, dict) or "id" not in f or "pattern" not in f:
                raise TrajlabError(f"rules {where}: needs 'id' and 'pattern'")
            fams.append(
                ForeignFamily(
                    str(f["id"]),
                    _compile(f["pattern"], where, re.DOTALL),
                    _compile(f["name"], where, re.DOTALL) if f.get("name") else None,
                    _compile(f["params"], where, re.DOTALL) if f.get("params") else None,
                    str(f["trigger"]) if f.get("trigger") else None,
                )
            )
        self.foreign_families = tuple(fams)
        # cheap trigger: the literal start of each family's pattern (everything before its first `.*?`)
        self.foreign_any = re.compile("|".join(f"(?:{f.pattern.pattern.split('.*?')[0]})" for f in fams)) if fams else None
        self.body_patterns = tuple(
            (str(b["id"]), _compile(b["pattern"], "formats/foreign.yaml body_patterns", re.DOTALL))
            for b in foreign.get("body_patterns") or []
        )
        inv = foreign.get("invented_tags") or {}
        name_pat = inv.get("name_pattern") or r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
        self.invented_re = _compile(rf"<({name_pat})>(.*?)</\1>", "formats/foreign.yaml invented_tags", re.DOTALL)
        self.invented_allowed = frozenset(str(t) for t in inv.get("allowed") or ())

        g = load_rule_file("formats/garbling.yaml", dirs) or {}
        self.valid_name_re = _compile(g.get("valid_name") or r"[A-Za-z0-9_.:\-]{1,64}", "formats/garbling.yaml")
        ident = g.get("identifier_chars") or r"A-Za-z0-9_.:\-"
        self.non_ident_re = _compile(f"[^{ident}]", "formats/garbling.yaml")
        self.junk_affix_re = _compile(
            "|".join(f"(?:{p})" for p in g.get("junk_affixes") or ()) or r"(?!x)x", "formats/garbling.yaml"
        )
        self.max_short_junk = int(g.get("max_short_junk", 2))
        self.edit_rules = tuple(
            sorted(((int(r["min_len"]), int(r["max_edit"])) for r in g.get("edit_distance") or []), reverse=True)
        )
        self.trim_chars = str(g.get("trim_chars", " \t\r\n\"'`"))

        # fast path: one search decides whether a turn needs any work at all
        quick = [
            r"</?\s*(?:tool_call|function|parameter|think)",
            r"\{\s*\{?\s*\"(?:name|function)\"",
        ]
        quick += [f"(?:{f.pattern.pattern.split('.*?')[0]})" for f in fams]
        quick.append(r"<[a-z][a-z0-9]*_[a-z0-9_]*>")
        self.quick_re = re.compile("|".join(quick))
        # literal prefilter (str.find runs at memchr speed, a regex scan at ~5 ns/char): a turn or a segment
        # that contains none of these has no call markup at all
        self.call_literals = ("<tool_call", "</tool_call", "<function", "</function", "<parameter", "</parameter",
                              '"name', '"function')
        extra = [lit for lits in self.format_literals.values() for lit in lits if lit and lit not in self.call_literals]
        self.call_literals += tuple(dict.fromkeys(extra))
        self.foreign_literals = tuple(f.trigger for f in fams if f.trigger)
        self.foreign_untriggered = any(f.trigger is None for f in fams)
        # grouped by first character: one memchr-fast `ch in text` rules out every literal starting with ch
        seg: dict[str, list[str]] = {}
        for lit in (*self.call_literals, *self.foreign_literals):
            seg.setdefault(lit[0], []).append(lit)
        self.segment_groups = tuple((ch, tuple(lits)) for ch, lits in seg.items())
        self.invented_quick = re.compile(r"<[a-z][a-z0-9]*_[a-z0-9_]*>")
        self.has_text_rules = any(
            set(r.applies_to) & {"text", "turn"} for r in self.regex_rules
        )
        # (category, variant, format) -> what `describe` needs besides the finding's parameters
        self._described: dict[tuple[str, str, str], tuple[str, Any, Any, str, str, str]] = {}

    # -- severities and messages ------------------------------------------------------------------------

    def severity(self, category: str, variant: str, fmt: str) -> str:
        cat = self.categories.get(category)
        if cat is None:
            return "warning"
        own = self.format_severities.get(fmt)
        if own:
            sev = own.get(f"{category}/{variant}") or own.get(category)
            if sev is not None:
                return sev
        var = cat.variants.get(variant) or {}
        sev = var.get("severity")
        if isinstance(sev, dict):
            sev = sev.get(fmt)
        return sev if sev in SEVERITIES else cat.severity

    def message(self, category: str, variant: str | None = None, params: dict[str, Any] | None = None) -> str:
        cat = self.categories.get(category)
        if cat is None:
            return category
        params = params or {}
        var = cat.variants.get(variant or "", {}) or {}
        template = var.get("explanation") or cat.explanation
        try:
            msg = template.format_map(params)
        except (KeyError, IndexError, ValueError, AttributeError):
            msg = cat.generic or cat.description
        detail = var.get("detail")
        if detail:
            try:
                msg = f"{msg} {detail.format_map(params)}"
            except (KeyError, IndexError, ValueError, AttributeError):
                pass
        return msg

    def describe(self, category: str, variant: str, fmt: str, params: dict[str, Any]) -> tuple[str, str, str]:
        """``(severity, message, rule id)`` of one finding: :meth:`severity`, :meth:`message` and
        ``fmt/category/variant``, with the rule lookups cached per (category, variant, format)."""
        key = (category, variant, fmt)
        parts = self._described.get(key)
        if parts is None:
            parts = self._describe_parts(category, variant, fmt)
            if len(self._described) < 4096:
                self._described[key] = parts
        sev, template, detail, suffix, fallback, rule_id = parts
        if template is None:  # an unknown category: message() returns its name
            return sev, category, rule_id
        try:
            msg = template.format_map(params)
        except (KeyError, IndexError, ValueError, AttributeError):
            msg = fallback
        if suffix:
            msg += suffix
        elif detail:
            try:
                msg = f"{msg} {detail.format_map(params)}"
            except (KeyError, IndexError, ValueError, AttributeError):
                pass
        return sev, msg, rule_id

    def _describe_parts(self, category: str, variant: str, fmt: str) -> tuple[str, Any, Any, str, str, str]:
        """What :meth:`message` looks up for (category, variant): template, detail (or, when the detail is a plain
        sentence without a placeholder, the suffix it always adds), fallback (template None: an unknown category)."""
        sev = self.severity(category, variant, fmt)
        rule_id = f"{fmt}/{category}/{variant}"
        cat = self.categories.get(category)
        if cat is None:
            return sev, None, None, "", category, rule_id
        var = cat.variants.get(variant or "", {}) or {}
        detail = var.get("detail")
        fmsgs = self.format_messages.get(fmt) or {}
        template = var.get("explanation") or fmsgs.get(f"{category}/{variant}") or fmsgs.get(category) \
            or cat.explanation
        notes = self.parser_notes.get(fmt) or {}
        note = notes.get(f"{category}/{variant}")
        if note is not None:
            detail = None  # a note for this exact variant replaces the variant's (other formats') detail
        else:
            note = notes.get(category)
        suffix = ""
        if isinstance(detail, str) and detail and "{" not in detail and "}" not in detail:
            suffix = " " + detail  # (format_map returns a text without braces unchanged)
        if note:  # what this family's parsers do with the call: a plain sentence after the explanation
            if suffix or not detail:
                suffix += " " + note
                detail = None
            else:
                detail = f"{detail} " + note.replace("{", "{{").replace("}", "}}")
        return sev, template, detail, suffix, cat.generic or cat.description, rule_id

    def has_literal(self, text: str, lo: int, hi: int) -> bool:
        """Whether ``text[lo:hi]`` holds any call literal (``<tool_call``, ``"name``, ...) that a scanner reads."""
        for ch, lits in self.segment_groups:
            if text.find(ch, lo, hi) >= 0:
                for lit in lits:
                    if text.find(lit, lo, hi) >= 0:
                        return True
        return False


def _merge_variants(cats: dict[str, CategoryDef], spec: Any, where: str) -> None:
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


def _compile(pattern: Any, where: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(str(pattern), flags)
    except re.error as e:
        raise TrajlabError(f"rules {where}: invalid regex {pattern!r}: {e}") from None


def _category(cid: str, spec: Any, source: str) -> CategoryDef:
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
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict):
            out.append((d, data))
    return out


def _category_origins(dirs: tuple[str, ...]) -> dict[str, str]:
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


def _regex_rules(items: Any, cats: dict[str, CategoryDef], dirs: tuple[str, ...]) -> list[RegexRule]:
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
                pattern=_compile(r["pattern"], f"{where} ({rid})", flags | re.DOTALL),
                severity=sev,
                message=str(r["message"]) if r.get("message") else None,
                params=_tuple_or_none(r.get("params")),
                functions=_tuple_or_none(r.get("functions")),
                formats=_tuple_or_none(r.get("formats")),
                source=src,
            )
        )
    return out


@lru_cache(maxsize=32)
def _ruleset_cached(dirs: tuple[str, ...]) -> RuleSet:
    return RuleSet(dirs)


_FAST: dict[Any, RuleSet] = {}


def get_ruleset(rules_dirs: Any = ()) -> RuleSet:
    """The compiled rules for the built-in pack plus ``rules_dirs`` (cached per distinct tuple).

    Called once per turn on the hot path, so a hit costs one dict lookup (no path checks).
    """
    key = rules_dirs if isinstance(rules_dirs, tuple) else tuple(rules_dirs or ())
    hit = _FAST.get(key)
    if hit is not None:
        return hit
    dirs = tuple(str(Path(d)) for d in key)
    for d in dirs:
        if not Path(d).is_dir():
            raise TrajlabError(f"rule pack directory not found: {d}")
    rs = _ruleset_cached(dirs)
    if len(_FAST) > 64:
        _FAST.clear()
    _FAST[key] = rs
    return rs


"""The compiled rule packs (:class:`RuleSet`): taxonomy, per-format hints, garbling heuristics, user rules, and
the severity and message of each finding.

Everything the classifier knows as *data* lives in ``rules/`` (installed as ``trajlab.rules``) and in user
packs given with ``--rules DIR``. :func:`get_ruleset` loads and compiles it once per distinct tuple of user
directories (``lru_cache``), so the hot path never touches YAML. Invalid packs raise
:class:`~trajlab.errors.TrajlabError` with the file and the offending entry (the entries are parsed and
validated in :mod:`.rule_defs`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from trajlab.errors import TrajlabError
from trajlab.rulepacks import builtin_rules_dir, load_rule_file
from trajlab.toolcalls.rule_defs import (
    SEVERITIES,
    CategoryDef,
    category_origins,
    compile_regex,
    merge_variants,
    parse_category,
    parse_regex_rules,
)

#: rules/formats/*.yaml that are not call formats
_NON_FORMAT_FILES = ("foreign", "garbling")


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
        origin = category_origins(dirs)
        cats: dict[str, CategoryDef] = {}
        for cid, spec in tax["categories"].items():
            cats[str(cid)] = parse_category(str(cid), spec, origin.get(str(cid), "builtin"))
        self.categories = cats
        self.regex_rules = tuple(parse_regex_rules(tax.get("rules") or [], cats, dirs))

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
            merge_variants(cats, d.get("variants"), f"formats/{n}.yaml")
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
        self.close_tail_re = compile_regex(
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
                    compile_regex(f["pattern"], where, re.DOTALL),
                    compile_regex(f["name"], where, re.DOTALL) if f.get("name") else None,
                    compile_regex(f["params"], where, re.DOTALL) if f.get("params") else None,
                    str(f["trigger"]) if f.get("trigger") else None,
                )
            )
        self.foreign_families = tuple(fams)
        # cheap trigger: the literal start of each family's pattern (everything before its first `.*?`)
        self.foreign_any = re.compile("|".join(f"(?:{f.pattern.pattern.split('.*?')[0]})" for f in fams)) if fams else None
        self.body_patterns = tuple(
            (str(b["id"]), compile_regex(b["pattern"], "formats/foreign.yaml body_patterns", re.DOTALL))
            for b in foreign.get("body_patterns") or []
        )
        inv = foreign.get("invented_tags") or {}
        name_pat = inv.get("name_pattern") or r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+"
        self.invented_re = compile_regex(rf"<({name_pat})>(.*?)</\1>", "formats/foreign.yaml invented_tags", re.DOTALL)
        self.invented_allowed = frozenset(str(t) for t in inv.get("allowed") or ())

        g = load_rule_file("formats/garbling.yaml", dirs) or {}
        self.valid_name_re = compile_regex(g.get("valid_name") or r"[A-Za-z0-9_.:\-]{1,64}", "formats/garbling.yaml")
        ident = g.get("identifier_chars") or r"A-Za-z0-9_.:\-"
        self.non_ident_re = compile_regex(f"[^{ident}]", "formats/garbling.yaml")
        self.junk_affix_re = compile_regex(
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

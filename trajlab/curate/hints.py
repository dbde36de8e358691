"""Hint templates (``rules/hints.yaml``) and the hint samples built from them.

A *hint* sample teaches from a prompt group that went wrong: some rollouts of the prompt were malformed or
scored low, and at least one was a positive. The sample is that positive trajectory with a hint appended to
its system prompt; the hint is chosen for the category the group got wrong most often and is filled with the
declared tool names, the call template of the format and the category's description from the taxonomy.

Templates use ``{identifier}`` placeholders only (substituted by a regex, never ``str.format``), so JSON
examples in them need no escaping and a user pack cannot reach Python attributes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from trajlab.curate.conversation import Message
from trajlab.curate.options import PoolOptions
from trajlab.curate.samples import Sample
from trajlab.curate.scan_tables import ScanTables, parse_tools
from trajlab.errors import TrajlabError
from trajlab.rulepacks import load_rule_file

_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
LOW_SCORE = "low_score"
#: the hint of a prompt that declares no tools (a tool-less task): about the answer's structure, never about calls
NEUTRAL_HINTS: dict[str, str] = {
    "unbalanced_think": "Close your reasoning with </think> exactly once, then write the final answer after it.",
    "unclosed_think": "Close your reasoning with </think> exactly once, then write the final answer after it.",
}
NEUTRAL_DEFAULT = ("Earlier attempts at this task fell short. Follow the output format the task asks for exactly "
                   "and finish with a complete final answer.")


def neutral_hint(category: str) -> str:
    """The format-neutral hint for ``category`` (:data:`NEUTRAL_HINTS`, else :data:`NEUTRAL_DEFAULT`)."""
    return NEUTRAL_HINTS.get(category, NEUTRAL_DEFAULT)


def fill(template: str, params: dict[str, Any]) -> str:
    """Replace ``{name}`` placeholders present in ``params``; other braces are left untouched."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        return str(params[key]) if key in params else m.group(0)

    return _PLACEHOLDER.sub(sub, template)


@dataclass
class HintRules:
    """The parsed ``hints.yaml`` (built-in merged with user packs)."""

    call_templates: dict[str, str]
    feedback_role: str
    feedback_template: str
    problem_line: str
    hint_separator: str
    hint_default: str
    hint_low_score: str
    hint_by_category: dict[str, str]
    ood: dict[str, Any] = field(default_factory=dict)
    hint_by_format: dict[str, dict[str, str]] = field(default_factory=dict)  # format -> category -> template
    taxonomy: dict[str, dict[str, Any]] = field(default_factory=dict)

    def call_template(self, tool_format: str | None, tools: Iterable[dict[str, Any]] | None, name: str | None = None) -> str:
        """The format's call template filled with ``name`` (or the first declared tool) and a required parameter."""
        fmt = tool_format if tool_format in self.call_templates else next(iter(self.call_templates), None)
        if fmt is None:
            return ""
        tools = list(tools or ())
        tool = next((t for t in tools if t.get("name") == name), None) or (tools[0] if tools and not name else None)
        tname = name or (tool.get("name") if tool else None) or "TOOL_NAME"
        param = "PARAMETER_NAME"
        if tool:
            schema = tool.get("parameters") or {}
            req = [p for p in schema.get("required") or [] if isinstance(p, str)]
            props = [p for p in (schema.get("properties") or {}) if isinstance(p, str)]
            param = (req or props or [param])[0]
        return fill(self.call_templates[fmt], {"name": tname, "param": param, "value": "VALUE"})

    def description(self, category: str) -> str:
        if category == LOW_SCORE:
            return "the rollouts of this prompt scored low"
        entry = self.taxonomy.get(category) or {}
        return str(entry.get("description") or category.replace("_", " "))

    def hint_text(self, category: str, params: dict[str, Any]) -> str:
        if category == LOW_SCORE:
            tpl = self.hint_low_score
        else:
            own = self.hint_by_format.get(str(params.get("tool_format") or "")) or {}
            tpl = own.get(category) or self.hint_by_category.get(category, self.hint_default)
        return fill(tpl, params).strip()


def _str(d: dict[str, Any], key: str, where: str) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v.strip():
        raise TrajlabError(f"hints.yaml: `{where}{key}` must be a non-empty string")
    return v


def load_hint_rules(rules_dirs: tuple[str, ...] = ()) -> HintRules:
    """Load ``rules/hints.yaml`` merged with user packs, and the classifier's taxonomy (for descriptions)."""
    data = load_rule_file("hints.yaml", rules_dirs)
    if not isinstance(data, dict):
        raise TrajlabError("hints.yaml: expected a mapping at the top level")
    ct = data.get("call_templates")
    if not isinstance(ct, dict) or not ct or not all(isinstance(v, str) for v in ct.values()):
        raise TrajlabError("hints.yaml: `call_templates` must map each format to a template string")
    fb = data.get("error_feedback") or {}
    hints = data.get("hints") or {}
    if not isinstance(fb, dict) or not isinstance(hints, dict):
        raise TrajlabError("hints.yaml: `error_feedback` and `hints` must be mappings")
    role = str(fb.get("role") or "user")
    if role not in ("user", "tool"):
        raise TrajlabError(
            f"hints.yaml: error_feedback.role {role!r} must be 'user' or 'tool'",
            hint="the broken call must never be in an assistant message: verl trains every assistant message",
        )
    by_cat = hints.get("by_category") or {}
    if not isinstance(by_cat, dict):
        raise TrajlabError("hints.yaml: `hints.by_category` must map category ids to template strings")
    return HintRules(
        call_templates={str(k): v for k, v in ct.items()},
        feedback_role=role,
        feedback_template=_str(fb, "template", "error_feedback."),
        problem_line=_str(fb, "problem_line", "error_feedback."),
        hint_separator=str(hints.get("separator", "\n\n")),
        hint_default=_str(hints, "default", "hints."),
        hint_low_score=_str(hints, "low_score", "hints."),
        hint_by_category={str(k): str(v) for k, v in by_cat.items()},
        ood=data.get("ood") or {},
        hint_by_format=_by_format(hints.get("by_format")),
        taxonomy=_taxonomy(rules_dirs),
    )


def _by_format(spec: Any) -> dict[str, dict[str, str]]:
    if spec is None:
        return {}
    if not isinstance(spec, dict) or not all(isinstance(v, dict) for v in spec.values()):
        raise TrajlabError("hints.yaml: `hints.by_format` must map each format to {category: template}")
    return {str(f): {str(k): str(v) for k, v in cats.items()} for f, cats in spec.items()}


def _taxonomy(rules_dirs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    from trajlab.toolcalls import load_taxonomy

    try:
        tax = load_taxonomy(rules_dirs)
    except TrajlabError:
        raise
    except Exception:
        return {}
    return dict(tax) if isinstance(tax, dict) else {}


def tool_names(tools: Iterable[dict[str, Any]] | None) -> str:
    names = [str(t.get("name")) for t in tools or () if t.get("name")]
    return ", ".join(names) if names else "(no tools declared in the prompt)"


def with_hint(messages: list[Message], hint: str, separator: str) -> list[Message]:
    """A copy of ``messages`` whose system prompt ends with ``hint`` (a system message is added if missing)."""
    out = [Message(m.role, m.content, m.text, m.tool_calls, m.turn_index) for m in messages]
    if out and out[0].role == "system":
        out[0].content = out[0].content + separator + hint
    else:
        out.insert(0, Message("system", hint))
    return out


@dataclass
class HintResult:
    samples: list[Sample]
    stats: dict[str, int] = field(default_factory=dict)


def group_failures(tables: ScanTables, scored: pl.DataFrame) -> dict[str, str]:
    """For each group with a failed rollout: the category it got wrong most often (``low_score`` if none).

    ``scored`` is the light trajectory frame with ``score_failed`` (see ``select_positive.score_flags``).
    Ties between categories are broken by name so the choice is deterministic.
    """
    bad = tables.bad_findings.join(scored.select("trajectory_id", "group_id"), on="trajectory_id", how="inner")
    counts: dict[str, Counter[str]] = {}
    for gid, cat in bad.select("group_id", "category").iter_rows():
        counts.setdefault(gid, Counter())[cat] += 1
    malformed = scored.filter(pl.col("n_malformed_calls") > 0)["group_id"].unique().to_list()
    low = scored.filter(pl.col("score_failed"))["group_id"].unique().to_list()
    out: dict[str, str] = {}
    for gid in set(counts) | set(malformed) | set(low):
        c = counts.get(gid)
        if c:
            out[gid] = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        else:
            out[gid] = LOW_SCORE
    return out


def build_hints(
    tables: ScanTables,
    opts: PoolOptions,
    rules: HintRules,
    positives_by_group: dict[str, list[Sample]],
    scored: pl.DataFrame,
    *,
    fits: Callable[[Sample], bool] | None = None,
) -> HintResult:
    """One hint sample per kept positive of every group that also has failed rollouts."""
    failures = group_failures(tables, scored)
    out: list[Sample] = []
    too_long = 0
    for gid in sorted(failures):
        pos = positives_by_group.get(gid)
        if not pos:
            continue
        cat = failures[gid]
        for p in pos:
            tools = parse_tools(p.tools_json)
            params = {
                "tool_names": tool_names(tools),
                "tool_format": p.tool_format or "none",
                "call_template": rules.call_template(p.tool_format, tools),
                "category": cat,
                "category_description": rules.description(cat),
            }
            # a prompt that declares no tools gets no tool-call teaching ("call only the declared tools", a call
            # template): a hint about the answer's structure instead
            text = rules.hint_text(cat, params) if tools else neutral_hint(cat)
            s = Sample(
                kind="hint",
                trajectory_id=p.trajectory_id,
                step=p.step,
                group_id=gid,
                prompt_key=p.prompt_key,
                tool_format=p.tool_format,
                enable_thinking=p.enable_thinking,
                messages=with_hint(p.messages, text, rules.hint_separator),
                categories=[cat],
                hint_id=cat,
                score=p.score,
                rank=p.rank,
                tools_json=p.tools_json,
            )
            if fits is not None and not fits(s):
                too_long += 1
                continue
            out.append(s)
    stats = {
        "groups_with_failures": len(failures),
        "groups_with_failures_and_positive": sum(1 for g in failures if positives_by_group.get(g)),
        "too_long": too_long,
        "tool_less": sum(1 for s in out if not parse_tools(s.tools_json)),
        "kept": len(out),
    }
    return HintResult(out, stats)

"""Match a written function (or parameter) name against the declared ones: exact, garbled, or unknown.

The heuristics and their thresholds are data (``rules/formats/garbling.yaml``); see that file for the order
they are tried in. Results are cached per (name, declared names, rule set) because the same garbled name
tends to recur thousands of times in one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from trajlab.toolcalls.ruleset import RuleSet


@dataclass(frozen=True)
class NameMatch:
    kind: str  # exact | garbled | ambiguous | unknown | valid_no_schema | invalid_no_schema
    nearest: str | None = None
    how: str = ""  # human phrase for messages ("with the extra suffix `英文明确`")
    variant: str = ""  # garbled_function_name variant
    candidates: tuple[str, ...] = ()


def _distance(a: str, b: str, cap: int) -> int:
    """Optimal-string-alignment distance (Damerau-Levenshtein with adjacent swaps), stopping past ``cap``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        best = cur[0]
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
            best = min(best, v)
        if best > cap:
            return cap + 1
        prev2, prev = prev, cur
    return prev[len(b)]


def _is_junk(affix: str, rs: RuleSet) -> bool:
    return bool(
        rs.non_ident_re.search(affix) or rs.junk_affix_re.fullmatch(affix) or len(affix) <= rs.max_short_junk
    )


def _script_phrase(junk: str) -> str:
    if any(ord(c) > 0x2E7F for c in junk):
        return "mixed scripts"
    return "junk characters"


def _pick(cands: list[str]) -> list[str]:
    """Prefer the longest declared names (search_web over search for `search_web英文`)."""
    if not cands:
        return cands
    m = max(len(c) for c in cands)
    return sorted({c for c in cands if len(c) == m})


@lru_cache(maxsize=8192)
def _match(written: str, declared: tuple[str, ...], rs: RuleSet) -> NameMatch:
    if written in declared:
        return NameMatch("exact", written)
    # 1. normalisation: whitespace, quotes, case, '-' vs '_'
    trimmed = written.strip(rs.trim_chars)

    def norm(s: str) -> str:
        return s.strip(rs.trim_chars).casefold().replace("-", "_")

    n = norm(written)
    cands = [d for d in declared if norm(d) == n] if n else []
    if len(cands) == 1:
        return NameMatch("garbled", cands[0], "written with different case, quotes or spacing", "normalisation")
    if len(cands) > 1:
        return NameMatch("ambiguous", None, "", "ambiguous", tuple(sorted(cands)))
    # 2. junk suffix / 3. junk prefix (on the trimmed name)
    suff = _pick([d for d in declared if len(trimmed) > len(d) and trimmed.startswith(d)
                  and _is_junk(trimmed[len(d):], rs)])
    if len(suff) == 1:
        junk = trimmed[len(suff[0]):]
        variant = "mixed_script" if any(ord(c) > 0x2E7F for c in junk) else "junk_suffix"
        return NameMatch("garbled", suff[0], f"with the extra suffix `{junk}` ({_script_phrase(junk)})", variant)
    pref = _pick([d for d in declared if len(trimmed) > len(d) and trimmed.endswith(d)
                  and _is_junk(trimmed[: len(trimmed) - len(d)], rs)])
    if len(suff) > 1 or len(pref) > 1:
        return NameMatch("ambiguous", None, "", "ambiguous", tuple(sorted(set(suff) | set(pref))))
    if len(pref) == 1:
        junk = trimmed[: len(trimmed) - len(pref[0])]
        variant = "mixed_script" if any(ord(c) > 0x2E7F for c in junk) else "junk_prefix"
        return NameMatch("garbled", pref[0], f"with the extra prefix `{junk}` ({_script_phrase(junk)})", variant)
    # 4. mixed scripts: drop everything that cannot be part of a name
    stripped = rs.non_ident_re.sub("", trimmed)
    if stripped != trimmed and stripped:
        cands = [d for d in declared if d == stripped]
        if len(cands) == 1:
            return NameMatch("garbled", cands[0], "with characters of another script mixed in", "mixed_script")
    # 5. small edit distance
    best: list[str] = []
    best_d = 10**9
    for d in declared:
        cap = next((e for m, e in rs.edit_rules if len(d) >= m), -1)
        if cap < 0:
            continue
        dist = _distance(trimmed, d, cap)
        if dist <= cap:
            if dist < best_d:
                best, best_d = [d], dist
            elif dist == best_d:
                best.append(d)
    if len(best) == 1:
        return NameMatch("garbled", best[0], f"misspelt ({best_d} edit{'s' if best_d > 1 else ''} away)", "edit_distance")
    if len(best) > 1:
        return NameMatch("ambiguous", None, "", "ambiguous", tuple(sorted(best)))
    return NameMatch("unknown")


def match_name(written: str, declared: tuple[str, ...] | None, rs: RuleSet) -> NameMatch:
    """Resolve ``written`` against ``declared`` (``None`` = no schema: only a plausibility check)."""
    if declared is None:
        if rs.valid_name_re.fullmatch(written):
            return NameMatch("valid_no_schema")
        clean = rs.non_ident_re.sub("", written.strip(rs.trim_chars))
        if clean and rs.valid_name_re.fullmatch(clean) and clean != written:
            # the name is an identifier plus junk (e.g. `search_web英文明确`): the identifier is the only reading
            junk = written.replace(clean, "", 1) if clean in written else written
            return NameMatch(
                "invalid_no_schema", clean, f"with `{junk.strip()}` attached ({_script_phrase(junk)})", "invalid_chars"
            )
        return NameMatch("invalid_no_schema", None, "with characters no tool name contains", "invalid_chars")
    return _match(written, declared, rs)

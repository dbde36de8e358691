"""Calls written in another model family's markup (``foreign_format``) and invented tags (``invented_tag``).

The families and their regexes are data (``rules/formats/foreign.yaml``: one entry per family's markup, from
``<function_calls><invoke name=..>`` to llama's python tag; no family is named here). Each match becomes a
``foreign`` call; when the family's regexes recover the name and parameters, the call can be re-rendered in
the trajectory's own format as a repair.
"""

from __future__ import annotations

from trajlab.toolcalls.draft import CallDraft, ParamDraft
from trajlab.toolcalls.ruleset import RuleSet


def find_foreign(text: str, lo: int, hi: int, rs: RuleSet, skip: tuple[str, ...] = ()) -> list[CallDraft]:
    """Foreign call blocks in ``text[lo:hi]``, in text order (one regex search per family).

    ``skip``: family ids that are the trajectory's own format (``rules/formats/<name>.yaml`` ``foreign_families``).
    """
    if rs.foreign_any is None:
        return []
    if not rs.foreign_untriggered and not any(text.find(t, lo, hi) >= 0 for t in rs.foreign_literals):
        return []
    if not rs.foreign_any.search(text, lo, hi):
        return []
    found: list[CallDraft] = []
    for fam in rs.foreign_families:
        if fam.id in skip:
            continue
        for m in fam.pattern.finditer(text, lo, hi):
            s, e = m.span()
            if e <= s or (found and any(d.start <= s < d.end for d in found[-8:])):
                continue
            d = CallDraft("foreign", s, e, family=fam.id)
            pos = s
            if fam.name is not None:
                nm = fam.name.search(text, s, e)
                if nm:
                    d.name, d.name_start, d.name_end = nm.group(1), nm.start(1), nm.end(1)
                    d.span("structural", s, nm.start(1))
                    d.span("function_name", nm.start(1), nm.end(1))
                    pos = nm.end(1)
            params_ok = False
            if fam.params is not None:
                params_ok = True
                for pm in fam.params.finditer(text, pos, e):
                    d.span("structural", pos, pm.start(1))
                    d.span("param_name", pm.start(1), pm.end(1))
                    d.span("structural", pm.end(1), pm.start(2))
                    d.span("param_value", pm.start(2), pm.end(2))
                    d.params.append(ParamDraft(pm.group(1), pm.start(1), pm.end(1), pm.group(2), None,
                                               pm.start(2), pm.end(2)))
                    pos = pm.end(2)
            d.span("structural", pos, e)
            blocker = None
            if d.name is None:
                blocker = f"the {fam.id} markup does not show a function name trajlab can read"
            elif not params_ok:
                blocker = f"trajlab cannot read the arguments of {fam.id} markup"
            d.add("foreign_format", "markup", s, e, family=fam.id, blocker=blocker)
            d.rerender = True
            found.append(d)
    found.sort(key=lambda d: d.start)
    return found

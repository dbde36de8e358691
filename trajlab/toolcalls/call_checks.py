"""Schema checks of one call: its function name and its parameters (declared, duplicated, typed, required).

Also the call's arguments (:func:`call_arguments`: the decoded JSON object, or each raw XML value read as the
schema means it), which the checks, the verdict and the repair share.
"""

from __future__ import annotations

from typing import Any

from trajlab.toolcalls.draft import MISSING, CallDraft, Edit, snip
from trajlab.toolcalls.formats import FORMATS, JSON_ARGUMENT_FORMATS, TEXT_INPUT_FORMATS
from trajlab.toolcalls.names import match_name
from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.type_checks import check_json_value, check_xml_value, intended_value


def check_name(d: CallDraft, index: ToolIndex | None, rs: RuleSet) -> tuple[str | None, str | None]:
    """Resolve the written name; returns (declared tool it resolves to, name to use in a repair)."""
    if d.name is None:
        return None, None
    s, e = (d.name_start, d.name_end) if d.name_start >= 0 else (d.start, d.end)
    declared = index.names if index is not None else None
    if d.name == "" or not d.name.strip():
        d.add("unknown_function", "empty_name", s, e, name=d.name, declared=_list(declared),
              blocker="the call has no function name")
        return None, None
    if index is not None and d.name in index.tools:
        return d.name, d.name  # what match_name answers for a declared name ("exact"), without its cache lookup
    nm = match_name(d.name, declared, rs)
    if nm.kind == "exact":
        return d.name, d.name
    rename = [Edit(s, e, nm.nearest or "", f"renamed `{d.name}` to `{nm.nearest}`")] if d.name_start >= 0 else []
    if nm.kind == "valid_no_schema":
        return None, d.name
    if nm.kind == "garbled":
        d.add("garbled_function_name", nm.variant, s, e, name=d.name, nearest=nm.nearest, how=nm.how, edits=rename)
        d.add("unknown_function", "undeclared", s, e, name=d.name, declared=_list(declared), _covered=True)
        if not rename:
            d.rerender = True
        return nm.nearest, nm.nearest
    if nm.kind == "ambiguous":
        d.add("garbled_function_name", "ambiguous", s, e, name=d.name, nearest=" or ".join(nm.candidates),
              how="with junk attached", candidates=", ".join(nm.candidates),
              blocker=f"`{d.name}` is equally near {', '.join(nm.candidates)}")
        d.add("unknown_function", "undeclared", s, e, name=d.name, declared=_list(declared))
        return None, None
    if nm.kind == "invalid_no_schema":
        if nm.nearest:
            d.add("garbled_function_name", "invalid_chars", s, e, name=d.name, nearest=nm.nearest, how=nm.how,
                  reading=f"reads as the tool name `{nm.nearest}` {nm.how} (the clean part is taken as the name meant)",
                  edits=rename)
            if not rename:
                d.rerender = True
            return None, nm.nearest
        d.add("garbled_function_name", "invalid_chars", s, e, name=d.name, nearest="?", how=nm.how,
              reading="holds characters no tool name contains, and no clean tool name can be read from it",
              blocker=f"no clean tool name can be read from `{d.name}`")
        return None, None
    d.add("unknown_function", "undeclared", s, e, name=d.name, declared=_list(declared),
          blocker=f"no declared tool is near `{d.name}`")
    return None, None


def _list(names: tuple[str, ...] | None, limit: int = 12) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f", … ({len(names)} in all)" if len(names) > limit else "")


def call_arguments(d: CallDraft, props: dict[str, Any], required: tuple[str, ...] = ()) -> Any:
    if d.json_args is MISSING and (d.fmt == "hermes" or d.fmt in JSON_ARGUMENT_FORMATS):
        return None  # the JSON did not decode: no arguments
    if d.json_args is not MISSING:
        a = d.json_args
        if isinstance(a, str) and d.fmt in TEXT_INPUT_FORMATS:  # (react: a plain-text Action Input)
            return FORMATS[d.fmt].text_arguments(a, props, required)
        if isinstance(a, dict) and d.coerce_strings and props:
            return {k: (intended_value(v, k, props) if isinstance(v, str) else v) for k, v in a.items()}
        return a if a is not MISSING else None
    out: dict[str, Any] = {}
    fobj = FORMATS.get(d.fmt)
    for p in d.params:
        if p.raw is not None:
            out[p.name] = intended_value(p.raw, p.name, props)
        elif p.written is not None and fobj is not None and p.name in props:
            out[p.name] = fobj.intended(p.written, p.value, props[p.name])  # (glm: a string as written)
        else:
            out[p.name] = p.value
    return out


def check_params(d: CallDraft, tool: Any, rs: RuleSet, args: Any) -> dict[str, str]:
    """Schema checks of the parameters; returns garbled parameter renames {written: declared}."""
    props = tool.intended
    fs, fe = (d.name_start, d.name_end) if d.name_start >= 0 else (d.start, d.end)
    renames: dict[str, str] = {}
    if not isinstance(args, dict) and not d.params:
        if isinstance(args, str) and d.fmt in TEXT_INPUT_FORMATS and (tool.required or len(props) > 1):
            # a plain-text input to a tool whose schema does not say which parameter it fills
            d.add("invalid_arguments", "text_input", d.start, d.end, problem="gives a plain-text input",
                  function=tool.name, declared=_list(tuple(props)),
                  blocker="which parameter the text was meant for is a guess")
        return renames
    seen: dict[str, list[Any]] = {}
    for p in d.params:
        occ = seen.get(p.name)
        if occ is None:
            seen[p.name] = [p]
        else:
            occ.append(p)
    present = set(seen) if d.params else set(args if isinstance(args, dict) else ())
    for name, occ in seen.items():
        p0 = occ[0]
        ps, pe = (p0.name_start, p0.name_end) if p0.name_start >= 0 else (d.start, d.end)
        if len(occ) > 1:
            vals = [p.raw if p.raw is not None else repr(p.value) for p in occ]
            same = all(v == vals[0] for v in vals)
            d.add("duplicate_parameter", "same_value" if same else "different_values", ps, pe, name=name,
                  count=len(occ), blocker=None if same else f"`{name}` has {len(occ)} different values: which one "
                  "was meant is a guess")
            if same:
                d.rerender = True  # the re-rendered call keeps one copy
        if name not in props:
            if tool.open_properties:
                continue
            free = tuple(k for k in props if k not in present)
            nm = match_name(name, free, rs) if free else None
            if nm is not None and nm.kind == "garbled" and nm.nearest:
                renames[name] = nm.nearest
                edits = [Edit(q.name_start, q.name_end, nm.nearest, f"renamed parameter `{name}` to `{nm.nearest}`")
                         for q in occ if q.name_start >= 0]
                if len(edits) < len(occ):
                    d.rerender = True
                d.add("unknown_parameter", "garbled", ps, pe, name=name, function=tool.name,
                      declared=_list(tuple(props)), nearest=nm.nearest, edits=edits)
            else:
                d.add("unknown_parameter", "undeclared", ps, pe, name=name, function=tool.name,
                      declared=_list(tuple(props)),
                      blocker=f"which declared parameter `{name}` stands for (if any) is a guess")
            continue
        prop = props[name]
        last = occ[-1]
        if last.raw is not None:
            # (a parameter declared only behind a top-level `$ref` is undeclared to verl: no type, the raw text)
            tc = check_xml_value(last.raw, prop, verl_prop=tool.properties.get(name, {}))
            if tc.ok and not tc.divergence:
                continue  # the common case: nothing to report
            shown = last.raw
        else:
            val = last.value
            fobj = FORMATS.get(d.fmt) if last.written is not None else None  # (a format's own value check first)
            tc = fobj.check_value(last.written, val, prop) if fobj is not None else None
            if tc is not None:
                pass
            elif d.coerce_strings and isinstance(val, str):
                tc = check_xml_value(val, prop)
            else:
                tc = check_json_value(val, prop)
            shown = val if isinstance(val, str) else repr(val)
        vs, ve = (last.value_start, last.value_end) if last.value_start >= 0 else (ps, pe)
        if not tc.ok:
            d.add("type_mismatch", tc.variant, vs, ve, name=name, expected=tc.expected, value=snip(str(shown), 40),
                  verl=snip(repr(tc.verl), 40), allowed=tc.allowed,
                  blocker=f"the intended value of `{name}` is unknown")
        elif tc.divergence:
            d.add("verl_conversion_divergence", tc.variant, vs, ve, name=name, expected=tc.expected,
                  value=snip(str(shown), 40), verl=snip(repr(tc.verl), 40))
    covered = present | set(renames.values()) if renames else present
    for r in tool.required:
        if r not in covered:
            d.add("missing_required_parameter", "missing", fs, fe, name=r, function=tool.name,
                  blocker=f"the value of the required `{r}` is unknown")
    return renames

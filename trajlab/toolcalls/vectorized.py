"""The classifier's verdict for whole columns of turns: canonical, well-formed turns recognised with polars.

In a healthy run almost every assistant turn is either plain text (a final answer, reasoning) or a think
block, a little text and calls written exactly as the chat template renders them. For those turns the
per-turn classifier (:func:`trajlab.toolcalls.analyze_turn`) ends with no finding, calls that are all ``ok``
and arguments converted as verl converts them. :func:`classify_canonical` reaches the same result for a
whole frame of turns at once -- regexes, joins and string expressions over columns, no Python per turn --
and leaves every other turn to the per-turn classifier. It accepts a turn only when it is certain:

* a turn **without calls** contains no call literal (``<tool_call``, ``<function``, ``"name``, ...), no
  foreign-format trigger, no ``<x_y>`` element (the invented-tag check) and no unclosed ``<think>``;
* a turn **with calls** (``qwen3_coder`` or ``hermes``, tool schemas known) is text without ``<`` around at
  most one think block, then canonical calls separated by whitespace and nothing after them; outside the
  calls there is no call literal and nowhere a foreign trigger; every call names a declared tool; every
  parameter is declared, given once, of a type the recogniser knows (strings without enum, integers, numbers
  written as integers, booleans, arrays of plain strings / integers) and its value fits that type exactly
  as verl would convert it; every required parameter is present.

Only the built-in rule pack is covered (user packs may add regex rules or change the literals); with user
packs every turn goes to the per-turn classifier. ``tests/test_vectorized.py`` checks the equivalence on the
sample data, the corpus and generated turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from trajlab.toolcalls.ruleset import RuleSet
from trajlab.toolcalls.schema import ToolIndex
from trajlab.toolcalls.verl_conversion import conversion_kind as verl_kind
from trajlab.toolcalls.verl_conversion import verl_type

_NAME = r"[A-Za-z0-9_.\-]{1,64}"
_WS = r"[ \t\r\n]*"
# text before the calls: no `<` at all, around at most one think block (opened by the turn or by the prompt)
_PRE = r"[^<]*(?:(?:<think>)?[^<]*</think>[^<]*)?"

_XML_PARAM = rf"<parameter={_NAME}>\n[^<]*\n</parameter>\n"
XML_CALL = rf"<tool_call>\n<function={_NAME}>\n(?:{_XML_PARAM})*</function>\n</tool_call>"

_STR = r'"[^"\\\x00-\x1f<]*"'  # a JSON string that json.dumps writes back unchanged (and holds no tag)
_INT = r"(?:0|-?[1-9][0-9]{0,14})"  # no "-0" (it comes back as 0); at most 15 digits: exact through float()
_ITEM = rf"(?:{_STR}|{_INT})"
_ARR = rf"\[(?:{_ITEM}(?:, {_ITEM})*)?\]"
_VAL = rf"(?:{_STR}|{_INT}|true|false|{_ARR})"
_ARGS = rf'\{{(?:"{_NAME}": {_VAL}(?:, "{_NAME}": {_VAL})*)?\}}'
HERMES_CALL = rf'<tool_call>\n\{{"name": "{_NAME}", "arguments": {_ARGS}\}}\n</tool_call>'

_CALL = {"qwen3_coder": XML_CALL, "hermes": HERMES_CALL}
_TURN = {f: rf"^{_PRE}(?:{c}{_WS})+$" for f, c in _CALL.items()}

#: value patterns by kind; XML values are raw text, hermes values JSON texts
_KIND_RE = {
    "string": None,  # any raw text (XML); hermes strings use _STR
    "int": rf"^{_INT}$",
    "numint": rf"^{_INT}$",
    "bool": r"^(?:true|false)$",
    "array": rf"^{_ARR}$",
}
_JSON_KINDS = {"string": "string", "integer": "int", "number": "numint", "boolean": "bool", "array": "array"}


def _json_string(expr: pl.Expr) -> pl.Expr:
    from trajlab.ingest.verl_columnar import json_string

    return json_string(expr)


@dataclass
class CanonicalResult:
    """Turns :func:`classify_canonical` vouches for, and their calls."""

    accepted: pl.Series  # tkey of every accepted turn
    calls: pl.DataFrame  # tkey, call_index, format, raw, start, end, function_name, matched_tool, arguments


def available(rs: RuleSet, rules_dirs: tuple[str, ...]) -> bool:
    """Whether the recogniser applies: built-in rules only, no regex rules, every foreign family triggered."""
    return not rules_dirs and not rs.regex_rules and not rs.foreign_untriggered


#: verl's conversion branch (``verl_conversion.conversion_kind``) -> the recogniser's value kind (None: not covered)
_XML_KINDS = {"string": "string", "int": "int", "num": "numint", "bool": "bool", "array": "array"}


#: schema keywords that make a property's reading depend on more than its ``type`` (the per-turn classifier checks
#: them: anyOf / oneOf branches, ``$ref``, ``nullable``, ``const``)
_BRANCHY = ("anyOf", "oneOf", "allOf", "$ref", "nullable", "const")


def _branchy(prop: Any) -> bool:
    return isinstance(prop, dict) and any(k in prop for k in _BRANCHY)


def _xml_kind(prop: Any) -> str | None:
    """How verl converts an XML value of this property, when the recogniser covers it (else None)."""
    if isinstance(prop, dict) and ("enum" in prop or "type" in prop and not isinstance(prop["type"], str)):
        return None
    if _branchy(prop):
        return None
    return _XML_KINDS.get(verl_kind(verl_type(prop)))


def _json_kind(prop: Any) -> str | None:
    """Which JSON values fit this property for :func:`~.type_checks.check_json_value` (None: not covered)."""
    if not isinstance(prop, dict):
        return "any"
    if "enum" in prop or _branchy(prop):
        return None
    t = prop.get("type")
    types = [t] if isinstance(t, str) else ([x for x in t if x != "null"] if isinstance(t, list) else None)
    if not types:
        return "any" if t is None else None
    if len(types) != 1 or not isinstance(types[0], str):
        return None
    ty = types[0].lower()
    if ty in ("object",):
        return None
    return _JSON_KINDS.get(ty, "any" if ty not in ("null",) else None)


def schema_frames(tool_sets: list[list[dict[str, Any]]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(tools: tools_id, function_name, n_required) and (params: tools_id, function_name, pname, xml_kind,
    json_kind, required) for each tool set, read through :class:`~.schema.ToolIndex` like the classifier."""
    tools_rows: list[tuple[int, str, int]] = []
    param_rows: list[tuple[int, str, str, str | None, str | None, bool]] = []
    for tid, tools in enumerate(tool_sets):
        idx = ToolIndex(tools)
        for name, info in idx.tools.items():
            req = set(info.required)
            tools_rows.append((tid, name, len(req)))
            for p, prop in info.properties.items():
                param_rows.append((tid, name, str(p), _xml_kind(prop), _json_kind(prop), p in req))
    tools_df = pl.DataFrame(tools_rows, schema={"tools_id": pl.Int32, "function_name": pl.String,
                                                "n_required": pl.Int64}, orient="row")
    params_df = pl.DataFrame(param_rows, schema={"tools_id": pl.Int32, "function_name": pl.String,
                                                 "pname": pl.String, "xml_kind": pl.String,
                                                 "json_kind": pl.String, "required": pl.Boolean}, orient="row")
    return tools_df, params_df


def classify_canonical(turns: pl.DataFrame, tool_sets: list[list[dict[str, Any]]], rs: RuleSet) -> CanonicalResult:
    """Recognise canonical, well-formed turns in ``turns`` (columns ``tkey``, ``text``, ``fmt``, ``tools_id``).

    ``fmt`` is the trajectory's call format, ``tools_id`` indexes ``tool_sets`` (null: no schema known).
    Turns not accepted must go through :func:`~trajlab.toolcalls.analyze_turn`.
    """
    foreign = list(rs.foreign_literals)
    literals = [*rs.call_literals, *foreign]
    # -- turns without calls ---------------------------------------------------------------------------
    plain = turns.filter(
        ~pl.col("text").str.contains_any(literals)
        & ~pl.col("text").str.contains(rs.invented_quick.pattern)
        # an unclosed <think>: one after the last </think>
        & ~pl.col("text").str.split("</think>").list.last().str.contains("<think>", literal=True)
    )["tkey"]

    # -- turns with canonical calls ----------------------------------------------------------------------
    accepted = [plain]
    call_frames = []
    tools_df, params_df = schema_frames(tool_sets)
    for fmt, turn_re in _TURN.items():
        cand = turns.filter(
            (pl.col("fmt") == fmt)
            & pl.col("tools_id").is_not_null()
            & pl.col("text").str.contains("<tool_call>", literal=True)
        )
        if cand.is_empty():
            continue
        cand = cand.filter(
            pl.col("text").str.contains(turn_re)
            & (~pl.col("text").str.contains_any(foreign) if foreign else pl.lit(True))
            & ~pl.col("text").str.replace_all(_CALL[fmt], "").str.contains_any(list(rs.call_literals))
        )
        if cand.is_empty():
            continue
        calls = _calls_of(cand, fmt)
        ok = _check_xml(calls, tools_df, params_df) if fmt == "qwen3_coder" else _check_hermes(calls, tools_df, params_df)
        good = ok.group_by("tkey").agg(pl.col("ok").all()).filter(pl.col("ok"))["tkey"]
        accepted.append(good)
        call_frames.append(
            calls.join(ok.select("tkey", "call_index", "arguments"), on=["tkey", "call_index"], how="inner")
            .filter(pl.col("tkey").is_in(good.implode()))
            .select("tkey", "call_index", pl.lit(fmt).alias("format"), "raw", "start", "end", "function_name",
                    pl.col("function_name").alias("matched_tool"), "arguments")
        )
    empty_calls = pl.DataFrame(schema={"tkey": turns.schema["tkey"], "call_index": pl.Int32, "format": pl.String,
                                       "raw": pl.String, "start": pl.Int64, "end": pl.Int64,
                                       "function_name": pl.String, "matched_tool": pl.String,
                                       "arguments": pl.String})
    return CanonicalResult(
        accepted=pl.concat(accepted).unique(maintain_order=True),
        calls=pl.concat([empty_calls, *call_frames], how="vertical_relaxed") if call_frames else empty_calls,
    )


def _calls_of(cand: pl.DataFrame, fmt: str) -> pl.DataFrame:
    """One row per call of each candidate turn: raw text, character offsets in the turn, call index.

    In a candidate turn ``<tool_call>`` occurs only where a call starts, so cutting the text there gives the
    prefix and then one piece per call (the call plus the whitespace after it).
    """
    pieces = (
        cand.select("tkey", "tools_id", pl.col("text").str.split("<tool_call>").alias("piece"))
        .explode("piece")
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int32).over("tkey").alias("k"))
        .with_columns((pl.col("piece").str.len_chars() + pl.when(pl.col("k") > 0).then(11).otherwise(0))
                      .cast(pl.Int64).alias("n"))
        .with_columns((pl.col("n").cum_sum().over("tkey") - pl.col("n")).alias("start"))
        .filter(pl.col("k") > 0)
        .with_columns(("<tool_call>" + pl.col("piece").str.strip_chars_end(" \t\r\n")).alias("raw"),
                      (pl.col("k") - 1).alias("call_index"))
        .with_columns((pl.col("start") + pl.col("raw").str.len_chars()).alias("end"))
    )
    if fmt == "qwen3_coder":
        name = pl.col("raw").str.extract(r"^<tool_call>\n<function=([^>\n]*)>", 1)
    else:
        name = pl.col("raw").str.extract(r'^<tool_call>\n\{"name": "([^"]*)"', 1)
    return pieces.select("tkey", "tools_id", "call_index", "raw", "start", "end", name.alias("function_name"))


def _params_xml(calls: pl.DataFrame) -> pl.DataFrame:
    return (
        calls.select("tkey", "call_index", "tools_id", "function_name",
                     pl.col("raw").str.extract_all(rf"<parameter={_NAME}>\n[^<]*\n</parameter>").alias("p"))
        .explode("p")
        .filter(pl.col("p").is_not_null())
        .select("tkey", "call_index", "tools_id", "function_name",
                pl.col("p").str.extract(r"^<parameter=([^>\n]*)>", 1).alias("pname"),
                pl.col("p").str.extract(r"(?s)^<parameter=[^>\n]*>\n(.*)\n</parameter>$", 1).alias("value"))
    )


def _params_hermes(calls: pl.DataFrame) -> pl.DataFrame:
    args = pl.col("raw").str.extract(r'"arguments": (\{.*\})\}\n</tool_call>$', 1)
    return (
        calls.select("tkey", "call_index", "tools_id", "function_name", args.alias("args"))
        .with_columns(pl.col("args").str.extract_all(rf'"{_NAME}": {_VAL}').alias("p"))
        .explode("p")
        .filter(pl.col("p").is_not_null())
        .select("tkey", "call_index", "tools_id", "function_name",
                pl.col("p").str.extract(r'^"([^"]*)": ', 1).alias("pname"),
                pl.col("p").str.extract(r'^"[^"]*": (.*)$', 1).alias("value"))
    )


def _value_ok(kind_col: str, *, xml: bool) -> pl.Expr:
    """Whether ``value`` fits the parameter's kind exactly (no conversion difference from verl)."""
    kind = pl.col(kind_col)
    v = pl.col("value")
    string_ok = (v.str.to_lowercase() != "null") if xml else v.str.contains(rf"^{_STR}$")
    expr = pl.when(kind == "string").then(string_ok)
    for k, pat in _KIND_RE.items():
        if pat is not None:
            expr = expr.when(kind == k).then(v.str.contains(pat))
    if not xml:
        expr = expr.when(kind == "any").then(pl.lit(True))
    return expr.otherwise(pl.lit(False))


def _call_verdicts(calls: pl.DataFrame, params: pl.DataFrame, tools_df: pl.DataFrame, params_df: pl.DataFrame,
                   *, xml: bool) -> pl.DataFrame:
    """Per call: ``ok`` (declared tool, declared params once each, values fit, required present) and the
    arguments JSON (XML: built from the values; hermes: the arguments text, already canonical)."""
    kind_col = "xml_kind" if xml else "json_kind"
    p = params.join(params_df, on=["tools_id", "function_name", "pname"], how="left")
    p = p.with_columns(_value_ok(kind_col, xml=xml).fill_null(False).alias("vok"))
    if xml:
        val_json = pl.when(pl.col("xml_kind") == "string").then(_json_string(pl.col("value"))).otherwise(pl.col("value"))
        p = p.with_columns(pl.concat_str(_json_string(pl.col("pname")), pl.lit(": "), val_json).alias("member"))
    per_call = (
        p.sort(["tkey", "call_index", "pname"])
        .group_by(["tkey", "call_index"], maintain_order=True)
        .agg(
            pl.col("vok").all().alias("vok"),
            (pl.col("pname").n_unique() == pl.len()).alias("unique"),
            pl.col("required").fill_null(False).sum().alias("n_req_present"),
            *([pl.col("member").str.join(", ").alias("members")] if xml else []),
        )
    )
    if not xml:  # hermes: keys must already be in sorted order (the arguments text is stored as is)
        order = params.group_by(["tkey", "call_index"], maintain_order=True).agg(
            (pl.col("pname") == pl.col("pname").sort()).all().alias("in_order"))
        per_call = per_call.join(order, on=["tkey", "call_index"], how="left")
    out = calls.join(tools_df, on=["tools_id", "function_name"], how="left").join(
        per_call, on=["tkey", "call_index"], how="left")
    ok = (
        pl.col("n_required").is_not_null()
        & pl.col("vok").fill_null(True)
        & pl.col("unique").fill_null(True)
        & (pl.col("n_req_present").fill_null(0) == pl.col("n_required"))
    )
    if xml:
        args = pl.lit("{") + pl.col("members").fill_null("") + pl.lit("}")
    else:
        ok = ok & pl.col("in_order").fill_null(True)
        args = pl.col("raw").str.extract(r'"arguments": (\{.*\})\}\n</tool_call>$', 1)
    return out.select("tkey", "call_index", ok.alias("ok"), args.alias("arguments"))


def _check_xml(calls: pl.DataFrame, tools_df: pl.DataFrame, params_df: pl.DataFrame) -> pl.DataFrame:
    return _call_verdicts(calls, _params_xml(calls), tools_df, params_df, xml=True)


def _check_hermes(calls: pl.DataFrame, tools_df: pl.DataFrame, params_df: pl.DataFrame) -> pl.DataFrame:
    return _call_verdicts(calls, _params_hermes(calls), tools_df, params_df, xml=False)

"""Every record of the public corpus (tests/data/corpus/, copied from shared/corpus) is classified as labelled.

The corpus uses its own label names; this is how they map onto trajlab's taxonomy (documented in
the README, section "The classifier"):

| corpus label | trajlab category |
|---|---|
| mixed_formats | format_mismatch |
| invalid_json_arguments | invalid_json or invalid_arguments |
| truncated | truncated_call |
| missing_tool_call_close | missing_call_close |
| other:missing_tool_call_open | missing_call_open |
| other:malformed_parameter_open | malformed_tag (rule variant fused_parameter_open) |
| other:invented_tag_format | invented_tag |
| other:doubled_braces | invalid_json (rule variant doubled_braces) |
| other:arguments_not_nested | invalid_arguments (rule variant flattened) |
| well_formed | no error or warning finding |
| any other label | the category of the same name |

A record is classified "as its labels say" when every label's category is among the turn's findings; extra
findings are allowed only at severity info or when they are the mechanical consequence named in the label set
(e.g. a garbled name is also an unknown function).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trajlab.toolcalls import check_text, detect_tool_format

CORPUS = Path(__file__).parent / "data" / "corpus" / "real_tool_calls.dev.jsonl"

LABEL_MAP: dict[str, tuple[tuple[str, ...], str | None]] = {
    # label -> (accepted categories, required rule-id fragment)
    "mixed_formats": (("format_mismatch",), None),
    "invalid_json_arguments": (("invalid_json", "invalid_arguments"), None),
    "truncated": (("truncated_call",), None),
    "missing_tool_call_close": (("missing_call_close",), None),
    "other:missing_tool_call_open": (("missing_call_open",), None),
    "other:malformed_parameter_open": (("malformed_tag",), "fused_parameter_open"),
    "other:invented_tag_format": (("invented_tag",), None),
    "other:doubled_braces": (("invalid_json",), "doubled_braces"),
    "other:arguments_not_nested": (("invalid_arguments",), "flattened"),
}

# Tool lists the record's note describes but its `tools` field leaves out (documented reconstruction).
EXTRA_TOOLS = {
    # "'create' is not in the request's tool list (only selectFunctions/getApiFunctions were)"
    "ollama-11381-unlisted-tool": [
        {"name": "selectFunctions", "description": "", "parameters": {"type": "object", "properties": {}}},
        {"name": "getApiFunctions", "description": "", "parameters": {"type": "object", "properties": {}}},
    ],
}

FORMAT_OF = {"qwen3_coder_xml": "qwen3_coder", "hermes_json": "hermes"}


def _records() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


RECORDS = _records()


def test_corpus_copy_matches_shared_when_available() -> None:
    shared = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "real_tool_calls.dev.jsonl"  # ../shared
    if not shared.exists():
        pytest.skip("shared corpus not mounted")
    assert CORPUS.read_bytes() == shared.read_bytes()


def _classify(rec: dict):
    tools = rec["tools"] or EXTRA_TOOLS.get(rec["id"])
    fmt = FORMAT_OF.get(rec["format"])  # format=other: detect from the text
    return check_text(rec["text"], tools=tools, tool_format=fmt)


@pytest.mark.parametrize("rec", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_classified_as_labelled(rec: dict) -> None:
    ta = _classify(rec)
    cats = {f.category for f in ta.findings}
    bad = {f.category for f in ta.findings if f.severity in ("error", "warning")}
    assert not any(f.category == "internal_error" for f in ta.findings)
    for label in rec["labels"]:
        if label == "well_formed":
            assert not bad, f"well-formed record got {sorted(bad)}"
            assert ta.calls and all(c.status == "ok" for c in ta.calls)
            continue
        accepted, fragment = LABEL_MAP.get(label, ((label,), None))
        hits = [f for f in ta.findings if f.category in accepted]
        assert hits, f"label {label!r}: none of {accepted} in {sorted(cats)}"
        if fragment:
            assert any(fragment in f.rule_id for f in hits), [f.rule_id for f in hits]
    # every finding's span is inside the text and every span tiles it
    n = len(rec["text"])
    assert all(0 <= f.start <= f.end <= n for f in ta.findings)
    pos = 0
    for s in ta.spans:
        assert s.start == pos and s.end > s.start
        pos = s.end
    assert pos == n


def test_no_unlabelled_error_categories() -> None:
    """Errors and warnings on a record are its labels' categories or their direct consequences."""
    consequences = {
        "garbled_function_name": {"unknown_function"},
        "truncated": {"unclosed_tag", "missing_call_close"},
        "other:missing_tool_call_open": {"missing_call_close"},
        "mixed_formats": {"invalid_json", "invalid_arguments"},
        "unknown_function": {"missing_call_open", "invalid_arguments"},  # the qwen3.8 record is a parsed call
        # the record is a fragment quoted without its call, so the opener is missing too
        "other:malformed_parameter_open": {"missing_call_open"},
    }
    for rec in RECORDS:
        ta = _classify(rec)
        allowed: set[str] = set()
        for label in rec["labels"]:
            allowed |= set(LABEL_MAP.get(label, ((label,), None))[0]) | consequences.get(label, set())
        got = {f.category for f in ta.findings if f.severity in ("error", "warning")}
        assert got <= allowed, (rec["id"], sorted(got - allowed))


def _seed(rid: str) -> dict:
    return next(r for r in RECORDS if r["id"] == rid)


def test_seed_garbled_name_is_repaired_to_search_web() -> None:
    rec = _seed("verl-6252-garbled-name")
    ta = _classify(rec)
    (call,) = ta.calls
    garbled = [f for f in ta.findings if f.category == "garbled_function_name"]
    assert garbled and garbled[0].severity == "error"
    assert rec["text"][garbled[0].start:garbled[0].end] == "search_web英文明确"
    assert "search_web" in garbled[0].message
    assert call.matched_tool == "search_web"
    assert call.repaired is not None
    assert "<function=search_web>" in call.repaired and "英文" not in call.repaired
    assert call.repaired_arguments == {
        "queries": ["Japan annual GDP latest year nominal GDP official statistic",
                    "Japan nominal GDP 2024 2025 government statistic"]}
    again = check_text(call.repaired, tools=rec["tools"], tool_format="qwen3_coder")
    assert [(c.function_name, c.arguments, c.status) for c in again.calls] == [
        ("search_web", call.repaired_arguments, "ok")]


def test_seed_stray_attribute_is_repaired_to_search_web() -> None:
    rec = _seed("verl-6252-stray-attr")
    ta = _classify(rec)
    (call,) = ta.calls
    stray = [f for f in ta.findings if f.category == "stray_attribute"]
    assert {rec["text"][f.start:f.end] for f in stray} == {'</parameter v2="">', '</function v2="">'}
    assert call.categories == ["stray_attribute"]
    assert call.repaired is not None and 'v2=""' not in call.repaired
    assert call.repaired_arguments == {"queries": ["XRP latest news January 2026", "Ripple SEC case update January 2026 XRP"]}
    # the repair differs from the raw text exactly where the malformation starts
    first = next(i for i, (a, b) in enumerate(zip(call.raw, call.repaired, strict=False)) if a != b)
    assert call.raw[first:].startswith(' v2=""')


def test_format_detection_on_corpus_text() -> None:
    for rec in RECORDS:
        if rec["format"] in FORMAT_OF:
            assert detect_tool_format("", rec["text"]) == FORMAT_OF[rec["format"]], rec["id"]

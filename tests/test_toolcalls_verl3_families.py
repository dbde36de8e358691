"""The Seed-OSS, MiniMax-M2 and Gemma 4 call formats on their sample texts (tests/helpers/verl3_texts.py): a good
call gives no error or warning and is detected from the output alone, each broken kind gives its named category
with a span inside the text, and a repair, where one is offered, re-classifies clean; the prompt's tool block
detects the family and yields the declared tools."""

from __future__ import annotations

import pytest
from helpers.verl3_texts import FAMILIES, TOOLS

from trajlab.model import TurnContext
from trajlab.toolcalls.analyze import analyze_turn, detect_output_format
from trajlab.toolcalls.detect import detect_tool_format
from trajlab.toolcalls.ruleset import get_ruleset

CASES = [(fmt, kind, text, want) for fmt, rows in FAMILIES.items() for kind, text, want in rows]


@pytest.mark.parametrize(("fmt", "kind", "text", "want"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_sample_text(fmt: str, kind: str, text: str, want: str | None) -> None:
    ta = analyze_turn(text, tool_format=fmt, tools=TOOLS, context=TurnContext())
    assert ta.calls and all(c.format == fmt for c in ta.calls)
    bad = [f for f in ta.findings if f.severity in ("error", "warning")]
    if want is None:
        assert not bad, [(f.rule_id, f.message) for f in bad]
        assert detect_output_format(text, get_ruleset(())) == fmt or fmt == "seed" and "<seed:" not in text
        assert all(c.status == "ok" for c in ta.calls)
        return
    hits = [f for f in ta.findings if f.category == want]
    assert hits, [(f.rule_id, f.message) for f in ta.findings]
    for f in hits:
        assert f.rule_id.startswith(f"{fmt}/{want}/") and 0 <= f.start < f.end <= len(text)
    for c in ta.calls:
        if c.repaired is not None:
            again = analyze_turn(c.repaired, tool_format=fmt, tools=TOOLS, context=TurnContext())
            assert not [f for f in again.findings if f.severity == "error"], (kind, c.repaired)


def test_prompts_detect_the_family_and_declare_the_tools() -> None:
    import importlib.util
    from pathlib import Path

    from trajlab.ingest.tool_schemas import tools_from_prompt

    spec = importlib.util.spec_from_file_location("gen_families_t", Path(__file__).parents[1] / "sample_data" /
                                                  "generate_families.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for fmt in ("seed", "minimax", "gemma4"):
        p = gen.prompt(fmt, "What is the weather?")
        tools, src = tools_from_prompt(p)
        assert src == f"prompt_{fmt}" and sorted(t["name"] for t in tools) == ["get_weather", "search"]
        weather = next(t for t in tools if t["name"] == "get_weather")["parameters"]
        assert weather["required"] == ["city"] and weather["properties"]["days"]["type"] == "integer"
        assert detect_tool_format(p, "", tools_source=src) == fmt

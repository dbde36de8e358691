"""Property tests for the added families: calls generated from each family's grammar (here, not by trajlab's
renderers) classify with no error or warning, and trajlab reads the same (name, arguments) as an independent
re-implementation of the family's reference parser (verl's glm / kimi / gpt-oss parsers, vLLM's deepseek_v31);
random and mutated text never raises."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajlab.toolcalls import check_text

# -- independent reference readers ----------------------------------------------------------------------------


def ref_glm(text: str) -> list[tuple[str, dict[str, Any]]]:
    """verl 0.9.1 ``glm``: both tags needed; name = text before the first ``<arg_key>``, stripped; values
    ``json.loads`` of the stripped text, else the stripped text."""
    if "<tool_call>" not in text or "</tool_call>" not in text:
        return []
    out = []
    for block in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.DOTALL):
        name = block.split("<arg_key>", 1)[0].strip()
        args: dict[str, Any] = {}
        for k, v in re.findall(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", block, re.DOTALL):
            try:
                args[k.strip()] = json.loads(v.strip())
            except ValueError:
                args[k.strip()] = v.strip()
        out.append((name, args))
    return out


def ref_kimi(text: str) -> list[tuple[str, dict[str, Any]]]:
    """vLLM 0.20 ``kimi_k2`` (name from the id) with verl's ``json.loads`` of the arguments."""
    if "<|tool_calls_section_begin|>" not in text:
        return []
    out = []
    for cid, args in re.findall(r"<\|tool_call_begin\|>\s*([^<]+:\d+)\s*<\|tool_call_argument_begin\|>\s*(.*?)\s*"
                                r"<\|tool_call_end\|>", text, re.DOTALL):
        name = cid.split(":")[0]
        name = name[len("functions."):] if name.startswith("functions.") else name
        out.append((name, json.loads(args)))
    return out


def ref_deepseek(text: str) -> list[tuple[str, dict[str, Any]]]:
    """vLLM 0.33 ``deepseek_v31``: needs the section opener; name verbatim, arguments decoded."""
    if "<｜tool▁calls▁begin｜>" not in text:
        return []
    return [(n, json.loads(a)) for n, a in
            re.findall(r"<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>([\s\S]*?)<｜tool▁call▁end｜>", text)]


def ref_gpt_oss(text: str) -> list[tuple[str, dict[str, Any]]]:
    """verl 0.9.1 ``gpt-oss``: analysis messages removed, then the one header regex."""
    text = re.sub(r"<\|channel\|>analysis<\|message\|>(.*?)<\|end\|>", "", text, flags=re.DOTALL)
    return [(n, json.loads(a)) for n, a in re.findall(
        r"<\|start\|>assistant<\|channel\|>[^<]* to=functions\.([^<]+) <\|constrain\|>json<\|message\|>(.*?)<\|call\|>",
        text, re.DOTALL)]


def ref_react(text: str) -> list[tuple[str, Any]] | None:
    """LangChain ``ReActSingleInputOutputParser``: the first ``Action: ... Action Input: ...`` (the input runs to the
    end of the text), spaces and then quotes stripped; None (an error) when ``Final Answer:`` is also written. The
    agent passes a JSON object input as the tool's keyword arguments, anything else as its single input."""
    m = re.search(r"Action\s*\d*\s*:[\s]*(.*?)[\s]*Action\s*\d*\s*Input\s*\d*\s*:[\s]*(.*)", text, re.DOTALL)
    if m is None:
        return []
    if "Final Answer:" in text:
        return None
    raw = m.group(2).strip(" ").strip('"')
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    return [(m.group(1).strip(), obj if isinstance(obj, dict) else raw)]


# -- generators -----------------------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,14}", fullmatch=True)
KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
SAFE_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="<>\x00", exclude_categories=("Cs", "Cc")),
                    min_size=1, max_size=30).filter(lambda s: s.strip() == s and s.strip() != "")
SCALARS = st.one_of(SAFE_TEXT, st.integers(-10**6, 10**6), st.booleans(),
                    st.lists(st.one_of(SAFE_TEXT, st.integers(0, 99)), max_size=3))
ARGS = st.dictionaries(KEYS, SCALARS, max_size=4)


def schema_of(name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    def t(v: Any) -> str:
        if isinstance(v, bool):
            return "boolean"
        if isinstance(v, int):
            return "integer"
        if isinstance(v, list):
            return "array"
        return "string"

    return [{"name": name, "description": "", "parameters": {
        "type": "object", "properties": {k: {"type": t(v)} for k, v in args.items()}, "required": sorted(args)}}]


def glm_text(name: str, args: dict[str, Any], sep: str) -> str:
    def val(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)

    body = "".join(f"<arg_key>{k}</arg_key>{sep}<arg_value>{val(v)}</arg_value>{sep}" for k, v in args.items())
    return f"<tool_call>{name}{sep}{body}</tool_call>"


def dumps(args: dict[str, Any], pretty: bool) -> str:
    return json.dumps(args, ensure_ascii=False, indent=2 if pretty else None)


def check(text: str, fmt: str, ref: list[tuple[str, dict[str, Any]]], tools: list[dict[str, Any]]) -> None:
    """No error/warning finding, and trajlab's (name, arguments) are the reference reader's."""
    ta = check_text(text, tools=tools, tool_format=fmt)
    bad = [(f.category, f.rule_id, f.message) for f in ta.findings if f.severity in ("error", "warning")]
    assert bad == [], (text, bad)
    assert [(c.function_name, c.arguments) for c in ta.calls] == ref, (text, ta.calls, ref)
    assert all(c.status == "ok" for c in ta.calls)


_S = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_S
@given(name=NAMES, args=ARGS, layout=st.sampled_from(["glm45", "glm47"]), n=st.integers(1, 3),
       preamble=st.sampled_from(["", "Let me check.", "\n<think>Need it.</think>\n"]))
def test_glm_well_formed(name: str, args: dict[str, Any], layout: str, n: int, preamble: str) -> None:
    sep = "\n" if layout == "glm45" else ""
    text = preamble + sep.join(glm_text(name, args, sep) for _ in range(n))
    ref = ref_glm(text)
    assert len(ref) == n
    # the intended reading is what the template rendered (a declared string stays the text it was written as);
    # verl's reading differs exactly where an info divergence names the parameter
    tools = schema_of(name, args)
    check(text, layout, [(name, args)] * n, tools)
    ta = check_text(text, tools=tools, tool_format=layout)
    for (vname, vargs), c in zip(ref, ta.calls, strict=True):
        assert vname == c.function_name
        differs = {k for k, v in args.items() if json.dumps(vargs[k]) != json.dumps(v)}
        named = {f.message.split("`")[1] for f in ta.findings
                 if f.call_index == c.call_index and f.category == "verl_conversion_divergence"}
        assert differs == named, (text, vargs, args)


@_S
@given(name=NAMES, args=ARGS, n=st.integers(1, 3), pretty=st.booleans(), stripped=st.booleans())
def test_kimi_well_formed(name: str, args: dict[str, Any], n: int, pretty: bool, stripped: bool) -> None:
    body = "".join(f"<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>{dumps(args, pretty)}"
                   "<|tool_call_end|>" for i in range(n))
    text = "<think>ok</think>I'll look.<|tool_calls_section_begin|>" + body + "<|tool_calls_section_end|>"
    ref = ref_kimi(text)
    assert ref == [(name, args)] * n
    if stripped:  # the same output decoded with skip_special_tokens=True
        text = re.sub(r"<\|[a-z_]+\|>", "", text)
    check(text, "kimi_k2", ref, schema_of(name, args))


@_S
@given(name=NAMES, args=ARGS, n=st.integers(1, 3), pretty=st.booleans())
def test_deepseek_well_formed(name: str, args: dict[str, Any], n: int, pretty: bool) -> None:
    body = "".join(f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{dumps(args, pretty)}<｜tool▁call▁end｜>" for _ in range(n))
    text = "Checking.<｜tool▁calls▁begin｜>" + body + "<｜tool▁calls▁end｜>"
    ref = ref_deepseek(text)
    check(text, "deepseek_v31", ref, schema_of(name, args))


@_S
@given(name=NAMES, args=ARGS, analysis=st.sampled_from(["", "Need the tool."]), stripped=st.booleans())
def test_gpt_oss_well_formed(name: str, args: dict[str, Any], analysis: str, stripped: bool) -> None:
    pre = f"<|channel|>analysis<|message|>{analysis}<|end|>" if analysis else ""
    text = (pre + f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
            + json.dumps(args, ensure_ascii=False) + "<|call|>")
    ref = ref_gpt_oss(text)
    assert ref == [(name, args)]
    if stripped:
        text = re.sub(r"<\|[a-z]+\|>", "", text)
    check(text, "gpt_oss", ref, schema_of(name, args))


@_S
@given(name=NAMES, args=ARGS, thought=st.sampled_from(["", "Thought: I need a tool.\n", "I will look it up.\n"]),
       as_json=st.booleans(), pretty=st.booleans(), text_input=SAFE_TEXT.filter(lambda s: s[0] not in '{["\''))
def test_react_well_formed(name: str, args: dict[str, Any], thought: str, as_json: bool, pretty: bool,
                           text_input: str) -> None:
    given_input = dumps(args, pretty) if as_json else text_input
    text = f"{thought}Action: {name}\nAction Input: {given_input}"
    ref = ref_react(text)
    assert ref is not None and len(ref) == 1
    # a JSON input is checked against a schema of its members; a text input goes to a tool declared by name only
    tools = schema_of(name, args) if as_json else [{"name": name, "description": "", "parameters": {
        "type": "object", "properties": {}, "additionalProperties": True}}]
    check(text, "react", ref, tools)


@_S
@given(name=NAMES, args=ARGS, extra=st.sampled_from(["\nFinal Answer: done", "\nAction: other\nAction Input: x"]))
def test_react_what_langchain_rejects_is_malformed(name: str, args: dict[str, Any], extra: str) -> None:
    text = f"Thought: go\nAction: {name}\nAction Input: {json.dumps(args)}{extra}"
    ref = ref_react(text)
    ta = check_text(text, tools=schema_of(name, args), tool_format="react")
    assert ta.calls and all(c.status == "malformed" for c in ta.calls)
    if ref is None:  # LangChain raises on an action with a final answer
        assert "action_after_final_answer" in ta.calls[0].categories
    else:  # it reads the second action into the first one's input
        assert ref[0][1] != args and "multiple_actions" in ta.calls[0].categories


FAMILY_TEXTS = [
    glm_text("get_weather", {"city": "Beijing", "days": 3}, "\n"),
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    '{"city": "Beijing"}<|tool_call_end|><|tool_calls_section_end|>',
    '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Beijing"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "B"}<|call|>',
    'Thought: weather\nAction: get_weather\nAction Input: {"city": "Beijing"}\nObservation: sunny\nFinal Answer: sun',
]


@settings(max_examples=150, deadline=None)
@given(base=st.sampled_from(FAMILY_TEXTS), cut=st.integers(0, 200), ins=st.integers(0, 200),
       junk=st.sampled_from(["<", ">", "\n", "}", "{", "<|call|>", "</arg_value>", "<arg_key>", "<|tool_call_end|>",
                             "<｜tool▁sep｜>", "to=", '"', "<tool_call>", "\nAction:", "Action Input:", ""]),
       fmt=st.sampled_from(["glm45", "glm47", "kimi_k2", "deepseek_v31", "gpt_oss", "react"]))
def test_mutated_text_never_raises(base: str, cut: int, ins: int, junk: str, fmt: str) -> None:
    text = base[: min(cut, len(base))] + junk + base[min(cut, len(base)):]
    text = text[: max(ins, 1) * 3] if ins % 5 == 0 else text
    ta = check_text(text, tools=[{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}], tool_format=fmt)
    assert not [f for f in ta.findings if f.category == "internal_error"], ta.findings
    assert ta.spans == [] or (ta.spans[0].start == 0 and ta.spans[-1].end == len(text))


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300), fmt=st.sampled_from(["glm45", "glm47", "kimi_k2", "deepseek_v31", "gpt_oss", "react"]))
def test_random_text_never_raises(text: str, fmt: str) -> None:
    ta = check_text(text, tool_format=fmt)
    assert not [f for f in ta.findings if f.category == "internal_error"]

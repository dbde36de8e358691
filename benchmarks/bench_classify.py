"""Classification throughput: trajlab's classifier vs a plain loop running verl's qwen3_coder regexes.

Both run in the same process on the same generated turns (seeded): realistic Qwen3.5-style assistant turns —
reasoning in ``<think>``, a preamble, one or two XML calls, some final answers without a call — with a share of
malformed calls (garbled names, stray attributes, unclosed tags, JSON inside the XML format, truncation), plus
Hermes-format turns for the JSON path. The baseline is what verl 0.9.1's ``qwen3_coder`` parser does per turn
(parsers.md §A.6): ``<tool_call>`` / ``<function=`` / ``<parameter=`` regex ``findall``, name and value split,
value conversion by schema type. It finds calls; it reports nothing. trajlab does the same and also names,
locates and (where safe) repairs every problem, and tiles every turn into spans.

    python benchmarks/bench_classify.py                # 20k turns, table
    python benchmarks/bench_classify.py --turns 50000 --malformed 0.3 --json
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from typing import Any

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn
from trajlab.toolcalls.verl_conversion import verl_convert

TOOLS = [
    {"name": "search_web", "description": "Search the web.", "parameters": {
        "type": "object", "properties": {"queries": {"type": "array", "items": {"type": "string"}},
                                         "limit": {"type": "integer"}}, "required": ["queries"]}},
    {"name": "fetch_web", "description": "Fetch pages.", "parameters": {
        "type": "object", "properties": {"urls": {"type": "array", "items": {"type": "string"}}},
        "required": ["urls"]}},
]
WORDS = ("the bridge was completed in river town council report year population museum founded railway station "
         "according to the source I should check whether answer question first second search results show that "
         "it seems likely verify").split()
GARBLED = ("search_web英文明确", "search_web英文", "fetch_web_v2", "search_webs", "fetch_web网页")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _xml_call(rng: random.Random, bad: str | None) -> str:
    if rng.random() < 0.6:
        name, param = "search_web", "queries"
        value = json.dumps([_sentence(rng, rng.randint(3, 8))[:-1] for _ in range(rng.randint(1, 3))])
    else:
        name, param = "fetch_web", "urls"
        value = json.dumps([f"https://en.wikipedia.org/wiki/{rng.choice(WORDS).title()}_{rng.randint(1, 999)}"])
    written = rng.choice(GARBLED) if bad == "garbled" else name
    if bad == "json_in_xml":
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": {param: json.loads(value)}}) + "\n</tool_call>"
    p_close = '</parameter v2="">' if bad == "stray" else "</parameter>"
    lines = ["<tool_call>", f"<function={written}>", f"<parameter={param}>", value]
    if bad != "unclosed":
        lines.append(p_close)
    lines += ["</function>", "</tool_call>"]
    text = "\n".join(lines)
    if bad == "truncated":
        text = text[: rng.randint(15, len(text) - 5)]
    return text


def _hermes_call(rng: random.Random, bad: str | None) -> str:
    args = {"queries": [_sentence(rng, rng.randint(3, 8))[:-1]]}
    body = json.dumps({"name": "search_web", "arguments": args}, ensure_ascii=False)
    if bad == "garbled":
        body = body.replace("search_web", rng.choice(GARBLED))
    elif bad in ("stray", "json_in_xml"):
        body = body.replace('"name": ', '"name=')
    elif bad == "unclosed":
        body = "{" + body + "}"
    elif bad == "truncated":
        return "<tool_call>\n" + body[: rng.randint(5, len(body) - 2)]
    return f"<tool_call>\n{body}\n</tool_call>"


def make_turns(n: int, malformed: float, seed: int) -> list[tuple[str, str]]:
    """(tool_format, turn text) pairs: 70% XML-format turns, 20% Hermes turns, 10% plain answers."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    kinds = ("garbled", "stray", "unclosed", "json_in_xml", "truncated")
    for _ in range(n):
        r = rng.random()
        think = "<think>\n" + " ".join(_sentence(rng, rng.randint(6, 20)) for _ in range(rng.randint(2, 12))) + "\n</think>\n\n"
        if r < 0.10:
            out.append(("qwen3_coder", think + "The answer is " + _sentence(rng, 5) + "\n<answer>" + rng.choice(WORDS) + "</answer>"))
            continue
        fmt = "qwen3_coder" if r < 0.80 else "hermes"
        calls = []
        for _ in range(1 if rng.random() < 0.8 else 2):
            bad = rng.choice(kinds) if rng.random() < malformed else None
            calls.append(_xml_call(rng, bad) if fmt == "qwen3_coder" else _hermes_call(rng, bad))
        pre = _sentence(rng, rng.randint(5, 15)) + "\n\n" if rng.random() < 0.5 else ""
        out.append((fmt, think + pre + "\n".join(calls)))
    return out


# verl 0.9.1 qwen3_coder regexes (parsers.md §A.6, verl-formats.md §2.3)
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*?)$", re.DOTALL)
_FUNC = re.compile(r"<function=(.*?)</function>|<function=(.*)$", re.DOTALL)
_PARAM = re.compile(r"<parameter=(.*?)</parameter>|<parameter=(.*?)$", re.DOTALL)


def verl_like(text: str, props_by_name: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """What verl's qwen3_coder parser computes for one turn: (name, converted arguments) per call."""
    if "<tool_call>" not in text:
        return []
    calls = []
    for a, b in _CALL.findall(text):
        for fa, fb in _FUNC.findall(a or b):
            fs = fa or fb
            i = fs.find(">")
            if i < 0:
                continue
            name = fs[:i]
            props = props_by_name.get(name, {})
            args = {}
            for pa, pb in _PARAM.findall(fs[i + 1:]):
                ps = pa or pb
                j = ps.find(">")
                if j < 0:
                    continue
                value = ps[j + 1:]
                if value.startswith("\n"):
                    value = value[1:]
                if value.endswith("\n"):
                    value = value[:-1]
                args[ps[:j]] = verl_convert(value, ps[:j], props)
            calls.append((name, args))
    return calls


def bench(turns: list[tuple[str, str]], repeat: int) -> dict[str, Any]:
    ctx = TurnContext(forbids_suffix=True, schema_known=True)
    props = {t["name"]: t["parameters"]["properties"] for t in TOOLS}
    nbytes = sum(len(t.encode()) for _, t in turns)
    xml_turns = [t for f, t in turns if f == "qwen3_coder"]
    xml_bytes = sum(len(t.encode()) for t in xml_turns)
    res: dict[str, Any] = {"turns": len(turns), "mb": nbytes / 1e6, "xml_turns": len(xml_turns)}

    def best(fn: Any) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    analyze_turn(turns[0][1], tool_format=turns[0][0], tools=TOOLS, context=ctx)  # load rules once
    t_all = best(lambda: [analyze_turn(t, tool_format=f, tools=TOOLS, context=ctx) for f, t in turns])
    t_xml = best(lambda: [analyze_turn(t, tool_format="qwen3_coder", tools=TOOLS, context=ctx) for t in xml_turns])
    t_verl = best(lambda: [verl_like(t, props) for t in xml_turns])
    plain = [("The answer is 42. " * 40)] * 2000
    t_plain = best(lambda: [analyze_turn(t, tool_format="qwen3_coder", tools=TOOLS, context=ctx) for t in plain])
    sample = [analyze_turn(t, tool_format=f, tools=TOOLS, context=ctx) for f, t in turns]
    n_calls = sum(len(a.calls) for a in sample)
    n_bad = sum(c.status == "malformed" for a in sample for c in a.calls)
    n_rep = sum(c.repaired is not None for a in sample for c in a.calls)
    res.update({
        "calls": n_calls, "malformed_calls": n_bad, "repaired_calls": n_rep,
        "trajlab_all_turns_per_s": len(turns) / t_all, "trajlab_all_mb_per_s": nbytes / 1e6 / t_all,
        "trajlab_xml_turns_per_s": len(xml_turns) / t_xml, "trajlab_xml_mb_per_s": xml_bytes / 1e6 / t_xml,
        "verl_regex_xml_turns_per_s": len(xml_turns) / t_verl, "verl_regex_xml_mb_per_s": xml_bytes / 1e6 / t_verl,
        "trajlab_vs_verl_time_ratio": t_xml / t_verl,
        "no_markup_us_per_turn": t_plain / len(plain) * 1e6,
    })
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=20000, help="assistant turns to generate (default 20000)")
    ap.add_argument("--malformed", type=float, default=0.2, help="share of malformed calls (default 0.2)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions; the best is reported")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    turns = make_turns(args.turns, args.malformed, args.seed)
    r = bench(turns, args.repeat)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"{r['turns']} turns ({r['mb']:.1f} MB; {r['xml_turns']} qwen3_coder), {r['calls']} calls, "
          f"{r['malformed_calls']} malformed, {r['repaired_calls']} repaired")
    print(f"{'':34}{'turns/s':>12}{'MB/s':>10}")
    print(f"{'trajlab, all turns':34}{r['trajlab_all_turns_per_s']:>12,.0f}{r['trajlab_all_mb_per_s']:>10.1f}")
    print(f"{'trajlab, qwen3_coder turns':34}{r['trajlab_xml_turns_per_s']:>12,.0f}{r['trajlab_xml_mb_per_s']:>10.1f}")
    print(f"{'verl qwen3_coder regex loop':34}{r['verl_regex_xml_turns_per_s']:>12,.0f}{r['verl_regex_xml_mb_per_s']:>10.1f}")
    print(f"trajlab takes {r['trajlab_vs_verl_time_ratio']:.1f}x the time of the plain verl regex loop on the same turns "
          f"(it also names, locates and repairs every problem and tiles the spans)")
    print(f"turn without call markup (fast path): {r['no_markup_us_per_turn']:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

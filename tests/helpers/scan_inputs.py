"""Input dumps the scan engines are compared on (``tests/test_scan_engines.py``): damaged verl dumps, generated
turns (canonical calls, typed parameters, random damage) and the labelled corpus of real model outputs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from helpers.verl_lines import (
    TOOLS,
    hermes_call,
    hermes_prompt,
    legacy_line,
    output_of,
    qwen35_prompt,
    v1_line,
    write_jsonl,
    xml_call,
)

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "corpus" / "real_tool_calls.dev.jsonl"
GOOD = xml_call("search_web", queries=["japan gdp 2024"])
BAD = GOOD.replace("</parameter>", '</parameter v2="">')


def row(step_no: int, i: int, **over: Any) -> dict[str, Any]:
    """A V1 dump line of step ``step_no`` (``over`` replaces or adds fields)."""
    out = output_of(["<think>\nlook it up\n</think>\n\n" + (BAD if i % 3 == 0 else GOOD), "Answer: 4."], ["r"])
    base = v1_line(step_no, qwen35_prompt(f"q{i}"), out, 1.0, uid=f"u{step_no}", session=i)
    return {**base, **over}


def make_messy(root: Path) -> Path:
    """Clean verl dump files next to every kind of damage the record reader reports (one kind per file)."""
    d = root / "rollout"
    write_jsonl(d / "1.jsonl", [row(1, i) for i in range(6)])
    write_jsonl(d / "2.jsonl", [row(2, i) for i in range(4)], tail=b'{"input": "sys", "outp')  # crashed writer
    (d / "3.jsonl").write_bytes(b"".join(json.dumps(row(3, i)).encode() + b"\n\n" for i in range(2)))  # blank lines
    write_jsonl(d / "4.jsonl", [row(4, 0), {**row(4, 1), "score": float("nan")}])  # NaN
    write_jsonl(d / "5.jsonl", [row(5, 0, gts="7"), row(5, 1, gts=7), row(5, 2, gts=[1, 2])])  # mixed types
    write_jsonl(d / "6.jsonl", [row(6, 0, acc=1.0), row(6, 1, acc=1), row(6, 2, acc=0.25)])  # int literal among floats
    write_jsonl(d / "7.jsonl", [row(7, 0, ok=True, n=3, f=1e-05, s='q"\\\n\x01ü'), row(7, 1, ok=False, n=-2, f=0.1,
                                                                                    s="")])  # every simple type
    write_jsonl(d / "8.jsonl", [row(8, 0, uid="a_١_2"), row(8, 1, uid="plain"), row(8, 2, uid="x_1_2")])  # odd uids
    (d / "9.jsonl").write_bytes(json.dumps(row(9, 0)).encode() + b"\r\n")  # CRLF
    write_jsonl(d / "10.jsonl", [row(10, 0, output=5), {k: v for k, v in row(10, 1).items() if k != "score"}])
    (d / "11.jsonl").write_bytes(json.dumps(row(11, 0)).encode()[:-1] + b', "z": "\\ud800"}\n')  # lone surrogate
    write_jsonl(d / "12.jsonl", [{k: v for k, v in row(0, i).items() if k != "step"} for i in range(3)])  # no step
    write_jsonl(d / "13.jsonl", [row(13, 0, uid="")])
    write_jsonl(d / "14.jsonl", [row(14, 0, score=None), row(14, 1, score=True)])
    write_jsonl(d / "15.jsonl", [row(15, 0, meta={"k": 1})])
    write_jsonl(root / "legacy" / "20.jsonl", [legacy_line(20, hermes_prompt("q"), output_of(
        [hermes_call("search_web", queries=["a"]), "done"], ["r"], "0.7"), 0.5, reward=1.0) for _ in range(3)])
    # an output whose tool block never reaches the next turn's header, and a prompt without any tool format
    write_jsonl(root / "odd" / "30.jsonl", [row(30, 0, output=GOOD + "\nuser\n<tool_response>\ncut off"),
                                            row(30, 1, input="system\nplain chat\nuser\nhi\nassistant\n",
                                                output=GOOD)])
    return root


#: a tool with typed parameters (verl converts XML values by type; the columnar recogniser covers some types)
CALC = {"type": "function", "function": {"name": "calc", "description": "Compute.", "parameters": {
    "type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}, "flag": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["a", "b"]}, "tags": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}}}}}}
GEN_TOOLS = [*TOOLS, CALC]
_FRAGMENTS = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "{", "}",
              '"', "<think>", "</think>", "\n", "<|im_end|>", "calc", "search_web", " ", "é", "\\", '"name": ']


def _args(rnd: random.Random, name: str) -> dict[str, Any]:
    if name == "search_web":
        return {"queries": [rnd.choice(["gdp", "x\ty", "中文", 'q"uote', ""]) for _ in range(rnd.randint(0, 3))]}
    if name == "fetch_web":
        return {"urls": [f"https://e.org/{rnd.randint(0, 99)}"]}
    if name == "calc":
        a: dict[str, Any] = {"n": rnd.choice([3, -7, 0, "12", "abc", 2.5, True])}
        for k, vals in (("x", [1.5, 2, "3.25", "nan?"]), ("flag", [True, False, "true", "yes"]),
                        ("mode", ["a", "b", "c"]), ("tags", [["t"], [], ["a", "b"], "t"]), ("ids", [[1, 2], ["3"]])):
            if rnd.random() < 0.4:
                a[k] = rnd.choice(vals)
        return a
    return {"q": "x"}


def _damage(rnd: random.Random, text: str) -> str:
    if not text:
        return text
    i, j = sorted(rnd.randrange(len(text) + 1) for _ in range(2))
    op = rnd.choice(["delete", "insert", "duplicate", "truncate", "swap"])
    if op == "delete":
        return text[:i] + text[j:]
    if op == "insert":
        return text[:i] + rnd.choice(_FRAGMENTS) + text[i:]
    if op == "duplicate":
        return text[:j] + text[i:j] + text[j:]
    if op == "truncate":
        return text[:j]
    return text[j:] + text[:i] + text[i:j]


def generated_turn(rnd: random.Random, fmt: str) -> str:
    """One assistant turn: an optional think block and text, 0-3 calls in ``fmt`` (some with unknown names or
    wrong types), damaged at random 30% of the time."""
    parts = []
    if rnd.random() < 0.6:
        parts.append("<think>\n" + rnd.choice(["plan", "", "long " * 50, "a\n\nb"]) + "\n</think>\n\n")
    if rnd.random() < 0.3:
        parts.append(rnd.choice(["Let me check.", "ok\n", "中文 text"]))
    for _ in range(rnd.choice([0, 1, 1, 1, 2, 3])):
        name = rnd.choice(["search_web", "fetch_web", "calc", "calc", "serch_web"])
        args = _args(rnd, name)
        parts.append(xml_call(name, **args) if fmt == "xml" else hermes_call(name, **args))
        parts.append(rnd.choice(["", "\n", "\n\n"]))
    text = "".join(parts)
    return _damage(rnd, text) if rnd.random() < 0.3 else text


def make_generated(root: Path, seed: int = 5, files: int = 6, per_file: int = 40) -> Path:
    """Verl dumps of generated trajectories (Qwen3.5 XML and Hermes prompts, 0.9 and 0.7 layouts)."""
    rnd = random.Random(seed)
    for f in range(files):
        fmt = "xml" if f % 2 == 0 else "hermes"
        version = "0.9" if f % 3 else "0.7"
        rows = []
        for i in range(per_file):
            n = rnd.randint(1, 4)
            turns = [generated_turn(rnd, fmt) for _ in range(n)]
            out = output_of(turns, [rnd.choice(["ok", "R" * 300, "<tool_response>x"]) for _ in range(n - 1)], version)
            prompt = (qwen35_prompt if fmt == "xml" else hermes_prompt)(f"question {i}", GEN_TOOLS)
            rows.append(v1_line(f + 1, prompt, out, rnd.choice([0.0, 1.0]), uid=f"g{f}", session=i)
                        if version == "0.9" else legacy_line(f + 1, prompt, out, 0.5))
        write_jsonl(root / "rollout" / f"{f + 1}.jsonl", rows)
    return root


def make_corpus_dump(root: Path) -> Path:
    """Every record of the labelled corpus of real model outputs as a verl dump line, with its own tools."""
    rows = []
    for i, line in enumerate(CORPUS.read_text().splitlines()):
        rec = json.loads(line)
        tools = [{"type": "function", "function": t} for t in rec["tools"]] if rec["tools"] else TOOLS
        prompt = (hermes_prompt if rec["format"] == "hermes_json" else qwen35_prompt)(rec["id"], tools)
        for last in (True, False):  # the call as the last turn, and followed by a tool response and an answer
            out = rec["text"] if last else output_of([rec["text"], "Done."], ["result"])
            rows.append(v1_line(1, prompt, out, 1.0, uid="corpus", session=2 * i + int(last)))
    write_jsonl(root / "rollout" / "1.jsonl", rows)
    return root

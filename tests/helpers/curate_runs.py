"""Small verl dumps for the SFT-pool tests (real verl 0.9 V1 lines, Qwen3.5 XML and Qwen3 Hermes formats),
scanned with the real ``trajlab.scan``; ``tests/test_curate_support.py`` checks that the
builder writes what the tests rely on."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from helpers.verl_lines import hermes_call, hermes_prompt, output_of, qwen35_prompt, write_jsonl, xml_call

TOOL_NAMES = ["search_web", "fetch_web"]


def think(text: str) -> str:
    return f"<think>\n{text}\n</think>\n\n"


def search_result(q: str) -> str:
    return f'Results for "{q}":\n1. {q.title()} - Wikipedia\n   https://en.wikipedia.org/wiki/{q.replace(" ", "_")}'


def unknown(name: str) -> str:
    return f"Unknown function '{name}'. Available tools: {TOOL_NAMES}"


def _uid(step: int, k: int) -> str:
    return str(uuid.UUID(int=step * 1000 + k))


def xml_rollouts(q: str, answer: str) -> list[tuple[str, float]]:
    """Four rollouts of one prompt: two clean successes, a garbled name, a stray attribute in the 2nd turn."""
    good = xml_call("search_web", queries=[q])
    fetch = xml_call("fetch_web", urls=[f"https://en.wikipedia.org/wiki/{q.replace(' ', '_')}"])
    ok1 = output_of(
        [think(f"I should search for {q}.") + good, think(f"The result says {answer}.") + f"<answer>{answer}</answer>"],
        [search_result(q)],
    )
    ok2 = output_of(
        [think(f"Search first: {q}.") + good, think("Open the page.") + fetch,
         think(f"It is {answer}.") + f"The answer is <answer>{answer}</answer>"],
        [search_result(q), f"{q}: {answer} (from the article)"],
    )
    garbled = good.replace("<function=search_web>", "<function=search_web英文明确>")
    bad1 = output_of(
        [think(f"Search {q}.") + garbled, think("The tool failed, I will guess.") + "<answer>unknown</answer>"],
        [unknown("search_web英文明确")],
    )
    stray = fetch.replace("</parameter>", '</parameter v2="">')
    bad2 = output_of(
        [think(f"Search {q}.") + good, think("Fetch it.") + stray, think("No page.") + "<answer>none</answer>"],
        [search_result(q), "Error executing tool 'fetch_web': invalid urls"],
    )
    return [(ok1, 1.0), (ok2, 1.0), (bad1, 0.0), (bad2, 0.0)]


def write_xml_run(root: Path, steps: int = 3, prompts: int = 4) -> Path:
    """A Qwen3.5 XML run (verl 0.9 V1 train dumps) under ``root/rollout``; returns that directory."""
    d = root / "rollout"
    for step in range(1, steps + 1):
        rows: list[dict[str, Any]] = []
        for k in range(prompts):
            q = f"population of town {step}-{k}"
            inp = qwen35_prompt(f"What is the {q}?")
            rollouts = xml_rollouts(q, str(1000 + 37 * k + step))
            if k == prompts - 1:  # a group where every rollout is clean and right
                rollouts = [rollouts[0], rollouts[1], rollouts[0], rollouts[1]]
            for s, (out, score) in enumerate(rollouts):
                rows.append({"input": inp, "output": out, "gts": "x", "score": score, "step": step,
                             "uid": f"{_uid(step, k)}_{s}_0"})
        rows.sort(key=lambda r: r["uid"])
        write_jsonl(d / f"{step}.jsonl", rows)
    return d


def write_clean_run(root: Path, steps: int = 2) -> Path:
    """A run with no malformed call at all (no error demonstrations can be made from it)."""
    d = root / "rollout"
    for step in range(1, steps + 1):
        rows = []
        for k in range(3):
            q = f"height of tower {step}-{k}"
            inp = qwen35_prompt(f"What is the {q}?")
            for s, (out, score) in enumerate(xml_rollouts(q, "42")[:2]):
                rows.append({"input": inp, "output": out, "gts": "x", "score": score - 0.5 * s, "step": step,
                             "uid": f"{_uid(step, k)}_{s}_0"})
        write_jsonl(d / f"{step}.jsonl", rows)
    return d


def write_hermes_run(root: Path, steps: int = 2, prompts: int = 3) -> Path:
    """A Qwen3 Hermes-JSON run (verl 0.9 V1 dumps, thinking disabled) with an unknown tool name."""
    d = root / "rollout"
    empty = "<think>\n\n</think>\n\n"
    for step in range(1, steps + 1):
        rows = []
        for k in range(prompts):
            q = f"mayor of city {step}-{k}"
            inp = hermes_prompt(f"Who is the {q}?") + empty
            good = hermes_call("search_web", queries=[q])
            ok = output_of([good, "The mayor is Ada Lovelace."], [search_result(q)]).replace(
                "</tool_response>\nassistant\n", "</tool_response>\nassistant\n" + empty)
            bad_call = hermes_call("search_webhook", queries=[q])
            bad = output_of([bad_call, "I do not know."], [unknown("search_webhook")]).replace(
                "</tool_response>\nassistant\n", "</tool_response>\nassistant\n" + empty)
            for s, (out, score) in enumerate([(ok, 1.0), (ok, 1.0), (bad, 0.0)]):
                rows.append({"input": inp, "output": out, "gts": "x", "score": score, "step": step,
                             "uid": f"{_uid(step, k)}_{s}_0"})
        write_jsonl(d / f"{step}.jsonl", rows)
    return d


def scan_dir(dump: Path, out: Path) -> Path:
    # ``trajlab.scan`` (the attribute) is shadowed by the submodule once imported, so import the function
    from trajlab.scan import ScanOptions, scan

    scan([dump], out, ScanOptions(jobs=1), progress=False)
    return out

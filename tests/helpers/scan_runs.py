"""A small V1 (0.9.x) verl train run that rots from a given step, plus a legacy val dump: the input of the scan,
runs and watch tests."""

from __future__ import annotations

from pathlib import Path

from helpers.verl_lines import (
    hermes_call,
    hermes_prompt,
    legacy_line,
    output_of,
    qwen35_prompt,
    v1_line,
    write_jsonl,
    xml_call,
)

GOOD = xml_call("search_web", queries=["japan gdp 2024"])
GARBLED = GOOD.replace("<function=search_web>", "<function=search_web英文明确>")
STRAY = GOOD.replace("</parameter>", '</parameter v2="">').replace("</function>", '</function v2="">')


def make_run(root: Path, steps: int = 30, rot_from: int = 20, per_step: int = 8) -> Path:
    """A V1 (0.9.x) train run with malformed calls from ``rot_from`` on, plus a legacy val dump."""
    for step in range(1, steps + 1):
        rows = []
        for i in range(per_step):
            q = f"question {i} of step {step}"
            bad = step >= rot_from and i % 2 == 0
            call = (GARBLED if i % 4 == 0 else STRAY) if bad else GOOD
            out = output_of(["<think>\nsearch first\n</think>\n\n" + call, "The answer is 42."], ["result text"], "0.9")
            rows.append(v1_line(step, qwen35_prompt(q), out, 0.0 if bad else 1.0, uid=f"{step:04d}{i // 4}", session=i % 4))
        write_jsonl(root / "rollout" / f"{step}.jsonl", rows)
    val = [legacy_line(10, hermes_prompt("val q"), output_of([hermes_call("search_web", queries=["v"]), "done"], ["r"], "0.7"), 1.0, reward=1.0)]
    write_jsonl(root / "validation" / "10.jsonl", val)
    return root

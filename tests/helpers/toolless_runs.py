"""Tool-less verl dumps shaped on real published lines (``/work/shared/corpus/real_dumps.dev.jsonl``): a
Qwen2.5-VL SVG run (darknoon/prefix-rl: legacy keys ``input, output, score, step, format, length, l2``, no uid,
the image placeholder stripped so every input reads the same) and GSM8K runs with and without ``<think>``
(ZyQiu6/verl_dev: ``input, output, score, step`` and ``gts``). Every figure a test checks is written down here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SVG_PROMPT = (
    "system\nYou are a helpful assistant.\nuser\nYou first analyze the input image, think about how to convert it "
    "into SVG format, then generate SVG code that would render the image exactly as you see it. Think about the key "
    "shapes, paths, and visual elements that need to be represented and their x/y coordinates and any nesting or "
    "transformations necessary.\n\nThe svg should have width 512 and height 512.\n\nInput image:\n\n\nFormatting:\n"
    "Your reasoning process MUST BE enclosed within <think></think> tags, immediately followed by <answer><svg ...>"
    "</svg></answer> tags containing the final SVG code or you will not receive any credit.\n\nassistant\n")
SVG = ('<svg width="512" height="512" xmlns="http://www.w3.org/2000/svg">\n  <rect x="100" y="100" width="400" '
       'height="50" fill="limegreen"/>\n</svg>')
THINK = "The image consists of a single, rectangular shape with a light green fill."

#: per step (16 records, rollout.n = 8: two images per step, 8 samples each)
SVG_STEP = (
    [f"<think>\n{THINK}\n</think>\n<answer>\n{SVG}\n</answer>"] * 10
    + [f"<think>\n{THINK}\n<answer>\n{SVG}\n</answer>"] * 3  # <think> never closed, complete answer: not truncated
    + [f"<think>\n{THINK}\n<think>\nAgain.\n</think>\n<answer>\n{SVG}\n</answer>"]  # two <think>, one </think>
    # the two longest outputs of the run, cut where the length limit fell (an output is truncated only where it
    # stops inside a structure *and* is near its run's longest output: trajlab.ending.near_length_limit)
    + [f"<think>\n{THINK}" + " The rectangle spans x 100 to 500 and y 100 to 150." * 20
       + " The rectangle is"]  # cut inside the reasoning: truncated (open_think)
    + [f"<think>\n{THINK}\n</think>\n<answer>\n<svg width=\"512\" height=\"512\">"
       + '\n  <path d="M 100 100 L 500 100 L 500 150 Z"/>' * 20 + '\n  <path d="M 100']  # cut in the answer
)
SVG_STEPS = 2


def svg_line(step: int, out: str, i: int) -> dict[str, Any]:
    out = out.replace('x="100"', f'x="{100 + 20 * step + i}"')  # every sample its own (the pool drops duplicates)
    return {"input": SVG_PROMPT, "output": out, "score": -1.371299791660542 + i / 100, "step": step,
            "format": 1.0, "length": -5.2005930791098915, "l2": 0.08669370412826538}


def make_svg_run(root: Path) -> Path:
    """``root/svg_run/{1,2}.jsonl``: 2 steps × 16 records, all inputs identical (the image was stripped).

    Per step: 14 final answers (4 of them after an unbalanced ``<think>``: 3 unclosed, 1 reopened), 2 truncated
    (``open_think``, ``open_answer``)."""
    d = root / "svg_run"
    d.mkdir(parents=True, exist_ok=True)
    for step in range(1, SVG_STEPS + 1):
        lines = [svg_line(step, out, i) for i, out in enumerate(SVG_STEP)]
        (d / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return d


GSM_QUESTIONS = [
    "John uses 5 liters of fuel per km to travel. How many liters of fuel should John plan to use if he plans to "
    "travel on two trips of 30 km and 20 km?",
    "Mr. Alonzo harvested 245.5 kg of tomatoes. He sold 125.5 kg to Mrs. Maxwell and 78 kg to Mr. Wilson. How many "
    "kilograms of tomatoes are not sold?",
]
GSM_SUFFIX = " Let's think step by step and output the final answer after \"####\".\nassistant\n"


def make_gsm8k_runs(root: Path) -> tuple[Path, Path]:
    """``root/gsm8k_plain`` (no ``<think>``, Qwen2.5 system turn) and ``root/gsm8k_think`` (``<think>`` kept, no
    system turn): 2 steps × 2 prompts × 4 samples each.

    plain, per step: 8 final answers. think, per step: per prompt 2 closed ``<think>`` + ``#### N`` (final), 1
    ``<think>`` never closed with no answer tags (truncated: open_think), 1 ``<think>…</think>`` and nothing after
    (no final answer: empty_answer)."""
    plain, think = root / "gsm8k_plain", root / "gsm8k_think"
    for d in (plain, think):
        d.mkdir(parents=True, exist_ok=True)
    for step in (1, 2):
        p_lines, t_lines = [], []
        for q in GSM_QUESTIONS:
            for k in range(4):
                p_lines.append({"input": "system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                                         f"assistant.\nuser\n{q}{GSM_SUFFIX}",
                                "output": f"Step by step: 150 + 100 = 250.\n\n#### {250 + k}", "score": float(k == 0),
                                "step": step})
                out = ["<think>\nOkay, let's see. 30 times 5 is 150.\n</think>\n\nTotal: 250 liters.\n\n#### 250",
                       "<think>\nOkay, let's see. 30 times 5 is 150.\n</think>\n\n#### 250",
                       "<think>\nOkay, let's see. 30 times 5 is 150." + " Check: 5 liters per km, 30 km." * 4
                       + " Then 20",  # the longest output of the run, cut in the reasoning: truncated
                       "<think>\nOkay, let's see.\n</think>\n\n"][k]
                t_lines.append({"input": f"user\n{q}{GSM_SUFFIX}", "output": out, "gts": "250",
                                "score": float(k < 2), "step": step})
        (plain / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in p_lines), encoding="utf-8")
        (think / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in t_lines), encoding="utf-8")
    return plain, think


def make_thinking_template_run(root: Path) -> Path:
    """``root/gsm8k_open_think``: the prompt ends inside ``<think>`` (a thinking template's generation prompt), so
    outputs have ``</think>`` only. Per step (1 prompt × 4): 2 close the reasoning and answer (final), 1 never
    closes it and stops well short of the run's longest output (stopped on its own: stopped_in_think, not
    truncated), 1 never closes it but ends with a complete ``<answer>`` (final)."""
    d = root / "gsm8k_open_think"
    d.mkdir(parents=True, exist_ok=True)
    outs = ["30 times 5 is 150.\n</think>\n\n#### 250", "150 + 100.\n</think>\n\nSo 250 liters.\n\n#### 250",
            "30 times 5 is 150, and 20 times", "150 + 100 = 250.\n<answer>250</answer>"]
    for step in (1, 2):
        lines = [{"input": f"user\n{GSM_QUESTIONS[0]}{GSM_SUFFIX}<think>\n", "output": o, "score": 1.0, "step": step}
                 for o in outs]
        (d / f"{step}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return d

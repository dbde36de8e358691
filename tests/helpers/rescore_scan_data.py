"""A small verl run for the rescore tests: real V1 (0.9.x) dump lines with healthy and malformed Qwen3.5-XML
calls, scanned with the real ``trajlab.scan``, plus tiny HF checkpoints carrying the real Qwen3 tokenizer."""

from __future__ import annotations

from pathlib import Path

from helpers.rescore_fixtures import qwen3_tokenizer_dir, save_tiny_model
from helpers.verl_lines import output_of, qwen35_prompt, v1_line, write_jsonl, xml_call

GOOD = xml_call("search_web", queries=["japan gdp 2024"])
GARBLED = GOOD.replace("<function=search_web>", "<function=search_web英文明确>")
STRAY = GOOD.replace("</parameter>", '</parameter v2="">')
CHATTY = GOOD + "\n\nI will now wait for the results."


def write_run(root: Path, steps: int = 4, per_step: int = 3) -> Path:
    """``root/rollout/{1..steps}.jsonl``: healthy early, malformed calls (stray attribute, garbled name,
    text after the call) from step 3 on; every trajectory has two assistant turns and one tool turn."""
    bad = [STRAY, GARBLED, CHATTY]
    for step in range(1, steps + 1):
        rows = []
        for i in range(per_step):
            call = bad[(step + i) % len(bad)] if step >= 3 and i != 0 else GOOD
            out = output_of(
                [f"<think>\nStep {step}, try {i}: search.\n</think>\n\n{call}", f"Japan's GDP was {4 + i}.1T USD."],
                [f"Japan GDP 2024: {4 + i}.1 trillion USD (result {step}-{i})"],
            )
            inp = qwen35_prompt(f"What was Japan's GDP in 2024? (case {step}-{i})")
            rows.append(v1_line(step, inp, out, 1.0 if call == GOOD else 0.0, session=i))
        write_jsonl(root / "rollout" / f"{step}.jsonl", rows)
    return root


def scan_run(tmp: Path, **kw) -> Path:
    """Write the run under ``tmp/dumps`` and scan it into ``tmp/out`` with the real scanner."""
    from trajlab.scan import ScanOptions, scan

    dumps = write_run(tmp / "dumps", **kw)
    out = tmp / "out"
    scan([dumps], out, ScanOptions(jobs=1), progress=False)
    return out


def checkpoints(tmp: Path, model_type: str = "qwen3") -> tuple[Path, Path]:
    """Two tiny HF checkpoints (different seeds) with the real Qwen3 tokenizer files."""
    tok = qwen3_tokenizer_dir()
    a = save_tiny_model(tmp / "ckpt_a", model_type, tokenizer_dir=tok, seed=0)
    b = save_tiny_model(tmp / "ckpt_b", model_type, tokenizer_dir=tok, seed=1)
    return a, b

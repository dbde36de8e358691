"""gpt-oss sample records as the model emitted them: harmony text with its special tokens kept.

``sample_data/gpt_oss_run`` is written as a ``skip_special_tokens=True`` dump shows it. This rebuilds the same
trajectories (the generator's own seeded ``iter_step``, with its four gpt-oss text pieces re-rendered with
``<|channel|>``, ``<|message|>``, ``<|constrain|>``, ``<|call|>``, ``<|end|>``, ``<|start|>``, ``<|return|>``), so a
test can check that stripping the special tokens gives back the dump's exact output.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

GENERATOR = Path(__file__).resolve().parents[2] / "sample_data" / "generate_families.py"
HARMONY_SPECIALS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|call|>", "<|return|>"]
_SPECIAL = re.compile("|".join(re.escape(t) for t in HARMONY_SPECIALS))


def strip_specials(text: str) -> str:
    return _SPECIAL.sub("", text)


def kept_records(step: int) -> list[dict[str, Any]]:
    """The records of ``gpt_oss_run`` step ``step`` with the response's special tokens kept (prompt as dumped)."""
    spec = importlib.util.spec_from_file_location("trajlab_test_generate_families", GENERATOR)
    assert spec is not None and spec.loader is not None
    gf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gf)
    plain_call = gf.call_text

    def call_text(family: str, name: str, args: Any, idx: int, defect: str, rng: Any) -> str:
        s = plain_call(family, name, args, idx, defect, rng)
        chan, rest = s.split(" to=functions.", 1)
        fname, js = rest.split(" json", 1)
        end = "" if defect == "truncated" else "<|call|>"
        return f"<|channel|>{chan} to=functions.{fname} <|constrain|>json<|message|>{js}{end}"

    gf.call_text = call_text
    gf.tool_block = lambda family, name, idx, result: (
        f"<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{json.dumps(result)}<|end|>"
        "<|start|>assistant")
    gf.think = lambda family, text: f"<|channel|>analysis<|message|>{text}<|end|><|start|>assistant"
    gf.final = lambda family, text: f"<|channel|>final<|message|>{text}<|return|>"
    return [rec for rec, _labels in gf.iter_step("gpt_oss", step)]

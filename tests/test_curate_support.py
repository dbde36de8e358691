"""The small verl dumps of ``tests/helpers/curate_runs.py`` are what the SFT-pool tests rely on: real verl 0.9 V1
lines."""

from __future__ import annotations

import json

from helpers.curate_runs import write_xml_run


def test_xml_run_lines_are_verl_v1(tmp_path):
    d = write_xml_run(tmp_path, steps=1, prompts=2)
    lines = (d / "1.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 8
    rec = json.loads(lines[0])
    assert set(rec) == {"input", "output", "gts", "score", "step", "uid"}
    assert rec["input"].startswith("system\n# Tools") and rec["input"].endswith("\nassistant\n")
    assert any("\nuser\n<tool_response>\n" in json.loads(x)["output"] for x in lines)

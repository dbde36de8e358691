"""`trajlab scan` with the classifier: the calls and findings tables agree with the ground truth of the
sample-data generator (every call it wrote, with the defects it injected), offsets point into the output, and
the per-step summary breaks the malformed rate down by category.

The dumps are generated into a temp dir by ``sample_data/generate.py`` (loaded with importlib, its public API:
``iter_step_trajectories`` + ``dump_line``), so the test does not depend on the committed sample files.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn

GEN = Path(__file__).resolve().parents[1] / "sample_data" / "generate.py"

# generator defect -> trajlab categories that must be reported for that call
DEFECTS = {
    "garbled_name": {"garbled_function_name", "unknown_function"},
    "stray_attribute": {"stray_attribute"},
    "unclosed_parameter": {"unclosed_tag"},
    "unclosed_function": {"unclosed_tag"},
    "missing_tool_call_close": {"missing_call_close"},
    "json_in_xml": {"format_mismatch"},
    "text_after_call": {"text_after_call"},
    "wrong_parameter": {"unknown_parameter"},
    "truncated_call": {"truncated_call"},
    "invalid_json": {"invalid_json"},
    "name_equals_hybrid": {"format_mismatch"},
    "unknown_function": {"unknown_function", "garbled_function_name"},
    "double_braces": {"invalid_json"},
    "missing_arguments_key": {"invalid_arguments"},
    "arguments_string": {"invalid_arguments"},
}


def _generator() -> Any:
    if not GEN.exists():
        pytest.skip("sample_data/generate.py not present")
    spec = importlib.util.spec_from_file_location("trajlab_sample_generate", GEN)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tools_of(prompt: str) -> list[dict[str, Any]]:
    block = re.findall(r"<tools>\n(.*?)\n</tools>", prompt, re.DOTALL)[-1]
    out = []
    for line in block.splitlines():
        obj = json.loads(line)
        out.append(obj.get("function", obj))
    return out


def _scan_run(tmp_path: Path, run: str, steps: range, *, pass_tools: bool) -> tuple[Path, dict, list]:
    from trajlab.scan import ScanOptions, scan

    gen = _generator()
    dump = tmp_path / run
    dump.mkdir()
    labels: dict[tuple[str, int], Any] = {}
    prompt = ""
    for st in steps:
        trajs = list(gen.iter_step_trajectories(st, run=run))
        (dump / f"{st}.jsonl").write_text("".join(gen.dump_line(t.record) for t in trajs), encoding="utf-8")
        for i, t in enumerate(trajs, 1):
            labels[(f"{st}.jsonl", i)] = t
            prompt = t.record["input"]
    tools = _tools_of(prompt)
    out = tmp_path / f"out_{run}"
    # the hermes prompt mentions "<tools></tools>" before the real block; pass the schema explicitly so the
    # test checks the classifier, not the prompt parser
    scan([dump], out, ScanOptions(tools=tools if pass_tools else None, jobs=1), progress=False)
    return out, labels, tools


@pytest.mark.parametrize("run,steps,pass_tools", [("qwen35_xml", range(110, 151, 8), False),
                                                  ("qwen3_hermes", range(24, 41, 4), True)])
def test_scan_tables_match_generator_ground_truth(tmp_path: Path, run: str, steps: range, pass_tools: bool) -> None:
    out, labels, tools = _scan_run(tmp_path, run, steps, pass_tools=pass_tools)
    traj = pq.read_table(out / "trajectories.parquet").to_pylist()
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    findings = pq.read_table(out / "findings.parquet").to_pylist()
    by_traj: dict[str, list[dict]] = {}
    for c in calls:
        by_traj.setdefault(c["trajectory_id"], []).append(c)
    n_defective = 0
    for row in traj:
        assert row["schema_checked"]
        truth = labels[(Path(row["source_path"]).name, row["source_line"])]
        got = sorted(by_traj.get(row["trajectory_id"], []), key=lambda c: (c["turn_index"], c["call_index"]))
        assert len(got) == len(truth.calls), row["source_line"]
        for c, lab in zip(got, truth.calls, strict=True):
            output = row["output"]
            assert output[c["char_start"]:c["char_end"]] == c["raw"]
            if lab.defects:
                n_defective += 1
                want = set().union(*(DEFECTS[d] for d in lab.defects))
                # not ok, named right: malformed where verl drops or mangles it, a warning where it runs
                assert c["status"] != "ok" and set(c["categories"]) & want, (lab, c["categories"], c["raw"])
            else:
                assert c["status"] == "ok" and c["categories"] == [], (c["categories"], c["raw"])
    assert n_defective >= 10  # late steps of the schedule: plenty of malformed calls to check
    outputs = {r["trajectory_id"]: r["output"] for r in traj}
    call_ids = {c["call_id"] for c in calls}
    for f in findings:
        assert 0 <= f["char_start"] <= f["char_end"] <= len(outputs[f["trajectory_id"]])
        assert f["call_id"] is None or f["call_id"] in call_ids
        assert f["category"] != "internal_error"
    # garbled names: the finding's span is exactly the name as written
    for f in findings:
        if f["category"] == "garbled_function_name":
            written = outputs[f["trajectory_id"]][f["char_start"]:f["char_end"]]
            assert written not in {t["name"] for t in tools}
    # repairs are offered for a good share of the malformed calls, and each one classifies clean
    repaired = [c for c in calls if c["repaired"] is not None]
    assert repaired
    fmt = traj[0]["tool_format"]
    for c in repaired[:40]:
        again = analyze_turn(c["repaired"], tool_format=fmt, tools=tools, context=TurnContext())
        assert not [x for x in again.findings if x.severity in ("error", "warning")]
        assert json.loads(c["repaired_arguments"]) == again.calls[0].arguments


def test_steps_table_breaks_the_malformed_rate_down_by_category(tmp_path: Path) -> None:
    out, _labels, _tools = _scan_run(tmp_path, "qwen35_xml", range(130, 151, 10), pass_tools=False)
    steps = pq.read_table(out / "steps.parquet").to_pylist()
    calls = pq.read_table(out / "calls.parquet").to_pylist()
    assert steps
    for s in steps:
        mine = [c for c in calls if c["step"] == s["step"] and c["split"] == s["split"]]
        counts = dict(s["category_counts"])
        assert s["malformed_calls"] == sum(c["status"] == "malformed" for c in mine)
        expected: dict[str, int] = {}
        for c in mine:  # the breakdown of the malformed rate: malformed calls only (warnings are counted apart)
            for cat in c["categories"] if c["status"] == "malformed" else ():
                expected[cat] = expected.get(cat, 0) + 1
        assert counts == expected
        assert s["warning_calls"] == sum(c["status"] == "warning" for c in mine)
    assert any(dict(s["category_counts"]) for s in steps)

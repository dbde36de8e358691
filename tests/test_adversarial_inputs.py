"""Adversarial suite, classes 2, 3 and 9 of issue 11: nothing beside the dumps hides them, one bad record or file
never aborts a scan or costs its good neighbours, and split names come from verl's layout, not from substrings.

Hostile inputs are built from real verl dump lines (tests/verl_lines.py); the hypothesis properties damage real
lines and whole files and check that every intact record is still read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.adversarial import (
    assert_clean_failure,
    cli,
    good_line,
    good_record,
    scan_json,
    snapshot,
    write_run,
)
from helpers.mutations import mutate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajlab.ingest import detect_format, find_inputs, iter_records, plan_tasks
from trajlab.model import IngestError, RawTrajectory

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


def _records(path: Path, rel: str | None = None) -> tuple[list[RawTrajectory], list[IngestError]]:
    fmt, why = detect_format(path)
    assert fmt is not None, why
    recs: list[RawTrajectory] = []
    errs: list[IngestError] = []
    for t in plan_tasks(path, rel or path.name, fmt):
        for x in iter_records(t):
            (errs if isinstance(x, IngestError) else recs).append(x)
    return recs, errs


def _traj(out: Path) -> list[dict]:
    return pq.read_table(out / "trajectories.parquet").to_pylist()


# ---------------------------------------------------------------------------------------------------- class 2
@pytest.mark.parametrize("beside", ["config.json", "tokenizer_config.json", "pytorch_model.bin", "model.pt",
                                    "model.safetensors", "config+weights"])
def test_model_files_beside_dumps_never_hide_them(tmp_path, capfd, beside):
    run = write_run(tmp_path / "run")
    d = run / "rollout"
    if beside == "config+weights":  # the full checkpoint shape in the same directory as the dumps
        (d / "config.json").write_text(json.dumps({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}))
        (d / "model.safetensors").write_bytes(b"\0" * 16)
    elif beside.endswith(".json"):
        (d / beside).write_text(json.dumps({"model_type": "qwen2"}))
    else:
        (d / beside).write_bytes(b"\0" * 16)
    rc, s, _ = scan_json([run, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 12 and s["files"] == 3
    assert s["ingest_errors"] == 0  # the model's JSON is skipped (and listed), not an error


def test_a_real_checkpoint_directory_is_skipped_and_reported(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    hf = run / "checkpoints" / "global_step_3" / "actor" / "huggingface"
    hf.mkdir(parents=True)
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (hf / "generation_config.json").write_text("{}")
    (hf / "trainer_state.json").write_text("{}")
    (hf.parent / "model_world_size_2_rank_0.pt").write_bytes(b"\0")
    (hf.parent / "fsdp_config.json").write_text('{"world_size": 2}')
    (hf.parent / "extra_state_world_size_2_rank_0.json").write_text("{}")
    rc, s, _ = scan_json([run, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 12 and s["ingest_errors"] == 0
    said = " ".join(s["skipped"])
    assert "checkpoint" in said and "global_step_3/actor" in said and "model/tokenizer JSON" in said


def test_skipping_is_never_silent(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    (run / "rollout" / ".hidden.jsonl").write_bytes(good_line(9))
    os.symlink("nowhere.jsonl", run / "rollout" / "dangling.jsonl")
    rc, s, _ = scan_json([run, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 12
    assert any("hidden" in x for x in s["skipped"])
    assert any("dangling.jsonl" in x and "link" in x for x in s["ingest_error_examples"])


def test_compressed_dumps_are_listed_as_not_read(tmp_path, capfd):
    import gzip

    run = write_run(tmp_path / "run")
    (run / "rollout" / "9.jsonl.gz").write_bytes(gzip.compress(good_line(9)))
    rc, s, _ = scan_json([run, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 12
    (said,) = [x for x in s["skipped"] if "compressed" in x]
    assert "rollout/9.jsonl.gz" in said and "gunzip" in said


@pytest.mark.parametrize("name, step", [("12.jsonl", 12), ("run-12.jsonl", 12), ("x-step-3.json", 3),
                                        ("val-4.jsonl", 4), ("0.jsonl", 0), ("-1.jsonl", None),
                                        ("\uff11\uff12.jsonl", None), ("\u0663.jsonl", None)])
def test_step_from_the_file_name(name, step):
    """ASCII digits only (Python's \\d also takes full-width and Arabic-Indic ones), and a name that starts with
    a minus sign is not a step."""
    from trajlab.ingest.fields import step_from_name

    assert step_from_name(name.encode().decode("unicode_escape")) == step


@pytest.mark.skipif(ROOT_USER, reason="root reads every file; permissions cannot be tested")
def test_unreadable_directory_and_file_are_errors_and_warnings(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    (run / "locked").mkdir()
    (run / "locked" / "9.jsonl").write_bytes(good_line(9))
    (run / "rollout" / "2.jsonl").chmod(0)
    (run / "locked").chmod(0)
    try:
        rc, out, err = cli(["scan", run, "-o", tmp_path / "out", "--no-progress", "-j", "1"], capfd)
    finally:
        (run / "locked").chmod(0o755)
        (run / "rollout" / "2.jsonl").chmod(0o644)
    assert rc == 0 and b"warning:" in err and b"locked" in err and b"2.jsonl" in err
    errs = pq.read_table(tmp_path / "out" / "ingest_errors.parquet").to_pylist()
    assert {e["source_path"] for e in errs} >= {"locked", "rollout/2.jsonl"}


# ---------------------------------------------------------------------------------------------------- class 3
def _around(bad: bytes, step: int = 5) -> bytes:
    """Two good records, the bad one, two good records."""
    return good_line(step, 0) + good_line(step, 1) + bad + good_line(step, 2) + good_line(step, 3)


DEEP = b'{"input": "x", "output": ' + b"[" * 100_000 + b"]" * 100_000 + b', "score": 1}\n'
HOSTILE_LINES = {
    "deep_nesting_100k": DEEP,
    "score_too_big_for_float": json.dumps({**good_record(5, 7), "score": 10 ** 400}).encode() + b"\n",
    "step_too_big_for_int64": json.dumps({**good_record(5, 7), "step": 10 ** 30}).encode() + b"\n",
    "negative_huge_step": json.dumps({**good_record(5, 7), "step": -(10 ** 19)}).encode() + b"\n",
    "int_with_5000_digits": b'{"input": "x", "output": "y", "score": ' + b"9" * 5000 + b"}\n",
    "float_overflow_string": json.dumps({**good_record(5, 7), "score": "1e999999"}).encode() + b"\n",
    "nul_bytes": b'{"input": "\x00", "output": "\x00\x00"}\n',
    "not_utf8": b'{"input": "\xff\xfe", "output": "caf\xe9", "score": 1}\n',
    "lone_surrogate": b'{"input": "\\ud800", "output": "\\udfff", "score": 1, "step": 5}\n',
    "array_line": b"[1, 2, 3]\n",
    "string_line": b'"just a string"\n',
    "cr_only": b"\r\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LINES))
def test_one_hostile_record_costs_only_itself(tmp_path, capfd, name):
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    (d / "5.jsonl").write_bytes(_around(HOSTILE_LINES[name]))
    rc, s, err = scan_json([tmp_path / "run", "-o", tmp_path / "out"], capfd)
    assert rc == 0 and b"Traceback" not in err
    lines = {r["source_line"] for r in _traj(tmp_path / "out")}
    assert {1, 2, 4, 5} <= lines  # every good neighbour
    bad_line_reported = any(e["line"] == 3 for e in pq.read_table(tmp_path / "out" / "ingest_errors.parquet").to_pylist())
    assert 3 in lines or bad_line_reported  # the bad one is read (where unambiguous) or reported at its line


@pytest.mark.parametrize("name", ["bom", "deep_first_line", "garbage_first_lines", "huge_first_line",
                                  "json_array_json", "json_array_jsonl", "pretty_json_array", "crlf"])
def test_format_detection_never_discards_a_file_for_its_first_lines(tmp_path, capfd, name):
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    recs = [good_record(6, i) for i in range(3)]
    suffix, n_good = ".jsonl", 3
    if name == "bom":
        data = b"\xef\xbb\xbf" + b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    elif name == "deep_first_line":
        data = b"[" * 100_000 + b"]" * 100_000 + b"\n" + b"".join(json.dumps(r).encode() + b"\n" for r in recs)
    elif name == "garbage_first_lines":
        data = b"### log header\n" * 20 + b'{"unrelated": 1}\n' * 10 + b"".join(
            json.dumps(r).encode() + b"\n" for r in recs)
    elif name == "huge_first_line":  # longer than detection parses (16 MB): judged by its head
        big = {**recs[0], "output": recs[0]["output"] + " " + "x" * (17 << 20)}
        data = json.dumps(big).encode() + b"\n" + b"".join(json.dumps(r).encode() + b"\n" for r in recs[1:])
    elif name == "json_array_json":
        suffix, data = ".json", json.dumps(recs).encode()
    elif name == "json_array_jsonl":
        data = json.dumps(recs).encode() + b"\n"
    elif name == "pretty_json_array":
        suffix, data = ".json", json.dumps(recs, indent=2).encode()
    else:
        data = b"".join(json.dumps(r).encode() + b"\r\n" for r in recs)
    (d / f"6{suffix}").write_bytes(data)
    rc, s, err = scan_json([tmp_path / "run", "-o", tmp_path / "out"], capfd)
    assert rc == 0 and b"Traceback" not in err
    assert s["trajectories"] == n_good, s["ingest_error_examples"]
    assert {r["split"] for r in _traj(tmp_path / "out")} == {"train"}


def test_damaged_parquet_page_costs_only_its_row_group(tmp_path, capfd):
    d = tmp_path / "logs"
    d.mkdir()
    rows = [{"messages": [{"role": "user", "content": f"q{i} " + "z" * 2000},
                          {"role": "assistant", "content": f"answer {i}"}]} for i in range(300)]
    p = d / "log.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p, row_group_size=100, compression="snappy")
    raw = bytearray(p.read_bytes())
    off = pq.ParquetFile(p).metadata.row_group(1).column(0).data_page_offset
    for k in range(off + 40, off + 400):
        raw[k] ^= 0xFF
    p.write_bytes(bytes(raw))
    rc, s, _ = scan_json([d, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 200
    assert any("row group 1" in x and "rows 101-200" in x for x in s["ingest_error_examples"])


def test_symlink_loops_and_non_utf8_names(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    d = run / "rollout"
    os.symlink("b.jsonl", d / "a.jsonl")
    os.symlink("a.jsonl", d / "b.jsonl")
    os.symlink(".", d / "self")
    os.symlink(str(run), d / "up")
    (d / os.fsdecode(b"\xff\xfe7.jsonl")).write_bytes(good_line(7))
    rc, s, err = scan_json([run, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 13
    paths = {r["source_path"] for r in _traj(tmp_path / "out")}
    assert "rollout/\\xff\\xfe7.jsonl" in paths  # stored as valid UTF-8, visibly
    assert sum("link" in x for x in s["ingest_error_examples"]) == 2
    assert any("already walked" in x for x in s["skipped"])


def test_a_deep_record_inside_a_json_list_costs_only_itself(tmp_path):
    p = tmp_path / "fcl-step-3.json"
    recs = [json.dumps(good_record(3, i)) for i in range(4)]
    p.write_text("[" + ",".join([recs[0], recs[1], '{"output": ' + "[" * 5000 + "]" * 5000 + "}", recs[2],
                                 recs[3]]) + "]")
    got, errs = _records(p)
    assert [r.source_line for r in got] == [1, 2, 4, 5]
    assert any(e.line == 3 for e in errs)


# ---------------------------------------------------------------------------------------------------- class 9
@pytest.mark.parametrize(("layout", "split"), [
    ("grpo-eval-v2/rollout/{s}.jsonl", "train"), ("grpo-eval-v2/{s}.jsonl", "train"),
    ("eval_sweep/run1/rollout_data/{s}.jsonl", "train"), ("my-val-experiment/rollout/{s}.jsonl", "train"),
    ("run/validation/{s}.jsonl", "val"), ("run/val_generations/{s}.jsonl", "val"), ("run/eval/{s}.jsonl", "val"),
])
def test_split_comes_from_the_dump_directory_not_a_substring(tmp_path, capfd, layout, split):
    for s in (1, 2):
        p = tmp_path / "runs" / layout.format(s=s)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(good_line(s, 0) + good_line(s, 1))
    rc, _, _ = scan_json([tmp_path / "runs", "-o", tmp_path / "out"], capfd)
    assert rc == 0
    assert {r["split"] for r in _traj(tmp_path / "out")} == {split}


def test_validation_records_say_so_themselves(tmp_path, capfd):
    d = tmp_path / "grpo-eval-v2" / "dumps"
    d.mkdir(parents=True)
    d.joinpath("4.jsonl").write_bytes(b"".join(
        json.dumps({**good_record(4, i), "reward": 1.0}).encode() + b"\n" for i in range(2)) + good_line(4, 5))
    assert scan_json([tmp_path / "grpo-eval-v2", "-o", tmp_path / "out"], capfd)[0] == 0
    assert sorted(r["split"] for r in _traj(tmp_path / "out")) == ["train", "val", "val"]


# ------------------------------------------------------------------------------------------- properties
FRAGMENTS = st.sampled_from(["\x00", "\x1b[2J", "\ufeff", "\\ud800", "{", "}", "[", "]", '"', "\\", ",", ":",
                             "\n", "\r", "99999999999999999999999999", "1e999", "NaN", "\u202e", "\x9b"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_damaged_lines_cost_only_themselves(tmp_path_factory, data):
    """Damage 1-3 real dump lines (text edits, hostile fragments): reading never raises and every intact line
    is a record, at its own line number."""
    tmp = tmp_path_factory.mktemp("prop_lines")
    lines = [good_line(8, i).decode().rstrip("\n") for i in range(6)]
    hit = sorted(set(data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=3))))
    for i in hit:
        lines[i] = mutate(data.draw, lines[i], FRAGMENTS).replace("\n", "\\n").replace("\r", "\\r")
    p = tmp / "8.jsonl"
    p.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    fmt, _ = detect_format(p)
    assert fmt == "verl_jsonl"  # five or more intact lines: the file is never discarded
    recs = [x for t in plan_tasks(p, p.name, fmt) for x in iter_records(t) if isinstance(x, RawTrajectory)]
    intact = {i + 1 for i in range(6) if i not in hit}
    assert intact <= {r.source_line for r in recs}


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_property_damaged_whole_files_never_sink_a_scan(tmp_path_factory, data):
    """Damage a whole dump file at the byte level (flips, cuts, inserted BOM/NUL/garbage, a truncated tail):
    the scan exits 0, the other file's records are all kept, nothing raises."""
    from trajlab.scan import ScanOptions, scan

    tmp = tmp_path_factory.mktemp("prop_files")
    run = write_run(tmp / "run", steps=2, per_step=4)
    victim = run / "rollout" / "2.jsonl"
    raw = bytearray(victim.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert", "truncate"]))
        i = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if op == "flip":
            if raw:  # an earlier truncate may have emptied the file: nothing to flip
                raw[i] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del raw[i:i + data.draw(st.integers(1, 4096))]
        elif op == "insert":
            raw[i:i] = data.draw(st.sampled_from([b"\xef\xbb\xbf", b"\x00" * 9, b"\xff\xfe", b"\n\n", b"[[[["]))
        else:
            del raw[i:]
    victim.write_bytes(bytes(raw))
    summary = scan([run], tmp / "out", ScanOptions(jobs=1), progress=False)
    kept = [r for r in _traj(tmp / "out") if r["source_path"] == "rollout/1.jsonl"]
    assert len(kept) == 4 and summary.trajectories >= 4


def test_scan_of_a_trajlab_output_is_not_an_error(tmp_path, capfd):
    """Pointing scan at a tree holding an earlier trajlab output reads the dumps and lists the output as skipped."""
    run = write_run(tmp_path / "run")
    assert scan_json([run / "rollout", "-o", tmp_path / "out"], capfd)[0] == 0
    (tmp_path / "all").mkdir()
    os.rename(tmp_path / "out", tmp_path / "all" / "out")
    os.rename(run, tmp_path / "all" / "run")
    before = snapshot(tmp_path / "all" / "out")
    rc, s, _ = scan_json([tmp_path / "all", "-o", tmp_path / "out2"], capfd)
    assert rc == 0 and s["trajectories"] == 12 and any("trajlab output" in x for x in s["skipped"])
    assert snapshot(tmp_path / "all" / "out") == before


def test_discovery_of_a_fifo_does_not_hang(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    os.mkfifo(run / "rollout" / "9.jsonl")
    rc, s, _ = scan_json([run, "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 12
    assert any("9.jsonl" in x and "regular file" in x for x in s["ingest_error_examples"])
    files, errors, _ = find_inputs([run / "rollout" / "9.jsonl"])
    assert not files and "regular file" in errors[0].reason
    # the metrics-log search walks the same tree: FIFOs named like a file-logger log or an event file, beside the
    # dumps and in verl's default tensorboard_log/ layout, are never opened
    tb = tmp_path / "tensorboard_log" / "proj" / "run"
    tb.mkdir(parents=True)
    os.mkfifo(tb / "events.out.tfevents.1.host")
    os.mkfifo(run / "metrics.jsonl")
    rc, s, _ = scan_json([run, "-o", tmp_path / "out3", "--metrics", str(tb)], capfd)
    assert rc == 0 and s["trajectories"] == 12


def test_missing_input_alone_with_strict_is_one_line(tmp_path, capfd):
    rc, _, err = cli(["scan", tmp_path / "nope", "-o", tmp_path / "out", "--strict", "--no-progress"], capfd)
    assert_clean_failure(rc, err)

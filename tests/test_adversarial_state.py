"""Adversarial suite, classes 4 and 6 of issue 11: pathological sizes stay bounded (the per-turn cap), and the
state of an output directory is consistent or visibly not (--full, damaged tables, killed runs, stale temp
files, the writer lock, workers that die with the scan, byte-identical re-runs)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.adversarial import (
    RAW_CONTROL,
    assert_clean_failure,
    cli,
    good_line,
    good_record,
    scan_json,
    write_run,
)

from trajlab.scan import ScanOptions, scan

TABLES = ("trajectories", "turns", "calls", "findings", "steps", "ingest_errors")


def _hashes(out: Path) -> dict[str, str]:
    return {t: hashlib.sha256((out / f"{t}.parquet").read_bytes()).hexdigest() for t in TABLES}


# ---------------------------------------------------------------------------------------------------- class 6
def test_full_rebuilds_when_content_changes_under_the_same_size_and_mtime(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    assert scan_json([run, "-o", out], capfd)[0] == 0
    f = run / "rollout" / "2.jsonl"
    st = f.stat()
    data = f.read_bytes()
    changed = data.replace(b"answer 1", b"answer 7")  # same length
    assert len(changed) == len(data) and changed != data
    f.write_bytes(changed)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert scan_json([run, "-o", out, "--full"], capfd)[0] == 0
    outs = [r["output"] for r in pq.read_table(out / "trajectories.parquet").to_pylist()]
    assert any("answer 7" in o for o in outs)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete"])
def test_a_damaged_table_is_rebuilt_not_fatal(tmp_path, capfd, damage):
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    assert scan_json([run, "-o", out], capfd)[0] == 0
    good = _hashes(out)
    p = out / "calls.parquet"
    if damage == "truncate":
        p.write_bytes(p.read_bytes()[:100])
    elif damage == "garbage":
        p.write_bytes(b"\0" * 4096)
    else:
        p.unlink()
    assert scan_json([run, "-o", out], capfd)[0] == 0
    assert _hashes(out) == good


@pytest.mark.parametrize("reader", ["sql", "report", "show", "build-sft-pool"])
def test_readers_refuse_a_directory_a_killed_scan_left(tmp_path, capfd, reader):
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    assert scan_json([run, "-o", out], capfd)[0] == 0
    from trajlab.outpaths import begin_write

    begin_write(out)  # what a scan killed between its first table and its manifest leaves
    args = {"sql": ["sql", out, "SELECT 1"], "report": ["report", out, "-o", tmp_path / "r.html"],
            "show": ["show", out, "--step", "1", "--index", "0"],
            "build-sft-pool": ["build-sft-pool", out, "--no-progress"]}[reader]
    rc, _, err = cli(args, capfd)
    assert_clean_failure(rc, err)
    assert b"did not finish" in err
    assert scan_json([run, "-o", out], capfd)[0] == 0  # the next scan repairs it
    assert cli(args[:3] if reader == "sql" else args, capfd)[0] in (0, 2) and not (out / ".trajlab-incomplete").exists()


def test_stale_temp_files_are_removed_and_user_files_kept(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    assert scan_json([run, "-o", out], capfd)[0] == 0
    part_dir = next(d for d in (out / ".parts").iterdir() if d.is_dir())
    stale = [out / ".calls.parquet.k1ll3d.tmp", out / ".manifest.json.x.tmp", part_dir / ".00000.turns.arrow.9.a.tmp"]
    for s in stale:
        s.write_bytes(b"half")
    (out / "notes.tmp").write_text("mine")
    assert scan_json([run, "-o", out], capfd)[0] == 0
    assert not any(s.exists() for s in stale)
    assert (out / "notes.tmp").read_text() == "mine"


def test_a_second_scan_into_the_same_directory_is_refused(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    from trajlab.outpaths import prepare_out_dir, write_lock

    prepare_out_dir(out, kind="scan")
    with write_lock(out):  # a first scan is running
        rc, _, err = cli(["scan", run, "-o", out, "--no-progress"], capfd)
    assert_clean_failure(rc, err)
    assert b"another trajlab run" in err
    assert scan_json([run, "-o", out], capfd)[0] == 0  # released: the next one runs


def test_part_files_written_at_once_never_collide(tmp_path):
    """Writers of one unit's part files at the same moment (two scans racing) never collide on a temp file."""
    from trajlab.ingest import FileTask
    from trajlab.scan.parts import PART_TABLES, RangeParts, part_path, write_unit_parts

    tables = {s.name: s.schema.empty_table() for s in PART_TABLES}
    tables["ingest_errors"] = pa.Table.from_pylist(
        [{"source_path": "a.jsonl", "line": i, "reason": "x" * 50} for i in range(1000)],
        schema=tables["ingest_errors"].schema)
    task = FileTask(str(tmp_path / "a.jsonl"), "a.jsonl", "verl_jsonl", None, 1, 0, 10, 1, 0)
    unit = tmp_path / "u-0123456789abcdef0123"
    errors: list[BaseException] = []

    def go() -> None:
        try:
            for _ in range(20):
                write_unit_parts(unit, [RangeParts(task, "d" * 40, tmp_path / "pdir", tables, "records")])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    with pa.memory_map(str(part_path(unit, "ingest_errors"))) as src:
        assert pa.ipc.open_file(src).read_all().equals(tables["ingest_errors"])
    assert not [p for p in unit.iterdir() if p.name.endswith(".tmp")]


def test_rescans_are_byte_identical_in_every_column(tmp_path):
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    for s in range(1, 5):
        rows = []
        for i in range(40):
            r = good_record(s, i, malformed=i % 5 == 0)
            r["score"] = [0.1, 1e-17, 0.7, 1e16, -0.3][i % 5] * (1 + i / 97)  # sums that depend on their order
            rows.append(json.dumps(r).encode() + b"\n")
        (d / f"{s}.jsonl").write_bytes(b"".join(rows))
    scan([tmp_path / "run"], tmp_path / "a", ScanOptions(jobs=1), progress=False)
    scan([tmp_path / "run"], tmp_path / "b", ScanOptions(jobs=2, chunk_bytes=4096), progress=False)
    assert _hashes(tmp_path / "a") == _hashes(tmp_path / "b")


def _big_run(root: Path, files: int = 30, lines: int = 700) -> Path:
    d = root / "run" / "rollout"
    d.mkdir(parents=True)
    for s in range(1, files + 1):
        (d / f"{s}.jsonl").write_bytes(b"".join(good_line(s, i, malformed=i % 3 == 0) for i in range(lines)))
    return root / "run"


def _children(pid: int) -> list[int]:
    kids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(p.name))
    return kids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupt_and_kill_leave_no_workers_and_no_tracebacks(tmp_path, sig):
    run = _big_run(tmp_path)
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "trajlab", "scan", str(run), "-o", str(out), "-j", "2",
                          "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    workers: list[int] = []
    while time.time() < deadline and p.poll() is None:
        workers = [k for k in _children(p.pid) if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
        if len(workers) >= 1 and any((out / ".parts").rglob("*.done.json")):
            break
        time.sleep(0.2)
    if p.poll() is not None:
        pytest.skip("the scan finished before it could be interrupted (machine too fast)")
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    gone = time.time() + 60  # a worker still starting up exits when it finds its parent gone
    while time.time() < gone and [w for w in workers if Path(f"/proc/{w}").exists()]:
        time.sleep(0.5)
    assert not [w for w in workers if Path(f"/proc/{w}").exists()]
    assert b"Traceback" not in err
    if sig == signal.SIGINT:
        assert p.returncode == 130
    # whatever the kill left: readers see a consistent set or refuse; the next scan gives the clean result
    rc = subprocess.run([sys.executable, "-m", "trajlab", "scan", str(run), "-o", str(out), "-j", "2",
                         "--no-progress"], capture_output=True).returncode
    assert rc == 0
    scan([run], tmp_path / "clean", ScanOptions(jobs=2), progress=False)
    assert _hashes(out) == _hashes(tmp_path / "clean")


# ---------------------------------------------------------------------------------------------------- class 4
def test_a_turn_looping_on_calls_is_capped_counted_and_reported(tmp_path, capfd):
    from trajlab.trajectory import TURN_CLASSIFY_CALLS

    call = "<tool_call>\n<function=search_web>\n<parameter=queries v2=\"\">\n[\"a\"]\n</parameter>\n</function>\n</tool_call>\n"
    loop = json.dumps({**good_record(1, 9), "output": call * (TURN_CLASSIFY_CALLS * 3)}).encode() + b"\n"
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    (d / "1.jsonl").write_bytes(good_line(1, 0) + loop + good_line(1, 1))
    rc, s, _ = scan_json([tmp_path / "run", "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 3
    traj = pq.read_table(tmp_path / "out" / "trajectories.parquet").to_pylist()
    loop_id = next(t["trajectory_id"] for t in traj if t["source_line"] == 2)
    calls = pq.read_table(tmp_path / "out" / "calls.parquet", columns=["trajectory_id"]).column(0).to_pylist()
    assert calls.count(loop_id) == TURN_CLASSIFY_CALLS  # classified in full up to the cap, no further
    assert {t["source_line"] for t in traj} == {1, 2, 3}
    note = [x for x in s["ingest_error_examples"] if "per-turn cap" in x]
    assert note and f"{TURN_CLASSIFY_CALLS * 2:,} more call openers" in note[0]


def test_a_huge_turn_is_capped_by_characters(tmp_path, capfd):
    from trajlab.trajectory import TURN_CLASSIFY_CHARS

    big = json.dumps({**good_record(2, 3), "output": "thinking " * (TURN_CLASSIFY_CHARS // 9 + 1000)}).encode()
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    (d / "2.jsonl").write_bytes(good_line(2, 0) + big + b"\n" + good_line(2, 1))
    rc, s, _ = scan_json([tmp_path / "run", "-o", tmp_path / "out"], capfd)
    assert rc == 0 and s["trajectories"] == 3
    assert any("per-turn cap" in x for x in s["ingest_error_examples"])
    turns = pq.read_table(tmp_path / "out" / "turns.parquet", columns=["text"]).column("text").to_pylist()
    assert max(len(t) for t in turns) > TURN_CLASSIFY_CHARS  # the data is kept whole; only the work is capped


@pytest.mark.slow
def test_rules_check_on_a_20_mb_value_prints_a_bounded_view(tmp_path, capfd):
    f = tmp_path / "big.txt"
    f.write_text("<tool_call>\n<function=search_web>\n<parameter=queries>\n" + "x" * (20 << 20)
                 + "\n</parameter>\n</function>\n</tool_call>")
    rc, out, err = cli(["rules", "check", f], capfd)
    assert rc in (0, 1) and b"Traceback" not in err
    assert len(out) < 200_000 and b"more characters" in out
    assert RAW_CONTROL.search(out) is None

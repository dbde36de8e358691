"""``trajlab watch``: a writer process appends step files (some with a half-written last line for a while) while
the watcher follows the directory; the trip comes at the run's own early-warning step and the final tables are
byte-identical to a one-shot scan of the finished directory."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.scan_runs import make_run

from trajlab.cli import main
from trajlab.scan import ScanOptions, scan
from trajlab.tables import SCAN_TABLES
from trajlab.watch import WatchOptions, watch

WRITER = r"""
import json, sys, time
plan = json.loads(sys.argv[1])
for src, dst, cut, pause in plan:
    data = open(src, "rb").read()
    import os
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as f:
        f.write(data[:cut]); f.flush()
        time.sleep(pause)  # the watcher sees a half-written last line meanwhile
        f.write(data[cut:]); f.flush()
    time.sleep(0.15)
"""


def _plan(staged: Path, live: Path) -> list[tuple[str, str, int, float]]:
    """Copy every staged file in step order; every third one is written in two parts, cut inside a line."""
    files = sorted(staged.rglob("*.jsonl"), key=lambda p: (int(p.stem), p.parent.name))
    plan = []
    for i, p in enumerate(files):
        data = p.read_bytes()
        cut = (data.index(b"\n", len(data) // 3) + 40) if i % 3 == 0 and data.count(b"\n") > 2 else len(data)
        plan.append((str(p), str(live / p.relative_to(staged)), cut, 1.0 if cut < len(data) else 0.0))
    return plan


def _tables(out: Path) -> dict[str, bytes]:
    return {n: (out / f"{n}.parquet").read_bytes() for n in SCAN_TABLES}


@pytest.mark.slow
def test_watch_follows_a_writer_trips_at_the_warning_and_ends_like_a_scan(tmp_path: Path) -> None:
    staged = make_run(tmp_path / "staged" / "exp", steps=24, rot_from=14)
    live = tmp_path / "live" / "exp"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(_plan(staged, live))])
    lines, trips = [], []
    try:
        result = watch(WatchOptions(paths=[live.parent], out=tmp_path / "out", interval=0.2, keep_watching=True,
                                    publish_every=1.0, idle_exit=2.5), emit=lines.append, on_trip=trips.append)
    finally:
        writer.wait(timeout=60)
    assert writer.returncode == 0 and result.stopped == "idle"
    # files written in two parts were classified in two ranges (only the new bytes the second time); each
    # publish is an incremental scan, so the final one reads again only files new or changed since the last
    assert result.files == 25 and result.ranges > result.files
    assert result.summary.files == 25 and 0 < result.summary.files_reused <= 25
    ranges = sorted(p.name for p in (tmp_path / "out" / ".watch").glob("*/r*"))  # watch's storage: a unit per range
    assert len(ranges) == result.ranges and not (tmp_path / "out" / ".parts" / ".watch").exists()
    # one line per step, in order, each step's data complete by its last line
    train = [x for x in lines if x.split == "train"]
    last = {x.step: x for x in train}
    assert sorted(last) == list(range(1, 25)) and all(last[s].calls == 8 for s in last)
    # the trip: the run's own early-warning step, noticed once its window (3 steps) is in
    one = scan([live.parent], tmp_path / "one", ScanOptions(jobs=1), progress=False)
    want = one.runs[0]["early_warning"]["step"]
    assert 14 <= want <= 16
    assert [(t.run, t.reason, t.step) for t in trips] == [("exp", "early_warning", want)]
    noticed = trips[0].noticed_step  # as soon as the steps so far (a window of up to 3) make it significant
    assert want <= noticed <= want + 2
    assert {x.state for x in train if x.step < noticed} == {"ok"}
    assert all(x.state.startswith(f"warning: early warning at step {want}") for x in train if x.step >= noticed)
    # OUT equals a one-shot scan of the finished directory, byte for byte
    assert _tables(tmp_path / "out") == _tables(tmp_path / "one")
    assert not any(p.name.startswith(".") and p.suffix == ".tmp" for p in (tmp_path / "out").iterdir())


def test_watch_cli_on_trip_command_gets_the_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path / "runs" / "exp", steps=20, rot_from=10)
    env_file = tmp_path / "trip.env"
    cmd = f"env | grep ^TRAJLAB_ | sort > {env_file}"
    rc = main(["watch", str(run), "-o", str(tmp_path / "out"), "--interval", "0.1", "--on-trip", cmd,
               "--fail-above", "0.3", "--window", "5"])
    assert rc == 3
    got = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert got["TRAJLAB_RUN"] == "exp" and got["TRAJLAB_OUT"] == str(tmp_path / "out")
    assert got["TRAJLAB_REASON"] in ("early_warning", "fail_above") and got["TRAJLAB_STEP"].isdigit()
    out = capsys.readouterr().out
    assert "step    10" in out and "tripped: run exp" in out
    # said once, with what happens next; the steps already on disk after the trip are scanned, not printed
    # (an early warning and --fail-above may both trip in one look: one line each)
    after = out.split("tripped: run exp", 1)[1]
    assert "then exit 3" in " ".join(after.split())
    assert not re.search(r"^exp\s+step", after, re.M)
    assert "steps after the trip were scanned, not printed" in " ".join(out.split())
    # OUT is a complete scan output that sql, report and show read
    assert main(["sql", str(tmp_path / "out"), "SELECT count(*) AS n FROM trajectories"]) == 0
    assert main(["show", str(tmp_path / "out"), "--step", "12"]) == 0
    assert main(["report", str(tmp_path / "out"), "-o", str(tmp_path / "r.html")]) == 0


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_watch_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    run = make_run(tmp_path / "exp", steps=6, rot_from=99)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "trajlab", "watch", str(run), "-o", str(out), "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    seen = ""
    while "step     6" not in seen and time.monotonic() < deadline:
        seen += proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "stopped (interrupted)" in seen + stdout
    scan([run], tmp_path / "one", ScanOptions(jobs=1), progress=False)
    assert _tables(out) == _tables(tmp_path / "one")
    assert os.listdir(out / ".watch")


def test_a_writer_that_crashed_mid_line_does_not_hold_the_watch(tmp_path: Path) -> None:
    """A last line that never gets its newline stops counting as pending after a while; the final tables report it
    as a one-shot scan does (truncated last line), and every good record is kept."""
    run = make_run(tmp_path / "exp", steps=7, rot_from=99)
    last = run / "rollout" / "7.jsonl"
    last.write_bytes(last.read_bytes()[:-300])  # crashed while writing its last line
    result = watch(WatchOptions(paths=[run], out=tmp_path / "out", interval=0.1, idle_exit=0.5, settle=1.0))
    assert result.stopped == "idle" and result.ranges == result.files == 8  # 7 step files + the val file
    scan([run], tmp_path / "one", ScanOptions(jobs=1), progress=False)
    assert _tables(tmp_path / "out") == _tables(tmp_path / "one")
    errors = json.loads((tmp_path / "out" / "manifest.json").read_text())["summary"]["ingest_error_examples"]
    assert any("truncated last line" in e for e in errors)


def test_a_restarted_watch_classifies_again_and_its_publish_reuses_the_scan_cache(tmp_path: Path) -> None:
    """A watch started on an OUT that already holds a scan classifies every file again into its own storage
    (``OUT/.watch/``, cleared at start) to rebuild its per-step lines; its publish is an incremental scan that
    reads no input file again, and leaves the tables as they were."""
    run = make_run(tmp_path / "exp", steps=8, rot_from=99)
    first = scan([run], tmp_path / "out", ScanOptions(jobs=1), progress=False)
    before = _tables(tmp_path / "out")
    (tmp_path / "out" / ".watch" / "stale").mkdir(parents=True)  # an earlier watch's storage
    lines: list = []
    result = watch(WatchOptions(paths=[run], out=tmp_path / "out", interval=0.1, idle_exit=0.3), emit=lines.append)
    assert result.files == result.ranges == first.files == 9
    assert not (tmp_path / "out" / ".watch" / "stale").exists()
    assert sorted(x.step for x in lines if x.split == "train") == list(range(1, 9))
    assert result.summary.files_reused == 9 and _tables(tmp_path / "out") == before


def test_a_trip_settles_the_file_being_written_and_keeps_its_last_record(tmp_path: Path) -> None:
    """A writer that writes each step file's last line in two parts (as a buffered writer can): the trip comes
    while a last line is half-written; the half line is pending, never an error, and watch settles the files it
    is reading before the trip writes the tables, so the record being written is in OUT."""
    staged = make_run(tmp_path / "staged" / "exp", steps=14, rot_from=6)
    live = tmp_path / "live" / "exp"
    plan = []
    for p in sorted(staged.rglob("*.jsonl"), key=lambda p: (int(p.stem), p.parent.name)):
        data = p.read_bytes()  # every file: its last line cut in the middle, the rest after a pause
        plan.append((str(p), str(live / p.relative_to(staged)), len(data) - 60, 0.8))
    writer = subprocess.Popen([sys.executable, "-c", WRITER, json.dumps(plan)])
    try:
        result = watch(WatchOptions(paths=[live.parent], out=tmp_path / "out", interval=0.1, publish_every=30.0,
                                    settle=5.0))
    finally:
        writer.kill()
        writer.wait(timeout=60)
    assert result.stopped == "trip"
    errors = pq.read_table(tmp_path / "out" / "ingest_errors.parquet").to_pylist()
    assert not [e for e in errors if "truncated" in e["reason"] or "invalid JSON" in e["reason"]], errors
    traj = pq.read_table(tmp_path / "out" / "trajectories.parquet", columns=["source_path"]).to_pylist()
    per_file = {}
    for r in traj:
        per_file[r["source_path"]] = per_file.get(r["source_path"], 0) + 1
    trip_file = f"exp/rollout/{result.trips[0].noticed_step}.jsonl"
    assert per_file[trip_file] == 8  # the record being written when it tripped is kept
    assert all(n == 8 for f, n in per_file.items() if "/rollout/" in f)


def test_sql_says_how_old_a_watch_publish_is_and_whether_the_watch_still_runs(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """After ``watch`` is killed (-9), ``sql`` on its OUT serves the last publish: it says so, with its age; while
    the watch runs it says the tables are the running watch's last publish; a later ``scan`` into OUT ends it."""
    run = make_run(tmp_path / "exp", steps=4, rot_from=99)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "trajlab", "watch", str(run), "-o", str(out), "--interval", "0.2",
                             "--publish-every", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / ".watch" / "published.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        capfd.readouterr()
        assert main(["sql", str(out), "SELECT count(*) AS n FROM trajectories"]) == 0
        assert "last publish of the running `trajlab watch`" in capfd.readouterr().err
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert main(["sql", str(out), "SELECT count(*) AS n FROM trajectories"]) == 0
    err = capfd.readouterr().err
    assert "no longer running" in err and " ago" in err and "UTC" in err
    scan([run], out, ScanOptions(jobs=1), progress=False)  # the tables are a scan's now, not the dead watch's
    assert main(["sql", str(out), "SELECT count(*) AS n FROM trajectories"]) == 0
    assert "watch" not in capfd.readouterr().err

"""Adversarial suite, classes 1, 8 and 10 of issue 11: trajlab never overwrites or deletes what it did not write,
its circuit breakers fail closed on bad option values and empty inputs, and every fix an error suggests runs.

Every case observes: the exit code, no traceback, and the user's files byte for byte."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from helpers.adversarial import assert_clean_failure, cli, good_line, scan_json, snapshot, write_run


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run dir, scan OUT) of a small real run."""
    root = tmp_path_factory.mktemp("adv_out")
    run = write_run(root / "run")
    out = root / "out"
    from trajlab.scan import ScanOptions, scan

    scan([run], out, ScanOptions(jobs=1), progress=False)
    return run, out


def _user_dir(p: Path) -> dict[str, str]:
    (p / "notes").mkdir(parents=True)
    (p / "notes" / "plan.md").write_text("my notes\n")
    (p / "results.parquet").write_bytes(b"PAR1 not really")
    (p / "manifest.json").write_text('{"mine": true}\n')  # a manifest that is not trajlab's
    return snapshot(p)


# ---------------------------------------------------------------------------------------------------- class 1
def test_scan_refuses_a_users_directory_and_writes_nothing(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    before = _user_dir(tmp_path / "mine")
    rc, _, err = cli(["scan", run, "-o", tmp_path / "mine", "--no-progress"], capfd)
    assert_clean_failure(rc, err)
    assert b"not a trajlab output" in err and err.count(b"\n") <= 2
    assert snapshot(tmp_path / "mine") == before  # byte-identical, and nothing added (no marker, no .parts)


def test_build_sft_pool_refuses_a_users_directory(scanned, tmp_path, capfd):
    _, out = scanned
    before = _user_dir(tmp_path / "pool")
    rc, _, err = cli(["build-sft-pool", out, "-o", tmp_path / "pool", "--no-progress", "--ratio", "0:1:0"], capfd)
    assert_clean_failure(rc, err)
    assert snapshot(tmp_path / "pool") == before


def test_build_sft_pool_refuses_the_scan_directory_itself(scanned, capfd):
    _, out = scanned
    before = snapshot(out)
    rc, _, err = cli(["build-sft-pool", out, "-o", out, "--no-progress"], capfd)
    assert_clean_failure(rc, err)
    assert snapshot(out) == before


@pytest.mark.parametrize("cmd", ["report", "sql"])
def test_file_outputs_never_replace_a_users_file(scanned, tmp_path, capfd, cmd):
    _, out = scanned
    mine = tmp_path / ("r.html" if cmd == "report" else "r.csv")
    mine.write_text("the user's own file\n")
    args = ["report", out, "-o", mine] if cmd == "report" else ["sql", out, "SELECT 1 AS x", "-o", mine]
    rc, _, err = cli(args, capfd)
    assert_clean_failure(rc, err)
    assert mine.read_text() == "the user's own file\n"


@pytest.mark.parametrize("name", ["manifest.json", "trajectories.parquet", "steps.parquet", ".trajlab-output"])
def test_sql_never_replaces_a_manifest_or_table(scanned, capfd, name):
    _, out = scanned
    before = snapshot(out)
    rc, _, err = cli(["sql", out, "SELECT 1 AS x", "-o", out / name, "--format", "json"], capfd)
    assert_clean_failure(rc, err)
    assert snapshot(out) == before


def test_report_replaces_its_own_report_only(scanned, tmp_path, capfd):
    _, out = scanned
    dest = tmp_path / "report.html"
    assert cli(["report", out, "-o", dest], capfd)[0] == 0
    first = dest.read_bytes()
    assert cli(["report", out, "-o", dest], capfd)[0] == 0  # its own earlier report: replaced
    assert dest.read_bytes() == first


@pytest.mark.parametrize("where", ["equal", "inside"])
def test_scan_output_equal_to_or_inside_an_input_is_refused(tmp_path, capfd, where):
    run = write_run(tmp_path / "run")
    before = snapshot(run)
    target = run if where == "equal" else run / "rollout" / "trajlab_out"
    rc, _, err = cli(["scan", run, "-o", target, "--no-progress"], capfd)
    assert_clean_failure(rc, err)
    assert snapshot(run) == before and not (run / "rollout" / "trajlab_out").exists()


def test_rescan_touches_only_trajlabs_own_files(tmp_path, capfd):
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    assert scan_json([run, "-o", out], capfd)[0] == 0
    # the user drops files into the output and into .parts/ (names that are not trajlab part keys)
    (out / "my_analysis.ipynb").write_text("{}")
    (out / ".parts" / "keep-me").mkdir()
    (out / ".parts" / "keep-me" / "data.txt").write_text("mine")
    (out / ".parts" / "README").write_text("mine")
    (run / "rollout" / "1.jsonl").unlink()  # a file leaves the run: its parts are pruned
    rc, summary, _ = scan_json([run, "-o", out, "--full"], capfd)
    assert rc == 0 and summary["files"] == 2
    assert (out / "my_analysis.ipynb").read_text() == "{}"
    assert (out / ".parts" / "keep-me" / "data.txt").read_text() == "mine"
    assert (out / ".parts" / "README").read_text() == "mine"


def test_a_run_killed_before_its_manifest_still_owns_its_directory(tmp_path, capfd):
    """The marker is written first, so the directory a killed first scan left is recognised as trajlab's."""
    run = write_run(tmp_path / "run")
    out = tmp_path / "out"
    from trajlab.outpaths import prepare_out_dir

    prepare_out_dir(out, kind="scan")
    (out / ".parts").mkdir()
    (out / ".parts" / "0123456789abcdef0123").mkdir()  # a stale part directory of the killed run
    rc, summary, _ = scan_json([run, "-o", out], capfd)
    assert rc == 0 and summary["trajectories"] == 12
    assert not (out / ".parts" / "0123456789abcdef0123").exists()


# ---------------------------------------------------------------------------------------------------- class 8
@pytest.mark.parametrize("opt", [["--fail-above", "nan"], ["--fail-above", "inf"], ["--fail-above", "-0.1"],
                                 ["--fail-above", "1.5"], ["--window", "0"], ["--window", "-3"], ["--jobs", "-1"]])
def test_bad_option_values_are_usage_errors_before_anything_is_written(tmp_path, capfd, opt):
    run = write_run(tmp_path / "run")
    rc, _, err = cli(["scan", run, "-o", tmp_path / "out", "--no-progress", *opt], capfd)
    assert_clean_failure(rc, err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["missing", "empty_dir", "empty_file", "only_bad_lines"])
def test_fail_above_fails_closed_without_anything_to_judge(tmp_path, capfd, kind):
    src = tmp_path / "in"
    if kind == "empty_dir":
        src.mkdir()
    elif kind == "empty_file":
        src = tmp_path / "1.jsonl"
        src.write_bytes(b"")
    elif kind == "only_bad_lines":
        src = tmp_path / "1.jsonl"
        src.write_bytes(b"{not json\n" * 3)
    rc, _, err = cli(["scan", src, "-o", tmp_path / "out", "--no-progress", "--fail-above", "0.2"], capfd)
    assert_clean_failure(rc, err)


@pytest.mark.parametrize("cmd", ["scan", "build-sft-pool", "report", "sql"])
def test_unwritable_output_paths_are_one_line_errors(scanned, tmp_path, capfd, cmd):
    run, out = scanned
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    bad = blocker / "sub" / ("r.html" if cmd == "report" else "r.csv" if cmd == "sql" else "d")
    args = {"scan": ["scan", run, "-o", bad, "--no-progress"],
            "build-sft-pool": ["build-sft-pool", out, "-o", bad, "--no-progress"],
            "report": ["report", out, "-o", bad],
            "sql": ["sql", out, "SELECT 1 AS x", "-o", bad]}[cmd]
    rc, _, err = cli(args, capfd)
    assert_clean_failure(rc, err)
    assert len([ln for ln in err.decode().splitlines() if ln.startswith("error:")]) == 1
    assert blocker.read_text() == "x"


def test_error_messages_with_brackets_print_as_written(tmp_path, capfd):
    weird = tmp_path / "run[red]x[/red] [/INST] [link=e.x]y[/link]"
    rc, _, err = cli(["report", weird, "-o", tmp_path / "r.html"], capfd)
    assert_clean_failure(rc, err)
    assert b"run[red]x[/red] [/INST] [link=e.x]y[/link]" in err


# --------------------------------------------------------------------------------------------------- class 10
@pytest.mark.slow
def test_every_fix_the_zero_positives_error_suggests_runs(tmp_path, capfd):
    """All scores 0: no positives. Each suggestion in the hint, applied as written, builds a pool."""
    d = tmp_path / "run" / "rollout"
    d.mkdir(parents=True)
    for s in (1, 2, 3):
        lines = []
        for i in range(6):
            rec = json.loads(good_line(s, i, malformed=i % 2 == 0))
            rec["score"] = 0.0
            lines.append(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
        (d / f"{s}.jsonl").write_bytes(b"".join(lines))
    out = tmp_path / "out"
    assert scan_json([tmp_path / "run", "-o", out], capfd)[0] == 0
    rc, _, err = cli(["build-sft-pool", out, "--no-progress"], capfd)
    assert_clean_failure(rc, err)
    text = " ".join(err.decode().split())
    hint = text.split("hint:", 1)[1]
    fixes = [shlex.split(m) for m in re.findall(r"\((--[a-z-]+ [^)\s]+)\)", hint)]
    fixes += [["--min-score", "any"]] if "--min-score any" in hint else []
    assert fixes, hint
    for i, fix in enumerate(fixes):
        rc, _, err = cli(["build-sft-pool", out, "-o", tmp_path / f"pool{i}", "--no-progress", *fix], capfd)
        assert rc == 0, (fix, err.decode())

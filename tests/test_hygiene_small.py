"""The small things a user trips over: DuckDB's spill is bounded, stderr carries no blank lines when it is not a
terminal, hints name the real output directory, ``watch`` takes ``--jobs``, and run names in the runs table break
only after separators (with a trajectories column). Real scans of real verl-format dumps, real DuckDB."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from helpers.verl_lines import output_of, qwen35_prompt, v1_line, write_jsonl, xml_call
from rich.console import Console

from trajlab.cli import main
from trajlab.errors import TrajlabError
from trajlab.query import SqlLimits, preview
from trajlab.query.limits import SPILL_CAP, default_spill_bytes
from trajlab.scan import ScanOptions, scan
from trajlab.scan.view import print_summary, wrap_name

GOOD = xml_call("search_web", queries=["q"])
LONG = "qwen3_hermes_experiment_with_a_long_descriptive_name_lr1e-6_kl0.001"


def _run(root: Path, name: str, steps: int = 2) -> None:
    for step in range(1, steps + 1):
        rows = [v1_line(step, qwen35_prompt(f"{name} {step} {i}"), output_of([GOOD, "done"], ["r"]), 1.0, session=i)
                for i in range(2)]
        write_jsonl(root / name / "rollout" / f"{step}.jsonl", rows)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("small")
    _run(tmp / "dumps", "baseline")
    _run(tmp / "dumps", LONG)
    scan([tmp / "dumps"], tmp / "out", ScanOptions(jobs=1), progress=False)
    return tmp / "out"


def test_sql_spill_is_bounded_and_its_failure_is_one_line(out: Path, tmp_path: Path) -> None:
    s = SqlLimits(temp_dir=str(tmp_path / "spill")).settings()
    bound = int(re.fullmatch(r"(\d+)MiB", s["max_temp_directory_size"]).group(1)) << 20  # type: ignore[union-attr]
    again = default_spill_bytes(str(tmp_path / "spill"))
    # the free space moves while other workers write to the same disk: the two reads agree within 64 MiB
    assert bound % (1 << 20) == 0 == again % (1 << 20) and abs(bound - again) <= 64 << 20
    assert bound <= SPILL_CAP  # never DuckDB's 90% of the disk
    import os

    st = os.statvfs(tmp_path)
    assert bound <= max(64 << 20, st.f_bavail * st.f_frsize // 4)
    with pytest.raises(TrajlabError, match="not a size"):
        SqlLimits(max_temp_size="lots")
    tight = SqlLimits(memory_limit="32MiB", max_temp_size="1MiB", threads=1, temp_dir=str(tmp_path / "spill"))
    big = "SELECT i, count(*) AS c FROM range(3000000) t(i) GROUP BY i ORDER BY c DESC, i"
    with pytest.raises(TrajlabError) as ex:
        preview(out, big, limit=3, limits=tight)
    msg = ex.value.template
    assert "\n" not in msg and "needs more than the spill bound" in msg
    assert "max_temp_size" in (ex.value.hint or "")


def test_sql_size_flags_reach_duckdb(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    q = "SELECT current_setting('max_temp_directory_size') AS t, current_setting('memory_limit') AS m"
    assert main(["sql", str(out), q, "--max-temp-size", "3GiB", "--memory-limit", "1GiB", "-f", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "t,m" and lines[1].startswith("3.0 GiB,") and "1" in lines[1].split(",")[1]
    assert main(["sql", str(out), "SELECT 1", "--max-temp-size", "9 parsecs"]) == 2
    assert "--max-temp-size '9 parsecs': not a size" in capsys.readouterr().err


def test_no_blank_lines_on_a_stderr_that_is_not_a_terminal(out: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(out.parent / "dumps"), "-o", str(tmp_path / "o")]) == 0  # progress on (the default)
    err = capsys.readouterr().err
    assert "\n\n" not in "\n" + err and not err.startswith("\n")


def test_hints_name_the_real_output_directory(out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(out), "nosuchid"]) == 2
    err = capsys.readouterr().err
    assert f"trajlab sql {out} " in err and " OUT " not in err
    odd = tmp_path / "my scans"
    odd.mkdir()
    assert main(["sql", str(odd), "SELECT 1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"-o '{odd}'" in err  # quoted: the hint pastes into a shell as is


def test_show_position_is_said_in_both_counts(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(out), "--step", "1", "--index", "0", "--run", "baseline"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--index 0: 1 of 2 at this step" in text and "#0 of" not in text


def test_watch_takes_jobs(tmp_path: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trajlab.watch import Watcher, WatchOptions

    w = Watcher(WatchOptions(paths=[out.parent / "dumps"], out=tmp_path / "w", jobs=2))
    assert w.scan_request.jobs == 2
    assert main(["watch", str(out.parent / "dumps"), "-o", str(tmp_path / "w2"), "--jobs", "-1"]) == 2
    assert "--jobs -1: must be a whole number >= 0" in capsys.readouterr().err


def test_run_names_break_after_separators_and_the_runs_table_counts_trajectories(out: Path) -> None:
    assert wrap_name(LONG, 20).split("\n") == ["qwen3_hermes_", "experiment_with_a_", "long_descriptive_",
                                                "name_lr1e-6_kl0.001"]
    assert wrap_name("x" * 25, 10).split("\n") == ["x" * 10, "x" * 10, "x" * 5]  # no separator: cut
    import json

    from trajlab.scan.summary import ScanSummary

    m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["summary"]
    s = ScanSummary(**{k: v for k, v in m.items() if k in ScanSummary.__dataclass_fields__})
    for width in (80, 120):
        buf = io.StringIO()
        print_summary(s, Console(file=buf, width=width, color_system=None))
        text = buf.getvalue()
        assert all(len(line) <= width for line in text.splitlines())
        table = text[text.index("runs compared"):]
        assert "trajectories" in table
        rows = [line.strip("│ ").split() for line in table.splitlines()]
        assert any(r[:1] == ["baseline"] and "4" in r for r in rows)  # 2 steps x 2 trajectories
        for start in [i for i, r in enumerate(rows) if r and LONG.startswith(r[0]) and r[0] != LONG[:0]]:
            pieces = []
            for r in rows[start:]:
                if not r or (pieces and not LONG.startswith("".join(pieces) + r[0])):
                    break
                pieces.append(r[0])
            assert "".join(pieces) == LONG  # the whole name, read back line by line
            assert all(p.endswith(("_", "-", ".")) for p in pieces[:-1])  # never broken inside a word

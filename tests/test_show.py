"""trajlab.show / `trajlab show`: a trajectory rendered with rich, captured from a real console."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from helpers.query_run import build_run
from helpers.show_style import highlighted
from rich.console import Console

from trajlab.cli import main
from trajlab.errors import TrajlabError
from trajlab.query import sql
from trajlab.show import ShowOptions, show


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_run(tmp_path_factory.mktemp("show") / "run")


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, color_system="truecolor", width=200, legacy_windows=False), buf


def test_garbled_name_is_highlighted_in_place_with_its_finding_and_repair(run: Path) -> None:
    f = sql(run, "SELECT trajectory_id, span, message, repaired, call_id, char_start, char_end FROM finding_spans "
                 "WHERE category = 'garbled_function_name' AND NOT regexp_matches(span, '^[ -~]+$') "
                 "ORDER BY step, trajectory_id LIMIT 1").to_pylist()[0]
    on_span = sql(run, f"SELECT category FROM findings WHERE trajectory_id = '{f['trajectory_id']}' "
                       f"AND char_start = {f['char_start']} AND char_end = {f['char_end']}").column("category").to_pylist()
    assert sorted(on_span) == ["garbled_function_name", "unknown_function"]  # the scan flags the name twice
    con, buf = _console()
    loaded = show(run, f["trajectory_id"], console=con)
    out = buf.getvalue()
    assert loaded.trajectory["trajectory_id"] == f["trajectory_id"]
    # the garbled name itself carries the highlight, inside the tinted call, followed by one marker per finding
    assert highlighted(f["span"]) in out
    plain = _plain(out)
    m = re.search(rf"<function={re.escape(f['span'])}⟨(\d+)⟩⟨(\d+)⟩>", plain)
    assert m and int(m.group(2)) == int(m.group(1)) + 1
    legend = {int(k): cat for k, cat in re.findall(r"^│? *⟨(\d+)⟩ (\w+) ", plain, re.MULTILINE)}
    assert sorted(legend[int(k)] for k in m.groups()) == ["garbled_function_name", "unknown_function"]
    assert f["message"] in plain
    # the repair is printed next to the call: its function line is the declared tool's
    repaired_fn = next(line for line in f["repaired"].splitlines() if line.startswith("<function="))
    assert repaired_fn in plain
    # text outside any finding is not highlighted
    assert highlighted("<tool_call>") not in out


def _plain(ansi: str) -> str:
    from rich.text import Text

    return Text.from_ansi(ansi).plain


def test_stray_attribute_span_and_the_other_turns(run: Path) -> None:
    f = sql(run, "SELECT trajectory_id, span FROM finding_spans WHERE category = 'stray_attribute' "
                 "ORDER BY step LIMIT 1").to_pylist()[0]
    con, buf = _console()
    data = show(run, f["trajectory_id"], console=con)
    out = buf.getvalue()
    assert highlighted(f["span"]) in out
    plain = _plain(out)
    for t in data.turns:  # every turn is shown with its role
        assert f"turn {t['turn_index']} · {t['role']}" in plain


def test_pick_by_step_and_index_follows_dump_order(run: Path) -> None:
    step = sql(run, "SELECT step FROM steps ORDER BY malformed_rate DESC, step LIMIT 1").to_pylist()[0]["step"]
    ids = [r["trajectory_id"] for r in sql(run, f"SELECT trajectory_id FROM trajectories_at({step})").to_pylist()]
    con, buf = _console()
    assert show(run, None, ShowOptions(step=step, index=2), console=con).trajectory["trajectory_id"] == ids[2]
    assert f"--index 2: 3 of {len(ids)} at this step" in _plain(buf.getvalue())  # 0-based --index, 1-based count
    assert show(run, None, ShowOptions(step=step, index=-1), console=_console()[0]).trajectory["trajectory_id"] == ids[-1]
    assert show(run, None, ShowOptions(step=step), console=_console()[0]).trajectory["trajectory_id"] == ids[0]
    with pytest.raises(TrajlabError, match=f"step {step} has {len(ids)} trajectories"):
        show(run, None, ShowOptions(step=step, index=len(ids)), console=_console()[0])
    with pytest.raises(TrajlabError, match="no trajectories at step 7; nearest steps: 5, 10"):
        show(run, None, ShowOptions(step=7), console=_console()[0])


def test_id_prefix_unknown_and_ambiguous(run: Path) -> None:
    ids = sorted(r["trajectory_id"] for r in sql(run, "SELECT trajectory_id FROM trajectories").to_pylist())
    target = ids[len(ids) // 2]
    prefix = next(target[:k] for k in range(1, len(target) + 1)
                  if sum(i.startswith(target[:k]) for i in ids) == 1)
    assert show(run, prefix, console=_console()[0]).trajectory["trajectory_id"] == target
    with pytest.raises(TrajlabError, match="ambiguous"):
        show(run, target[:1], console=_console()[0])
    with pytest.raises(TrajlabError, match="no trajectory with id 'zzz'"):
        show(run, "zzz", console=_console()[0])
    with pytest.raises(TrajlabError, match="not both"):
        show(run, target, ShowOptions(step=5), console=_console()[0])


def test_cli(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tid = sql(run, "SELECT trajectory_id FROM trajectories WHERE n_malformed_calls > 0 LIMIT 1").to_pylist()[0]
    assert main(["show", str(run), tid["trajectory_id"], "--prompt"]) == 0
    out = capsys.readouterr().out
    assert tid["trajectory_id"] in out and "prompt" in out and "repair" in out
    assert main(["show", str(run), "no-such-id"]) == 2
    err = capsys.readouterr().err
    assert "no trajectory with id" in err and "Traceback" not in err


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A turn with CR, BEL and backspace before a garbled call, and a 3.3 MB turn of call openers, scanned."""
    from helpers.verl_lines import legacy_line, qwen35_prompt, write_jsonl, xml_call

    from trajlab.scan import ScanOptions, scan

    root = tmp_path_factory.mktemp("show_hostile")
    controlled = "Done\r\x07\x08 now:\n" + xml_call("search_web英文", queries=["x"])
    rows = [legacy_line(1, qwen35_prompt("q"), controlled, 0.0),
            legacy_line(1, qwen35_prompt("q"), "<tool_call>" * 300_000, 0.0)]
    write_jsonl(root / "run" / "rollout" / "1.jsonl", rows)
    scan([root / "run"], root / "out", ScanOptions(jobs=1), progress=False)
    return root / "out"


def _ids(out: Path) -> list[str]:
    return sql(out, "SELECT trajectory_id FROM trajectories ORDER BY source_line").column("trajectory_id").to_pylist()


def test_controls_rich_would_drop_are_shown_and_spans_stay_in_place(hostile_run: Path) -> None:
    con, buf = _console()
    show(hostile_run, _ids(hostile_run)[0], console=con)
    plain = _plain(buf.getvalue())
    assert "Done\\x0d\\x07\\x08 now:" in plain  # visible, not dropped (rich strips \r, BEL, BS from a Text)
    assert "\r" not in buf.getvalue() and "\x07" not in buf.getvalue()
    # the garbled name is still the highlighted text, after the widened escapes
    assert highlighted("search_web英文") in buf.getvalue()


def test_a_huge_turn_is_clipped_unless_full(hostile_run: Path) -> None:
    tid = _ids(hostile_run)[1]
    con, buf = _console()
    show(hostile_run, tid, console=con)
    out = _plain(buf.getvalue())
    assert re.search(r"… [\d,]+ characters hidden \(--full\) …", out)
    assert re.search(r"… [\d,]+ more findings in this turn \(--full\)", out)
    assert len(out) < 200_000  # not the 3.3 MB turn
    con, buf = _console()
    show(hostile_run, tid, ShowOptions(full=True), console=con)
    assert "characters hidden" not in _plain(buf.getvalue()) and len(buf.getvalue()) > 3_000_000

"""trajlab never reads its own outputs as input: every file it writes carries a mark (Parquet key-value metadata,
a ``$trajlab`` first key in JSON manifests, a sidecar for JSON/JSON-lines exports), and discovery skips marked
files wherever they sit, listing them with the reason. Real dumps in verl's format, the real scanner, real
DuckDB exports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.verl_lines import output_of, qwen35_prompt, v1_line, write_jsonl, xml_call

from trajlab.cli import main
from trajlab.ingest import find_inputs
from trajlab.ownfiles import JSON_KEY, PARQUET_KEY, own_output, sidecar_path
from trajlab.query import export
from trajlab.scan import ScanOptions, scan
from trajlab.tables import SCAN_TABLES

GOOD = xml_call("search_web", queries=["japan gdp 2024"])
BAD = GOOD.replace("<function=search_web>", "<function=search_web英文>")


def _dumps(root: Path) -> Path:
    """Two steps of one run: 6 trajectories, 2 of them with a garbled name."""
    for step in (1, 2):
        rows = [v1_line(step, qwen35_prompt(f"case {step}-{i}"),
                        output_of([BAD if (step == 2 and i) else GOOD, "done"], ["result"]), 1.0, session=i)
                for i in range(3)]
        write_jsonl(root / "exp1" / "rollout" / f"{step}.jsonl", rows)
    return root


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("own")
    dumps = _dumps(tmp / "dumps")
    out = tmp / "out"
    scan([dumps], out, ScanOptions(jobs=1), progress=False)
    return {"tmp": tmp, "dumps": dumps, "out": out}


def test_every_table_and_manifest_carries_the_mark(scanned: dict[str, Path]) -> None:
    out = scanned["out"]
    tables = sorted(out.glob("*.parquet"))
    assert {t.stem for t in tables} == set(SCAN_TABLES)  # every scan table, each marked
    for t in tables:
        assert pq.read_metadata(t).metadata[PARQUET_KEY] == t.stem.encode()
        assert own_output(t) == t.stem
    manifest = (out / "manifest.json").read_text(encoding="utf-8")
    assert manifest.startswith('{\n  "$trajlab": "scan manifest"')  # first key: the first bytes tell
    assert json.loads(manifest)[JSON_KEY] == "scan manifest" and own_output(out / "manifest.json") == "scan manifest"
    for dump in sorted(scanned["dumps"].rglob("*.jsonl")):
        assert own_output(dump) is None  # a verl dump is not trajlab's


def test_exports_under_the_scanned_tree_are_not_read_again(scanned: dict[str, Path], tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    shutil.copytree(scanned["dumps"], dumps)
    query = "SELECT * FROM trajectories"
    assert export(scanned["out"], query, "parquet", dumps / "exp1" / "rollout" / "all.parquet") == 6
    assert export(scanned["out"], query, "jsonl", dumps / "exp1" / "rollout" / "all.jsonl") == 6
    assert export(scanned["out"], query, "json", dumps / "again.json") == 6
    shutil.copy(scanned["out"] / "calls.parquet", dumps / "exp1" / "calls.parquet")  # a table copied by hand
    shutil.copy(scanned["out"] / "manifest.json", dumps / "exp1" / "scan_manifest_copy.json")
    assert sidecar_path(dumps / "again.json").is_file()
    out = tmp_path / "out"
    s = scan([dumps], out, ScanOptions(jobs=1), progress=False)
    first = scan([scanned["dumps"]], tmp_path / "ref", ScanOptions(jobs=1), progress=False)
    # what a user checks by hand: the same trajectories, calls and runs as the dumps alone (no phantom run)
    assert (s.trajectories, s.calls, s.malformed_calls) == (first.trajectories, first.calls,
                                                                  first.malformed_calls) == (6, 6, 2)
    assert pq.read_table(out / "trajectories.parquet", columns=["run"]).column(0).unique().to_pylist() == ["exp1"]
    own = [x for x in s.skipped if "trajlab wrote" in x]
    assert len(own) == 1 and own[0].startswith("5 files trajlab wrote")
    for kind in ("sql export", "calls", "scan manifest"):
        assert kind in own[0]
    assert not any("hidden" in x for x in s.skipped)  # the export's sidecar is not counted as a stranger
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["summary"]["skipped"] == s.skipped and len(manifest["inputs"]) == 2


def test_named_export_is_skipped_and_an_edited_one_is_the_users_again(scanned: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    dest = tmp_path / "rows.jsonl"
    export(scanned["out"], "SELECT input, output, step, score FROM trajectories ORDER BY step", "jsonl", dest)
    files, errors, skipped = find_inputs([dest])
    assert files == [] and errors == [] and "rows.jsonl (sql export)" in skipped[0]
    with open(dest, "a", encoding="utf-8") as f:  # the user edits it: trajlab's mark no longer holds
        f.write(dest.read_text(encoding="utf-8").splitlines()[0] + "\n")
    files, _, skipped = find_inputs([tmp_path])
    assert [f.rel for f in files] == ["rows.jsonl"] and not any("trajlab wrote" in x for x in skipped)


def test_export_bytes_are_deterministic_and_readable_elsewhere(scanned: dict[str, Path], tmp_path: Path) -> None:
    fastparquet = pytest.importorskip("fastparquet")
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    for dest in (a, b):
        export(scanned["out"], "SELECT trajectory_id, step, score FROM trajectories ORDER BY trajectory_id", "parquet",
               dest)
    assert a.read_bytes() == b.read_bytes()
    assert pq.read_metadata(a).metadata[PARQUET_KEY] == b"sql export"
    assert len(fastparquet.ParquetFile(str(a)).to_pandas()) == 6


def test_cli_export_then_rescan_lists_the_skip(scanned: dict[str, Path], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    dumps = tmp_path / "dumps"
    shutil.copytree(scanned["dumps"], dumps)
    assert main(["sql", str(scanned["out"]), "SELECT * FROM calls", "-o", str(dumps / "calls_export.parquet")]) == 0
    capsys.readouterr()
    assert main(["scan", str(dumps), "-o", str(tmp_path / "out"), "--no-progress"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "1 file trajlab wrote" in text and "calls_export.parquet (sql export)" in text


def test_a_damaged_or_foreign_parquet_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    import pyarrow as pa

    plain = tmp_path / "dump.parquet"
    pq.write_table(pa.table({"input": ["x"], "output": ["trajlab.table"]}), plain)  # the key's text as data
    assert own_output(plain) is None
    (tmp_path / "short.parquet").write_bytes(b"PAR1")
    (tmp_path / "lie.parquet").write_bytes(b"PAR1" + b"trajlab.table" + (10**9).to_bytes(4, "little") + b"PAR1")
    assert own_output(tmp_path / "short.parquet") is None and own_output(tmp_path / "lie.parquet") is None
    ctl = tmp_path / "ctl.parquet"  # a mark whose text would drive the terminal is shown inert
    pq.write_table(pa.table({"a": [1]}).replace_schema_metadata({PARQUET_KEY: b"\x1b[2Jboom"}), ctl)
    assert own_output(ctl) == "?[2Jboom"


def test_a_scan_with_a_long_manifest_is_still_an_output_directory(scanned: dict[str, Path], tmp_path: Path) -> None:
    """The manifest's mark is its first key: thousands of inputs listed before ``trajlab_version`` (keys sort) no
    longer hide that a directory is a scan output (so it is neither scanned as dumps nor refused as ``-o``)."""
    from trajlab.outpaths import MARKER, check_out_dir, output_kind

    old = tmp_path / "dumps" / "old_scan"
    shutil.copytree(scanned["out"], old)
    (old / MARKER).unlink()  # as a scan from before the marker file, or one whose marker was lost
    m = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    m["inputs"] = m["inputs"] * 2000
    (old / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True), encoding="utf-8")
    assert (old / "manifest.json").stat().st_size > 1 << 20
    assert output_kind(old) == "scan" and check_out_dir(old, kind="scan") == old
    _dumps(tmp_path / "dumps")
    files, _, skipped = find_inputs([tmp_path / "dumps"])
    assert len(files) == 2 and "old_scan/: a trajlab output directory" in skipped

"""The differential harness of the scan engines: every engine, the same inputs, every table byte for byte.

``scan`` runs once per engine (``auto``, ``columnar``, ``records``; :mod:`trajlab.scan.engines`) over the
sample runs, damaged dumps, generated turns and the labelled corpus of real model outputs, and every table must
be byte-identical. The manifest and ``scan --json`` must say which engine read each file and why a fallback
happened, and the engine option (and ``$TRAJLAB_ENGINE``) must really choose the engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers.scan_inputs import make_corpus_dump, make_generated, make_messy

from trajlab.cli import main
from trajlab.scan import ScanOptions, engines, scan
from trajlab.scan.engines import SMALL_INPUT_BYTES
from trajlab.scan.options import ENGINES, ENV_VAR
from trajlab.tables import SCAN_TABLES

ROOT = Path(__file__).resolve().parents[1]


def every_engine(paths: list[Path], tmp: Path, names: tuple[str, ...] = ENGINES, **kw: Any) -> dict[str, dict[str, Any]]:
    """Scan ``paths`` with each engine of ``names``; assert every table is byte-identical across them; return, per
    engine, the tables' bytes and the manifest."""
    got: dict[str, dict[str, Any]] = {}
    for engine in names:
        out = tmp / f"out_{engine}"
        scan(paths, out, ScanOptions(incremental=False, engine=engine, **{"jobs": 1, **kw}), progress=False)
        got[engine] = {"tables": {n: (out / f"{n}.parquet").read_bytes() for n in SCAN_TABLES},
                       "manifest": json.loads((out / "manifest.json").read_text()), "out": out}
    for engine in names[1:]:
        for name in SCAN_TABLES:
            assert got[engine]["tables"][name] == got[names[0]]["tables"][name], (engine, name)
    for inp in got["records"]["manifest"]["inputs"]:
        assert inp["engine"] == "records" and inp["fallback"] is None, inp
    return got


def engines_of(got: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {i["rel"]: (i["engine"], i["fallback"]) for i in got["manifest"]["inputs"]}


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_sample_runs(tmp_path: Path) -> None:
    # auto is columnar on an input this size (below SMALL_INPUT_BYTES it is the record engine: the small trees of
    # the other tests scan it): the two engines it picks from are compared here
    assert sum(p.stat().st_size for p in (ROOT / "sample_data").rglob("*") if p.is_file()) > 10 * SMALL_INPUT_BYTES
    got = every_engine([ROOT / "sample_data"], tmp_path, ("columnar", "records"), jobs=2)
    eng = engines_of(got["columnar"])
    # verl JSONL runs are read by the columnar engine; the other formats fall back, with the reason
    assert eng["qwen35_xml_run/rollout/1.jsonl"] == ("columnar", None)
    assert eng["openai_messages/agent_log.jsonl"][0] == "records"
    assert "openai_messages" in eng["openai_messages/agent_log.jsonl"][1]
    assert sum(e == "columnar" for e, _ in eng.values()) > 200


def test_damaged_dumps(tmp_path: Path) -> None:
    root = make_messy(tmp_path / "in")
    got = every_engine([root], tmp_path)
    errs = pl.read_parquet(got["auto"]["out"] / "ingest_errors.parquet")
    reasons = " | ".join(errs["reason"])
    assert "truncated last line" in reasons and "blank line" in reasons and "not finite" in reasons
    assert "missing field 'score'" in reasons and "'output' is int" in reasons
    traj = pl.read_parquet(got["auto"]["out"] / "trajectories.parquet")
    extra = dict(zip(traj["source_line"].cast(str) + "@" + traj["source_path"], traj["extra"], strict=True))
    assert json.loads(extra["2@rollout/6.jsonl"])["acc"] == 1 and '"acc": 1,' in extra["2@rollout/6.jsonl"]
    assert json.loads(extra["1@rollout/7.jsonl"])["s"] == 'q"\\\n\x01ü'
    # each damaged file fell back alone, with the columnar reader's reason; its clean neighbours did not
    eng = engines_of(got["columnar"])
    assert eng["rollout/1.jsonl"] == ("columnar", None) and eng["rollout/7.jsonl"] == ("columnar", None)
    assert eng["rollout/2.jsonl"][0] == "records" and "read_ndjson" in eng["rollout/2.jsonl"][1]
    assert eng["rollout/3.jsonl"][0] == "records" and "blank" in eng["rollout/3.jsonl"][1]
    assert eng["rollout/9.jsonl"] == ("records", "not a clean verl range: CR line endings")


def test_runs_of_several_roots(tmp_path: Path) -> None:
    """Several roots, sibling runs and a --run name: every engine fills ``run`` (and the prefixed paths) alike."""
    a, b = make_messy(tmp_path / "a" / "exp"), make_messy(tmp_path / "b" / "exp")
    got = every_engine([a, b], tmp_path, runs={"named": tmp_path / "b" / "exp" / "rollout"})
    assert got["auto"]["tables"]["trajectories"]
    traj = pl.read_parquet(got["auto"]["out"] / "trajectories.parquet")
    assert {"a/exp", "a/exp/legacy", "b/exp/legacy", "named"} <= set(traj["run"])
    named = traj.filter(pl.col("run") == "named")["source_path"]
    assert named.len() and named.str.starts_with("b/exp/rollout/").all()
    assert traj["source_path"].str.starts_with("b/exp/rollout/").sum() == named.len()


def test_damaged_dumps_small_chunks_two_workers(tmp_path: Path) -> None:
    """Ranges of one file and units of several files give the same tables as one unit, for every engine."""
    root = make_messy(tmp_path / "in")
    a = every_engine([root], tmp_path / "a")
    b = every_engine([root], tmp_path / "b", jobs=2, chunk_bytes=3000)
    assert a["auto"]["tables"] == b["auto"]["tables"]


def test_generated_turns(tmp_path: Path) -> None:
    root = make_generated(tmp_path / "in")
    got = every_engine([root], tmp_path)
    assert all(e == ("columnar", None) for e in engines_of(got["columnar"]).values())
    calls = pl.read_parquet(got["auto"]["out"] / "calls.parquet")
    # the inputs exercise both engines' branches: canonical calls and many kinds of malformed ones
    assert (calls["status"] == "ok").sum() > 100 and (calls["status"] == "malformed").sum() > 50
    assert calls.filter(pl.col("status") == "malformed")["categories"].explode().n_unique() >= 8


def test_corpus(tmp_path: Path) -> None:
    root = make_corpus_dump(tmp_path / "in")
    got = every_engine([root], tmp_path)
    assert engines_of(got["columnar"]) == {"rollout/1.jsonl": ("columnar", None)}
    assert pl.read_parquet(got["auto"]["out"] / "calls.parquet").height >= 30


def test_rule_packs_fall_back_with_reason(tmp_path: Path) -> None:
    """User rule packs turn the canonical recogniser off: the files fall back, and say why."""
    rules = ROOT / "rules" / "user_rules_example"
    root = make_messy(tmp_path / "in")
    got = every_engine([root / "rollout"], tmp_path, rules_dirs=[rules])
    eng = engines_of(got["columnar"])
    assert eng["1.jsonl"][0] == "records" and "recogniser is off" in eng["1.jsonl"][1]


def test_auto_reads_small_inputs_with_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``auto`` a scan with less than SMALL_INPUT_BYTES to read takes the record engine (the columnar
    engine's fixed cost does not pay back there), saying so per file; above it, auto is the columnar engine."""
    root = make_messy(tmp_path / "in")
    got = every_engine([root], tmp_path / "small")
    eng = engines_of(got["auto"])
    assert {e for e, _ in eng.values()} == {"records"}
    assert all(why and why.startswith("small input (") and "auto takes the record engine" in why for _, why in eng.values())
    monkeypatch.setattr(engines, "SMALL_INPUT_BYTES", 1)
    got = every_engine([root], tmp_path / "big")
    assert engines_of(got["auto"]) == engines_of(got["columnar"])
    assert engines_of(got["auto"])["rollout/1.jsonl"] == ("columnar", None)


def test_env_var_and_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``$TRAJLAB_ENGINE`` picks the engine when ``--engine`` is not given; ``--json`` lists every file's engine;
    an unknown engine is a one-line error with exit code 2."""
    root = make_messy(tmp_path / "in")
    monkeypatch.setenv(ENV_VAR, "records")
    assert main(["scan", str(root), "-o", str(tmp_path / "o1"), "--json", "--jobs", "1"]) == 0
    s1 = json.loads(capsys.readouterr().out)
    assert {e["engine"] for e in s1["engines"]} == {"records"}
    assert main(["scan", str(root), "-o", str(tmp_path / "o2"), "--json", "--jobs", "1", "--engine", "columnar"]) == 0
    s2 = json.loads(capsys.readouterr().out)
    by_file = {e["file"]: e for e in s2["engines"]}
    assert by_file["rollout/1.jsonl"]["engine"] == "columnar" and by_file["rollout/9.jsonl"]["engine"] == "records"
    assert "CR line endings" in by_file["rollout/9.jsonl"]["fallback"]
    assert json.loads((tmp_path / "o2" / "manifest.json").read_text())["options"]["engine"] == "columnar"
    monkeypatch.setenv(ENV_VAR, "fast")
    assert main(["scan", str(root), "-o", str(tmp_path / "o3")]) == 2
    err = capsys.readouterr().err
    assert "$TRAJLAB_ENGINE" in err and "auto, columnar, records" in err and "Traceback" not in err

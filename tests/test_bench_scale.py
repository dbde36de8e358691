"""``benchmarks/bench_scale.py`` runs end to end on a tiny generated dump: it measures every stage, finds the two
scans byte-identical in every table, and the output holds no second copy of the tables (the cache is tiny)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.slow
def test_bench_scale_tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_scale

    assert bench_scale.main(["--sizes", "0.002", "--work-dir", str(tmp_path), "--jobs", "1", "--no-check",
                             "--json", str(tmp_path / "r.json")]) == 0
    (r,) = json.loads((tmp_path / "r.json").read_text())
    assert r["identical"] and all(r["identical"].values()) and len(r["identical"]) >= 7
    assert not r["scan"]["killed"] and not r["report"]["killed"] and r["scan"]["peak_rss"] >= r["scan"]["peak_rss_driver"] > 0
    assert 0 < r["cache_bytes"] < r["tables_bytes"] / 10 and r["output_bytes"] >= r["tables_bytes"]
    assert "byte-identical in every table" in capsys.readouterr().out
    sys.modules.pop("bench_scale", None)

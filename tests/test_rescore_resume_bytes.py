"""`trajlab rescore --resume` ends byte for byte where a clean run does, whatever point the earlier run died at.

A real verl dump scanned by the real scanner, the real demo checkpoint ``sample_data/demo_checkpoints/global_step_20``
(tiny Qwen3 with its own tokenizer), and a run interrupted at deterministic points (a ``KeyboardInterrupt`` where a
``kill -9`` could land): while scoring a block; after the merge but before its parts were removed; while the
parts were being removed; and a fresh run killed over the results of an earlier finished one. Each resume must
give the clean run's tables, every byte (``positions.parquet`` included: rows are neither lost nor doubled).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers.rescore_scan_data import scan_run  # noqa: E402

from trajlab.rescore import (  # noqa: E402
    RescoreOptions,
    rescore,
    scoring,  # noqa: E402
)
from trajlab.rescore import outputs as outputs_mod  # noqa: E402

CKPT = Path(__file__).resolve().parents[1] / "sample_data" / "demo_checkpoints" / "global_step_20"
LABEL = "global_step_20"
OPTS = RescoreOptions(block_size=2, progress=False)


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("resume_bytes")
    out = scan_run(tmp, steps=2, per_step=2)  # 4 trajectories: 2 blocks of 2
    pristine = tmp / "pristine"
    shutil.copytree(out, pristine)
    rescore(out, [CKPT], OPTS)
    return {"out": out, "pristine": pristine}


def _tables(out: Path) -> dict[str, bytes]:
    root = out / "rescore"
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


def _fresh_copy(clean, tmp_path: Path, *, with_results: bool = False) -> Path:
    dst = tmp_path / "out"
    shutil.copytree(clean["out"] if with_results else clean["pristine"], dst)
    return dst


def _interrupted(out: Path, monkeypatch, *, at_block: int | None = None, in_clear: str | None = None) -> None:
    """Run a fresh rescore into ``out`` and stop it like a kill would: in the ``at_block``-th scoring call, or in
    the removal of the parts after the merge (``in_clear``: ``"before"`` anything is removed, ``"after_marks"``
    once the ``trajectory_scores`` parts are gone)."""
    real_score, real_clear = scoring.ChunkedScorer.score, outputs_mod.clear_parts
    calls = {"n": 0}

    def score(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == at_block:
            raise KeyboardInterrupt
        return real_score(self, *a, **kw)

    def clear(pdir):
        if not pdir.exists():
            return real_clear(pdir)
        if in_clear == "after_marks":
            shutil.rmtree(pdir / "trajectory_scores")
        raise KeyboardInterrupt

    monkeypatch.setattr(scoring.ChunkedScorer, "score", score)
    if in_clear:
        monkeypatch.setattr(outputs_mod, "clear_parts", clear)
    with pytest.raises(KeyboardInterrupt):
        rescore(out, [CKPT], OPTS)
    monkeypatch.setattr(scoring.ChunkedScorer, "score", real_score)
    monkeypatch.setattr(outputs_mod, "clear_parts", real_clear)


def _resume(out: Path):
    return rescore(out, [CKPT], RescoreOptions(block_size=2, progress=False, resume=True)).checkpoints[0]


@pytest.mark.slow  # a clean run and four interrupted + resumed runs of a tiny model (~20 s CPU)
def test_resume_is_byte_identical_wherever_the_run_died(clean, tmp_path, monkeypatch):
    want = _tables(clean["out"])
    assert {"global_step_20/positions.parquet", "global_step_20/trajectory_scores.parquet",
            "compare.parquet"} <= set(want)

    # 1. killed while scoring the second block: the first block's part is kept, the rest is scored
    out = _fresh_copy(clean, tmp_path / "a")
    _interrupted(out, monkeypatch, at_block=2)
    assert len(outputs_mod.complete_parts(outputs_mod.parts_dir(out, LABEL))) == 1
    c = _resume(out)
    assert (c.skipped_resume, c.trajectories) == (2, 4)
    assert _tables(out) == want

    # 2. killed after the merge wrote every table, before its parts were removed: the merged tables are the
    #    parts' own rows (folding both counted every row twice)
    out = _fresh_copy(clean, tmp_path / "b")
    _interrupted(out, monkeypatch, in_clear="before")
    assert (outputs_mod.label_dir(out, LABEL) / "trajectory_scores.parquet").exists()
    assert len(outputs_mod.complete_parts(outputs_mod.parts_dir(out, LABEL))) == 2
    c = _resume(out)
    assert (c.skipped_resume, c.trajectories) == (4, 4)
    assert _tables(out) == want

    # 3. killed while the parts were being removed (the trajectory_scores parts went first)
    out = _fresh_copy(clean, tmp_path / "c")
    _interrupted(out, monkeypatch, in_clear="after_marks")
    assert _resume(out).skipped_resume == 4
    assert _tables(out) == want

    # 4. a fresh run over an earlier finished one, killed in its second block: the old results are replaced,
    #    never folded in beside the new parts
    out = _fresh_copy(clean, tmp_path / "d", with_results=True)
    _interrupted(out, monkeypatch, at_block=2)
    assert not (outputs_mod.label_dir(out, LABEL) / "positions.parquet").exists()
    c = _resume(out)
    assert (c.skipped_resume, c.trajectories) == (2, 4)
    assert _tables(out) == want

"""Float aggregates are order-independent: the exact means of :mod:`trajlab.exactsum` against their reference
(shuffled, chunked, with nulls and non-finite values), and two scans of one dump -- one reader in process, two
workers over small chunks that split every step -- give byte-identical ``steps`` tables."""

from __future__ import annotations

import math
import random
from pathlib import Path

import polars as pl
import pytest
from helpers.verl_lines import qwen35_prompt, v1_line, write_jsonl

from trajlab.exactsum import finish_mean, mean_exprs, reference_mean
from trajlab.scan import ScanOptions, scan


def grouped_means(values: list[float | None], groups: list[int], chunks: int = 1) -> dict[int, float | None]:
    frames = [pl.DataFrame({"g": groups[i::chunks], "x": values[i::chunks]}, schema={"g": pl.Int64, "x": pl.Float64})
              for i in range(chunks)]
    lf = pl.concat(frames, rechunk=False).lazy()
    got = {}
    for r in lf.group_by("g").agg(*mean_exprs("x", "_x_")).collect().iter_rows(named=True):
        got[r["g"]] = finish_mean(r, "_x_", lambda g=r["g"]: [v for v, k in zip(values, groups, strict=True) if k == g])
    return got


def same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and (a == b or (math.isnan(a) and math.isnan(b))))


def test_exact_mean_matches_the_reference_in_any_order() -> None:
    rnd = random.Random(3)
    values: list[float | None] = [rnd.uniform(-5, 5) * 10 ** rnd.randint(-8, 3) for _ in range(20_000)]
    values[::97] = [None] * len(values[::97])
    groups = [rnd.randrange(40) for _ in values]
    ref = {g: reference_mean([v for v, k in zip(values, groups, strict=True) if k == g]) for g in set(groups)}
    first = grouped_means(values, groups)
    assert first == ref  # correctly rounded exact means (nothing here is finer than the last limb)
    order = list(range(len(values)))
    for chunks in (1, 3, 17):
        rnd.shuffle(order)
        assert grouped_means([values[i] for i in order], [groups[i] for i in order], chunks) == first


def test_exact_mean_edge_values() -> None:
    cases: list[list[float | None]] = [
        [None, None], [1.0, math.nan], [math.inf, 1.0], [-math.inf, 2.0], [math.inf, -math.inf],
        [1e15, -1e15, 3.0], [5e-324, 1.0], [-0.0, 0.0], [0.1] * 1000, [-1e-30, 1e-30, -2.5],
    ]
    for vals in cases:
        got = grouped_means(vals, [0] * len(vals))[0]
        ref = reference_mean(vals)
        assert same(got, ref) or (ref is not None and got is not None and abs(got - ref) <= 1e-24), (vals, got, ref)


@pytest.mark.slow
def test_two_scans_byte_identical_steps_when_chunks_and_workers_split_steps(tmp_path: Path) -> None:
    rnd = random.Random(11)
    prompt = qwen35_prompt("q", [])
    rows = [v1_line(1 + i // 700, prompt, "The answer is " + "x" * rnd.randint(50, 400) + ".",
                    rnd.random() * rnd.choice([1.0, 1e-3, 37.0]), uid=f"u{i // 8}", session=i % 8)
            for i in range(2100)]  # three steps of 700 records, each cut across chunks of 64 KB
    root = tmp_path / "in"
    write_jsonl(root / "rollout" / "all.jsonl", rows)
    a, b = tmp_path / "a", tmp_path / "b"
    scan([root], a, ScanOptions(jobs=1, incremental=False), progress=False)
    scan([root], b, ScanOptions(jobs=2, chunk_bytes=64_000, incremental=False), progress=False)
    assert (a / "steps.parquet").read_bytes() == (b / "steps.parquet").read_bytes()
    steps = pl.read_parquet(a / "steps.parquet")
    traj = pl.read_parquet(a / "trajectories.parquet")
    assert steps.height == 3
    for step, mean in steps.select("step", "mean_score").iter_rows():
        assert mean == reference_mean(traj.filter(pl.col("step") == step)["score"].to_list())

"""Whether a text output that stops inside a structure hit the length limit: settled once its run is merged.

A text dump does not say where the length limit was, so an output is *truncated* only when it is near the longest
output of its run (:func:`trajlab.ending.near_length_limit`): an opener followed by the end of a 1.2 k-character
output in a run whose outputs reach 30 k characters stopped on its own (``stopped_in_call``, ...). The per-record
verdict of both engines (:func:`trajlab.ending.output_ending`) is structural. Each worker records its range's
longest output per run (:func:`longest_outputs`, in the range's stats), so the merge knows every run's longest
output before it writes a row and settles each batch of ``trajectories`` as it streams it (:func:`settle`): no
second pass over the table, and the same input still gives the same bytes. Exact-token sources (NeMo-RL) are decided
per record, from their last generated token, and are not touched here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from trajlab.ending import NEAR_LIMIT, STOPPED
from trajlab.tables import TRAJECTORIES

#: sources that log exact tokens: decided per record
EXACT_TOKEN_SOURCES = ("nemo_rl_jsonl",)


def longest_outputs(traj: pa.Table) -> list[list[Any]]:
    """The longest ``output`` (characters) per run of a range's trajectories, as ``[run, chars]`` pairs sorted by
    run (None first): what a worker records in the range's stats so the merge knows every run's longest output
    before it writes the first row."""
    import polars as pl

    if not traj.num_rows:
        return []
    df = pl.from_arrow(traj.select(["run", "output"]))
    assert isinstance(df, pl.DataFrame)
    got = (df.group_by("run").agg(pl.col("output").str.len_chars().max().alias("n"))
           .sort("run", nulls_last=False))
    return [[r, int(n or 0)] for r, n in got.iter_rows()]


def run_longest(stats: Iterable[Mapping[str, Any]]) -> dict[str | None, int]:
    """Every run's longest output over the ranges' stats (:func:`longest_outputs`)."""
    out: dict[str | None, int] = {}
    for st in stats:
        for run, n in st.get("longest") or ():
            out[run] = max(out.get(run, 0), int(n))
    return out


def settle(t: pa.Table, longest: Mapping[str | None, int]) -> pa.Table:
    """``t`` (rows of ``trajectories``) with the text outputs that stop inside a structure far below their run's
    longest output (``longest``: :func:`run_longest`) not truncated: their ``end_reason`` says where they
    stopped (:data:`trajlab.ending.STOPPED`). The merge applies it to every batch it writes."""
    import polars as pl

    if not t.num_rows:
        return t
    df = pl.from_arrow(t.select(["run", "source_format", "end_reason", "output"]))
    assert isinstance(df, pl.DataFrame)
    limit = pl.DataFrame({"run": list(longest), "run_max": list(longest.values())},
                         schema={"run": df.schema["run"], "run_max": pl.Int64})
    hit = (df.with_row_index("i").join(limit, on="run", how="left", nulls_equal=True, maintain_order="left")
           .filter(pl.col("end_reason").is_in(list(STOPPED)) & ~pl.col("source_format").is_in(EXACT_TOKEN_SOURCES)
                   & (pl.col("output").str.len_chars() < NEAR_LIMIT * pl.col("run_max")))["i"].to_list())
    if not hit:
        return t
    schema = TRAJECTORIES.schema
    ti, ri = schema.get_field_index("truncated"), schema.get_field_index("end_reason")
    trunc = t.column(ti).to_pylist()
    reason = t.column(ri).to_pylist()
    for k in hit:
        trunc[k] = False
        reason[k] = STOPPED[reason[k]]
    t = t.set_column(ti, schema.field(ti), pa.array(trunc, pa.bool_()))
    return t.set_column(ri, schema.field(ri), pa.array(reason, schema.field(ri).type))

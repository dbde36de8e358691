"""Whether a text output that stops inside a structure hit the length limit: settled once its run is merged.

A text dump does not say where the length limit was, so an output is *truncated* only when it is near the longest
output of its run (:func:`trajlab.ending.near_length_limit`): an opener followed by the end of a 1.2 k-character
output in a run whose outputs reach 30 k characters stopped on its own (``stopped_in_call``, ...). The per-record
verdict of both engines (:func:`trajlab.ending.output_ending`) is structural; :func:`settle` rewrites the rows of
``trajectories.parquet`` that did not hit the limit, row group by row group (memory: one row group), keeping the
file's row groups, so the same input still gives the same bytes. Exact-token sources (NeMo-RL) are decided
per record, from their last generated token, and are not touched here.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab.atomic import atomic_path
from trajlab.ending import NEAR_LIMIT, STOPPED
from trajlab.tables import TRAJECTORIES, table_path

#: sources that log exact tokens: decided per record
EXACT_TOKEN_SOURCES = ("nemo_rl_jsonl",)


def stopped_rows(path: Path) -> set[int]:
    """Row numbers (in file order) of text outputs that stop inside a structure far below their run's longest
    output."""
    import polars as pl

    lf = pl.scan_parquet(path).with_row_index("i").select(
        "i", "run", "source_format", "end_reason", pl.col("output").str.len_chars().alias("n"))
    rows = (lf.with_columns(pl.col("n").max().over("run").alias("run_max"))
            .filter(pl.col("end_reason").is_in(list(STOPPED)) & ~pl.col("source_format").is_in(EXACT_TOKEN_SOURCES)
                    & (pl.col("n") < NEAR_LIMIT * pl.col("run_max")))
            .select("i").collect())
    return set(rows["i"].to_list())


def settle(out: Path) -> int:
    """Rewrite ``out/trajectories.parquet`` so that outputs that did not hit the length limit are not truncated
    (their ``end_reason`` says where they stopped); returns how many rows changed."""
    path = table_path(out, "trajectories")
    rows = stopped_rows(path)
    if not rows:
        return 0
    src = pq.ParquetFile(path)
    schema = TRAJECTORIES.schema
    ti, ri = schema.get_field_index("truncated"), schema.get_field_index("end_reason")
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, schema, compression="zstd", write_statistics=True) as w:
            first = 0
            for g in range(src.num_row_groups):
                t = src.read_row_group(g)
                n = t.num_rows
                hit = [i - first for i in rows if first <= i < first + n]
                if hit:
                    trunc = t.column(ti).to_pylist()
                    reason = t.column(ri).to_pylist()
                    for k in hit:
                        trunc[k] = False
                        reason[k] = STOPPED[reason[k]]
                    t = t.set_column(ti, schema.field(ti), pa.array(trunc, pa.bool_()))
                    t = t.set_column(ri, schema.field(ri), pa.array(reason, schema.field(ri).type))
                w.write_table(t, row_group_size=n)
                first += n
        src.close()
    return len(rows)

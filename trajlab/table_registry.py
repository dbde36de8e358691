"""The registry of every table trajlab writes: one explicit list, read by ``trajlab schema``, ``trajlab sql``'s
table descriptions and the generated table reference (``docs/reference/tables.md``).

Each spec is declared beside its kind of output (:mod:`trajlab.tables` for the scan, :mod:`trajlab.rescore.specs`,
:mod:`trajlab.curate.specs`) and listed here once; nothing registers itself on import. A new table is written
through its :class:`~trajlab.tables.TableSpec` and must be added to :data:`ALL_TABLES` (then ``python docs/gen_reference.py``
regenerates its documentation, and a test fails until it does). The order below is the order ``trajlab schema`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trajlab.curate.specs import MESSAGES_SPEC, OOD_SPEC, OPENAI_SPEC, PROMPT_RESPONSE_SPEC
from trajlab.rescore.specs import (
    CALIBRATION,
    COMPARE,
    CONTROL_STATS,
    DISCOVERED,
    DISTRIBUTION,
    MALFORMATIONS,
    PAIRED,
    POSITIONS,
    SPIKES,
    TOKEN_MASS,
    TOKENS,
    TRAJECTORY_SCORES,
)
from trajlab.tables import (
    CALLS,
    FINDINGS,
    INGEST_ERRORS,
    METRICS,
    ROLLOUT_TOKENS,
    SCHEMA_VERSION,
    STEPS,
    TRAJECTORIES,
    TURNS,
    TableSpec,
)

#: every table trajlab writes, by name, in documentation order
ALL_TABLES: dict[str, TableSpec] = {s.name: s for s in (
    # trajlab scan: OUT/<table>.parquet
    TRAJECTORIES, TURNS, CALLS, FINDINGS, STEPS, INGEST_ERRORS, ROLLOUT_TOKENS, METRICS,
    # trajlab rescore: OUT/rescore/<label>/<table>.parquet, then across checkpoints OUT/rescore/<table>.parquet
    TOKENS, SPIKES, TRAJECTORY_SCORES, MALFORMATIONS, CONTROL_STATS, COMPARE, POSITIONS, TOKEN_MASS,
    CALIBRATION, PAIRED, DISCOVERED, DISTRIBUTION,
    # trajlab build-sft-pool: POOL/{train,val}.parquet in one style, POOL/ood_eval.parquet
    MESSAGES_SPEC, PROMPT_RESPONSE_SPEC, OPENAI_SPEC, OOD_SPEC,
)}


def all_specs() -> dict[str, TableSpec]:
    """Every table spec by name (a copy of :data:`ALL_TABLES`)."""
    return dict(ALL_TABLES)


def describe_tables(specs: Iterable[TableSpec] | None = None) -> list[dict[str, Any]]:
    """The documented schema as plain data (what ``trajlab schema --json`` prints); every table by default."""
    specs = list(specs) if specs is not None else list(ALL_TABLES.values())
    return [
        {
            "table": s.name,
            "doc": s.doc,
            "schema_version": SCHEMA_VERSION,
            "columns": [
                {"name": c.name, "type": str(c.type), "nullable": c.nullable, "doc": c.doc} for c in s.columns
            ],
        }
        for s in specs
    ]


def tables_markdown(specs: Iterable[TableSpec] | None = None) -> str:
    """The table reference as Markdown (``docs/reference/tables.md`` is built from this text; a test keeps them in sync)."""
    out: list[str] = []
    for d in describe_tables(specs):
        out.append(f"#### `{d['table']}`\n\n{d['doc']}\n")
        out.append("| column | type | null | meaning |\n|---|---|---|---|")
        for c in d["columns"]:
            doc = c["doc"].replace("|", "\\|")
            out.append(f"| `{c['name']}` | `{c['type']}` | {'yes' if c['nullable'] else 'no'} | {doc} |")
        out.append("")
    return "\n".join(out)

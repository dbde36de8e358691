"""Which tables an output directory holds (scan, rescore, SFT pool) and how each becomes a DuckDB view."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import TableError, shell_word
from trajlab.tables import SCAN_TABLES

if TYPE_CHECKING:  # pragma: no cover
    import duckdb


@dataclass
class TableSource:
    """One view backed by Parquet: the files it reads and, for rescore tables, their checkpoint labels."""

    name: str
    kind: str  # scan | rescore | sft
    files: list[tuple[str | None, Path]] = field(default_factory=list)  # (checkpoint label or None, path)


_IDENT = re.compile(r"[^0-9a-zA-Z_]+")


def ident(text: str) -> str:
    name = _IDENT.sub("_", text).strip("_").lower()
    return name or "_"


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def discover(out: Path | str) -> dict[str, TableSource]:
    """Find every table under ``out`` (scan, rescore, SFT pool); raises :class:`TableError` if there is none."""
    root = Path(out)
    if not root.is_dir():
        raise TableError(f"{root}: no such directory (expected the output of `trajlab scan`)")
    from trajlab.outpaths import check_complete

    check_complete(root)
    found: dict[str, TableSource] = {}
    for name in SCAN_TABLES:
        p = root / f"{name}.parquet"
        if p.is_file():
            found[name] = TableSource(name, "scan", [(None, p)])
    rescore = root / "rescore"
    if rescore.is_dir():
        for p in sorted(rescore.glob("*.parquet")):
            view = f"rescore_{ident(p.stem)}"
            found[view] = TableSource(view, "rescore", [(None, p)])
        for d in sorted(x for x in rescore.iterdir() if x.is_dir()):
            for p in sorted(d.glob("*.parquet")):
                view = f"rescore_{ident(p.stem)}"
                src = found.get(view)
                if src is None or src.files and src.files[0][0] is None:
                    src = found[view] = TableSource(view, "rescore", [])
                src.files.append((d.name, p))
    pool = root / "sft_pool"
    if pool.is_dir():
        for p in sorted(pool.rglob("*.parquet")):
            rel = p.relative_to(pool).with_suffix("")
            view = f"sft_{ident('_'.join(rel.parts))}"
            found.setdefault(view, TableSource(view, "sft", [(None, p)]))
    if not found:
        raise TableError(
            f"{root}: no trajlab tables found (no trajectories.parquet, rescore/ or sft_pool/)",
            hint=f"run `trajlab scan DUMPS -o {shell_word(root)}` first",
        )
    return found


#: rows per Arrow batch a view's scan hands DuckDB, and batches / files read ahead (pyarrow's defaults are 131,072
#: rows, 16 batches and 4 files: on a 5 GB scan's ``trajectories`` a query reading ``tools`` held 1.3 GiB in
#: read-ahead alone, outside DuckDB's memory limit; with these 0.25 GiB, and no slower)
SCAN_BATCH_ROWS = 16_384
SCAN_READAHEAD = 1


@functools.cache
def _lean_dataset_class() -> type:
    """A pyarrow ``FileSystemDataset`` whose scanners read ahead one small batch (see :data:`SCAN_BATCH_ROWS`).

    DuckDB scans a registered dataset through its ``scanner(columns=, filter=)``, keeping projection, filter
    pushdown and row-group pruning by statistics; only the batch size and the read-ahead change."""
    import pyarrow.dataset as ds

    class LeanDataset(ds.FileSystemDataset):  # type: ignore[misc]
        def scanner(self, *args: Any, **kwargs: Any) -> ds.Scanner:
            kwargs.setdefault("batch_size", SCAN_BATCH_ROWS)
            kwargs.setdefault("batch_readahead", SCAN_READAHEAD)
            kwargs.setdefault("fragment_readahead", SCAN_READAHEAD)
            return super().scanner(*args, **kwargs)

    return LeanDataset


def lean_dataset(path: Path | str) -> Any:
    """The Parquet file at ``path`` as a pyarrow dataset for DuckDB to scan with bounded read-ahead."""
    import pyarrow.dataset as ds

    try:
        d = ds.dataset(str(path), format="parquet")
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError: truncated or not Parquet
        raise TableError(f"{path}: not a readable Parquet file ({e})") from None
    return _lean_dataset_class()(list(d.get_fragments()), d.schema, d.format, d.filesystem)


def register(con: duckdb.DuckDBPyConnection, src: TableSource) -> None:
    if len(src.files) == 1 and src.files[0][0] is None:
        con.register(src.name, lean_dataset(src.files[0][1]))
        return
    parts = []
    for i, (label, path) in enumerate(src.files):
        hidden = f"__{src.name}_{i}"
        d = lean_dataset(path)
        con.register(hidden, d)
        has_checkpoint = "checkpoint" in d.schema.names
        lab = "'" + (label or "").replace("'", "''") + "'"
        cols = "*" if has_checkpoint else f"{lab} AS checkpoint, *"
        parts.append(f"SELECT {cols} FROM {quote(hidden)}")
    con.execute(f"CREATE VIEW {quote(src.name)} AS " + " UNION ALL BY NAME ".join(parts))


"""The incremental cache: which files' parts can be reused, and whether the merged tables are already current.

A file whose key (:func:`trajlab.scan.plan.file_key`) still names a part directory with a ``done.json`` for
every range is not read again; its content hash comes from those stats. A range's rows are either in its
unit's part files (a range not merged yet, or a file skipped as a duplicate) or -- once merged -- in the merged
tables themselves (:func:`point_at_tables`): then its ``done.json`` names the merge and its first row per table,
and it is reusable only while ``manifest.json`` still holds that merge with every table whole and of the row
counts it wrote. The merge is skipped when its key -- the ordered part sets plus the driver-side ingest
errors -- equals the one in ``manifest.json``. Part directories no longer used are pruned.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

from trajlab.atomic import atomic_write_bytes
from trajlab.model import IngestError
from trajlab.outpaths import INCOMPLETE
from trajlab.scan.parts import PART_TABLES, done_path
from trajlab.scan.plan import FileEntry
from trajlab.tables import STEPS, table_path


def load_done(pdir: Path, n_tasks: int, tables_key: str | None = None) -> list[dict[str, Any]] | None:
    """The stats of every range of a file from its part directory, or ``None`` if any range is missing (or
    the unit directory holding its rows, or -- for a range whose rows are in the merged tables -- those tables:
    ``tables_key`` is the merge key of the tables now in the output directory, :func:`previous_merge_key`)."""
    out = []
    for i in range(n_tasks):
        p = done_path(pdir, i)
        if not p.is_file():
            return None
        try:
            stats = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if not isinstance(stats, dict) or "sha1" not in stats or not isinstance(stats.get("rows"), dict):
            return None
        unit = stats.get("unit")
        if unit is None:  # rows in the merged tables
            if (tables_key is None or stats.get("merged") != tables_key
                    or not isinstance(stats.get("offsets"), dict)):
                return None
        elif (not isinstance(stats.get("batches"), dict) or not isinstance(unit, str)
              or not (pdir.parent / unit).is_dir()):
            return None
        out.append(stats)
    return out


def point_at_tables(keep: list[FileEntry], parts_root: Path, n_errors: int, key: str) -> None:
    """After the merge ``key`` (its tables written): rewrite each kept range's ``done.json`` to point at its
    rows in the merged tables -- the first row of each table, in merge order, after the ``n_errors`` driver-side
    ingest errors that head ``ingest_errors`` -- instead of at its unit's part files, which the prune then
    deletes. ``keep``'s stats are updated in place."""
    at = {spec.name: (n_errors if spec.name == "ingest_errors" else 0) for spec in PART_TABLES}
    for e in keep:
        for i, st in enumerate(e.stats):
            new = {**st, "unit": None, "batches": {}, "merged": key, "offsets": dict(at)}
            for spec in PART_TABLES:
                at[spec.name] += int(st["rows"].get(spec.name, 0))
            if new != st:
                # a cache (lost is recomputed): no fsync
                atomic_write_bytes(done_path(parts_root / e.key, st["chunk"]),
                                   json.dumps(new, sort_keys=True).encode(), fsync=False)
                e.stats[i] = new


def table_rows(out: Path) -> dict[str, int]:
    """The row count of each merged table in ``out`` (from the footers), as ``manifest.json`` records them."""
    import pyarrow.parquet as pq

    return {s.name: pq.read_metadata(table_path(out, s.name)).num_rows for s in PART_TABLES}


def content_hash(stats: list[dict[str, Any]]) -> str:
    """Content hash of a file: the sha1 its ranges were processed with (kept in every range's stats), so an
    unchanged file is never read again just to be hashed."""
    return str(stats[0].get("sha1") or "") if stats else ""


def merge_key(keep: list[FileEntry], errors: list[IngestError]) -> str:
    """Identity of a merge: the ordered part sets and the driver-side ingest errors."""
    h = hashlib.sha1()
    for e in keep:
        h.update(f"{e.key}:{len(e.tasks)}\n".encode())
    for x in errors:
        h.update(f"{x.source_path}\0{x.line}\0{x.reason}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def previous_merge_key(out: Path) -> str | None:
    """The merge key of the scan already in ``out``, when all its tables are still there."""
    if not all(table_path(out, s.name).is_file() for s in (*PART_TABLES, STEPS)):
        return None
    if (out / INCOMPLETE).exists():  # a scan was killed while rewriting the tables
        return None
    import pyarrow.parquet as pq

    rows = {}
    for s in (*PART_TABLES, STEPS):  # a damaged table (truncated, overwritten) is rebuilt, never trusted
        try:
            rows[s.name] = pq.read_metadata(table_path(out, s.name)).num_rows
        except Exception:  # noqa: BLE001 - ArrowInvalid, OSError...: any unreadable footer
            return None
    from trajlab.outpaths import read_json_object

    man = read_json_object(out / "manifest.json")[0]  # damaged: no key, the tables are merged
    key, want = man.get("merge_key"), man.get("table_rows")
    if isinstance(want, dict) and any(rows.get(k) != v for k, v in want.items()):
        return None  # a table replaced by another of the same shape: its rows are not the ones recorded
    return key if isinstance(key, str) else None


_PART_KEY = re.compile(r"(?:u-)?[0-9a-f]{20}")  # a file key, or a unit directory (parts.unit_name)


def prune_parts(parts_root: Path, live: set[str]) -> None:
    """Remove the part directories no longer needed: files no longer scanned, and units none of whose ranges
    are still used (``live``: the file keys and unit directory names of this scan)."""
    if not parts_root.is_dir():
        return
    for d in parts_root.iterdir():  # only trajlab's own part directories (20 hex digits), never anything else
        if d.is_dir() and not d.is_symlink() and _PART_KEY.fullmatch(d.name) and d.name not in live:
            shutil.rmtree(d, ignore_errors=True)

"""Trajlab's mark on the data files it writes, and the test that recognises one, so that no command ever reads a
trajlab output back as input (a ``trajlab sql ... -o FILE`` export left under a scanned directory is not a dump).

The marks (documented in ``docs/guides/disk-guarantees.md``):

* **Parquet**: the file's key-value metadata holds :data:`PARQUET_KEY` (``trajlab.table``) naming the table or
  output (every :class:`~trajlab.tables.TableSpec` schema carries it; ``sql --format parquet`` exports add it).
  It travels with the file wherever it is copied, and verl, pandas and fastparquet ignore it.
* **JSON objects** trajlab writes (manifests, ``drift.json``) start with the key :data:`JSON_KEY` (``"$trajlab"``);
  key-sorted JSON puts it first, so the first bytes of the file tell.
* **JSON / JSON lines exports** (``sql --format json|jsonl -o FILE``) hold the query's rows and nothing else, so
  their mark is a hidden sidecar ``.FILE.trajlab`` beside them recording the export's size and SHA-256: the file
  is trajlab's while its bytes are the ones exported (an edited file is the user's again).

:func:`own_output` says which trajlab output a data file is (or ``None``); discovery skips such files and lists
them with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

#: the Parquet key-value metadata key naming the trajlab table or output a file holds
PARQUET_KEY = b"trajlab.table"
#: the first key of every JSON object file trajlab writes (its value names the file's kind)
JSON_KEY = "$trajlab"
#: ``.<name>`` + this: the sidecar marking a JSON / JSON lines export
SIDECAR_SUFFIX = ".trajlab"

_JSON_HEAD = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"\$trajlab"\s*:\s*"([^"\\]{0,120})"')
_MAX_FOOTER = 256 << 20


def parquet_metadata(name: str) -> dict[bytes, bytes]:
    """The key-value metadata that marks a Parquet file as trajlab's output ``name`` (a table or export)."""
    return {PARQUET_KEY: name.encode("utf-8")}


def marked_json(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with trajlab's mark (:data:`JSON_KEY`: ``kind``) added, for :func:`trajlab.atomic.atomic_write_json`."""
    return {JSON_KEY: kind, **obj}


def sidecar_path(path: str | Path) -> Path:
    """The hidden sidecar that marks the export ``path`` (``dir/.name.trajlab``)."""
    p = Path(path)
    return p.with_name(f".{p.name}{SIDECAR_SUFFIX}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_sidecar(path: str | Path, kind: str) -> Path:
    """Mark the file ``path`` (already written) as the trajlab output ``kind`` with a sidecar recording its size
    and SHA-256; returns the sidecar's path."""
    from trajlab.atomic import atomic_write_json

    p = Path(path)
    side = sidecar_path(p)
    atomic_write_json(side, marked_json(kind, {"file": p.name, "size": p.stat().st_size, "sha256": _sha256(p),
                                               "note": "written by trajlab: the file beside it is a trajlab "
                                                       "export and is never read as input"}), fsync=False)
    return side


def _sidecar_kind(path: Path) -> str | None:
    side = sidecar_path(path)
    try:
        if not side.is_file():
            return None
        with open(side, "rb") as f:
            info = json.loads(f.read(1 << 16))
        if not isinstance(info, dict) or not isinstance(info.get(JSON_KEY), str):
            return None
        if info.get("size") != path.stat().st_size or info.get("sha256") != _sha256(path):
            return None  # edited since trajlab wrote it: the user's file now
        return _shown(str(info[JSON_KEY]))
    except (OSError, ValueError, RecursionError):
        return None


def _parquet_kind(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 12:
                return None
            f.seek(size - 8)
            tail = f.read(8)
            if tail[4:] != b"PAR1":
                return None
            n = int.from_bytes(tail[:4], "little")
            if n <= 0 or n > size - 12 or n > _MAX_FOOTER:
                return None
            f.seek(size - 8 - n)
            footer = f.read(n)
    except OSError:
        return None
    if PARQUET_KEY not in footer:  # cheap test first: most dumps never reach pyarrow here
        return None
    try:
        import pyarrow.parquet as pq

        meta = pq.read_metadata(path).metadata or {}
    except Exception:  # noqa: BLE001 - a damaged footer: not a file trajlab wrote; the reader reports it
        return None
    value = meta.get(PARQUET_KEY)
    return _shown(value.decode("utf-8", "replace")) if value is not None else None


def _shown(kind: str) -> str:
    """A kind read from a file, as short printable text (it is shown in summaries)."""
    text = "".join(c if c.isprintable() else "?" for c in kind)
    return text[:60] or "unnamed"


def json_head_kind(head: bytes) -> str | None:
    """The kind a JSON file trajlab wrote names in its first bytes (``{"$trajlab": "scan manifest", ...``), or
    ``None`` when ``head`` does not start with trajlab's mark."""
    m = _JSON_HEAD.match(head)
    return _shown(m.group(1).decode("utf-8", "replace")) if m else None


def own_output(path: str | Path) -> str | None:
    """What trajlab output the data file ``path`` is (``"calls"``, ``"sql export"``, ``"scan manifest"``, ...),
    or ``None`` when trajlab did not write it (or it was edited since; see the module's marks)."""
    p = Path(path)
    name = p.name.lower()
    if name.endswith(".parquet"):
        return _parquet_kind(p)
    kind = _sidecar_kind(p)
    if kind is not None:
        return kind
    if name.endswith((".json", ".jsonl", ".ndjson")):
        try:
            with open(p, "rb") as f:
                head = f.read(4096)
        except OSError:
            return None
        return json_head_kind(head)
    return None


#: output folders made from a scan's tables (``OUT/<name>/``): stale once a scan replaces those tables
DERIVED_DIRS = ("rescore",)


def retire_derived(out: str | Path) -> list[str]:
    """Delete what was derived from ``out``'s earlier tables (:data:`DERIVED_DIRS`): trajlab's own marked files
    only (a file a user put or edited there stays, and so does its folder), then the folders left empty.
    Returns the folders retired (relative to ``out``)."""
    root = Path(out)
    retired = []
    for name in DERIVED_DIRS:
        d = root / name
        if not d.is_dir() or d.is_symlink():
            continue
        files = sorted((p for p in d.rglob("*") if p.is_file() and not p.is_symlink()), key=lambda p: len(p.parts))
        for p in files:
            if own_output(p) is not None or p.name.startswith("."):  # (.tmp files of an interrupted atomic write)
                p.unlink(missing_ok=True)
        for sub in sorted((p for p in d.rglob("*") if p.is_dir() and not p.is_symlink()),
                          key=lambda p: -len(p.parts)):
            for leftover in ("options.json",):  # trajlab's record in its own parts/ folder
                lp = sub / leftover
                if sub.name == "parts" and lp.is_file():
                    lp.unlink()
            if not any(sub.iterdir()):
                sub.rmdir()
        if not any(d.iterdir()):
            d.rmdir()
        retired.append(name)
    return retired

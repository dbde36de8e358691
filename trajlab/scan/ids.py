"""Identity of input: a file's content hash and the stable id of each record read from it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def trajectory_id(rel: str, line: int, file_digest: str, sample: int | None = None) -> str:
    """Stable id of a record: its file (relative to the scanned root), its line and the file's content hash
    (and the sample's index within the line, for sources that hold several samples per line)."""
    key = f"{rel}\n{line}\n{file_digest}" + ("" if sample is None else f"\n{sample}")
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def file_digest(path: str | Path) -> str:
    """sha1 of a file's bytes (~1.9 GB/s where the CPU has SHA extensions; one read, 4 MiB at a time)."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()

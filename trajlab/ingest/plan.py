"""Task planning: cut an input file into :class:`FileTask` units (newline-aligned byte ranges of big JSON-lines
files) that workers read in parallel, each carrying the file's split, step and run."""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass
from pathlib import Path

from trajlab.ingest import nemo_rl, openai_messages, verl_jsonl
from trajlab.ingest.detect import container_of
from trajlab.ingest.discover import display_name
from trajlab.ingest.fields import step_from_name

CHUNK_BYTES = 32 * 1024 * 1024
#: a dump directory that holds validation dumps, by its whole name (``validation``, ``val_generations``, ...);
#: a substring of a run name (``grpo-eval-v2``) never counts
_VAL_DIR = re.compile(
    r"(?:val|valid|validation|eval|evaluation)(?:[_\-.](?:data|dir|dump|dumps|generations?|gens?|rollouts?|"
    r"outputs?|samples?|jsonl))?", re.IGNORECASE)


@dataclass(frozen=True)
class FileTask:
    """A byte range of one input file, processed as a unit (one worker, one set of part files)."""

    path: str
    rel: str
    fmt: str
    split: str | None
    step: int | None
    start: int
    end: int
    first_line: int
    chunk: int
    run: str = ""  # the run the file belongs to (:mod:`trajlab.ingest.runs`)
    container: str = "lines"  # lines (JSON lines) | list (one JSON list of records) | parquet
    tokenizer: str | None = None  # decodes the token ids of sources that log ids (None: auto)


def split_from_path(rel: str) -> str | None:
    """``val`` when the file's own directory is named like a validation dump directory (``validation``,
    ``val_generations``, ...; the whole name, not a substring of a run name) or a verl-tool file name says so
    (``-step-val-``), else None (the records decide: verl validation dumps carry ``reward``)."""
    parts = rel.split("/")
    if len(parts) > 1 and _VAL_DIR.fullmatch(parts[-2]):
        return "val"
    if "-step-val-" in parts[-1] or "_val_" in parts[-1]:
        return "val"
    return None


def plan_tasks(path: Path, rel: str, fmt: str, chunk_bytes: int = CHUNK_BYTES, *, run: str = "",
               inner: str | None = None, tokenizer: str | None = None) -> list[FileTask]:
    """Split a file into tasks: JSONL files in newline-aligned byte ranges with their first line numbers.

    ``run`` and ``tokenizer`` are copied into every task; ``inner`` is the file's path inside its root (default ``rel``), from
    which its split is read (a root's label never makes a file validation data)."""
    size = path.stat().st_size
    split = split_from_path(inner if inner is not None else rel)
    step = step_from_name(display_name(path.name))
    container = container_of(path)  # how records sit; a JSON-lines file headed by a verl-tool record stays lines
    if fmt not in (verl_jsonl.FORMAT, openai_messages.FORMAT, nemo_rl.FORMAT) or container != "lines" or size <= chunk_bytes:
        return [FileTask(str(path), rel, fmt, split, step, 0, size, 1, 0, run, container, tokenizer)]
    tasks: list[FileTask] = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        start, line = 0, 1
        while start < size:
            end = min(start + chunk_bytes, size)
            if end < size:
                nl = mm.find(b"\n", end)
                end = size if nl < 0 else nl + 1
            tasks.append(FileTask(str(path), rel, fmt, split, step, start, end, line, len(tasks), run, container,
                                  tokenizer))
            line += mm[start:end].count(b"\n")
            start = end
    return tasks

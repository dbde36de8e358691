"""Ingest: find input files, detect their format, and stream records out of them.

One module per source format (:mod:`verl_jsonl`, :mod:`verl_tool`, :mod:`openai_messages`) converts a parsed
record into a :class:`~trajlab.model.RawTrajectory`. This module owns what is common: walking directories,
per-file format detection, splitting big JSONL files into byte ranges that workers read in parallel, and
turning every unreadable line into an :class:`~trajlab.model.IngestError` (file, line, reason) instead of
an exception. Good records around a bad one are always kept.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab.errors import InputError
from trajlab.ingest import openai_messages, verl_jsonl, verl_tool
from trajlab.ingest.fields import may_hold_surrogates, replace_lone_surrogates, step_from_name
from trajlab.model import IngestError, RawTrajectory

FORMATS: dict[str, Any] = {
    verl_jsonl.FORMAT: verl_jsonl,
    verl_tool.FORMAT: verl_tool,
    openai_messages.FORMAT: openai_messages,
}
DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")
CHUNK_BYTES = 32 * 1024 * 1024
_VAL_PART = re.compile(r"(?:^|[_\-.])(?:val|valid|validation|eval|evaluation)(?:[_\-.]|$)", re.IGNORECASE)

Converter = Callable[..., "tuple[RawTrajectory | None, list[IngestError]]"]


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


@dataclass(frozen=True)
class InputFile:
    """A file to scan: its path, its unique relative name (``source_path``) and its run."""

    path: Path
    rel: str
    run: str
    inner: str  # the path inside its root (``rel`` without the root's label)


def discover(paths: list[str | Path]) -> tuple[list[tuple[Path, str]], list[IngestError]]:
    """Files to scan as ``(path, relative name)`` pairs, sorted, plus errors for paths that do not exist
    (see :func:`find_inputs`, which also gives each file its run)."""
    files, errors = find_inputs(paths)
    return [(f.path, f.rel) for f in files], errors


def find_inputs(
    paths: list[str | Path], runs: dict[str, Path] | None = None
) -> tuple[list[InputFile], list[IngestError]]:
    """Files to scan, sorted by relative name, plus errors for paths that do not exist.

    Directories are walked recursively; hidden entries and trajlab output directories (holding a trajlab
    ``manifest.json``) are skipped; only ``.jsonl``/``.json``/``.ndjson``/``.parquet`` files are taken from
    directories. A file named explicitly is always taken. ``runs`` (``--run NAME=PATH``) name the run of every
    file under PATH; a PATH not under one of ``paths`` is scanned as a root of its own. With several roots each
    relative name starts with its root's label (:func:`trajlab.ingest.runs.unique_labels`), so names and runs
    stay unique; with one root, names are relative to it (as they always were).
    """
    from trajlab.ingest import runs as runs_mod

    runs = dict(runs or {})
    errors: list[IngestError] = []
    roots: list[Path] = []
    names: list[str | None] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            errors.append(IngestError(str(raw), None, "path does not exist"))
            continue
        roots.append(p)
        names.append(None)
    for name, rp in runs.items():
        if not rp.exists():
            errors.append(IngestError(str(rp), None, f"path of --run {name} does not exist"))
            continue
        rr = rp.resolve()
        if not any(rr == r.resolve() or r.resolve() in rr.parents for r in roots if r.is_dir()):
            roots.append(rp)
            names.append(name)
    labels = runs_mod.unique_labels(roots, names)
    several = len(roots) > 1
    found: dict[str, InputFile] = {}

    def add(fp: Path, inner: str, label: str) -> None:
        key = str(fp.resolve())
        if key in found:
            return
        rel = f"{label}/{inner}" if several else inner
        run = runs_mod.named_run_of(fp, runs) if runs else None
        found[key] = InputFile(fp, rel, run or runs_mod.run_of(rel, label), inner)

    for root, label in zip(roots, labels, strict=True):
        if root.is_file():
            add(root, root.name, label)
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            d = Path(dirpath)
            if _is_trajlab_output(d) or _is_model_dir(d, filenames):
                dirnames[:] = []
                continue
            dirnames[:] = sorted(x for x in dirnames if not x.startswith("."))
            for fn in sorted(filenames):
                if fn.startswith(".") or not fn.lower().endswith(DATA_SUFFIXES):
                    continue
                fp = d / fn
                add(fp, fp.relative_to(root).as_posix(), label)
    files = sorted(found.values(), key=lambda f: (f.rel, str(f.path)))
    return files, errors


_MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "fsdp_config.json", "model.safetensors")


def _is_model_dir(d: Path, filenames: list[str]) -> bool:
    """A checkpoint / tokenizer directory (HF or verl layout): its JSON files are not trajectories."""
    names = set(filenames)
    return any(n in names for n in _MODEL_FILES) or any(n.endswith((".safetensors", ".pt", ".bin")) for n in names)


def _is_trajlab_output(d: Path) -> bool:
    m = d / "manifest.json"
    if not m.is_file():
        return False
    try:
        with open(m, encoding="utf-8") as f:
            head = f.read(4096)
    except OSError:
        return False
    return '"trajlab_version"' in head


def split_from_path(rel: str) -> str | None:
    """``val`` when a directory (or a verl-tool ``-step-val-`` file name) says validation, else None."""
    parts = rel.split("/")
    if any(_VAL_PART.search(x) for x in parts[:-1]):
        return "val"
    if "-step-val-" in parts[-1] or "_val_" in parts[-1]:
        return "val"
    return None


def _first_objects(path: Path, limit: int = 5) -> list[Any]:
    objs: list[Any] = []
    with open(path, "rb") as f:
        for _ in range(200):
            line = f.readline(1 << 24)
            if not line:
                break
            if not line.strip():
                continue
            try:
                objs.append(json.loads(line.decode("utf-8", "replace")))
            except json.JSONDecodeError:
                objs.append(None)
            if len(objs) >= limit:
                break
    return objs


def detect_format(path: Path) -> tuple[str | None, str]:
    """The input format of a file, or ``None`` with the reason it is not recognised."""
    suffix = path.suffix.lower()
    try:
        if path.stat().st_size == 0:
            return None, "empty file"
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            names = set(pq.read_schema(path).names)
            if "messages" in names:
                return openai_messages.FORMAT, ""
            return None, f"unknown Parquet layout (columns: {', '.join(sorted(names)[:8])}); expected 'messages'"
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
        if head.startswith(b"["):
            return verl_tool.FORMAT, ""
        objs = _first_objects(path)
        if suffix == ".json" and head.startswith(b"{") and all(o is None for o in objs):
            return None, _single_object_reason(path)
    except OSError as e:
        return None, f"cannot read file: {e.strerror}"
    except Exception as e:  # pyarrow raises several types for a corrupt Parquet file
        return None, f"cannot read file: {e}"
    for o in objs:
        if verl_jsonl.looks_like(o):
            return verl_jsonl.FORMAT, ""
        if openai_messages.looks_like(o):
            return openai_messages.FORMAT, ""
        if verl_tool.looks_like(o):
            return verl_tool.FORMAT, ""
    if not objs:
        return None, "no records (only blank lines)"
    if all(o is None for o in objs):
        return None, "unknown format: the first lines are not JSON"
    return None, "unknown format: records have neither 'output' (verl dump) nor 'messages' (OpenAI messages)"


def _single_object_reason(path: Path) -> str:
    """Why a pretty-printed ``.json`` file (one object over many lines) is not trajectory data."""
    if path.stat().st_size > 64 * 1024 * 1024:
        return "unknown format: a large .json file that is neither JSON lines nor a JSON list"
    try:
        obj = json.loads(path.read_bytes().decode("utf-8", "replace"))
    except json.JSONDecodeError as e:
        return f"unknown format: not JSON lines, and not valid JSON either ({e.msg} at line {e.lineno})"
    keys = ", ".join(list(obj)[:6]) if isinstance(obj, dict) else type(obj).__name__
    return f"not trajectory data: a single JSON object (keys: {keys}), not JSON lines or a list of records"


def plan_tasks(path: Path, rel: str, fmt: str, chunk_bytes: int = CHUNK_BYTES, *, run: str = "",
               inner: str | None = None) -> list[FileTask]:
    """Split a file into tasks: JSONL files in newline-aligned byte ranges with their first line numbers.

    ``run`` is copied into every task; ``inner`` is the file's path inside its root (default ``rel``), from
    which its split is read (a root's label never makes a file validation data)."""
    size = path.stat().st_size
    split = split_from_path(inner if inner is not None else rel)
    step = step_from_name(path.name)
    if fmt not in (verl_jsonl.FORMAT, openai_messages.FORMAT) or path.suffix.lower() == ".parquet" or size <= chunk_bytes:
        return [FileTask(str(path), rel, fmt, split, step, 0, size, 1, 0, run)]
    tasks: list[FileTask] = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        start, line = 0, 1
        while start < size:
            end = min(start + chunk_bytes, size)
            if end < size:
                nl = mm.find(b"\n", end)
                end = size if nl < 0 else nl + 1
            tasks.append(FileTask(str(path), rel, fmt, split, step, start, end, line, len(tasks), run))
            line += mm[start:end].count(b"\n")
            start = end
    return tasks


def _decode_line(raw: bytes, task: FileTask, lineno: int) -> tuple[str, IngestError | None]:
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return raw.decode("utf-8", "replace"), IngestError(
            task.rel, lineno, f"invalid UTF-8 at byte {e.start} of the line; bad bytes replaced with U+FFFD, record kept"
        )


def iter_records(task: FileTask) -> Iterator[RawTrajectory | IngestError]:
    """Stream the records of one task; never raises for bad content (errors are yielded instead)."""
    mod = FORMATS[task.fmt]
    path = Path(task.path)
    if task.fmt == verl_tool.FORMAT:
        yield from _iter_json_list(task, mod)
        return
    if path.suffix.lower() == ".parquet":
        yield from _iter_parquet(task, mod)
        return
    with open(path, "rb") as f:
        f.seek(task.start)
        data = f.read(task.end - task.start)
    at_eof = task.end >= path.stat().st_size
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
        last_unterminated = False
    else:
        last_unterminated = at_eof and bool(lines)
    for i, raw in enumerate(lines):
        lineno = task.first_line + i
        if not raw.strip():
            yield IngestError(task.rel, lineno, "blank line")
            continue
        text, err = _decode_line(raw, task, lineno)
        if err:
            yield err
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            if last_unterminated and i == len(lines) - 1:
                yield IngestError(
                    task.rel, lineno,
                    f"truncated last line ({len(raw)} bytes, no newline at end of file; the writer probably "
                    f"crashed mid-write): {e.msg} at column {e.colno}",
                )
            else:
                yield IngestError(task.rel, lineno, f"invalid JSON: {e.msg} at column {e.colno}")
            continue
        if not isinstance(obj, dict):
            yield IngestError(task.rel, lineno, f"not a JSON object (got {type(obj).__name__})")
            continue
        if may_hold_surrogates(raw):
            obj, changed = replace_lone_surrogates(obj)
            if changed:
                yield IngestError(task.rel, lineno, "lone UTF-16 surrogate escape(s) replaced with U+FFFD; record kept")
        yield from _convert(mod, obj, task, lineno)


def _convert(mod: Any, obj: dict[str, Any], task: FileTask, lineno: int) -> Iterator[RawTrajectory | IngestError]:
    if not getattr(mod, "accepts", mod.looks_like)(obj):
        yield IngestError(task.rel, lineno, f"record does not look like {task.fmt} (keys: {', '.join(list(obj)[:8])}); skipped")
        return
    try:
        rec, notes = mod.to_trajectory(obj, source_path=task.rel, line=lineno, file_step=task.step, file_split=task.split)
    except (TypeError, ValueError, AttributeError, KeyError) as e:  # defensive: never lose the rest of the file
        yield IngestError(task.rel, lineno, f"record could not be converted: {type(e).__name__}: {e}")
        return
    yield from notes
    if rec is not None:
        rec.run = task.run
        yield rec


def _iter_json_list(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    try:
        with open(task.path, "rb") as f:
            raw = f.read()
    except OSError as e:
        yield IngestError(task.rel, None, f"cannot read file: {e.strerror}")
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        yield IngestError(task.rel, None, f"invalid UTF-8 at byte {e.start}; bad bytes replaced with U+FFFD")
        text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        yield from _salvage_json_list(task, mod, text, e)
        return
    if not isinstance(data, list):
        yield IngestError(task.rel, None, f"expected a JSON list of records, got {type(data).__name__}")
        return
    if may_hold_surrogates(raw):
        data, changed = replace_lone_surrogates(data)
        if changed:
            yield IngestError(task.rel, None, "lone UTF-16 surrogate escape(s) replaced with U+FFFD; records kept")
    for i, obj in enumerate(data, start=1):
        if not isinstance(obj, dict):
            yield IngestError(task.rel, i, f"record {i} is not a JSON object")
            continue
        yield from _convert(mod, obj, task, i)


def _salvage_json_list(task: FileTask, mod: Any, text: str, err: json.JSONDecodeError) -> Iterator[RawTrajectory | IngestError]:
    """A JSON list cut short (crashed writer): keep every complete record before the damage."""
    dec = json.JSONDecoder()
    i = text.find("[") + 1
    n = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        n += 1
        if isinstance(obj, dict):
            yield from _convert(mod, obj, task, n)
    yield IngestError(
        task.rel, n + 1,
        f"invalid JSON list ({err.msg} at line {err.lineno} column {err.colno}); kept the {n} complete records before it",
    )


def _iter_parquet(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(task.path)
    except Exception as e:  # corrupt footer etc.
        yield IngestError(task.rel, None, f"cannot read Parquet file: {e}")
        return
    idx = 0
    for batch in pf.iter_batches(batch_size=1024):
        for obj in batch.to_pylist():
            idx += 1
            yield from _convert(mod, obj, task, idx)


def validate_format_name(name: str | None) -> str | None:
    if name is None or name == "auto":
        return None
    if name not in FORMATS:
        raise InputError(f"unknown --format {name!r}; choose one of: auto, {', '.join(FORMATS)}")
    return name

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
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param
from trajlab.ingest import openai_messages, verl_jsonl, verl_tool
from trajlab.ingest.fields import may_hold_surrogates, replace_lone_surrogates, step_from_name
from trajlab.model import IngestError, RawTrajectory
from trajlab.outpaths import output_kind

FORMATS: dict[str, Any] = {
    verl_jsonl.FORMAT: verl_jsonl,
    verl_tool.FORMAT: verl_tool,
    openai_messages.FORMAT: openai_messages,
}
DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")
CHUNK_BYTES = 32 * 1024 * 1024
#: a dump directory that holds validation dumps, by its whole name (``validation``, ``val_generations``, ...);
#: a substring of a run name (``grpo-eval-v2``) never counts
_VAL_DIR = re.compile(
    r"(?:val|valid|validation|eval|evaluation)(?:[_\-.](?:data|dir|dump|dumps|generations?|gens?|rollouts?|"
    r"outputs?|samples?|jsonl))?", re.IGNORECASE)
BOM = b"\xef\xbb\xbf"
#: format detection reads at most this many lines / bytes of a file; longer lines are judged by their head
DETECT_LINES = 1000
DETECT_BYTES = 64 * 1024 * 1024
_DETECT_LINE_BYTES = 16 * 1024 * 1024

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
    container: str = "lines"  # lines (JSON lines) | list (one JSON list of records) | parquet


@dataclass(frozen=True)
class InputFile:
    """A file to scan: its path, its unique relative name (``source_path``) and its run."""

    path: Path
    rel: str
    run: str
    inner: str  # the path inside its root (``rel`` without the root's label)


def display_name(name: str) -> str:
    """A file name as text that fits a table (a name that is not valid UTF-8 gets ``\\xNN`` escapes)."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def discover(paths: list[str | Path]) -> tuple[list[tuple[Path, str]], list[IngestError]]:
    """Files to scan as ``(path, relative name)`` pairs, sorted, plus errors (see :func:`find_inputs`, which
    also gives each file its run and says what it skipped)."""
    files, errors, _ = find_inputs(paths)
    return [(f.path, f.rel) for f in files], errors


def find_inputs(
    paths: list[str | Path], runs: dict[str, Path] | None = None
) -> tuple[list[InputFile], list[IngestError], list[str]]:
    """Files to scan (sorted by relative name), errors (``ingest_errors`` rows), and what was skipped on purpose
    with the reason (printed in the scan summary).

    Every data file (``.jsonl``/``.json``/``.ndjson``/``.parquet``) under the paths is taken, with its name
    relative to the path given (made valid UTF-8 for the tables). A file named explicitly is always taken.
    Directories are walked recursively, following symbolic links to directories once (a link loop is reported,
    not followed). Nothing is skipped silently: an unreadable directory, a broken or looping link and a
    data-named entry that is not a regular file become errors; hidden entries, trajlab outputs, model checkpoint
    directories (their full shape: ``config.json`` naming a model plus weight files, or verl FSDP rank shards:
    there only dump-named files are read) and model/tokenizer side files (``config.json``,
    ``tokenizer_config.json``, ...) are counted in ``skipped``. A model file beside dump files never hides them.

    ``runs`` (``--run NAME=PATH``) name the run of every file under PATH; a PATH not under one of ``paths`` is
    scanned as a root of its own. With several roots each relative name starts with its root's label
    (:func:`trajlab.ingest.runs.unique_labels`), so names and runs stay unique; with one root, names are
    relative to it.
    """
    from trajlab.ingest import runs as runs_mod

    runs = dict(runs or {})
    errors: list[IngestError] = []
    skipped: list[str] = []
    ckpt_dirs: list[str] = []
    side: list[str] = []
    hidden = 0
    roots: list[Path] = []
    names: list[str | None] = []
    for raw in paths:
        p = Path(raw)
        shown = display_name(str(raw))
        try:
            st = p.stat()
        except FileNotFoundError:
            errors.append(IngestError(shown, None, "broken symbolic link" if p.is_symlink() else "path does not exist"))
            continue
        except OSError as e:
            errors.append(IngestError(shown, None, f"cannot read: {e.strerror or e}"))
            continue
        if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            errors.append(IngestError(shown, None, "not a regular file or directory (a pipe or device?); skipped"))
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
        key = _real(fp)
        if key in found:
            return
        inner = display_name(inner)
        rel = f"{label}/{inner}" if several else inner
        run = runs_mod.named_run_of(fp, runs) if runs else None
        found[key] = InputFile(fp, rel, run or runs_mod.run_of(rel, label), inner)

    for root, label in zip(roots, labels, strict=True):
        if root.is_file():
            add(root, root.name, label)
            continue
        shown = display_name(str(root))
        visited: set[str] = set()
        stack = [root]
        while stack:
            d = stack.pop()
            real = _real(d)
            rel_d = display_name(d.relative_to(root).as_posix()) if d != root else "."
            if real in visited:
                skipped.append(f"{rel_d}/: a link to a directory already walked (link loop or repeat)")
                continue
            visited.add(real)
            if output_kind(d) is not None:
                skipped.append(f"{rel_d if d != root else shown}/: a trajlab output directory")
                continue
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda x: x.name)
            except OSError as e:
                errors.append(IngestError(rel_d, None, f"cannot read directory: {e.strerror or e}; skipped"))
                continue
            entry_names = {x.name for x in entries}
            model = _checkpoint_shape(d, entry_names)
            if model:
                ckpt_dirs.append(rel_d)
            subdirs = []
            for x in entries:
                if x.name.startswith("."):
                    hidden += 1
                    continue
                fp = d / x.name
                rel = display_name(fp.relative_to(root).as_posix())
                try:
                    is_dir = x.is_dir()  # follows links
                    is_file = not is_dir and x.is_file()
                except OSError as e:
                    if x.name.lower().endswith(DATA_SUFFIXES):
                        errors.append(IngestError(rel, None, f"cannot read: {e.strerror or e}; skipped"))
                    continue
                if is_dir:
                    subdirs.append(fp)
                    continue
                if not x.name.lower().endswith(DATA_SUFFIXES):
                    continue
                if not is_file:
                    why = "broken symbolic link or link loop" if x.is_symlink() else "not a regular file"
                    errors.append(IngestError(rel, None, f"{why}; skipped"))
                    continue
                if x.name in MODEL_SIDE_FILES or x.name.endswith(_MODEL_SIDE_SUFFIXES) or (
                        model and x.name.lower().endswith(".json") and not _DUMP_JSON_NAME.fullmatch(x.name)):
                    side.append(rel)  # a checkpoint's own JSON (trainer_state, results...), never a dump name
                    continue
                add(fp, fp.relative_to(root).as_posix(), label)
            stack.extend(reversed(subdirs))
    if ckpt_dirs:
        skipped.append(f"{len(ckpt_dirs)} model checkpoint director{'y' if len(ckpt_dirs) == 1 else 'ies'} "
                       f"(config.json + weights, or FSDP shards): only dump-named files read there; e.g. "
                       f"{', '.join(ckpt_dirs[:3])}")
    if side:
        skipped.append(f"{len(side)} model/tokenizer JSON file{'s' if len(side) != 1 else ''} (not trajectory data), "
                       f"e.g. {', '.join(side[:3])}")
    if hidden:
        skipped.append(f"{hidden} hidden entr{'y' if hidden == 1 else 'ies'} (names starting with '.')")
    files = sorted(found.values(), key=lambda f: (f.rel, str(f.path)))
    return files, errors, skipped


def _real(p: Path) -> str:
    try:
        return os.path.realpath(p)
    except (OSError, ValueError):
        return os.path.abspath(p)


#: JSON files that belong to a model or tokenizer, never to a dump (skipped wherever they are, and listed)
MODEL_SIDE_FILES = frozenset((
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "preprocessor_config.json", "chat_template.json", "fsdp_config.json",
    "adapter_config.json", "trainer_state.json",
))
_MODEL_SIDE_SUFFIXES = (".safetensors.index.json", ".bin.index.json")
_WEIGHTS = re.compile(r".+\.(?:safetensors|bin|pt|pth|gguf)$")
#: a ``.json`` name a dump may have inside a checkpoint directory: ``{step}.json``, verl-tool's ``*-step-N.json``
_DUMP_JSON_NAME = re.compile(r"(?:\d+|.*-step-(?:val-)?\d+)\.json", re.IGNORECASE)
_FSDP_SHARD = re.compile(r"model_world_size_\d+_rank_\d+\.pt$")


def _checkpoint_shape(d: Path, names: set[str]) -> str | None:
    """Why ``d`` is a model checkpoint directory (its whole shape, not one file name), or None.

    A Hugging Face checkpoint: ``config.json`` naming a model (``model_type`` or ``architectures``) next to
    weight files; a verl actor checkpoint: FSDP rank shards ``model_world_size_W_rank_R.pt``.
    """
    if any(_FSDP_SHARD.match(n) for n in names):
        return "a verl FSDP checkpoint"
    if "config.json" in names and any(_WEIGHTS.match(n) for n in names):
        try:
            with open(d / "config.json", "rb") as f:
                cfg = json.loads(f.read(1 << 20))
        except (OSError, ValueError, RecursionError):
            return None
        if isinstance(cfg, dict) and ("model_type" in cfg or "architectures" in cfg):
            return "a model checkpoint"
    return None


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


def loads_line(raw: bytes | str) -> tuple[Any, str | None]:
    """``json.loads`` that never raises: ``(object, None)`` or ``(None, reason)`` (bad JSON, nesting too deep for
    Python's parser, an integer literal with thousands of digits)."""
    try:
        return json.loads(raw), None
    except json.JSONDecodeError as e:
        return None, f"invalid JSON: {e.msg} at column {e.colno}"
    except RecursionError:
        return None, "JSON nested too deeply to read (over ~1000 levels)"
    except ValueError as e:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        return None, f"unreadable JSON value: {e}"


def container_of(path: Path) -> str:
    """How records sit in a file: ``parquet``, ``list`` (one JSON list of records) or ``lines`` (JSON lines).

    A file starting with ``[`` is one JSON list when it is a ``.json`` file, when its first line is the ``[``
    alone (pretty-printed) or when it is one line; otherwise it is JSON lines whose first line is an array.
    """
    if path.suffix.lower() == ".parquet":
        return "parquet"
    try:
        with open(path, "rb") as f:
            head = f.read(4096).removeprefix(BOM)
            if not head.lstrip().startswith(b"["):
                return "lines"
            if path.suffix.lower() == ".json":
                return "list"
            first_nl = head.find(b"\n")
            if first_nl >= 0 and head[:first_nl].strip() == b"[":
                return "list"
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                nl = mm.find(b"\n")
                one_line = nl < 0 or not mm[nl:].strip()
    except (OSError, ValueError):
        return "lines"
    return "list" if one_line else "lines"


def _sniff_lines(path: Path) -> tuple[list[Any], list[bytes]]:
    """Parsed JSON lines from the head of a file (``None`` for a line that is not JSON), stopping at the first
    line of a known format, after :data:`DETECT_LINES` lines or :data:`DETECT_BYTES` bytes. A line too long to
    parse here is skipped (bounded memory) and its first 64 KiB returned in the second list."""
    objs: list[Any] = []
    heads: list[bytes] = []
    read = 0
    with open(path, "rb") as f:
        for n in range(DETECT_LINES):
            line = f.readline(_DETECT_LINE_BYTES)
            if not line:
                break
            read += len(line)
            if n == 0:
                line = line.removeprefix(BOM)
            if not line.endswith(b"\n") and len(line) >= _DETECT_LINE_BYTES:
                heads.append(line[:65536])
                while read <= DETECT_BYTES:
                    more = f.readline(_DETECT_LINE_BYTES)
                    read += len(more)
                    if not more or more.endswith(b"\n"):
                        break
            elif line.strip():
                obj, _ = loads_line(line.decode("utf-8", "replace"))
                objs.append(obj)
                if _format_of(obj):
                    break
            if read > DETECT_BYTES:
                break
    return objs, heads


def _format_of(obj: Any) -> str | None:
    if verl_jsonl.looks_like(obj):
        return verl_jsonl.FORMAT
    if openai_messages.looks_like(obj):
        return openai_messages.FORMAT
    if verl_tool.looks_like(obj):
        return verl_tool.FORMAT
    return None


def _first_list_element(path: Path) -> Any:
    """The first record of a file holding one JSON list (read from at most :data:`DETECT_BYTES`), or None."""
    dec = json.JSONDecoder()
    for budget in (1 << 20, DETECT_BYTES):
        with open(path, "rb") as f:
            text = f.read(budget).removeprefix(BOM).decode("utf-8", "replace")
        i = text.find("[") + 1
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        try:
            return dec.raw_decode(text, i)[0]
        except (ValueError, RecursionError):
            if len(text) < budget // 2:
                return None
    return None


def detect_format(path: Path) -> tuple[str | None, str]:
    """The input format of a file, or ``None`` with the reason it is not recognised.

    JSON lines are judged by the first line of a known shape among the first :data:`DETECT_LINES` lines, so
    damaged or foreign lines at the top do not cost the file; a JSON list by its first record (a list of verl
    dump records reads as ``verl_jsonl``; otherwise it is verl-tool's layout). A leading UTF-8 BOM is ignored.
    """
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
            head = f.read(4096).removeprefix(BOM).lstrip()
        if container_of(path) == "list":
            first = _first_list_element(path)
            return (_format_of(first) if isinstance(first, dict) and _format_of(first) else verl_tool.FORMAT), ""
        objs, long_heads = _sniff_lines(path)
        if suffix == ".json" and head.startswith(b"{") and all(o is None for o in objs):
            return None, _single_object_reason(path)
    except OSError as e:
        return None, f"cannot read file: {e.strerror}"
    except Exception as e:  # pyarrow raises several types for a corrupt Parquet file
        return None, f"cannot read file: {type(e).__name__}: {e}"
    for o in objs:
        fmt = _format_of(o)
        if fmt:
            return fmt, ""
    for h in long_heads:  # only lines too long to parse here: judge them by the keys near their start
        if h.lstrip().startswith(b"{"):
            if b'"messages"' in h:
                return openai_messages.FORMAT, ""
            if b'"output"' in h or b'"input"' in h:
                return verl_jsonl.FORMAT, ""
    if not objs and not long_heads:
        return None, "no records (only blank lines)"
    if all(o is None for o in objs):
        return None, f"unknown format: none of the first {len(objs) + len(long_heads)} lines is a JSON record"
    return None, "unknown format: records have neither 'output' (verl dump) nor 'messages' (OpenAI messages)"


def _single_object_reason(path: Path) -> str:
    """Why a pretty-printed ``.json`` file (one object over many lines) is not trajectory data."""
    if path.stat().st_size > 64 * 1024 * 1024:
        return "unknown format: a large .json file that is neither JSON lines nor a JSON list"
    try:
        obj = json.loads(path.read_bytes().removeprefix(BOM).decode("utf-8", "replace"))
    except json.JSONDecodeError as e:
        return f"unknown format: not JSON lines, and not valid JSON either ({e.msg} at line {e.lineno})"
    except (ValueError, RecursionError) as e:
        return f"unknown format: not JSON lines, and not readable JSON either ({type(e).__name__})"
    keys = ", ".join(list(obj)[:6]) if isinstance(obj, dict) else type(obj).__name__
    return f"not trajectory data: a single JSON object (keys: {keys}), not JSON lines or a list of records"


def plan_tasks(path: Path, rel: str, fmt: str, chunk_bytes: int = CHUNK_BYTES, *, run: str = "",
               inner: str | None = None) -> list[FileTask]:
    """Split a file into tasks: JSONL files in newline-aligned byte ranges with their first line numbers.

    ``run`` is copied into every task; ``inner`` is the file's path inside its root (default ``rel``), from
    which its split is read (a root's label never makes a file validation data)."""
    size = path.stat().st_size
    split = split_from_path(inner if inner is not None else rel)
    step = step_from_name(display_name(path.name))
    container = "list" if fmt == verl_tool.FORMAT else container_of(path)
    if fmt not in (verl_jsonl.FORMAT, openai_messages.FORMAT) or container != "lines" or size <= chunk_bytes:
        return [FileTask(str(path), rel, fmt, split, step, 0, size, 1, 0, run, container)]
    tasks: list[FileTask] = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        start, line = 0, 1
        while start < size:
            end = min(start + chunk_bytes, size)
            if end < size:
                nl = mm.find(b"\n", end)
                end = size if nl < 0 else nl + 1
            tasks.append(FileTask(str(path), rel, fmt, split, step, start, end, line, len(tasks), run, container))
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
    """Stream the records of one task; never raises for bad content (errors are yielded instead): an
    unexpected failure on one record costs that record only, one on the file (unreadable) the file only."""
    mod = FORMATS[task.fmt]
    try:
        if task.fmt == verl_tool.FORMAT or task.container == "list":
            yield from _iter_json_list(task, mod)
        elif task.container == "parquet" or Path(task.path).suffix.lower() == ".parquet":
            yield from _iter_parquet(task, mod)
        else:
            yield from _iter_lines(task, mod)
    except OSError as e:
        yield IngestError(task.rel, None, f"cannot read file: {e.strerror or e}")


def _iter_lines(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    path = Path(task.path)
    with open(path, "rb") as f:
        f.seek(task.start)
        data = f.read(task.end - task.start)
    at_eof = task.end >= path.stat().st_size
    if task.start == 0 and data.startswith(BOM):
        data = data[len(BOM):]
    lines = data.split(b"\n")
    del data
    if lines and lines[-1] == b"":
        lines.pop()
        last_unterminated = False
    else:
        last_unterminated = at_eof and bool(lines)
    for i, raw in enumerate(lines):
        lineno = task.first_line + i
        lines[i] = b""  # the record's bytes are not needed once it is parsed
        try:
            yield from _line_records(task, mod, raw, lineno, last_unterminated and i == len(lines) - 1)
        except Exception as e:  # never lose the rest of the range to one record
            yield IngestError(task.rel, lineno, f"record could not be read: {type(e).__name__}: {e}")


def _line_records(task: FileTask, mod: Any, raw: bytes, lineno: int,
                  unterminated: bool) -> Iterator[RawTrajectory | IngestError]:
    if not raw.strip():
        yield IngestError(task.rel, lineno, "blank line")
        return
    text, err = _decode_line(raw, task, lineno)
    if err:
        yield err
    obj, why = loads_line(text)
    if why is not None:
        if unterminated and why.startswith("invalid JSON"):
            yield IngestError(
                task.rel, lineno,
                f"truncated last line ({len(raw)} bytes, no newline at end of file; the writer probably "
                f"crashed mid-write): {why.removeprefix('invalid JSON: ')}",
            )
        else:
            yield IngestError(task.rel, lineno, why)
        return
    if not isinstance(obj, dict):
        yield IngestError(task.rel, lineno, f"not a JSON object (got {type(obj).__name__})")
        return
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
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError, RecursionError) as e:
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
    raw = raw.removeprefix(BOM)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        yield IngestError(task.rel, None, f"invalid UTF-8 at byte {e.start}; bad bytes replaced with U+FFFD")
        text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        yield from _salvage_json_list(task, mod, text, e.msg, e.lineno, e.colno)
        return
    except (ValueError, RecursionError) as e:  # one record nested too deeply, or a huge integer literal
        yield from _salvage_json_list(task, mod, text, f"{type(e).__name__}: {str(e)[:120]}", None, None)
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
        try:
            yield from _convert(mod, obj, task, i)
        except Exception as e:  # never lose the rest of the list to one record
            yield IngestError(task.rel, i, f"record could not be read: {type(e).__name__}: {e}")


def _salvage_json_list(task: FileTask, mod: Any, text: str, msg: str, lineno: int | None,
                       colno: int | None) -> Iterator[RawTrajectory | IngestError]:
    """A JSON list that does not parse whole (cut short by a crashed writer, or one record that cannot be read):
    keep every readable record; a record that cannot be read is reported and skipped when its end can be found."""
    dec = json.JSONDecoder()
    i = text.find("[") + 1
    n = 0
    bad = 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            break
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            break
        except (ValueError, RecursionError) as e:
            n += 1
            bad += 1
            yield IngestError(task.rel, n, f"record {n} cannot be read ({type(e).__name__}); skipped")
            j = _next_record_start(text, i)
            if j is None:
                break
            i = j
            continue
        n += 1
        if isinstance(obj, dict):
            yield from _convert(mod, obj, task, n)
    where = f" at line {lineno} column {colno}" if lineno is not None else ""
    if i < len(text) and text[i] == "]":
        if not bad:
            yield IngestError(task.rel, None, f"JSON list not readable whole ({msg}); records read one by one")
        return
    yield IngestError(
        task.rel, n + 1,
        f"invalid JSON list ({msg}{where}); kept the {n - bad} complete records before it",
    )


def _next_record_start(text: str, i: int) -> int | None:
    """Where the next top-level record of a JSON list starts after an unreadable one at ``i`` (a ``},{``
    boundary at depth 1, found by counting brackets outside strings), or None."""
    depth = 0
    in_str = esc = False
    for j in range(i, len(text)):
        c = text[j]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth < 0:
                return j
        elif c == "," and depth == 0:
            return j + 1
    return None


def _iter_parquet(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    """Records of a Parquet file, row group by row group: a damaged row group (bad page, bad compression)
    becomes one error naming its rows, and the other row groups are still read."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(task.path)
    except Exception as e:  # corrupt footer etc.
        yield IngestError(task.rel, None, f"cannot read Parquet file: {e}")
        return
    idx = 0
    for rg in range(pf.num_row_groups):
        n = pf.metadata.row_group(rg).num_rows
        try:
            rows = pf.read_row_group(rg).to_pylist()
        except Exception as e:  # ArrowInvalid / OSError / ... for a damaged page
            yield IngestError(task.rel, idx + 1, f"Parquet row group {rg} (rows {idx + 1}-{idx + n}) cannot be read "
                                                 f"({type(e).__name__}: {str(e)[:200]}); its {n} records skipped")
            idx += n
            continue
        for obj in rows:
            idx += 1
            try:
                yield from _convert(mod, obj, task, idx)
            except Exception as e:
                yield IngestError(task.rel, idx, f"record could not be read: {type(e).__name__}: {e}")


def validate_format_name(name: str | None) -> str | None:
    if name is None or name == "auto":
        return None
    if name not in FORMATS:
        raise InputError(f"unknown {param('input_format')} {name!r}; choose one of: auto, {', '.join(FORMATS)}")
    return name

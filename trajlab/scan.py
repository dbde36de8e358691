"""``trajlab scan``: input files → classified tool calls → versioned Parquet tables in OUT.

Pipeline: :func:`trajlab.ingest.discover` finds files, :func:`trajlab.ingest.plan_tasks` cuts them into
newline-aligned byte ranges, workers (``--jobs`` processes) stream each range through ingest and the
classifier and write *part files* under ``OUT/.parts/<file key>/``. The file key hashes the file's path, size,
mtime and every option that changes results, so a re-scan reuses the parts of unchanged files. Parts are then
streamed into one Parquet file per table (bounded memory: one part in memory at a time) in a fixed order,
``steps`` is aggregated from the merged tables, and ``manifest.json`` records versions, options and inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from trajlab import __version__
from trajlab.errors import InputError
from trajlab.ingest import (
    FileTask,
    detect_format,
    find_inputs,
    iter_records,
    plan_tasks,
    validate_format_name,
)
from trajlab.ingest.fields import dumps_extra
from trajlab.model import IngestError, RawTrajectory, TurnAnalysis
from trajlab.rulepacks import rules_hash
from trajlab.tables import (
    CALLS,
    FINDINGS,
    INGEST_ERRORS,
    SCHEMA_VERSION,
    STEPS,
    TRAJECTORIES,
    TURNS,
    TableSpec,
    atomic_write_json,
    make_readable,
    sort_table,
    table_path,
    to_table,
    write_table,
)
from trajlab.trends import first_warning, recent_rate, run_summaries, run_warnings, steps_table

PART_TABLES: tuple[TableSpec, ...] = (TRAJECTORIES, TURNS, CALLS, FINDINGS, INGEST_ERRORS)
PARTS_DIR = ".parts"
_IN_PROCESS_BYTES = 16 * 1024 * 1024  # below this total input size, don't start worker processes
UNIT_BYTES = 16 * 1024 * 1024  # small files are processed together up to this many bytes (a unit of work)


@dataclass
class ScanOptions:
    tool_format: str | None = None
    tools: list[dict[str, Any]] | None = None
    rules_dirs: tuple[str, ...] = ()
    input_format: str | None = None

    def fingerprint(self) -> str:
        blob = json.dumps(
            {
                "v": __version__,
                "schema": SCHEMA_VERSION,
                "parts": 4,  # layout of the part files and ids (bumped when done.json or trajectory_id change)
                "rules": rules_hash(self.rules_dirs),
                "tool_format": self.tool_format,
                "tools": self.tools,
                "input_format": self.input_format,
            },
            sort_keys=True,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


@dataclass
class ScanSummary:
    """What a scan found; printed by the CLI and stored under ``summary`` in ``manifest.json``."""

    out: str
    files: int = 0
    files_reused: int = 0
    bytes: int = 0
    trajectories: int = 0
    calls: int = 0
    malformed_calls: int = 0
    malformed_rate: float | None = None
    trajectories_with_malformed: int = 0
    final_answer_rate: float | None = None
    schema_checked_rate: float | None = None
    top_categories: list[tuple[str, int]] = field(default_factory=list)
    ingest_errors: int = 0
    ingest_error_examples: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)  # per-step (run, split, step, calls, malformed, rate)
    early_warning: dict[str, Any] | None = None  # the earliest warning of any run (with its "run")
    runs: list[dict[str, Any]] = field(default_factory=list)  # one summary per run (trajlab.trends.run_summaries)
    elapsed_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["top_categories"] = [{"category": c, "calls": n} for c, n in self.top_categories]
        return d

    def recent_rate(self, window: int, split: str = "train", run: str | None = None) -> float | None:
        """Malformed-call rate pooled over the last ``window`` steps of ``split`` of ``run`` (falls back to any
        split; ``run=None`` with one run: that run)."""
        if run is None and len(self.runs) == 1:
            run = self.runs[0]["run"]
        return recent_rate(self.steps, window, run=run, split=split)


# ---------------------------------------------------------------------------------------------------------
# worker side


#: column order of the row tuples each table collects (rows are transposed into columns once per task)
ROW_COLUMNS: dict[str, tuple[str, ...]] = {
    "trajectories": ("trajectory_id", "source_path", "source_line", "source_format", "run", "split", "step", "group_id",
                     "score", "tool_format", "n_turns", "n_calls", "n_malformed_calls", "has_final_answer",
                     "truncated", "schema_checked", "input", "output", "tools", "extra"),
    "turns": ("trajectory_id", "turn_index", "role", "text", "char_start", "char_end"),
    "calls": ("call_id", "trajectory_id", "turn_index", "call_index", "step", "split", "format", "raw", "char_start",
              "char_end", "function_name", "matched_tool", "arguments", "status", "categories", "repaired",
              "repaired_arguments", "repair_note"),
    "findings": ("trajectory_id", "turn_index", "call_id", "step", "split", "category", "severity", "char_start",
                 "char_end", "message", "rule_id"),
    "ingest_errors": ("source_path", "line", "reason"),
}
Rows = dict[str, list[tuple[Any, ...]]]


def _rows_for(rec: RawTrajectory, opts: ScanOptions, rows: Rows, traj_id: str, extra_json: str) -> None:
    """Append the rows of one trajectory (in :data:`ROW_COLUMNS` order) to ``rows``."""
    from trajlab.analyze import analyze_trajectory

    an = analyze_trajectory(rec, tool_format=opts.tool_format, tools=opts.tools, rules_dirs=opts.rules_dirs)
    rows["trajectories"].append((
        traj_id, rec.source_path, rec.source_line, rec.source_format, rec.run, rec.split, rec.step, rec.group_id, rec.score,
        an.tool_format, len(rec.turns), an.n_calls, an.n_malformed, an.has_final_answer, an.truncated,
        an.schema_checked, rec.input, rec.output, an.tools_json, extra_json,
    ))
    turns = rows["turns"]
    for turn, ta in an.turns:
        turns.append((traj_id, turn.index, turn.role, turn.text, turn.char_start, turn.char_end))
        if ta is not None:
            turn_rows(traj_id, turn.index, turn.char_start, ta, rec.step, rec.split, rows["calls"], rows["findings"])


def turn_rows(traj_id: str, ti: int, off: int, ta: TurnAnalysis, step: int | None, split: str,
              calls: list[tuple[Any, ...]], findings: list[tuple[Any, ...]]) -> None:
    """Append the ``calls`` and ``findings`` rows of one classified assistant turn (``off``: its start)."""
    call_ids = {}
    for c in ta.calls:
        cid = f"{traj_id}:{ti}:{c.call_index}"
        call_ids[c.call_index] = cid
        calls.append((
            cid, traj_id, ti, c.call_index, step, split, c.format, c.raw, c.start + off, c.end + off,
            c.function_name, c.matched_tool, _json_or_none(c.arguments), c.status, list(c.categories),
            c.repaired, _json_or_none(c.repaired_arguments) if c.repaired is not None else None, c.repair_note,
        ))
    for f in ta.findings:
        findings.append((
            traj_id, ti, call_ids.get(f.call_index) if f.call_index is not None else None, step, split,
            f.category, f.severity, f.start + off, f.end + off, f.message, f.rule_id,
        ))


#: ``json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)``, without building an encoder per call
_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode


def _json_or_none(v: Any) -> str | None:
    if v is None:
        return None
    return _ENCODE(v)


def trajectory_id(rel: str, line: int, file_digest: str) -> str:
    """Stable id of a record: its file (relative to the scanned root), its line and the file's content hash."""
    return hashlib.sha1(f"{rel}\n{line}\n{file_digest}".encode("utf-8", "surrogatepass")).hexdigest()[:20]


def file_digest(path: str | Path) -> str:
    """sha1 of a file's bytes (~1.9 GB/s where the CPU has SHA extensions; one read, 4 MiB at a time)."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def process_unit(unit: list[tuple[FileTask, str, str]], opts: ScanOptions) -> list[dict[str, Any]]:
    """Worker: ingest + classify a unit of work -- consecutive small files, or one range of a big file -- given
    as ``(task, file sha1, part directory)`` items, and write each item's part files. Returns their stats.

    Clean verl dump ranges go through :func:`trajlab.scan_columnar.process_segments` together (whole
    columns); a unit that is not clean is retried range by range, and a range that is not clean -- and every
    other format -- goes through the record loop.
    """
    from polars.exceptions import PanicException

    from trajlab import scan_columnar

    results: dict[int, dict[str, pa.Table]] = {}
    verl = [i for i, (t, _, _) in enumerate(unit) if t.fmt == "verl_jsonl" and not t.path.lower().endswith(".parquet")]
    datas = {i: _read_range(unit[i][0]) for i in verl}

    def columnar(group: list[int]) -> None:
        """Try ``group`` in one pass; when it is not clean, halve it (a bad file costs log2(n) retries)."""
        try:
            got = scan_columnar.process_segments([(unit[i][0], datas[i], unit[i][1]) for i in group], opts)
        except (Exception, PanicException):  # never lose a range to the fast path: the record loop decides
            got = None
        if got is not None:
            results.update(zip(group, got, strict=True))
        elif len(group) > 1:
            columnar(group[: len(group) // 2])
            columnar(group[len(group) // 2:])

    if verl:
        columnar(verl)
    stats = []
    for i, (task, digest, part_dir) in enumerate(unit):
        tables = results.pop(i, None) or _record_loop(task, opts, digest)
        stats.append(_write_parts(task, digest, Path(part_dir), tables))
    datas.clear()
    _release_memory()
    return stats


def _release_memory() -> None:
    """Hand freed memory back to the OS between units (a long-lived worker otherwise keeps its peak)."""
    pa.default_memory_pool().release_unused()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _read_range(task: FileTask) -> bytes:
    with open(task.path, "rb") as f:
        f.seek(task.start)
        return f.read(task.end - task.start)


def _write_parts(task: FileTask, digest: str, pdir: Path, tables: dict[str, pa.Table]) -> dict[str, Any]:
    """Write one range's part files (Arrow IPC, lz4: fast to write and to merge) and its ``done.json``.

    A table with no rows gets no part file (most ranges have no ingest errors, healthy ones no findings);
    ``done.json`` records every table's row count, so the merge knows which files exist."""
    pdir.mkdir(parents=True, exist_ok=True)
    for spec in PART_TABLES:
        if tables[spec.name].num_rows:
            write_part(tables[spec.name], pdir / f"{task.chunk:05d}.{spec.name}.arrow")
    traj = tables["trajectories"]
    steps = traj.column("step").drop_null()
    stats = {
        "chunk": task.chunk,
        "bytes": task.end - task.start,
        "min_step": pa.compute.min(steps).as_py() if len(steps) else None,
        "splits": sorted(set(traj.column("split").to_pylist())),
        "sha1": digest,
        "rows": {spec.name: tables[spec.name].num_rows for spec in PART_TABLES},
    }
    atomic_write_json(pdir / f"{task.chunk:05d}.done.json", stats, fsync=False)  # a cache: lost is recomputed
    return stats


def write_part(table: pa.Table, path: Path) -> None:
    """Atomically write a part file (temp file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(
            sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(table)
    os.replace(tmp, path)


def read_part(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_file(src).read_all()


def _record_loop(task: FileTask, opts: ScanOptions, digest: str) -> dict[str, pa.Table]:
    """The part tables of a range, record by record (every format, every kind of damage)."""
    rows: Rows = {s.name: [] for s in PART_TABLES}
    errs = rows["ingest_errors"]
    for item in iter_records(task):
        if isinstance(item, IngestError):
            errs.append((item.source_path, item.line, item.reason))
            continue
        try:
            _rows_for(item, opts, rows, trajectory_id(task.rel, item.source_line, digest), dumps_extra(item.extra))
        except Exception as e:  # the classifier never raises by contract; keep going if it ever does
            errs.append((task.rel, item.source_line,
                         f"internal error while classifying (please report): {type(e).__name__}: {e}"))
    return {spec.name: _cols_table(spec, _columns(spec.name, rows[spec.name])) for spec in PART_TABLES}


def _columns(table: str, rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Row tuples → one list per column."""
    names = ROW_COLUMNS[table]
    if not rows:
        return {c: [] for c in names}
    return {c: list(col) for c, col in zip(names, zip(*rows, strict=True), strict=True)}


def _cols_table(spec: TableSpec, cols: dict[str, list[Any]]) -> pa.Table:
    return pa.table({c.name: pa.array(cols[c.name], type=c.type) for c in spec.columns}, schema=spec.schema)


# ---------------------------------------------------------------------------------------------------------
# driver side


@dataclass
class _FileEntry:
    path: Path
    rel: str
    fmt: str
    size: int
    key: str
    tasks: list[FileTask]
    reused: bool = False
    sha: str | None = None
    stats: list[dict[str, Any]] = field(default_factory=list)


def _file_key(path: Path, rel: str, fmt: str, fp: str, run: str = "") -> tuple[str, int]:
    st = path.stat()
    blob = f"{rel}\n{st.st_size}\n{st.st_mtime_ns}\n{fmt}\n{fp}\n{run}"
    return hashlib.sha1(blob.encode()).hexdigest()[:20], st.st_size


def _content_hash(stats: list[dict[str, Any]]) -> str:
    """Content hash of a file: the sha1 its ranges were processed with (kept in every range's stats), so an
    unchanged file is never read again just to be hashed."""
    return str(stats[0].get("sha1") or "") if stats else ""


def _load_done(pdir: Path, n_tasks: int) -> list[dict[str, Any]] | None:
    out = []
    for i in range(n_tasks):
        p = pdir / f"{i:05d}.done.json"
        if not p.is_file():
            return None
        try:
            stats = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if not isinstance(stats, dict) or "sha1" not in stats or not isinstance(stats.get("rows"), dict):
            return None
        out.append(stats)
    return out


def scan(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    tools: str | Path | list[dict[str, Any]] | None = None,
    input_format: str | None = None,
    tool_format: str | None = None,
    rules_dirs: Iterable[str | Path] = (),
    jobs: int = 0,
    strict: bool = False,
    incremental: bool = True,
    progress: bool = True,
    chunk_bytes: int | None = None,
    runs: dict[str, str | Path] | None = None,
) -> ScanSummary:
    """Scan trajectory dumps and write the trajlab tables into ``out``.

    Args:
        paths: files or directories (walked recursively) of verl dumps, verl-tool step records or
            OpenAI-messages JSONL/Parquet; the format is detected per file unless ``input_format`` is set.
        out: output directory (created); tables are ``<out>/<table>.parquet`` plus ``manifest.json``.
        tools: tool schemas that override the prompts' (a ``--tools`` file path or a list of schemas).
        tool_format: force the call format (``qwen3_coder`` | ``hermes``) instead of detecting it.
        rules_dirs: user rule packs added to the built-in ``rules/``.
        jobs: worker processes (0 = one per CPU; small inputs run in-process).
        strict: raise :class:`~trajlab.errors.InputError` (exit code 2) if any record could not be read.
        incremental: reuse the parts of files unchanged since the last scan into ``out``.
        progress: show a progress bar on stderr.
        runs: ``{NAME: PATH}`` (``--run NAME=PATH``): every file under PATH belongs to run NAME; a PATH outside
            ``paths`` is scanned too. Other files get the run their directory names (:mod:`trajlab.ingest.runs`).

    Returns:
        A :class:`ScanSummary` (also written to ``manifest.json``).
    """
    from trajlab import toolcalls
    from trajlab.ingest.tool_schemas import load_tools_file

    known_formats = tuple(getattr(toolcalls, "KNOWN_FORMATS", ("qwen3_coder", "hermes")))

    t0 = time.perf_counter()
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"output path {out} exists and is not a directory")
    if tool_format in ("auto", ""):
        tool_format = None
    if tool_format is not None and tool_format not in known_formats:
        raise InputError(f"unknown --tool-format {tool_format!r}; choose one of: auto, {', '.join(known_formats)}")
    fmt_forced = validate_format_name(input_format)
    tool_list = load_tools_file(tools) if isinstance(tools, (str, Path)) else tools
    rdirs = tuple(str(Path(d)) for d in rules_dirs)
    opts = ScanOptions(tool_format=tool_format, tools=tool_list, rules_dirs=rdirs, input_format=fmt_forced)
    fp = opts.fingerprint()

    inputs, errors = find_inputs(list(paths), {k: Path(v) for k, v in (runs or {}).items()})
    out_resolved = out.resolve()
    inputs = [f for f in inputs if out_resolved not in f.path.resolve().parents]
    files = [(f.path, f.rel) for f in inputs]
    run_of = {f.rel: f for f in inputs}
    if not files and not errors:
        errors.append(IngestError(", ".join(str(p) for p in paths), None, "no input files found (.jsonl/.json/.parquet)"))

    parts_root = out / PARTS_DIR
    entries: list[_FileEntry] = []
    for p, rel in files:
        fmt, why = (fmt_forced, "") if fmt_forced else detect_format(p)
        if fmt is None:
            errors.append(IngestError(rel, None, why))
            continue
        key, size = _file_key(p, rel, fmt, fp, run_of[rel].run)
        tasks = plan_tasks(p, rel, fmt, chunk_bytes or _chunk_default(), run=run_of[rel].run, inner=run_of[rel].inner)
        entries.append(_FileEntry(p, rel, fmt, size, key, tasks))

    total_bytes = sum(e.size for e in entries)
    todo: list[tuple[_FileEntry, FileTask]] = []
    for e in entries:
        pdir = parts_root / e.key
        done = _load_done(pdir, len(e.tasks)) if incremental else None
        if done is not None:
            e.reused, e.stats = True, done
        else:
            if pdir.exists():
                shutil.rmtree(pdir)
            todo.extend((e, t) for t in e.tasks)
    _run_tasks(todo, opts, parts_root, jobs, progress, total_bytes, sum(e.size for e in entries if e.reused),
               chunk_bytes or _chunk_default())
    for e in entries:
        if not e.reused:
            e.stats = _load_done(parts_root / e.key, len(e.tasks)) or []

    # duplicates: identical content in two files (e.g. the same step copied twice, even into another run's
    # directory: two runs never write byte-identical dumps) → keep the first
    seen: dict[str, str] = {}
    by_step: dict[tuple[str, str, int], list[str]] = defaultdict(list)
    keep: list[_FileEntry] = []
    for e in entries:
        e.sha = _content_hash(e.stats)
        if e.sha in seen:
            errors.append(IngestError(e.rel, None, f"duplicate of {seen[e.sha]} (identical content); skipped"))
            continue
        seen[e.sha] = e.rel
        keep.append(e)
        if e.fmt != "openai_messages":
            for s in e.stats:
                for split in s.get("splits", []):
                    if s.get("min_step") is not None and len(e.tasks) == 1:
                        by_step[(str(Path(e.rel).parent), split, s["min_step"])].append(e.rel)
    for (_, split, step), rels in sorted(by_step.items()):
        if len(rels) > 1:
            errors.append(IngestError(rels[-1], None, f"{split} step {step} also appears in {', '.join(rels[:-1])} (different content); both kept"))

    out.mkdir(parents=True, exist_ok=True)
    keep.sort(key=lambda e: (min((s["min_step"] for s in e.stats if s.get("min_step") is not None), default=1 << 62), e.rel))
    merge_key = _merge_key(keep, errors)
    if _previous_merge_key(out) != merge_key:  # else every table already holds exactly these parts
        _merge_parts(keep, parts_root, out, errors, progress)
        write_table(STEPS, steps_table(out), table_path(out, "steps"))
    _prune_parts(parts_root, {e.key for e in entries})
    steps = pq.read_table(table_path(out, "steps"))
    summary = _summarise(out, keep, steps, time.perf_counter() - t0)
    manifest = {
        "trajlab_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "rules_hash": rules_hash(rdirs),
        "options": {
            "tool_format": tool_format,
            "tools": str(tools) if isinstance(tools, (str, Path)) else (None if tools is None else "<list>"),
            "input_format": fmt_forced,
            "rules_dirs": list(rdirs),
            "runs": {k: str(v) for k, v in (runs or {}).items()},
        },
        "inputs": [
            {
                "path": str(e.path),
                "rel": e.rel,
                "run": run_of[e.rel].run,
                "format": e.fmt,
                "size": e.size,
                "mtime_ns": e.path.stat().st_mtime_ns,
                "sha1": e.sha,
                "records": sum(s["rows"]["trajectories"] for s in e.stats),
                "reused": e.reused,
            }
            for e in entries
        ],
        "tables": {s.name: f"{s.name}.parquet" for s in (*PART_TABLES, STEPS)},
        "merge_key": merge_key,
        "summary": {k: v for k, v in summary.to_dict().items() if k not in ("steps", "elapsed_s", "files_reused")},
    }
    atomic_write_json(out / "manifest.json", manifest)
    if strict and summary.ingest_errors:
        raise InputError(
            f"{summary.ingest_errors} ingest error(s) (--strict); first: {summary.ingest_error_examples[0]}",
            hint=f"see {table_path(out, 'ingest_errors')}",
        )
    return summary


def _chunk_default() -> int:
    from trajlab.ingest import CHUNK_BYTES

    return CHUNK_BYTES


def _run_tasks(
    todo: list[tuple[_FileEntry, FileTask]],
    opts: ScanOptions,
    parts_root: Path,
    jobs: int,
    progress: bool,
    total_bytes: int,
    done_bytes: int,
    chunk_bytes: int,
) -> None:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from trajlab.console import err_console

    prog = Progress(
        TextColumn("scan"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TextColumn("{task.fields[files]} files"),
        TimeRemainingColumn(),
        console=err_console,
        disable=not progress or not todo,
        transient=True,
    )
    n_files_total = len({id(e) for e, _ in todo})
    remaining = defaultdict(int)
    for e, _ in todo:
        remaining[id(e)] += 1
    files_done = 0
    with prog:
        bar = prog.add_task("scan", total=max(total_bytes, 1), completed=done_bytes, files=f"0/{n_files_total}")

        def finished(e: _FileEntry, t: FileTask) -> None:
            nonlocal files_done
            remaining[id(e)] -= 1
            if remaining[id(e)] == 0:
                files_done += 1
            prog.update(bar, advance=t.end - t.start, files=f"{files_done}/{n_files_total}")

        n_jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
        small = sum(t.end - t.start for _, t in todo) < _IN_PROCESS_BYTES
        digests: dict[int, str] = {}

        def unit_of(batch: list[tuple[_FileEntry, FileTask]]) -> list[tuple[FileTask, str, str]]:
            out = []
            for e, t in batch:  # files are hashed by the driver, one after the other, while workers run
                if id(e) not in digests:
                    digests[id(e)] = file_digest(e.path)
                out.append((t, digests[id(e)], str(parts_root / e.key)))
            return out

        units = _units(todo, min(chunk_bytes, UNIT_BYTES))
        if n_jobs == 1 or len(units) <= 1 or small:
            for batch in units:
                process_unit(unit_of(batch), opts)
                for e, t in batch:
                    finished(e, t)
            return
        import multiprocessing as mp

        with ProcessPoolExecutor(max_workers=min(n_jobs, len(units)), mp_context=mp.get_context("spawn")) as ex:
            futs: dict[Any, list[tuple[_FileEntry, FileTask]]] = {}
            for batch in units:
                futs[ex.submit(process_unit, unit_of(batch), opts)] = batch
                for f in [f for f in futs if f.done()]:
                    f.result()
                    for e, t in futs.pop(f):
                        finished(e, t)
            for f in as_completed(futs):
                f.result()
                for e, t in futs[f]:
                    finished(e, t)


def _units(todo: list[tuple[_FileEntry, FileTask]], chunk_bytes: int) -> list[list[tuple[_FileEntry, FileTask]]]:
    """Group tasks into units of work: consecutive whole small files up to ``chunk_bytes`` together (one
    columnar pass instead of one per file), each range of a big file alone."""
    units: list[list[tuple[_FileEntry, FileTask]]] = []
    cur: list[tuple[_FileEntry, FileTask]] = []
    size = 0
    for e, t in todo:
        n = t.end - t.start
        if len(e.tasks) > 1:
            if cur:
                units.append(cur)
                cur, size = [], 0
            units.append([(e, t)])
            continue
        # a unit stays within one directory (one run, one dump layout), so its files read as one table
        if cur and (size + n > chunk_bytes or len(cur) >= 256 or Path(cur[-1][0].rel).parent != Path(e.rel).parent):
            units.append(cur)
            cur, size = [], 0
        cur.append((e, t))
        size += n
    if cur:
        units.append(cur)
    return units


#: rows per row group of each merged table (fixed, so output bytes do not depend on how input was chunked)
ROW_GROUP_ROWS = {"trajectories": 2048, "turns": 16384}
DEFAULT_ROW_GROUP_ROWS = 65536


class _RowGroupWriter:
    """Write tables into row groups of exactly ``n`` rows (the last one shorter), whatever the input sizes."""

    def __init__(self, writer: pq.ParquetWriter, n: int) -> None:
        self.w, self.n, self.pending, self.rows = writer, n, [], 0

    def add(self, t: pa.Table) -> None:
        if not t.num_rows:
            return
        self.pending.append(t)
        self.rows += t.num_rows
        if self.rows >= self.n:
            whole = pa.concat_tables(self.pending).combine_chunks()
            k = (whole.num_rows // self.n) * self.n
            for i in range(0, k, self.n):
                self.w.write_table(whole.slice(i, self.n), row_group_size=self.n)
            rest = whole.slice(k)
            self.pending, self.rows = ([rest] if rest.num_rows else []), rest.num_rows

    def close(self) -> None:
        if self.rows:
            self.w.write_table(pa.concat_tables(self.pending).combine_chunks(), row_group_size=self.n)
        self.pending, self.rows = [], 0


def _merge_parts(keep: list[_FileEntry], parts_root: Path, out: Path, errors: list[IngestError],
                 progress: bool = False) -> None:
    """Stream every part of every table into ``out/<table>.parquet`` (bounded memory: a row group at a time
    per table); the tables are written by parallel threads (Arrow's readers and writers release the GIL).
    With ``progress``, a bar on stderr counts the part files merged (a big scan's merge takes minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from trajlab.console import err_console

    n_parts = sum(len(e.tasks) for e in keep) * len(PART_TABLES)
    prog = Progress(TextColumn("merge"), BarColumn(), MofNCompleteColumn(), TextColumn("part files"),
                    TimeRemainingColumn(), console=err_console, disable=not progress or not n_parts, transient=True)
    with prog, ThreadPoolExecutor(max_workers=min(len(PART_TABLES), os.cpu_count() or 1)) as ex:
        bar = prog.add_task("merge", total=max(n_parts, 1))

        def advance() -> None:
            prog.advance(bar)

        for f in [ex.submit(_merge_table, spec, keep, parts_root, out, errors, advance) for spec in PART_TABLES]:
            f.result()


def _merge_table(spec: TableSpec, keep: list[_FileEntry], parts_root: Path, out: Path,
                 errors: list[IngestError], advance: Callable[[], None] = lambda: None) -> None:
    import tempfile

    final = table_path(out, spec.name)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=out)
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp, spec.schema, compression="zstd", write_statistics=True) as w:
            rg = _RowGroupWriter(w, ROW_GROUP_ROWS.get(spec.name, DEFAULT_ROW_GROUP_ROWS))
            if spec is INGEST_ERRORS and errors:
                rg.add(sort_table(spec, to_table(spec, [asdict(x) for x in errors])))
            for e in keep:
                for i in range(len(e.tasks)):
                    if e.stats[i]["rows"].get(spec.name):
                        rg.add(read_part(parts_root / e.key / f"{i:05d}.{spec.name}.arrow"))
                    advance()
            rg.close()
        make_readable(tmp)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _merge_key(keep: list[_FileEntry], errors: list[IngestError]) -> str:
    """Identity of a merge: the ordered part sets and the driver-side ingest errors."""
    h = hashlib.sha1()
    for e in keep:
        h.update(f"{e.key}:{len(e.tasks)}\n".encode())
    for x in errors:
        h.update(f"{x.source_path}\0{x.line}\0{x.reason}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _previous_merge_key(out: Path) -> str | None:
    """The merge key of the scan already in ``out``, when all its tables are still there."""
    if not all(table_path(out, s.name).is_file() for s in (*PART_TABLES, STEPS)):
        return None
    try:
        return json.loads((out / "manifest.json").read_text()).get("merge_key")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def _prune_parts(parts_root: Path, live: set[str]) -> None:
    if not parts_root.is_dir():
        return
    for d in parts_root.iterdir():
        if d.is_dir() and d.name not in live:
            shutil.rmtree(d, ignore_errors=True)


def _summarise(out: Path, keep: list[_FileEntry], steps: pa.Table, elapsed: float) -> ScanSummary:
    import polars as pl

    s = ScanSummary(out=str(out))
    s.files = len(keep)
    s.files_reused = sum(1 for e in keep if e.reused)
    s.bytes = sum(e.size for e in keep)
    traj = pl.scan_parquet(table_path(out, "trajectories")).select(
        pl.len().alias("n"),
        pl.col("n_calls").sum().alias("calls"),
        pl.col("n_malformed_calls").sum().alias("bad"),
        (pl.col("n_malformed_calls") > 0).sum().alias("twm"),
        pl.col("has_final_answer").mean().alias("far"),
        pl.col("schema_checked").mean().alias("sc"),
    ).collect().row(0, named=True)
    s.trajectories = int(traj["n"])
    s.calls = int(traj["calls"] or 0)
    s.malformed_calls = int(traj["bad"] or 0)
    s.trajectories_with_malformed = int(traj["twm"] or 0)
    s.malformed_rate = s.malformed_calls / s.calls if s.calls else None
    s.final_answer_rate = traj["far"]
    s.schema_checked_rate = traj["sc"]
    cats = (
        pl.scan_parquet(table_path(out, "calls"))
        .filter(pl.col("status") == "malformed")
        .select(pl.col("categories").alias("category"))
        .explode("category")
        .drop_nulls()
        .group_by("category")
        .len()
        .sort(["len", "category"], descending=[True, False])
        .collect()
    )
    s.top_categories = [(r[0], int(r[1])) for r in cats.iter_rows()]
    errs = pl.read_parquet(table_path(out, "ingest_errors"))
    s.ingest_errors = errs.height
    s.ingest_error_examples = [
        f"{r['source_path']}:{r['line'] if r['line'] is not None else '-'}: {r['reason']}" for r in errs.head(5).iter_rows(named=True)
    ]
    s.steps = [
        {
            "run": r["run"],
            "split": r["split"],
            "step": r["step"],
            "trajectories": r["trajectories"],
            "calls": r["calls"],
            "malformed_calls": r["malformed_calls"],
            "malformed_rate": r["malformed_rate"],
            "mean_score": r["mean_score"],
            "final_answer_rate": r["final_answer_rate"],
        }
        for r in steps.select([c for c in steps.column_names if c != "category_counts"]).to_pylist()
    ]
    warnings = run_warnings(steps)
    s.early_warning = first_warning(warnings)
    s.runs = run_summaries(steps, warnings)
    s.elapsed_s = round(elapsed, 3)
    return s


from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, scan)

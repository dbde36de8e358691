"""``trajlab scan``, the driver: plan the files, run the units (in ``--jobs`` worker processes), merge, summarise.

Pipeline: :func:`trajlab.ingest.find_inputs` finds files and their runs; :mod:`trajlab.scan.plan` gives each a cache key and
cuts it into byte ranges grouped into units; :mod:`trajlab.scan.cache` says which files' parts are reused;
workers (:mod:`trajlab.scan.worker`) turn each unit into part files under ``OUT/.parts/<file key>/``; the
parts are merged into one Parquet file per table (:mod:`trajlab.scan.parts`), ``steps`` is aggregated from
the merged tables, and :mod:`trajlab.scan.summary` writes the summary and ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from trajlab.atomic import atomic_write_json
from trajlab.errors import InputError, param
from trajlab.ingest import FileTask, detect_format, find_inputs, plan_tasks
from trajlab.memory import release_memory
from trajlab.model import IngestError
from trajlab.outpaths import begin_write, end_write, prepare_out_dir, remove_stale_temps, write_lock
from trajlab.ownfiles import marked_json, retire_derived
from trajlab.scan.cache import (
    content_hash,
    load_done,
    merge_key,
    point_at_tables,
    previous_merge_key,
    prune_parts,
    table_rows,
)
from trajlab.scan.engines import for_input_size
from trajlab.scan.ids import file_digest
from trajlab.scan.options import DEFAULT_CONTROL_PROB, ScanOptions, WorkerOptions, worker_options
from trajlab.scan.parts import PARTS_DIR, merge_parts, unit_name
from trajlab.scan.plan import IN_PROCESS_BYTES, UNIT_BYTES, FileEntry, chunk_bytes_or_default, file_key, units
from trajlab.scan.summary import ScanSummary, manifest, summarise
from trajlab.scan.worker import process_unit, worker_init, worker_threads
from trajlab.tables import STEPS, table_path, write_table
from trajlab.trends import steps_table


def scan(
    paths: Sequence[str | Path],
    out: str | Path,
    options: ScanOptions | None = None,
    *,
    progress: bool = True,
) -> ScanSummary:
    """Scan trajectory dumps and write the trajlab tables into ``out``.

    Args:
        paths: files or directories (walked recursively) of verl dumps, verl-tool step records or
            OpenAI-messages JSONL/Parquet; the format is detected per file unless ``options.input_format`` is set.
        out: output directory (created); tables are ``<out>/<table>.parquet`` plus ``manifest.json``.
        options: what to scan with (:class:`~trajlab.scan.options.ScanOptions`: tools, formats, rule packs,
            jobs, strict, incremental, chunk size, engine, runs); default ``ScanOptions()``.
        progress: show a progress bar on stderr.

    Returns:
        A :class:`ScanSummary` (also written to ``manifest.json``).

    Example::

        trajlab.scan(["rollouts/"], "out", trajlab.ScanOptions(jobs=8, runs={"base": "exp/a"}))
    """
    t0 = time.perf_counter()
    out = Path(out)
    request = options if options is not None else ScanOptions()
    opts = worker_options(request)
    jobs, strict, incremental, chunk_bytes, runs = (request.jobs, request.strict, request.incremental,
                                                     request.chunk_bytes, request.runs)
    tool_format, fmt_forced, rdirs = opts.tool_format, opts.input_format, opts.rules_dirs
    fp = opts.fingerprint()
    prepare_out_dir(out, kind="scan", inputs=paths)  # refuses a user's directory before anything is written

    with write_lock(out):  # one writer at a time; released at exit, even on kill -9
        inputs, errors, skipped = find_inputs(list(paths), {k: Path(v) for k, v in (runs or {}).items()})
        out_resolved = out.resolve()
        inputs = [f for f in inputs if out_resolved not in f.path.resolve().parents]
        files = [(f.path, f.rel) for f in inputs]
        found = {f.rel: f for f in inputs}
        if not files and not errors:
            errors.append(IngestError(", ".join(str(p) for p in paths), None, "no input files found (.jsonl/.json/.parquet)"))

        parts_root = out / PARTS_DIR
        if parts_root.is_dir():  # what a killed run left half-written: trajlab's own temp files only
            remove_stale_temps(out, [d for d in parts_root.iterdir() if d.is_dir() and not d.is_symlink()])
        entries: list[FileEntry] = []
        for p, rel in files:
            fmt, why = (fmt_forced, "") if fmt_forced else detect_format(p)
            if fmt is None:
                errors.append(IngestError(rel, None, why))
                continue
            key, size = file_key(p, rel, fmt, fp, found[rel].run)
            tasks = plan_tasks(p, rel, fmt, chunk_bytes_or_default(chunk_bytes), run=found[rel].run,
                               inner=found[rel].inner, tokenizer=opts.tokenizer)
            entries.append(FileEntry(p, rel, fmt, size, key, tasks))

        total_bytes = sum(e.size for e in entries)
        todo: list[tuple[FileEntry, FileTask]] = []
        prev_key = previous_merge_key(out) if incremental else None  # the merge the tables now hold
        for e in entries:
            pdir = parts_root / e.key
            done = load_done(pdir, len(e.tasks), prev_key) if incremental else None
            if done is not None:
                e.reused, e.stats = True, done
            else:
                if pdir.exists():
                    shutil.rmtree(pdir)
                todo.extend((e, t) for t in e.tasks)
        run_tasks(todo, for_input_size(opts, sum(t.end - t.start for _, t in todo)), parts_root, jobs, progress,
                  total_bytes, sum(e.size for e in entries if e.reused), chunk_bytes_or_default(chunk_bytes))
        for e in entries:
            if not e.reused:
                e.stats = load_done(parts_root / e.key, len(e.tasks)) or []

        # duplicates: identical content in two files of one run (e.g. the same step copied twice) → keep the first.
        # Two runs may hold identical files (greedy validation of the same base model at step 0): both are kept.
        seen: dict[tuple[str, str], str] = {}
        by_step: dict[tuple[str, str, int], list[str]] = defaultdict(list)
        keep: list[FileEntry] = []
        for e in entries:
            e.sha = content_hash(e.stats)
            if (e.run, e.sha) in seen:
                errors.append(IngestError(e.rel, None, f"duplicate of {seen[e.run, e.sha]} (identical content); skipped",
                                          "note"))
                continue
            seen[e.run, e.sha] = e.rel
            keep.append(e)
            if e.fmt != "openai_messages":
                for s in e.stats:
                    for split in s.get("splits", []):
                        if s.get("min_step") is not None and len(e.tasks) == 1:
                            by_step[(str(Path(e.rel).parent), split, s["min_step"])].append(e.rel)
        for (_, split, step), rels in sorted(by_step.items()):
            if len(rels) > 1:
                errors.append(IngestError(rels[-1], None, f"{split} step {step} also appears in {', '.join(rels[:-1])} (different content); both kept", "note"))

        out.mkdir(parents=True, exist_ok=True)
        keep.sort(key=lambda e: (min((s["min_step"] for s in e.stats if s.get("min_step") is not None), default=1 << 62), e.rel))
        mkey = merge_key(keep, errors)
        if request.control_prob != DEFAULT_CONTROL_PROB:  # steps depend on it: another value is another merge
            mkey = hashlib.sha1(f"{mkey}\ncontrol_prob={request.control_prob!r}".encode()).hexdigest()
        from trajlab.verl.records import find_record_files, records_fingerprint

        record_files = find_record_files(paths)  # the verl reward's records: the steps' exact-token columns
        if record_files:  # steps depend on them: other records are another merge
            mkey = hashlib.sha1(f"{mkey}\nrecords={records_fingerprint(record_files)}".encode()).hexdigest()
        n_driver_errors = len(errors)
        held_key = previous_merge_key(out)  # the merge the tables hold now (None: none, or damaged)
        retired = retire_derived(out) if held_key != mkey else []  # a rescore of other tables is not this run's
        if not incremental or held_key != mkey:  # else every table already holds exactly these parts
            begin_write(out)  # a kill from here to the manifest leaves a marker that readers refuse
            merge_parts(keep, parts_root, out, errors, progress)  # settles the length limit per run as it goes
            release_memory()
            from trajlab.verl.readback import assign_record_runs, record_step_columns

            rec_cols = record_step_columns(assign_record_runs(record_files, [(f.path, f.run) for f in inputs]))
            write_table(STEPS, steps_table(out, control_prob=request.control_prob, record_columns=rec_cols),
                        table_path(out, "steps"))
        # the tables are the cache from here on: each kept range points at its rows in them (valid once the
        # manifest names this merge), and the part files of its unit go in the prune after the manifest
        point_at_tables(keep, parts_root, n_driver_errors, mkey)
        steps = pq.ParquetFile(table_path(out, "steps")).read()  # read_table would load pyarrow.dataset
        metrics_report = training_metrics(out, paths, request, [(f.path, f.run) for f in inputs])
        release_memory()  # the steps aggregate and the metrics are done with their buffers
        summary = summarise(out, keep, steps, time.perf_counter() - t0, rollout_n=opts.rollout_n)
        summary.skipped = skipped
        summary.retired = [f"{out / name}" for name in retired]
        add_training_metrics(summary, out, steps, request, metrics_report)
        recorded = {
            "tool_format": tool_format,
            "tools": (str(request.tools) if isinstance(request.tools, (str, Path))
                      else (None if request.tools is None else "<list>")),
            "input_format": fmt_forced,
            "rules_dirs": list(rdirs),
            "engine": opts.engine,
            "runs": {k: str(v) for k, v in (runs or {}).items()},
            **({"rollout_n": opts.rollout_n} if opts.rollout_n else {}),
            "tokenizer": request.tokenizer,
            "control_prob": request.control_prob,
        }
        atomic_write_json(out / "manifest.json", marked_json("scan manifest", manifest(
            entries, summary, options=recorded, rules_dirs=rdirs, merge_key=mkey, table_rows=table_rows(out))))
        end_write(out)
        prune_parts(parts_root, {e.key for e in entries} | {s["unit"] for e in entries for s in e.stats if s["unit"]})
        if strict and summary.ingest_errors:
            raise InputError(
                f"{summary.ingest_errors} ingest error(s) ({param('strict')}); first: {summary.ingest_error_examples[0]}",
                hint=f"see {table_path(out, 'ingest_errors')}",
            )
        return summary


def training_metrics(out: Path, paths: Sequence[str | Path], request: ScanOptions,
                     dumps: list[tuple[Path, str]]) -> dict[str, Any]:
    """Read the trainer's metrics logs into ``OUT/metrics.parquet`` (:mod:`trajlab.metrics.load`)."""
    from trajlab.metrics.load import scan_metrics
    from trajlab.metrics.sources import parse_metrics_specs

    return scan_metrics(out, [Path(p) for p in paths], parse_metrics_specs(request.metrics), dumps,
                        reuse=request.incremental)


def add_training_metrics(summary: ScanSummary, out: Path, steps: Any, request: ScanOptions,
                         report: dict[str, Any]) -> None:
    """The metrics report and each run's lead time into ``summary``; trajlab's scalars into
    ``--tensorboard`` and ``--wandb`` when asked."""
    from trajlab.metrics.load import lead_times

    warnings = {r["run"]: r["early_warning"] for r in summary.runs}
    summary.metrics = report
    summary.lead_times = lead_times(out, warnings, metric=request.lead_metric, direction=request.lead_direction)
    if request.tensorboard is not None:
        from trajlab.metrics.tensorboard_out import write_scalars

        summary.tensorboard = [str(p) for p in write_scalars(request.tensorboard, steps.to_pylist(), warnings)]
    if request.wandb is not None:
        from trajlab.metrics.wandb_out import WandbExportOptions, write_wandb_runs

        summary.wandb = [str(p) for p in write_wandb_runs(
            steps.to_pylist(), warnings, WandbExportOptions(Path(request.wandb), project=request.wandb_project),
            report.get("wandb") or ())]


def run_tasks(
    todo: list[tuple[FileEntry, FileTask]],
    opts: WorkerOptions,
    parts_root: Path,
    jobs: int,
    progress: bool,
    total_bytes: int,
    done_bytes: int,
    chunk_bytes: int,
) -> None:
    from trajlab.progress import (
        BarColumn,
        DownloadColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
        progress_bar,
    )

    prog = progress_bar(TextColumn("scan"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                        TextColumn("{task.fields[files]} files"), TimeRemainingColumn(),
                        enabled=progress and bool(todo))
    n_files_total = len({id(e) for e, _ in todo})
    remaining = defaultdict(int)
    for e, _ in todo:
        remaining[id(e)] += 1
    files_done = 0
    with prog:
        bar = prog.add_task("scan", total=max(total_bytes, 1), completed=done_bytes, files=f"0/{n_files_total}")

        def finished(e: FileEntry, t: FileTask) -> None:
            nonlocal files_done
            remaining[id(e)] -= 1
            if remaining[id(e)] == 0:
                files_done += 1
            prog.update(bar, advance=t.end - t.start, files=f"{files_done}/{n_files_total}")

        n_jobs = jobs if jobs > 0 else (os.cpu_count() or 1)
        small = sum(t.end - t.start for _, t in todo) < IN_PROCESS_BYTES
        digests: dict[int, str] = {}

        def unit_dir(batch: list[tuple[FileEntry, FileTask]]) -> str:
            return str(parts_root / unit_name([f"{e.key}:{t.chunk}" for e, t in batch]))

        def unit_of(batch: list[tuple[FileEntry, FileTask]]) -> list[tuple[FileTask, str, str]]:
            out = []
            for e, t in batch:  # files are hashed by the driver, one after the other, while workers run
                if id(e) not in digests:
                    digests[id(e)] = file_digest(e.path)
                out.append((t, digests[id(e)], str(parts_root / e.key)))
            return out

        batches = units(todo, min(chunk_bytes, UNIT_BYTES))
        if n_jobs == 1 or len(batches) <= 1 or small:
            for batch in batches:
                process_unit(unit_of(batch), opts, unit_dir(batch))
                for e, t in batch:
                    finished(e, t)
            return
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        n_workers = min(n_jobs, len(batches))
        with worker_threads(n_workers), ProcessPoolExecutor(
                max_workers=n_workers, mp_context=mp.get_context("spawn"), initializer=worker_init,
                initargs=(os.getpid(),)) as ex:
            futs: dict[Any, list[tuple[FileEntry, FileTask]]] = {}
            for batch in batches:
                futs[ex.submit(process_unit, unit_of(batch), opts, unit_dir(batch))] = batch
                for f in [f for f in futs if f.done()]:
                    f.result()
                    for e, t in futs.pop(f):
                        finished(e, t)
            for f in as_completed(futs):
                f.result()
                for e, t in futs[f]:
                    finished(e, t)


"""The engine seam: which engine reads each range of a unit of work, and why a fast path was not taken.

An engine turns ranges of input into part tables (``trajectories``, ``turns``, ``calls``, ``findings``,
``ingest_errors``). There are two, and they write the same bytes (``tests/test_scan_engines.py`` compares
every table across engines):

* ``records`` (:mod:`trajlab.scan.records`) -- the reference: record by record through ingest and the
  per-turn classifier; reads every format and names every problem;
* ``columnar`` (:mod:`trajlab.scan.columnar`) -- the fast path: clean verl JSONL ranges as whole columns.

``--engine`` (or ``$TRAJLAB_ENGINE`` when the option is not given) picks ``auto`` (the default), ``columnar``
or ``records``. Under ``auto`` and ``columnar`` every range the columnar engine can vouch for goes through it
and every other range falls back to ``records``; ``auto`` is the one to use (it will keep meaning "the fastest
engine that gives the reference's bytes"), ``columnar`` names the fast path explicitly. ``auto`` reads a scan
with less than :data:`SMALL_INPUT_BYTES` to read with ``records`` (:func:`for_input_size`): there the columnar
engine's fixed cost, paid once per process, does not pay back. Each range's engine
and the reason for a fallback are kept in its ``done.json`` and reported per file in ``manifest.json`` and
``scan --json``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa

from trajlab.ingest import FileTask
from trajlab.scan.options import ENGINES, ENV_VAR, WorkerOptions, resolve_engine
from trajlab.scan.records import record_loop

#: the engine names and their resolution are options (:mod:`trajlab.scan.options`); named here too
__all__ = ["ENGINES", "ENV_VAR", "RangeResult", "read_unit", "resolve_engine"]

#: under ``auto``, a scan with fewer bytes than this left to read goes through the ``records`` engine: the
#: columnar engine's first polars queries cost ~0.1-0.2 s of CPU in each process, which it wins back only above
#: ~1-2 MB of verl JSONL (one-process CPU time of ``scan`` on 3 KB-4 MB of the sample run: records faster up to
#: 1 MB, columnar from 2 MB; docs/explanation/startup.md)
SMALL_INPUT_BYTES = 1 << 20


def for_input_size(opts: WorkerOptions, nbytes: int) -> WorkerOptions:
    """The options to read ``nbytes`` of input with: under ``auto``, below :data:`SMALL_INPUT_BYTES` the
    ``records`` engine, with the reason recorded for every range (``opts`` itself otherwise)."""
    if opts.engine != "auto" or nbytes >= SMALL_INPUT_BYTES:
        return opts
    return replace(opts, engine="records", fallback=(
        f"small input ({nbytes:,} bytes to read, under {SMALL_INPUT_BYTES:,}): auto takes the record engine, "
        "faster there than the columnar engine's fixed cost"))


@dataclass
class RangeResult:
    """The part tables of one range, the engine that read it, and why the columnar engine did not (or None)."""

    tables: dict[str, pa.Table]
    engine: str
    fallback: str | None = None


def read_unit(unit: list[tuple[FileTask, str]], opts: WorkerOptions) -> list[RangeResult]:
    """Read every ``(task, file sha1)`` range of a unit with the engine ``opts.engine`` asks for.

    Columnar candidates are read together in one pass; when the columnar engine declines a group, the group is
    halved until each declined range is alone (a bad file in a unit of n costs log2(n) retries), and that
    range falls back to the ``records`` engine with the columnar engine's reason."""
    fallback: dict[int, str] = {}
    results: dict[int, dict[str, pa.Table]] = {}
    if opts.engine != "records":
        from polars.exceptions import PanicException  # polars is loaded only by the columnar engine

        from trajlab.scan.columnar import process_segments

        candidates = []
        for i, (t, _) in enumerate(unit):
            why = _not_columnar(t)
            if why:
                fallback[i] = why
            else:
                candidates.append(i)
        datas = {i: _read_range(unit[i][0]) for i in candidates}

        def columnar_pass(group: list[int]) -> None:
            try:
                got = process_segments([(unit[i][0], datas[i], unit[i][1]) for i in group], opts)
            except (Exception, PanicException) as e:  # never lose a range to the fast path: the reference decides
                got = f"columnar engine failed: {type(e).__name__}: {e}"
            if not isinstance(got, str):
                results.update(zip(group, got, strict=True))
            elif len(group) > 1:
                columnar_pass(group[: len(group) // 2])
                columnar_pass(group[len(group) // 2:])
            else:
                fallback[group[0]] = got

        if candidates:
            columnar_pass(candidates)
        datas.clear()
    out = []
    for i, (task, digest) in enumerate(unit):
        tables = results.pop(i, None)
        if tables is not None:
            out.append(RangeResult(tables, "columnar"))
        else:
            out.append(RangeResult(record_loop(task, opts, digest), "records", fallback.get(i) or opts.fallback))
    return out


def _not_columnar(task: FileTask) -> str | None:
    """Why a range cannot go through the columnar engine, judged from its task alone (None: it may)."""
    if task.fmt != "verl_jsonl":
        return f"{task.fmt} input (the columnar engine reads verl JSONL)"
    if task.path.lower().endswith(".parquet"):
        return "a Parquet file (the columnar engine reads verl JSONL)"
    if task.container != "lines":
        return f"a JSON {task.container} of records (the columnar engine reads JSON lines)"
    return None


def _read_range(task: FileTask) -> bytes:
    with open(task.path, "rb") as f:
        f.seek(task.start)
        return f.read(task.end - task.start)

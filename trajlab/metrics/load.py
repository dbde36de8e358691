"""The ``metrics`` table of a scan: the trainer's logs read, matched to runs, written once per change; and the
per-run series and lead times read back from it.

:func:`scan_metrics` finds the logs (:mod:`trajlab.metrics.sources`), reads each (a damaged line or a cut-off
event-file tail costs only itself, and is listed in the returned report) and writes ``OUT/metrics.parquet``
(:data:`trajlab.tables.METRICS`) atomically -- only when a log or the matching changed, so an unchanged re-scan
leaves the file's bytes and time alone. An empty table is written when there are no logs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trajlab.metrics.sources import MatchedLog, find_logs, match_runs, run_directories
from trajlab.tables import METRICS, table_path, write_table

#: stored beside the table: the fingerprint of the logs and matching it was written from
KEY_FILE = ".metrics_key"
#: which logger wins when both logged the same (run, step, name): the file logger keeps full precision
LOGGER_ORDER = {"file": 0, "tensorboard": 1}


def read_log(m: MatchedLog) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of one matched log and its problems (one line each)."""
    problems: list[str] = []
    rows: list[dict[str, Any]] = []
    log = m.log
    try:
        if log.kind == "file":
            from trajlab.metrics.filelog import LogProblem, read_file_log

            bad: list[LogProblem] = []
            values = read_file_log(log.path, bad)
            problems += [f"{log.rel}:{p.line}: {p.reason}" for p in bad]
            rows = [{"run": m.run, "step": s, "name": n, "value": v, "logger": "file", "source": log.rel}
                    for (s, n), v in values.items()]
        else:
            from trajlab.metrics.tfevents import read_scalars
            from trajlab.metrics.tfrecord import FrameProblem

            fp: list[FrameProblem] = []
            last: dict[tuple[int, str], float] = {}
            for sc in read_scalars(log.path, fp):
                last[(sc.step, sc.tag)] = sc.value
            problems += [f"{log.rel}{'@' + str(p.offset) if p.offset >= 0 else ''}: {p.reason}" for p in fp]
            rows = [{"run": m.run, "step": s, "name": n, "value": v, "logger": "tensorboard", "source": log.rel}
                    for (s, n), v in last.items()]
    except OSError as e:
        problems.append(f"{log.rel}: cannot read: {e.strerror or e}")
    return rows, problems


#: the modules whose import closure reads the logs into the table: a change to any of them rewrites it
CODE_ROOTS = ("trajlab.metrics.load",)


def _fingerprint(matched: Sequence[MatchedLog]) -> str:
    from trajlab import __version__
    from trajlab.codeprint import source_hash
    from trajlab.tables import SCHEMA_VERSION

    items = []
    for m in matched:
        try:
            st = m.log.path.stat()
            items.append([str(m.log.path), m.log.rel, m.run, m.log.kind, st.st_size, st.st_mtime_ns])
        except OSError:
            items.append([str(m.log.path), m.log.rel, m.run, m.log.kind, None, None])
    blob = json.dumps({"schema": SCHEMA_VERSION, "version": __version__, "code": source_hash(CODE_ROOTS),
                       "logs": items}, sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def scan_metrics(out: Path, roots: Sequence[Path | str], named: Sequence[tuple[str | None, Path]],
                 dumps: Iterable[tuple[Path, str]], *, reuse: bool = True) -> dict[str, Any]:
    """Find, match, read and write the metrics of a scan into ``out``; returns the report stored in the scan
    summary: ``logs`` (path, logger, run, rule, rows), ``unmatched`` runs, ``names`` (distinct metric names per
    run) and ``problems`` (one line each).

    ``roots``: the scanned paths; ``named``: the ``--metrics`` values (:func:`~trajlab.metrics.sources.
    parse_metrics_specs`); ``dumps``: ``(dump path, run)`` of every dump file the scan read; ``reuse``: keep
    the table when its key (the logs' paths, sizes and times, the matching, trajlab's version and the source of
    the modules that read logs) is unchanged (``scan --full``: False, the logs are read again).
    """
    from trajlab.atomic import atomic_write_bytes

    dumps = list(dumps)
    dirs = run_directories(dumps)
    experiments = {run.rsplit("/", 1)[-1] for run in dirs}
    logs, problems = find_logs([Path(r) for r in roots], named, experiments)
    matched = match_runs(logs, dirs)
    key = _fingerprint(matched)
    dest = table_path(out, METRICS.name)
    key_path = out / KEY_FILE
    old = key_path.read_text(encoding="utf-8") if key_path.is_file() else None
    rows_by_log: list[int] = []
    if reuse and old is not None and dest.is_file() and old.split("\n", 1)[0] == key:
        cached: dict[str, Any] = json.loads(old.split("\n", 1)[1])
        return cached
    rows: list[dict[str, Any]] = []
    for m in matched:
        got, p = read_log(m)
        rows += got
        rows_by_log.append(len(got))
        problems += p
    write_table(METRICS, rows, dest)
    names: dict[str, set[str]] = {}
    for r in rows:
        names.setdefault(r["run"], set()).add(r["name"])
    report = {
        "logs": [{"path": m.log.rel, "logger": m.log.kind, "run": m.run, "rule": m.rule, "rows": n}
                 for m, n in zip(matched, rows_by_log, strict=True)],
        "unmatched": sorted({m.run for m in matched if m.rule == "unmatched"}),
        "names": {run: len(v) for run, v in sorted(names.items())},
        "problems": problems[:50],
        "problem_count": len(problems),
    }
    atomic_write_bytes(key_path, (key + "\n" + json.dumps(report, sort_keys=True)).encode("utf-8"))
    return report


def read_metrics(out: Path | str, names: Iterable[str] | None = None, run: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``OUT/metrics.parquet`` (``run, step, name, value``), one per (run, step, name): where both loggers
    logged a value, the file logger's (full precision); where a resumed run's newer event file logged a step again,
    the newer file's (:func:`_resumed_from`). Optionally only ``names`` / one ``run``. Empty when the scan has no
    metrics table."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = table_path(out, METRICS.name)
    if not path.is_file():
        return []
    t = pq.read_table(path, columns=["run", "step", "name", "value", "logger", "source"])
    if run is not None:
        t = t.filter(pc.equal(t["run"], run))
    if names is not None:
        t = t.filter(pc.is_in(t["name"], value_set=pa.array(list(names), type=pa.string())))
    rows = t.to_pylist()
    cut = _resumed_from(rows)
    best: dict[tuple[str, int, str], tuple[tuple[int, int], float]] = {}
    for r in rows:
        k = (r["run"], r["step"], r["name"])
        place, restart = cut.get((r["run"], r["name"], r["source"]), (0, None))
        if restart is not None and r["step"] >= restart:
            continue  # logged before a resume that restarted at an earlier step: the abandoned stretch
        rank = (LOGGER_ORDER.get(r["logger"], 9), -place)
        if k not in best or rank < best[k][0]:
            best[k] = (rank, r["value"])
    return [{"run": k[0], "step": k[1], "name": k[2], "value": v[1]} for k, v in sorted(best.items())]


def _resumed_from(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[int, int | None]]:
    """For each (run, name, event file): the file's place among the run's event files holding that name, oldest
    first (by file name, which holds its creation time: ``events.out.tfevents.<seconds>.<host>...``), and the
    first step of that name in a later file, or None. A resumed run writes a new event file and restarts at its
    checkpoint's step: as TensorBoard does, the older file's values from that step on (the abandoned stretch) are
    dropped and the newer file's win."""
    first: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        if r["logger"] == "tensorboard":
            got = first.setdefault((r["run"], r["name"]), {})
            got[r["source"]] = min(got.get(r["source"], r["step"]), r["step"])
    out: dict[tuple[str, str, str], tuple[int, int | None]] = {}
    for (run, name), starts in first.items():
        if len(starts) < 2:
            continue
        order = sorted(starts, key=lambda s: (s.rsplit("/", 1)[-1], s))
        for i, src in enumerate(order):
            later = [starts[s] for s in order[i + 1:]]
            out[(run, name, src)] = (i, min(later) if later else None)
    return out


def metric_names(out: Path | str) -> dict[str, list[str]]:
    """``{run: sorted metric names}`` of a scan's metrics table."""
    import pyarrow.parquet as pq

    path = table_path(out, METRICS.name)
    if not path.is_file():
        return {}
    t = pq.read_table(path, columns=["run", "name"]).group_by(["run", "name"]).aggregate([])
    got: dict[str, list[str]] = {}
    for r in t.to_pylist():
        got.setdefault(r["run"], []).append(r["name"])
    return {k: sorted(v) for k, v in sorted(got.items())}


def series(rows: Iterable[dict[str, Any]], run: str, name: str) -> list[tuple[int, float]]:
    """``[(step, value)]`` of one metric of one run from :func:`read_metrics` rows, by step."""
    return sorted((r["step"], r["value"]) for r in rows if r["run"] == run and r["name"] == name)


def lead_times(out: Path | str, warnings: dict[str, dict[str, Any] | None], *, metric: str | None = None,
               direction: str = "down", **test: Any) -> list[dict[str, Any]]:
    """One lead-time record per scanned run that logged the metric (:func:`trajlab.metrics.leadtime.lead_time`,
    with ``run`` added), runs sorted. ``warnings``: trajlab's early warning per scanned run (its keys are the runs;
    :func:`trajlab.trends.run_warnings`): a log matched to no scanned run gets no lead time;
    ``metric``: the metric to test (None: the reward, :func:`trajlab.metrics.leadtime.pick_metric`)."""
    from trajlab.metrics.leadtime import lead_time, pick_metric

    names = metric_names(out)
    result = []
    for run, have in names.items():
        if run not in warnings:
            continue  # an unmatched log: its run was not scanned, so there is no warning to compare with
        chosen = pick_metric(have, metric)
        if chosen is None:
            continue
        s = series(read_metrics(out, [chosen], run), run, chosen)
        result.append({"run": run, **lead_time(s, chosen, warnings.get(run), direction, **test)})
    return result

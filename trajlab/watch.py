"""``trajlab watch``: follow a live run directory, scan each new or grown step file as it lands, and trip a circuit
breaker (exit code 3 or a command) when a run's malformed-call rate rises. Every trip also (re)writes
``OUT/trip.json`` (:mod:`trajlab.tripfile`), which the verl checkpoint callback (:mod:`trajlab.verl.breaker`)
acts on and ``trajlab handoff`` (:mod:`trajlab.handoff`) starts from.

Every ``interval`` seconds the inputs are listed again (:func:`trajlab.ingest.find_inputs`, so runs are derived as
``trajlab scan`` derives them). For a JSON-lines file only the bytes added since the last look are read, and only
up to its last newline: a half-written last line waits for the next look. That byte range is classified by the scan
workers (:func:`trajlab.scan.worker.process_unit`) into watch's own storage, one unit directory per range
(``OUT/.watch/<file hash>/r<range>/<table>.arrow``, the scan's part-file layout); the per-step aggregates, the early
warning and ``--fail-above`` are updated from that range alone, and one line is printed per step. When a file
grows, the ids of its earlier ranges are recomputed (a ``trajectory_id`` hashes the file's content), which reads
only that file's parts (:mod:`trajlab.watch_store`). Other
formats (verl-tool JSON lists, Parquet) are read whole once their size and modification time stay the same for
one interval. ``OUT/.watch/`` is watch's alone: a (re)started watch clears it and classifies every file again.

OUT is a complete scan output all along: every ``publish_every`` seconds (and on exit) watch runs
:func:`trajlab.scan.scan` on its paths into OUT. That scan is incremental: files its cache (``OUT/.parts/``)
already holds unchanged are not read again, files new or grown since the last publish are classified again by the
scan itself. The final publish is exactly ``trajlab scan ROOT -o OUT``, so the tables equal a one-shot scan of the
finished directory byte for byte.

The module is longer than ~400 lines because :class:`Watcher` is one state machine (look, classify, aggregate,
report and trip, publish) whose steps share its per-file state; its storage is in :mod:`trajlab.watch_store`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab.control_trip import K as CONTROL_K
from trajlab.errors import InputError, param
from trajlab.ingest import FileTask, InputFile, detect_format, find_inputs, plan_tasks, split_from_path
from trajlab.ingest.fields import step_from_name
from trajlab.outpaths import prepare_out_dir
from trajlab.scan.options import ScanOptions, WorkerOptions, worker_options
from trajlab.trends import aggregate_steps, early_warning, tripped_runs
from trajlab.tripfile import write_trip_file
from trajlab.watch_store import (
    WATCH_DIR,
    file_dir,
    range_dir,
    range_table,
    record_publish,
    reid_ranges,
    watching,
)

#: environment variables set for ``--on-trip CMD``
TRIP_ENV = ("TRAJLAB_RUN", "TRAJLAB_STEP", "TRAJLAB_RATE", "TRAJLAB_REASON", "TRAJLAB_OUT")


@dataclass
class WatchOptions:
    """What ``trajlab watch`` is asked to do (the CLI maps its flags onto this)."""

    paths: list[Path]
    out: Path
    runs: dict[str, Path] = field(default_factory=dict)  # --run NAME=PATH
    interval: float = 5.0  # seconds between looks at the directory
    fail_above: float | None = None  # trip when a run's rate over its last `window` steps exceeds this
    window: int = 10
    warning: bool = True  # trip on a run's early warning
    on_trip: str | None = None  # shell command run on a trip (environment: TRIP_ENV)
    keep_watching: bool = False  # after a trip, keep going (each run trips once per reason)
    publish_every: float = 60.0  # seconds between publishing OUT's tables (0: after every look with new data)
    idle_exit: float | None = None  # stop after this many seconds without new data (None: until Ctrl-C)
    settle: float = 10.0  # an unterminated last line unchanged this long (and 3 intervals) is a crashed writer's
    tools: str | Path | None = None
    input_format: str | None = None
    tool_format: str | None = None
    rules_dirs: tuple[str, ...] = ()
    jobs: int = 1  # worker processes of each publish's scan, as ScanOptions.jobs (0 = one per CPU)
    metrics: tuple[str, ...] = ()  # --metrics [NAME=]PATH: the trainer's logs, read at every publish
    tensorboard: Path | None = None  # --tensorboard DIR: trajlab's scalars rewritten at every publish
    #: trip on the control-token statistic (the verl reward's record files, exact-token dumps) as well (trajlab.control_trip)
    control: bool = True
    control_tau: float | None = None  # a fixed τ for control_logprob_mean (None: calibrated on the run's first steps)
    control_k: float = CONTROL_K  # the calibrated τ's distance from the baseline, in scaled MADs


@dataclass
class Trip:
    """One circuit-breaker trip: which run, at which step, at what rate, and why."""

    run: str
    step: int
    rate: float
    reason: str  # early_warning | fail_above | control_tokens (rate: then the statistic's value)
    noticed_step: int  # the run's last step when the trip was noticed (an early warning needs its window)
    command_rc: int | None = None
    detail: str | None = None  # control_tokens: the statistic, τ and how τ was set (trajlab.control_trip.describe)


@dataclass
class StepLine:
    """One printed line: a step of a run whose data arrived (or grew)."""

    run: str
    split: str
    step: int | None
    calls: int
    malformed_calls: int
    top_category: str | None
    state: str  # "ok" | "warning: ..." (the run's warning state after this step)
    at: float  # time.time() when the line was made

    @property
    def rate(self) -> float | None:
        return self.malformed_calls / self.calls if self.calls else None

    def text(self) -> str:
        rate = f"{self.rate:6.1%}" if self.rate is not None else "     -"
        split = "" if self.split == "train" else f" ({self.split})"
        return (f"{self.run}  step {self.step if self.step is not None else '?':>5}{split}  calls {self.calls:>5}  "
                f"malformed {self.malformed_calls:>4} {rate}  top {self.top_category or '-':<24}  {self.state}")


@dataclass
class WatchResult:
    """How a watch ended."""

    stopped: str  # interrupted | idle | trip
    trips: list[Trip]
    lines: list[StepLine]
    summary: Any = None  # the final publish's ScanSummary
    files: int = 0  # files classified while watching
    ranges: int = 0  # byte ranges classified (more than files when files grew while being watched)
    unprinted: int = 0  # steps classified after the trip and not printed (they are in the final scan)


@dataclass
class _File:
    """What the watcher knows of one input file."""

    info: InputFile
    fmt: str | None = None
    consumed: int = 0  # bytes classified (JSON lines: up to a newline)
    lines: int = 0  # lines in those bytes
    chunks: int = 0  # ranges classified (part files under wdir)
    sha: Any = field(default_factory=hashlib.sha1)  # of the consumed bytes
    seen: tuple[int, int] | None = None  # (size, mtime_ns) at the last look
    changed_at: float = 0.0  # time.monotonic() when (size, mtime_ns) last changed
    stable: tuple[int, int] | None = None  # whole-file formats: (size, mtime_ns) processed
    contrib: dict[tuple[str, str, int | None], dict[str, Any]] = field(default_factory=dict)

    @property
    def whole(self) -> bool:
        """Formats read whole (a JSON list, Parquet), not by appended lines."""
        return self.fmt != "verl_jsonl" and not (self.fmt == "openai_messages"
                                                 and not self.info.path.suffix.lower() == ".parquet")

    def digest(self) -> str:
        return self.sha.hexdigest()


class Watcher:
    """The state of one watch: files seen, their ranges and per-step aggregates, trips so far."""

    def __init__(self, opts: WatchOptions, emit: Callable[[StepLine], None] | None = None,
                 on_trip_event: Callable[[Trip], None] | None = None) -> None:
        self.opts = opts
        self.out = Path(opts.out)
        if opts.interval <= 0:
            raise InputError(f"{param('interval')} {opts.interval}: must be > 0")
        if opts.fail_above is not None and not 0 <= opts.fail_above <= 1:
            raise InputError(f"{param('fail_above')} {opts.fail_above}: must be a rate between 0 and 1")
        #: what each publish scans with (one worker by default: watch runs beside training)
        self.scan_request = ScanOptions(tools=opts.tools, input_format=opts.input_format, tool_format=opts.tool_format,
                                        rules_dirs=tuple(opts.rules_dirs), jobs=opts.jobs, runs=dict(opts.runs),
                                        metrics=tuple(opts.metrics), tensorboard=opts.tensorboard)
        self.scan_opts: WorkerOptions = worker_options(self.scan_request)
        self.files: dict[str, _File] = {}
        self.trips: list[Trip] = []
        #: step lines not printed because a trip had already stopped the watch (they are in the tables)
        self.unprinted = 0
        self.tripped: set[tuple[str, str]] = set()
        self.records_key: str | None = None  # the verl reward record files last read (trajlab.verl.records)
        self.exact_dirty = False  # exact-token control figures arrived since the last control-token check
        self.record_figures: dict[str, list[dict[str, Any]]] = {}  # run -> step_figures of its record files
        self.lines: list[StepLine] = []
        self.emit = emit or (lambda line: None)
        self.on_trip_event = on_trip_event
        self.dirty = False  # parts changed since the last publish
        self.last_publish = 0.0
        self.last_data = time.monotonic()
        # refuse a user's directory (or one inside the inputs) before anything is written; marks OUT as trajlab's
        prepare_out_dir(self.out, kind="scan", inputs=[*opts.paths, *opts.runs.values()])
        self.lock = contextlib.ExitStack()  # OUT's watch lock, held until close(): readers see the watch runs
        self.lock.enter_context(watching(self.out))
        shutil.rmtree(self.out / WATCH_DIR, ignore_errors=True)  # ranges of an earlier watch: classified again

    # -- looking at the directory ----------------------------------------------------------------------

    def poll(self) -> list[Trip]:
        """Look once: classify what is new, print a line per step that got data, return new trips."""
        inputs, _, _ = find_inputs(list(self.opts.paths), self.opts.runs)
        out_resolved = self.out.resolve()
        touched: set[tuple[str, str, int | None]] = set()
        for info in inputs:
            if out_resolved in info.path.resolve().parents:
                continue
            f = self.files.get(info.rel)
            if f is None:
                f = self.files[info.rel] = _File(info)
            try:
                st = info.path.stat()
            except OSError:
                continue
            now = (st.st_size, st.st_mtime_ns)
            prev, f.seen = f.seen, now
            if now != prev:
                f.changed_at = time.monotonic()
            if now == prev and not (f.fmt and f.whole and f.stable != now):
                continue
            touched |= self._advance(f, now, prev)
        if touched:
            self.last_data = time.monotonic()
        return self._report(touched) + self._control_trips()

    def _control_trips(self) -> list[Trip]:
        """Trips on the control-token statistic (:func:`trajlab.control_trip.control_trip`) of each run: from the
        verl reward's record files (:mod:`trajlab.verl.records`) under the watched paths, else from the sampled
        control tokens of exact-token inputs (NeMo-RL, slime: ``rollout_tokens``); checked again only when new
        figures came in."""
        if not self.opts.control or (self.trips and not self.opts.keep_watching):
            return []
        from trajlab.control_trip import control_trip, describe
        from trajlab.verl.readback import assign_record_runs
        from trajlab.verl.records import (
            find_record_files,
            is_training_record,
            read_records,
            records_fingerprint,
            step_figures,
        )

        files = [p for p in find_record_files(self.opts.paths) if self.out.resolve() not in p.resolve().parents]
        key = records_fingerprint(files)
        if (not files or key == self.records_key) and not self.exact_dirty:
            return []
        if key != self.records_key:  # the verl reward's records, read again only when they changed
            by_run = assign_record_runs(files, [(f.info.path, f.info.run) for f in self.files.values()])
            self.record_figures = {
                run: step_figures([r for d in sorted({f.parent for f in mine}) for r in read_records(d)
                                   if is_training_record(r)]) for run, mine in by_run.items()}
        self.records_key, self.exact_dirty = key, False
        figures: dict[str, list[dict[str, Any]]] = {}  # run -> per-step control_logprob_mean
        for r in self.steps():  # exact-token inputs: the sampled control tokens of the train steps
            if r["split"] == "train" and r["ctl_n"] and r["step"] is not None:
                figures.setdefault(r["run"], []).append({"step": r["step"],
                                                          "control_logprob_mean": r["ctl_sum"] / r["ctl_n"]})
        figures.update(self.record_figures)  # a run with both: the records
        new = []
        for run, rows in sorted(figures.items()):
            if (run, "control_tokens") in self.tripped:
                continue
            trip = control_trip(rows, tau=self.opts.control_tau, k=self.opts.control_k)
            if trip is not None:
                new.append(self._trip(Trip(run, trip["step"], trip["value"], "control_tokens", trip["noticed_step"],
                                           detail=describe(trip))))
        return new

    def _advance(self, f: _File, now: tuple[int, int], prev: tuple[int, int] | None) -> set[Any]:
        """Classify what is new in one file; returns the (run, split, step) keys it touched."""
        size = now[0]
        if size == 0:
            return set()
        if f.fmt is None:
            if self.scan_opts.input_format:
                f.fmt = self.scan_opts.input_format
            else:
                if not f.info.path.suffix.lower() == ".parquet" and not _has_newline(f.info.path):
                    return set()  # not one complete line yet
                fmt, _why = detect_format(f.info.path)
                if fmt is None:
                    return set()  # the final scan reports it
                f.fmt = fmt
        if f.whole:
            if now != prev or f.stable == now:
                return set()  # read a whole-file format once it stopped changing for one interval
            return self._whole(f, now)
        return self._append(f, size)

    def _append(self, f: _File, size: int) -> set[Any]:
        if size < f.consumed:  # truncated or rewritten: start the file over
            self._reset(f)
        with open(f.info.path, "rb") as fh:
            fh.seek(f.consumed)
            data = fh.read(size - f.consumed)
        cut = data.rfind(b"\n")
        if cut < 0:
            return set()  # only a half-written line so far
        data = data[: cut + 1]
        start = f.consumed
        f.sha.update(data)
        task = FileTask(str(f.info.path), f.info.rel, f.fmt or "verl_jsonl", split_from_path(f.info.inner),
                        step_from_name(f.info.path.name), start, start + len(data), f.lines + 1, f.chunks,
                        f.info.run)
        f.consumed += len(data)
        f.lines += data.count(b"\n")
        return self._classify(f, task)

    def _whole(self, f: _File, now: tuple[int, int]) -> set[Any]:
        self._reset(f)
        f.stable = now
        f.sha = hashlib.sha1(f.info.path.read_bytes())
        f.consumed = now[0]
        task = plan_tasks(f.info.path, f.info.rel, f.fmt or "", 1 << 62, run=f.info.run, inner=f.info.inner)[0]
        return self._classify(f, task)

    def _reset(self, f: _File) -> None:
        shutil.rmtree(file_dir(self.out, f.info.rel), ignore_errors=True)
        f.consumed = f.lines = f.chunks = 0
        f.sha = hashlib.sha1()
        f.contrib = {}

    def _classify(self, f: _File, task: FileTask) -> set[Any]:

        from trajlab.scan.engines import for_input_size
        from trajlab.scan.worker import process_unit

        wdir = file_dir(self.out, f.info.rel)
        digest = f.digest()
        opts = for_input_size(self.scan_opts, task.end - task.start)  # a small step file: the record engine
        process_unit([(task, digest, str(wdir))], opts, str(range_dir(wdir, task.chunk)))
        if f.chunks:
            reid_ranges(wdir, f.chunks, f.info.rel, digest)
        f.chunks += 1
        self.dirty = True
        return self._aggregate(f, wdir, task.chunk)

    def _aggregate(self, f: _File, wdir: Path, k: int) -> set[Any]:
        """Add range ``k``'s rows to the file's per-step aggregates; returns the steps it touched."""
        import polars as pl

        traj = range_table(wdir, k, "trajectories")
        calls = range_table(wdir, k, "calls")
        touched = set()
        for r in aggregate_steps(pl.from_arrow(traj).lazy(), pl.from_arrow(calls).lazy()):
            key = (r["run"], r["split"], r["step"])
            acc = f.contrib.setdefault(key, _new_acc())
            acc["trajectories"] += r["trajectories"]
            acc["calls"] += r["calls"]
            acc["malformed_calls"] += r["malformed_calls"]
            acc["cats"].update(dict(r["category_counts"]))
            touched.add(key)
        tokens = range_table(wdir, k, "rollout_tokens")  # exact tokens (NeMo-RL, slime): the sampled control tokens
        if tokens.num_rows:
            tok_df, traj_df = pl.from_arrow(tokens), pl.from_arrow(traj)
            assert isinstance(tok_df, pl.DataFrame) and isinstance(traj_df, pl.DataFrame)  # (tables, not arrays)
            ctl = (tok_df.lazy().filter(pl.col("generated") & pl.col("control") & pl.col("logprob").is_not_null())
                   .join(traj_df.lazy().select("trajectory_id", "run", "split", "step"), on="trajectory_id",
                         how="inner")
                   .group_by("run", "split", "step").agg(pl.col("logprob").sum().alias("s"), pl.len().alias("n"))
                   .collect())
            for run, split, step, total, n in ctl.iter_rows():
                acc = f.contrib.setdefault((run, split, step), _new_acc())
                acc["ctl_sum"] += total
                acc["ctl_n"] += n
                self.exact_dirty = True
        return touched

    # -- aggregates, warnings, trips -------------------------------------------------------------------

    def steps(self) -> list[dict[str, Any]]:
        """Per (run, split, step) rows summed over every file seen (what ``steps`` will hold; ``ctl_sum`` /
        ``ctl_n``: the sampled control tokens' log-probs of exact-token inputs)."""
        tot: dict[tuple[str, str, int | None], dict[str, Any]] = {}
        for f in self.files.values():
            for key, acc in f.contrib.items():
                t = tot.setdefault(key, _new_acc())
                for k in ("trajectories", "calls", "malformed_calls", "ctl_sum", "ctl_n"):
                    t[k] += acc[k]
                t["cats"].update(acc["cats"])
        return [{"run": k[0], "split": k[1], "step": k[2], **v,
                 "malformed_rate": v["malformed_calls"] / v["calls"] if v["calls"] else None}
                for k, v in sorted(tot.items(), key=lambda kv: (kv[0][0], kv[0][1], -1 if kv[0][2] is None
                                                                 else kv[0][2]))]

    def _report(self, touched: set[Any]) -> list[Trip]:
        """One line per touched step, in step order per run, each with the run's warning state *as of that step*
        (the early warning and --fail-above over the steps up to it); trips are noticed at the step that
        completes them."""
        if not touched:
            return []
        rows = self.steps()
        by_key = {(r["run"], r["split"], r["step"]): r for r in rows}
        new: list[Trip] = []
        for run in sorted({k[0] for k in touched}):
            mine = [r for r in rows if r["run"] == run]
            for key in sorted((k for k in touched if k[0] == run), key=lambda k: (-1 if k[2] is None else k[2], k[1])):
                r = by_key[key]
                upto = [x for x in mine if x["step"] is not None and key[2] is not None and x["step"] <= key[2]]
                ew = early_warning(upto) if upto else None
                fa = (next(iter(tripped_runs(upto, self.opts.fail_above, self.opts.window)), None)
                      if self.opts.fail_above is not None and upto else None)
                states = []
                if ew:
                    states.append(f"early warning at step {ew['step']}")
                if fa:
                    states.append(f"last {self.opts.window} steps {fa['rate']:.1%} > {self.opts.fail_above:.1%}")
                top = r["cats"].most_common(1)
                line = StepLine(run, key[1], key[2], r["calls"], r["malformed_calls"], top[0][0] if top else None,
                                "warning: " + "; ".join(states) if states else "ok", time.time())
                self.lines.append(line)
                if self.trips and not self.opts.keep_watching:  # tripped: it stops; later steps are not news
                    self.unprinted += 1
                else:
                    self.emit(line)
                if self.opts.warning and ew and (run, "early_warning") not in self.tripped:
                    new.append(self._trip(Trip(run, ew["step"], ew["window_rate"], "early_warning", key[2] or 0)))
                if fa and (run, "fail_above") not in self.tripped:
                    new.append(self._trip(Trip(run, fa["last_step"], fa["rate"], "fail_above", key[2] or 0)))
        return new

    def _trip(self, t: Trip) -> Trip:
        self.tripped.add((t.run, t.reason))
        if self.opts.on_trip:
            t.command_rc = run_trip_command(self.opts.on_trip, t, self.out)
        self.trips.append(t)
        write_trip_file(self.out, [{"run": x.run, "step": x.step, "rate": x.rate, "reason": x.reason,
                                    "noticed_step": x.noticed_step, "detail": x.detail} for x in self.trips],
                        next_steps=[f"trajlab handoff {shlex.quote(str(self.out))}"])
        if self.on_trip_event is not None:
            self.on_trip_event(t)
        return t

    # -- publishing OUT --------------------------------------------------------------------------------

    def pending(self) -> bool:
        """Some file holds bytes not classified yet (a half-written line, a whole-file format still changing)
        and changed recently. A file left with an unterminated last line (a writer that crashed) stops counting
        after ``opts.settle`` seconds: the scan then reads it itself and reports the cut line, as a one-shot scan does."""
        settle = max(3 * self.opts.interval, self.opts.settle)
        now = time.monotonic()
        return any(f.seen and f.fmt and (f.consumed != f.seen[0] or (f.whole and f.stable != f.seen))
                   and now - f.changed_at < settle for f in self.files.values())

    def close(self) -> None:
        """Release OUT's watch lock (the watch is over)."""
        self.lock.close()

    def settle(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """Before a trip writes the tables: keep looking while some file holds a half-written last line or is
        still changing (:meth:`pending`, or a file not looked at yet whose last line has no newline and changed
        recently), so the record being written when it tripped is read whole, not reported as a truncated line.
        Bounded: a file unchanged for ``settle`` seconds no longer counts (a writer that died mid-line), and the
        whole wait lasts at most that long (a writer that never pauses)."""
        deadline = time.monotonic() + max(3 * self.opts.interval, self.opts.settle)
        while (self.pending() or self.cut_lines()) and time.monotonic() < deadline:
            sleep(self.opts.interval)
            self.poll()  # trips it finds are recorded (each run trips once per reason)

    def cut_lines(self, published: bool = False) -> bool:
        """Whether a JSON-lines input ends without a newline and changed within the settle time (a writer is in
        the middle of its last line); with ``published``, only those the tables in OUT report as truncated."""
        if published:
            import pyarrow.parquet as pq

            try:
                errs = pq.read_table(self.out / "ingest_errors.parquet", columns=["source_path", "reason"])
            except (OSError, ValueError):
                return False
            cut = {r["source_path"] for r in errs.to_pylist() if r["reason"].startswith("truncated last line")}
            paths = [f.info.path for rel, f in self.files.items() if rel in cut]
        else:
            paths = [f.info.path for f in self.files.values()]
            paths += [i.path for i in find_inputs(list(self.opts.paths), self.opts.runs)[0]
                      if i.rel not in self.files]
        settle = max(3 * self.opts.interval, self.opts.settle)
        for p in paths:
            if p.suffix.lower() in (".parquet", ".json"):
                continue
            try:
                with open(p, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    if not st.st_size:
                        continue
                    fh.seek(st.st_size - 1)
                    last = fh.read(1)
            except OSError:
                continue
            if published and last == b"\n":
                return True  # the tables hold a line cut that the file has completed since
            if not published and last != b"\n" and time.time() - st.st_mtime < settle:
                return True
        return False

    def publish(self) -> Any:
        """Make OUT a complete scan output of what is on disk: :func:`trajlab.scan.scan` into OUT, which reads
        again only the files its cache does not hold unchanged (those new or grown since the last publish)."""
        from trajlab.scan import scan

        summary = scan(list(self.opts.paths), self.out, self.scan_request, progress=False)
        record_publish(self.out)
        self.dirty = False
        self.last_publish = time.monotonic()
        return summary


def _has_newline(path: Path, limit: int = 1 << 24) -> bool:
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            if b"\n" in block:
                return True
            limit -= len(block)
            if limit <= 0:
                return True
    return False


def _new_acc() -> dict[str, Any]:
    """One (run, split, step)'s running sums in :class:`Watcher`."""
    return {"trajectories": 0, "calls": 0, "malformed_calls": 0, "cats": Counter(), "ctl_sum": 0.0, "ctl_n": 0}


def run_trip_command(cmd: str, trip: Trip, out: Path) -> int:
    """Run ``--on-trip CMD`` through the shell with the trip in its environment (:data:`TRIP_ENV`)."""
    env = dict(os.environ, TRAJLAB_RUN=trip.run, TRAJLAB_STEP=str(trip.step), TRAJLAB_RATE=f"{trip.rate:.6f}",
               TRAJLAB_REASON=trip.reason, TRAJLAB_OUT=str(out))
    return subprocess.run(cmd, shell=True, env=env, check=False).returncode  # noqa: S602 (the user's own command)


def watch(opts: WatchOptions, emit: Callable[[StepLine], None] | None = None,
          on_trip: Callable[[Trip], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> WatchResult:
    """Follow ``opts.paths`` until Ctrl-C, ``idle_exit`` seconds without new data, or a trip (unless
    ``keep_watching``); OUT is published every ``publish_every`` seconds and once more at the end.

    ``emit`` gets one :class:`StepLine` per step that got data, ``on_trip`` each :class:`Trip` (after
    ``--on-trip CMD`` ran). Returns a :class:`WatchResult`; the CLI exits 3
    when ``stopped == "trip"``.
    """
    w = Watcher(opts, emit, on_trip)
    stopped = "interrupted"
    try:
        while True:
            t0 = time.monotonic()
            trips = w.poll()
            if trips and not opts.keep_watching:
                stopped = "trip"
                w.settle(sleep)
                break
            if w.dirty and not w.pending() and time.monotonic() - w.last_publish >= opts.publish_every:
                w.publish()
            if opts.idle_exit is not None and time.monotonic() - w.last_data >= opts.idle_exit and not w.pending():
                stopped = "idle"
                break
            sleep(max(0.0, opts.interval - (time.monotonic() - t0)))
    except KeyboardInterrupt:
        stopped = "interrupted"
    try:
        summary = w.publish()
        for _ in range(3 if stopped == "trip" else 0):  # a line completed while the trip published: once more
            if not w.cut_lines(published=True):
                break
            w.settle(sleep)
            summary = w.publish()
    except KeyboardInterrupt:  # a second Ctrl-C during the final publish: OUT keeps its last complete state
        summary = None
    finally:
        w.close()
    return WatchResult(stopped, w.trips, w.lines, summary, sum(1 for f in w.files.values() if f.chunks),
                       sum(f.chunks for f in w.files.values()), unprinted=w.unprinted)


from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, watch)

"""Per-sample records the verl reward writes itself: the figures verl 0.9.1 keeps nowhere in training.

In verl 0.9.1 ``reward_extra_info`` reaches no training metric and the default (V1) training dump keeps only
``uid`` (``verl-inloop-and-peers.md`` §1.4). With ``reward_kwargs record_dir=DIR`` the reward-loop manager
(:mod:`trajlab.verl.manager`) appends one JSON line per sample to ``DIR/trajlab-records-<host>-<pid>.jsonl``:
one file per process (verl runs several reward workers, Ray actors), opened for append (never truncated), each
write whole lines flushed at once (:meth:`RecordLog.append`), so a crash loses at most the sample being written.

A row (:func:`record_row`) holds the keys that join it to verl's own rows — ``uid`` and ``session_id`` (the V1
dump's ``uid``), the dataset's ``index``, ``output_sha1`` (SHA-1 of the response decoded as verl's dumps write it,
special tokens skipped) — the ``step`` (the trajectory's ``global_steps`` where verl passes it, else the rollout
server's weight version), and every reward key (floats). :func:`read_records` reads a directory back (a torn last
line, from a crash, is skipped) and :func:`step_figures` sums them per step.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import socket
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trajlab.errors import TrajlabError

#: the record files' name: ``trajlab-records-<host>-<pid>.jsonl``
RECORD_PREFIX = "trajlab-records-"
RECORD_SUFFIX = ".jsonl"
#: the rows' layout version (``"v"``)
RECORD_VERSION = 1
#: the control-token statistics :func:`step_figures` averages, each weighted by its token count
_STAT_SETS = (("control", "control_tokens"), ("scaffold", "scaffold_tokens"), ("call", "call_tokens"),
              ("other", "other_tokens"))


def record_file_name(host: str | None = None, pid: int | None = None) -> str:
    """This process's record file name (the host name cut to safe characters)."""
    h = re.sub(r"[^A-Za-z0-9._-]+", "_", host if host is not None else socket.gethostname())[:64] or "host"
    return f"{RECORD_PREFIX}{h}-{os.getpid() if pid is None else pid}{RECORD_SUFFIX}"


class RecordLog:
    """One process's record file in ``directory`` (made when missing), appended to, never overwritten."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TrajlabError(f"reward_kwargs record_dir={str(directory)!r}: cannot make the directory "
                               f"({e.strerror or e}); give a writable absolute path") from None
        self.pid = os.getpid()
        self.path = self.directory / record_file_name()
        self._lock = threading.Lock()
        self._fd: int | None = None
        try:
            self._open()
        except OSError as e:
            raise TrajlabError(f"reward_kwargs record_dir={str(directory)!r}: cannot write {self.path.name} "
                               f"({e.strerror or e}); give a writable absolute path") from None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def append(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append ``rows`` as whole JSON lines in one write (a batch is flushed at once); returns the rows
        written."""
        lines = [json.dumps(dict(r), ensure_ascii=False, allow_nan=False, default=str) + "\n" for r in rows]
        if not lines:
            return 0
        data = "".join(lines).encode("utf-8")
        with self._lock:
            fd = self._open()
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        return len(lines)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


_LOGS: dict[str, RecordLog] = {}
_LOGS_LOCK = threading.Lock()


def record_log(directory: str | Path) -> RecordLog:
    """The process's :class:`RecordLog` for ``directory`` (one per process: a forked child opens its own)."""
    key = str(Path(directory).resolve())
    with _LOGS_LOCK:
        log = _LOGS.get(key)
        if log is None or log.pid != os.getpid():
            log = RecordLog(directory)
            _LOGS[key] = log
        return log


def _scalar(x: Any) -> Any:
    """A JSON-able scalar from a numpy / torch one (None for anything else that is not a str, int or float)."""
    if x is None or isinstance(x, (str, bool)):
        return x
    if isinstance(x, (int, float)):
        return x if not isinstance(x, float) or math.isfinite(x) else None
    item = getattr(x, "item", None)
    if callable(item):
        try:
            return _scalar(item())
        except (TypeError, ValueError):
            return None
    return None


def output_sha1(text: str) -> str:
    """The join key of a record with a dump row: SHA-1 of the response text verl's dumps write (``output``)."""
    return hashlib.sha1(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def record_row(result: Mapping[str, float], *, step: Any = None, uid: Any = None, session_id: Any = None,
               index: Any = None, data_source: Any = None, split: Any = None, stripped_text: str = "",
               response_tokens: int = 0) -> dict[str, Any]:
    """One record: the join keys, the step and every reward key of ``result``."""
    row: dict[str, Any] = {"v": RECORD_VERSION, "step": _scalar(step), "uid": _scalar(uid),
                           "session_id": _scalar(session_id), "index": _scalar(index),
                           "data_source": _scalar(data_source), "split": _scalar(split),
                           "output_sha1": output_sha1(stripped_text), "response_tokens": int(response_tokens)}
    for k, v in result.items():
        if k not in row:
            f = _scalar(v)
            row[k] = float(f) if isinstance(f, (int, float)) and not isinstance(f, bool) else f
    return row


def is_record_file(path: str | Path) -> bool:
    """Whether ``path`` is one of these record files: its name (``trajlab-records-*.jsonl``) and a first line that
    is a record (``"v"`` and ``"output_sha1"``), or an empty file (a worker that has written nothing yet).
    ``scan`` never reads such a file as a dump."""
    p = Path(path)
    if not (p.name.startswith(RECORD_PREFIX) and p.name.endswith(RECORD_SUFFIX)):
        return False
    try:
        with p.open("rb") as fh:
            line = fh.readline(1 << 20)
    except OSError:
        return False
    if not line.strip():
        return True
    try:
        row = json.loads(line)
    except ValueError:
        return False
    return isinstance(row, dict) and "v" in row and "output_sha1" in row


def record_files(directory: str | Path) -> list[Path]:
    """The record files of ``directory``, sorted by name."""
    d = Path(directory)
    return sorted(p for p in d.glob(f"{RECORD_PREFIX}*{RECORD_SUFFIX}") if p.is_file())


def read_records(directory: str | Path) -> list[dict[str, Any]]:
    """Every record in ``directory`` (file by file, in order). A line that does not parse is skipped: the last
    line of a file a crash cut short; rows of another layout version are skipped too."""
    d = Path(directory)
    if not d.is_dir():
        raise TrajlabError(f"{d}: no such directory (the reward's record_dir)")
    out: list[dict[str, Any]] = []
    for p in record_files(d):
        with p.open("rb") as fh:
            for raw in fh:
                try:
                    row = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(row, dict) and row.get("v") == RECORD_VERSION:
                    out.append(row)
    return out


def _num(row: Mapping[str, Any], key: str) -> float:
    v = row.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def _step_key(step: Any) -> tuple[int, int]:
    return (1, 0) if step is None else (0, int(step))


def step_figures(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per step (sorted; records without a step last, under ``step: None``): ``samples``, ``exact_samples``,
    ``mean_score``, ``tool_calls``, ``malformed_calls``, ``malformed_rate``, ``generated_tokens``,
    ``fabricated_turns``, ``samples_with_fabricated`` and, for ``control`` and each kind (``scaffold``, ``call``,
    ``other``), ``<k>_tokens``, ``<k>_logprob_mean`` and ``<k>_low_prob_share`` (weighted by the tokens of each
    sample) and ``<k>_logprob_min``; a statistic over no token is None."""
    by_step: dict[Any, list[Mapping[str, Any]]] = {}
    for r in records:
        s = r.get("step")
        by_step.setdefault(None if not isinstance(s, int) or isinstance(s, bool) else s, []).append(r)
    out: list[dict[str, Any]] = []
    for step in sorted(by_step, key=_step_key):
        rows = by_step[step]
        exact = [r for r in rows if _num(r, "exact_tokens") > 0]
        calls = math.fsum(_num(r, "tool_calls") for r in rows)
        bad = math.fsum(_num(r, "malformed_calls") for r in rows)
        fig: dict[str, Any] = {
            "step": step, "samples": len(rows), "exact_samples": len(exact),
            "mean_score": math.fsum(_num(r, "score") for r in rows) / len(rows),
            "tool_calls": calls, "malformed_calls": bad, "malformed_rate": bad / calls if calls else None,
            "generated_tokens": math.fsum(_num(r, "generated_tokens") for r in exact),
            "fabricated_turns": math.fsum(_num(r, "fabricated_turns") for r in exact),
            "samples_with_fabricated": sum(1 for r in exact if _num(r, "fabricated_turns") > 0),
        }
        for name, count_key in _STAT_SETS:
            weighted = [(r, _num(r, count_key)) for r in exact if _num(r, count_key) > 0]
            n = math.fsum(w for _, w in weighted)
            fig[f"{name}_tokens"] = n
            if n:
                fig[f"{name}_logprob_mean"] = math.fsum(_num(r, f"{name}_logprob_mean") * w for r, w in weighted) / n
                fig[f"{name}_low_prob_share"] = math.fsum(_num(r, f"{name}_low_prob_share") * w
                                                         for r, w in weighted) / n
                fig[f"{name}_logprob_min"] = min(_num(r, f"{name}_logprob_min") for r, _ in weighted)
            else:
                fig[f"{name}_logprob_mean"] = fig[f"{name}_low_prob_share"] = fig[f"{name}_logprob_min"] = None
        out.append(fig)
    return out


def find_record_files(paths: Iterable[str | Path]) -> list[Path]:
    """The record files under ``paths`` (files named directly, or directories walked; hidden entries skipped),
    sorted."""
    found: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            if is_record_file(p):
                found.add(p)
            continue
        if not p.is_dir():
            continue
        for d, dirs, files in os.walk(p, followlinks=False):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in files:
                if f.startswith(RECORD_PREFIX) and f.endswith(RECORD_SUFFIX) and is_record_file(Path(d) / f):
                    found.add(Path(d) / f)
    return sorted(found)


def records_fingerprint(files: Sequence[Path]) -> str:
    """A digest of the record files' names, sizes and modification times (what a cached scan compares)."""
    h = hashlib.sha1()
    for p in files:
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def is_training_record(row: Mapping[str, Any]) -> bool:
    """Whether a record is a training sample (the dataset's ``extra_info.split`` is unset or ``train``; a
    validation sample's reward is recorded too, with its dataset's split)."""
    split = row.get("split")
    return split is None or str(split).lower() == "train"

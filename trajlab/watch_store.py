"""Watch's own storage under ``OUT/.watch/``: the byte ranges it classified, as Arrow IPC part files.

One directory per input file, one unit directory per range, in the scan's part-file layout
(``OUT/.watch/<file hash>/r<range>/<table>.arrow``): :func:`file_dir` and :func:`range_dir` name them,
:func:`read_arrow` / :func:`write_arrow` are watch's one pair of Arrow IPC helpers, :func:`reid_ranges` recomputes
the ids of a file's earlier ranges when it grew (a ``trajectory_id`` hashes the file's content), and
:func:`range_table` reads one table of one range back.

It also says how fresh OUT is: a watch holds an OS lock on ``OUT/.trajlab-watch-lock`` for its whole life
(:func:`watching`, released even by ``kill -9``) and records each publish (``OUT/.watch/published.json``), so
:func:`publish_note` can tell a reader of OUT (``trajlab sql``) when the tables were published and whether the
watch that wrote them still runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trajlab.atomic import atomic_path, atomic_write_json
from trajlab.errors import TrajlabError
from trajlab.scan.ids import trajectory_id
from trajlab.scan.parts import PART_TABLES, part_path

WATCH_DIR = ".watch"
WATCH_LOCK = ".trajlab-watch-lock"
_PUBLISHED = "published.json"


@contextlib.contextmanager
def watching(out: Path) -> Iterator[None]:
    """Hold OUT's watch lock while a watch runs (a second watch into the same OUT gets a one-line error)."""
    import fcntl

    fd = os.open(Path(out) / WATCH_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise TrajlabError(f"{out}: another trajlab watch is writing into this directory",
                               hint="stop it first, or watch into another directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def record_publish(out: Path) -> None:
    """Note that the tables now in OUT are a watch's publish (the manifest's modification time identifies it)."""
    try:
        mtime = (Path(out) / "manifest.json").stat().st_mtime_ns
    except OSError:
        return
    atomic_write_json(Path(out) / WATCH_DIR / _PUBLISHED, {"manifest_mtime_ns": mtime})


def _watch_running(out: Path) -> bool:
    import fcntl

    try:
        fd = os.open(Path(out) / WATCH_LOCK, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _ago(seconds: float) -> str:
    s = max(0, int(seconds))
    return f"{s} s" if s < 120 else f"{s // 60} min" if s < 7200 else f"{s // 3600} h {s % 3600 // 60} min"


def publish_note(out: Path | str) -> str | None:
    """How fresh OUT's tables are when a ``trajlab watch`` published them (None: they are not a watch's publish,
    e.g. a later ``trajlab scan`` replaced them): when, how long ago, and whether that watch still runs."""
    out = Path(out)
    try:
        rec = json.loads((out / WATCH_DIR / _PUBLISHED).read_text())
        st = (out / "manifest.json").stat()
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("manifest_mtime_ns") != st.st_mtime_ns:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(st.st_mtime))
    age = _ago(time.time() - st.st_mtime)
    if _watch_running(out):
        return f"tables as of the last publish of the running `trajlab watch` ({when}, {age} ago)"
    return (f"these tables are the last publish of a `trajlab watch` that is no longer running ({when}, {age} "
            "ago): data written since is not in them; `trajlab scan` the run again to bring them up to date")


def file_dir(out: Path, rel: str) -> Path:
    """Watch's directory for one input file (its ranges' unit directories and ``done.json`` files)."""
    return out / WATCH_DIR / hashlib.sha1(rel.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def range_dir(wdir: Path, chunk: int) -> Path:
    """The unit directory holding the part files of range ``chunk`` of a file (one range per unit)."""
    return wdir / f"r{chunk:05d}"


def read_arrow(path: Path) -> Any:
    """A whole Arrow IPC file as a table, read into memory (the file may be rewritten afterwards)."""
    import pyarrow as pa

    with pa.OSFile(str(path), "rb") as src:
        return pa.ipc.open_file(src).read_all()


def write_arrow(table: Any, path: Path) -> None:
    """Write ``table`` as an Arrow IPC file (lz4), atomically: a temp file, then a rename."""
    import pyarrow as pa

    with atomic_path(path) as tmp, pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(
            sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(table)


def sample_of(source_format: str, extra: str | None) -> int | None:
    """The sample index of a record from a source with several samples per line (NeMo-RL: ``extra.sample``),
    which its trajectory id includes; None for every other source."""
    if source_format != "nemo_rl_jsonl" or not extra:
        return None
    import json

    v = json.loads(extra).get("sample")
    return v if isinstance(v, int) else None


def reid_ranges(wdir: Path, chunks: int, rel: str, digest: str) -> None:
    """Recompute the ids in the parts of ``chunks`` ranges of one file for its new content hash."""
    import pyarrow as pa

    for k in range(chunks):
        path = part_path(range_dir(wdir, k), "trajectories")
        if not path.is_file():
            continue
        traj = read_arrow(path)
        old = traj.column("trajectory_id").to_pylist()
        new = [trajectory_id(rel, line, digest, sample_of(fmt, extra)) for line, fmt, extra in zip(
            traj.column("source_line").to_pylist(), traj.column("source_format").to_pylist(),
            traj.column("extra").to_pylist(), strict=True)]
        if old == new:
            continue
        mapping = dict(zip(old, new, strict=True))
        for spec in PART_TABLES:
            p = part_path(range_dir(wdir, k), spec.name)
            if spec.name == "ingest_errors" or not p.is_file():
                continue
            t = read_arrow(p)
            ids = t.column("trajectory_id").to_pylist()
            t = t.set_column(t.schema.get_field_index("trajectory_id"), "trajectory_id",
                             pa.array([mapping[i] for i in ids], pa.string()))
            if "call_id" in t.column_names:
                cids = t.column("call_id").to_pylist()
                t = t.set_column(t.schema.get_field_index("call_id"), t.schema.field("call_id"),
                                 pa.array([None if c is None else mapping[i] + c[len(i):]
                                           for c, i in zip(cids, ids, strict=True)], pa.string()))
            write_arrow(t, p)


def range_table(wdir: Path, chunk: int, table: str) -> Any:
    from trajlab.tables import SCAN_TABLES, empty_table

    p = part_path(range_dir(wdir, chunk), table)
    return read_arrow(p) if p.is_file() else empty_table(SCAN_TABLES[table])

"""Where trajlab may write: the one check every command that writes runs before it writes anything.

Rules (``docs/explanation/guarantees.md``):

* An output **directory** (``scan -o``, ``build-sft-pool -o``) is used only when it does not exist yet, is empty,
  or is already a trajlab output of the same kind (it holds trajlab's marker file :data:`MARKER` or a trajlab
  ``manifest.json``). Any other existing directory is refused (exit 2, one line); nothing is written. A fresh
  or empty directory gets the marker first, so a run killed before its manifest still owns its directory.
* An output **file** (``report -o``, ``sql -o``) replaces an existing file only when trajlab wrote it (an HTML
  report carrying trajlab's ``generator`` tag); it never replaces a manifest, a table or any file inside a
  trajlab output directory other than its own report.
* An output may not be, or lie inside, an input path (``scan``'s dumps), and an input may not lie inside a
  fresh output (the scan would read what it writes).
* Unwritable or invalid paths become one-line :class:`~trajlab.errors.TrajlabError`\\ s (exit 2).

It also holds the state of a write in progress: the writer lock (a second scan into one directory is refused),
the marker a killed scan leaves (readers refuse such a directory) and the removal of stale temp files.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from trajlab.atomic import TEMP_NAME
from trajlab.errors import TrajlabError

#: the file that marks a directory as trajlab's (written before anything else into a fresh output directory)
MARKER = ".trajlab-output"
_MANIFEST = "manifest.json"
_REPORT_TAG = b'<meta name="generator" content="trajlab'
#: the ``$trajlab`` mark of a manifest (:mod:`trajlab.ownfiles`) -> the output kind of its directory
_MARKED_KINDS = {"scan manifest": "scan", "sft pool manifest": "sft_pool"}


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def output_kind(d: Path) -> str | None:
    """``"scan"`` / ``"sft_pool"`` when ``d`` is a trajlab output directory of that kind (``"unknown"`` for a
    trajlab manifest of neither shape), else ``None``."""
    try:
        mark = d / MARKER
        if mark.is_file():
            kind = json.loads(mark.read_text(encoding="utf-8")).get("kind")
            return kind if isinstance(kind, str) else "unknown"
    except (OSError, ValueError, AttributeError):
        pass
    m = d / _MANIFEST
    try:
        if not m.is_file():
            return None
        with open(m, encoding="utf-8", errors="replace") as f:
            head = f.read(1 << 16)
    except OSError:
        return None
    from trajlab.ownfiles import json_head_kind

    marked = json_head_kind(head.encode("utf-8", "replace"))  # the first key: a long inputs list cannot hide it
    if marked in _MARKED_KINDS:
        return _MARKED_KINDS[marked]
    if '"trajlab_version"' not in head:
        return None
    if '"merge_key"' in head or '"tables"' in head:
        return "scan"
    if '"ratio"' in head or '"kinds"' in head:
        return "sft_pool"
    return "unknown"


def read_json_object(path: str | Path) -> tuple[dict[str, Any], str | None]:
    """The JSON object a trajlab file holds (a ``manifest.json``), read without trusting it.

    ``({}, None)`` when the file does not exist; ``({}, why)`` when it cannot be read or is not one JSON object
    (empty, invalid, a list, nested too deep); else ``(object, None)``. Every reader of a manifest goes through
    here, so a damaged one gives a degraded result or a one-line error, never a traceback.
    """
    p = Path(path)
    try:
        if not p.is_file():
            return {}, None
        with open(p, "rb") as f:
            raw = f.read()
    except OSError as e:
        return {}, f"{p.name} cannot be read ({_why(e)})"
    if not raw.strip():
        return {}, f"{p.name} is empty"
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return {}, f"{p.name} is not valid JSON"
    if not isinstance(obj, dict):
        kind = {"list": "list", "str": "string", "int": "number", "float": "number", "bool": "boolean"}.get(
            type(obj).__name__, "null")
        return {}, f"{p.name} holds a JSON {kind}, not an object"
    return obj, None


def inside_trajlab_output(path: Path) -> Path | None:
    """The trajlab output directory that ``path`` (a file) lies in, if any (its parent or an ancestor)."""
    for d in Path(os.path.abspath(path)).parents:
        if output_kind(d) is not None:
            return d
    return None


def _overlap(out: Path, inputs: Iterable[str | Path]) -> str | None:
    o = Path(os.path.abspath(out)).resolve()
    for raw in inputs:
        p = Path(os.path.abspath(raw))
        try:
            p = p.resolve()
        except (OSError, RuntimeError):
            continue
        if o == p:
            return f"-o {out} is the input {raw}"
        if p in o.parents:
            return f"-o {out} lies inside the input {raw} (the scan would read its own output)"
        if o.exists() and o in p.parents and output_kind(o) is None:
            return f"the input {raw} lies inside -o {out}"
    return None


def check_out_dir(out: str | Path, *, kind: str, inputs: Iterable[str | Path] = (),
                  accept: Callable[[str], bool] | None = None) -> Path:
    """Check, without writing anything, that trajlab may write into directory ``out`` (see the module rules).

    ``kind`` names the output (``"scan"``, ``"sft_pool"``); a trajlab output of another kind is refused unless
    ``accept(kind)`` says yes. Raises :class:`TrajlabError` (exit 2).
    """
    out = Path(out)
    bad = _overlap(out, inputs)
    if bad:
        raise TrajlabError(bad, hint="choose an output directory outside the inputs")
    try:
        if out.exists() or out.is_symlink():
            if not out.is_dir():
                raise TrajlabError(f"-o {out}: exists and is not a directory",
                                   hint="give a new or empty directory, or an earlier trajlab output")
            have = output_kind(out)
            if have is None:
                if any(out.iterdir()):
                    raise TrajlabError(
                        f"-o {out}: the directory is not empty and is not a trajlab output; nothing was written",
                        hint="give a new or empty directory, or an earlier trajlab output")
            elif have not in (kind, "unknown") and not (accept and accept(have)):
                raise TrajlabError(f"-o {out}: holds a trajlab {have} output, not a {kind} output; nothing was written",
                                   hint="give a new or empty directory")
            where = out
        else:
            where = Path(os.path.abspath(out)).parent
            while not where.exists() and where != where.parent:
                where = where.parent
            if not where.is_dir():
                raise NotADirectoryError(20, "Not a directory")
        if not os.access(where, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except TrajlabError:
        raise
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise TrajlabError(f"-o {out}: cannot write there ({_why(e) if isinstance(e, OSError) else e})",
                           hint="choose a writable directory") from None
    return out


def prepare_out_dir(out: str | Path, *, kind: str, inputs: Iterable[str | Path] = (),
                    accept: Callable[[str], bool] | None = None) -> Path:
    """:func:`check_out_dir`, then create ``out`` and put trajlab's marker in it (before any other file)."""
    out = check_out_dir(out, kind=kind, inputs=inputs, accept=accept)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not (out / MARKER).is_file():
            from trajlab.atomic import atomic_write_json

            atomic_write_json(out / MARKER, {"kind": kind, "note": "written by trajlab; marks this directory as "
                                                                   "a trajlab output"}, fsync=False)
    except OSError as e:
        raise TrajlabError(f"-o {out}: cannot write there ({_why(e)})", hint="choose a writable directory") from None
    return out


def check_out_file(dest: str | Path, *, inputs: Iterable[str | Path] = (), report: bool = False) -> Path:
    """Check that trajlab may write the file ``dest`` (see the module rules); create its parent directory.

    ``report``: an existing trajlab HTML report may be replaced. Raises :class:`TrajlabError` (exit 2).
    """
    dest = Path(dest)
    try:
        me = Path(os.path.abspath(dest)).resolve()
        for raw in inputs:
            if Path(os.path.abspath(raw)).resolve() == me:
                raise TrajlabError(f"-o {dest}: is an input; refusing to overwrite it",
                                   hint="write the result to another file")
        if dest.is_dir():
            raise TrajlabError(f"-o {dest}: is a directory; give a file name")
        if dest.exists() or dest.is_symlink():
            if not (report and dest.is_file() and not dest.is_symlink() and _is_trajlab_report(dest)):
                raise TrajlabError(f"-o {dest}: exists and was not written by trajlab (as this output); nothing "
                                   "was written", hint="remove it first or choose another file name")
        home = inside_trajlab_output(dest)
        if home is not None and (dest.name == _MANIFEST or dest.name == MARKER or dest.suffix.lower() == ".parquet"
                                 or any(part.startswith(".") for part in Path(os.path.abspath(dest)).relative_to(
                                     Path(os.path.abspath(home))).parts[:-1])):
            raise TrajlabError(f"-o {dest}: would sit among the tables of the trajlab output {home}",
                               hint="write the result outside it, or under another name")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(dest.parent, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except TrajlabError:
        raise
    except (OSError, ValueError) as e:
        raise TrajlabError(f"-o {dest}: cannot write there ({_why(e) if isinstance(e, OSError) else e})",
                           hint="choose a writable location") from None
    return dest


def _is_trajlab_report(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            return _REPORT_TAG in f.read(4096)
    except OSError:
        return False


# ------------------------------------------------------------------------------------------------------------
# a write in progress: the lock, the unfinished-write marker, stale temp files

#: present while a scan rewrites the tables of an output directory; a run killed mid-way leaves it behind
INCOMPLETE = ".trajlab-incomplete"
LOCK = ".trajlab-lock"


@contextlib.contextmanager
def write_lock(out: Path) -> Iterator[None]:
    """Hold the writer lock of ``out`` (an OS lock on :data:`LOCK`, released when the process dies, even by
    ``kill -9``); a second writer gets a one-line :class:`TrajlabError` (exit 2) instead of racing the first."""
    import fcntl

    path = Path(out) / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            except OSError:
                holder = ""
            raise TrajlabError(f"{out}: another trajlab run is writing into this directory"
                               + (f" (pid {holder})" if holder else ""),
                               hint="wait for it to finish, or write into another directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)


def begin_write(out: Path) -> None:
    """Mark ``out`` as being rewritten (before the first table is replaced)."""
    from trajlab.atomic import atomic_write_json

    atomic_write_json(Path(out) / INCOMPLETE, {"pid": os.getpid(), "note": "a trajlab scan is rewriting the "
                                                                          "tables; if no scan runs, it was killed"})


def end_write(out: Path) -> None:
    """The tables and the manifest of ``out`` are consistent again."""
    (Path(out) / INCOMPLETE).unlink(missing_ok=True)


def check_complete(out: str | Path) -> None:
    """Raise a one-line :class:`TrajlabError` when the last scan into ``out`` did not finish (its tables may be
    from two different scans). ``sql``, ``report``, ``show`` and ``build-sft-pool`` call it before reading."""
    if (Path(out) / INCOMPLETE).exists():
        raise TrajlabError(f"{out}: the last scan into this directory did not finish (killed?); its tables may "
                           "not belong together", hint=f"re-run the same `trajlab scan ... -o {out}`")


def remove_stale_temps(out: Path, subdirs: Iterable[Path] = ()) -> int:
    """Delete the temp files (``.<name>.tmp``, trajlab's own pattern) that a killed run left in ``out`` and in
    ``subdirs``; call it only while holding :func:`write_lock`. Returns how many were removed."""
    n = 0
    for d in (Path(out), *subdirs):
        try:
            names = [x for x in os.scandir(d) if x.is_file(follow_symlinks=False) and TEMP_NAME.fullmatch(x.name)]
        except OSError:
            continue
        for x in names:
            try:
                os.unlink(x.path)
                n += 1
            except OSError:
                pass
    return n

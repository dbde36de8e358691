"""Keep pandas out of a trajlab process that never asked for it (the CLI's commands, the scan's workers).

pyarrow imports pandas behind the caller's back: the first conversion of Python objects (``pa.array``,
``pa.table``, ``pa.scalar``; ``import pyarrow.dataset`` makes one) imports it from C++ to learn pandas'
missing-value sentinels, and pyarrow's Cython shim imports it to ask whether an object is a DataFrame. That
costs 0.15-0.3 s of a command that has nothing to do with pandas -- and when pandas is not loaded, no pandas
object can exist, so both questions are answered without it.

:func:`install` (called by the ``trajlab`` command and by the scan's worker processes) adds an import finder
that refuses the named modules (pandas) to *compiled* code while they are not loaded: an import that no Python
``import`` statement, :func:`importlib.import_module` or :func:`importlib.util.find_spec` asked for. pyarrow
handles the refusal as "not installed" and goes on; Python code that imports pandas gets it as usual, and once
a module is loaded the finder is never consulted again for it. What is refused outright is compiled code
producing pandas output as the first use of pandas in the process (``Table.to_pandas()``, DuckDB's ``.df()``):
no trajlab command does that, and the error names the way out (``import pandas`` first, or
``TRAJLAB_IMPORT_GATE=0``). The finder takes any module name; numpy is *not* gated by the CLI: pyarrow imports
numpy when it starts, and a pyarrow started without it never takes numpy arrays in that process, even once
numpy is imported -- a trap for any later code in the same command that uses numpy.
"""

from __future__ import annotations

import opcode
import os
import sys
from collections.abc import Iterable, Sequence
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from importlib.machinery import ModuleSpec

#: ``TRAJLAB_IMPORT_GATE=0`` (or ``off``) turns the gate off
ENV_VAR = "TRAJLAB_IMPORT_GATE"
_IMPORT_NAME = opcode.opmap["IMPORT_NAME"]
_EXTENDED_ARG = opcode.opmap["EXTENDED_ARG"]
_MACHINERY = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_IMPORTLIB_DIR = os.path.dirname(os.path.abspath(sys.modules["importlib"].__file__ or ""))


class ImportGate:
    """The import finder (a ``sys.meta_path`` entry; not an ``importlib.abc.MetaPathFinder`` subclass, whose module
    loads ``importlib.resources``): refuses the top-level import of each name in ``names`` when compiled code
    asks for it."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in self.names or _asked_by_python(sys._getframe(1), fullname):
            return None  # the other finders decide
        raise ModuleNotFoundError(
            f"trajlab: {fullname} was not imported: compiled code (pyarrow, duckdb) asked for it while no "
            f"{fullname} object exists in this process; import {fullname} first, or set {ENV_VAR}=0",
            name=fullname)


def _asked_by_python(frame: FrameType | None, module: str) -> bool:
    """Whether the import of ``module`` in progress was asked for by Python code: the innermost frame outside the
    import machinery is executing ``import module`` (or ``from module ...``), or belongs to :mod:`importlib`
    (``import_module``, ``util.find_spec``). A C extension's own import has neither: that frame is at a call
    into compiled code, or at the import of the extension itself (whose initialisation asks for pandas)."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename in _MACHINERY or filename == __file__:
            frame = frame.f_back
            continue
        if filename.startswith("<frozen importlib") or os.path.dirname(os.path.abspath(filename)) == _IMPORTLIB_DIR:
            return True
        name = _imported_name(frame)
        return name is None or name.partition(".")[0] == module
    return False


def _imported_name(frame: FrameType) -> str | None:
    """The module name of the ``import`` statement ``frame`` is executing ("" when it is not at one; None when
    the bytecode cannot be read, and the import is let through)."""
    code, at = frame.f_code.co_code, frame.f_lasti
    if not 0 <= at < len(code) - 1:
        return None
    if code[at] != _IMPORT_NAME:
        return ""
    arg, shift, i = code[at + 1], 8, at - 2
    while i >= 0 and code[i] == _EXTENDED_ARG:
        arg |= code[i + 1] << shift
        shift, i = shift + 8, i - 2
    names = frame.f_code.co_names
    return names[arg] if arg < len(names) else None


def _enabled() -> bool:
    return os.environ.get(ENV_VAR, "").strip().lower() not in ("0", "off", "false", "no")


def install(names: Iterable[str] = ("pandas",)) -> None:
    """Gate ``names`` (top-level modules not yet loaded) for the rest of this process: one that runs trajlab's
    own code and nothing else (the ``trajlab`` command, a scan worker). Not for a process that hosts trajlab as
    a library: after a refusal, pyarrow no longer recognises pandas' missing-value sentinels (``pd.NA``), or
    takes numpy arrays, for the rest of the process, even once the module is imported."""
    if not _enabled():
        return
    todo = [n for n in names if n not in sys.modules]
    gate = next((f for f in sys.meta_path if isinstance(f, ImportGate)), None)
    if gate is None:
        sys.meta_path.insert(0, ImportGate(todo))
    else:
        gate.names.update(todo)

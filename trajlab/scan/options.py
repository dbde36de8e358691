"""What a scan is asked to do: :class:`ScanOptions` (every option of :func:`trajlab.scan.scan`, checked once,
when made) and :class:`WorkerOptions` (the part workers need, with its fingerprint).

The fingerprint hashes every option that changes results (plus the trajlab and schema versions and the part
layout), so the incremental cache (:mod:`trajlab.scan.cache`) never reuses parts made under other options.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab import __version__
from trajlab.rulepacks import rules_hash
from trajlab.tables import SCHEMA_VERSION

#: layout of the part files and ids (bumped when done.json or trajectory_id change)
PARTS_LAYOUT = 5


@dataclass(frozen=True)
class ScanOptions:
    """Every option of :func:`trajlab.scan.scan` (frozen; each value checked when the object is made, so a bad one
    is a one-line :class:`~trajlab.errors.InputError` naming the field before anything is read or written).

    Attributes:
        tools: tool schemas that override the prompts' (a ``--tools`` file path, or a list of schemas).
        input_format: force the input format (``auto`` or None: detected per file).
        tool_format: force the call format (a name of ``trajlab.toolcalls.KNOWN_FORMATS``; ``auto`` or None:
            detected per trajectory).
        rules_dirs: user rule packs added to the built-in ``rules/``.
        jobs: worker processes (0 = one per CPU; small inputs run in-process).
        strict: raise :class:`~trajlab.errors.InputError` (exit code 2) if any record could not be read.
        incremental: reuse the parts of files unchanged since the last scan into the output directory.
        chunk_bytes: size of the byte ranges big files are cut into (None: 32 MB).
        engine: ``auto`` | ``columnar`` | ``records`` (:mod:`trajlab.scan.engines`; None: ``$TRAJLAB_ENGINE``,
            else ``auto``). Every engine writes the same tables; the manifest records which read each file.
        runs: ``{NAME: PATH}`` (``--run NAME=PATH``): every file under PATH belongs to run NAME; a PATH outside
            the scanned paths is scanned too. Other files get the run their directory names
            (:mod:`trajlab.ingest.runs`).
    """

    tools: str | Path | list[dict[str, Any]] | None = None
    input_format: str | None = None
    tool_format: str | None = None
    rules_dirs: tuple[str, ...] = ()
    jobs: int = 0
    strict: bool = False
    incremental: bool = True
    chunk_bytes: int | None = None
    engine: str | None = None
    runs: Mapping[str, str | Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from trajlab import toolcalls
        from trajlab.errors import InputError, param
        from trajlab.ingest import validate_format_name
        from trajlab.scan.engines import resolve_engine

        put = object.__setattr__
        put(self, "rules_dirs", tuple(str(Path(d)) for d in self.rules_dirs))
        put(self, "runs", dict(self.runs or {}))
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 0:
            raise InputError(f"{param('jobs')} {self.jobs!r}: must be a whole number >= 0 (0 = one per CPU)")
        if self.chunk_bytes is not None and (not isinstance(self.chunk_bytes, int) or self.chunk_bytes < 1):
            raise InputError(f"{param('chunk_bytes')} {self.chunk_bytes!r}: must be a whole number >= 1")
        fmt = None if self.tool_format in ("auto", "") else self.tool_format
        if fmt is not None and fmt not in toolcalls.KNOWN_FORMATS:
            raise InputError(f"unknown {param('tool_format')} {fmt!r}; choose one of: auto, "
                             f"{', '.join(toolcalls.KNOWN_FORMATS)}")
        put(self, "tool_format", fmt)
        put(self, "input_format", validate_format_name(self.input_format))
        resolve_engine(self.engine)  # an unknown engine is refused here, not in a worker


@dataclass
class WorkerOptions:
    """The options a worker needs to turn input into table parts (picklable: sent to worker processes)."""

    tool_format: str | None = None
    tools: list[dict[str, Any]] | None = None
    rules_dirs: tuple[str, ...] = ()
    input_format: str | None = None
    #: ``auto`` | ``columnar`` | ``records`` (:mod:`trajlab.scan.engines`); not in the fingerprint: every
    #: engine writes the same bytes
    engine: str = "auto"
    #: why no range goes through the columnar engine (``auto`` on a small input,
    #: :func:`trajlab.scan.engines.for_input_size`); recorded with each range read
    fallback: str | None = None

    def fingerprint(self) -> str:
        blob = json.dumps(
            {
                "v": __version__,
                "code": code_hash(),
                "schema": SCHEMA_VERSION,
                "parts": PARTS_LAYOUT,
                "rules": rules_hash(self.rules_dirs),
                "tool_format": self.tool_format,
                "tools": self.tools,
                "input_format": self.input_format,
            },
            sort_keys=True,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


#: the code whose behaviour the scan tables record: readers, the classifier, the engines, the table specs
_CODE = ("ingest", "toolcalls", "scan", "trajectory.py", "tables.py", "model.py", "chatml.py", "trends.py",
         "rulepacks.py")


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """sha1 over the source of every module that shapes a scan's tables (:data:`_CODE`), so an upgraded
    classifier never reuses parts made by the old one, even at the same version number (a wheel without
    sources hashes what it has; the version and schema still count)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha1()
    for name in _CODE:
        base = root / name
        for f in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            if f.is_file():
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def worker_options(options: ScanOptions) -> WorkerOptions:
    """The part of ``options`` workers need, with the ``tools`` file (if one is named) loaded and the engine
    resolved (``$TRAJLAB_ENGINE`` when none is given)."""
    from trajlab.ingest.tool_schemas import load_tools_file
    from trajlab.scan.engines import resolve_engine

    tools = options.tools
    tool_list = load_tools_file(tools) if isinstance(tools, (str, Path)) else tools
    return WorkerOptions(tool_format=options.tool_format, tools=tool_list, rules_dirs=options.rules_dirs,
                         input_format=options.input_format, engine=resolve_engine(options.engine))

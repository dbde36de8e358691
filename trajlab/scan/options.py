"""What a scan is asked to do: :class:`ScanOptions` (the options workers need) and their fingerprint.

The fingerprint hashes every option that changes results (plus the trajlab and schema versions and the part
layout), so the incremental cache (:mod:`trajlab.scan.cache`) never reuses parts made under other options.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab import __version__
from trajlab.rulepacks import rules_hash
from trajlab.tables import SCHEMA_VERSION

#: layout of the part files and ids (bumped when done.json or trajectory_id change)
PARTS_LAYOUT = 5


@dataclass
class ScanOptions:
    """The options a worker needs to turn input into table parts (picklable: sent to worker processes)."""

    tool_format: str | None = None
    tools: list[dict[str, Any]] | None = None
    rules_dirs: tuple[str, ...] = ()
    input_format: str | None = None
    #: ``auto`` | ``columnar`` | ``records`` (:mod:`trajlab.scan.engines`); not in the fingerprint: every
    #: engine writes the same bytes
    engine: str = "auto"

    def fingerprint(self) -> str:
        blob = json.dumps(
            {
                "v": __version__,
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


def make_scan_options(*, tools: str | Path | list[dict[str, Any]] | None = None, input_format: str | None = None,
                      tool_format: str | None = None, rules_dirs: Iterable[str | Path] = (),
                      engine: str | None = None) -> ScanOptions:
    """Validate the scan options as the CLI gives them (``auto`` = detect); one-line errors for bad values."""
    from trajlab import toolcalls
    from trajlab.errors import InputError, param
    from trajlab.ingest import validate_format_name
    from trajlab.ingest.tool_schemas import load_tools_file
    from trajlab.scan.engines import resolve_engine

    known_formats = toolcalls.KNOWN_FORMATS
    if tool_format in ("auto", ""):
        tool_format = None
    if tool_format is not None and tool_format not in known_formats:
        raise InputError(f"unknown {param('tool_format')} {tool_format!r}; choose one of: auto, {', '.join(known_formats)}")
    tool_list = load_tools_file(tools) if isinstance(tools, (str, Path)) else tools
    return ScanOptions(tool_format=tool_format, tools=tool_list, rules_dirs=tuple(str(Path(d)) for d in rules_dirs),
                       input_format=validate_format_name(input_format), engine=resolve_engine(engine))

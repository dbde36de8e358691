"""What a scan is asked to do: :class:`ScanOptions` (the options workers need) and their fingerprint.

The fingerprint hashes every option that changes results (plus the trajlab and schema versions and the part
layout), so the incremental cache (:mod:`trajlab.scan.cache`) never reuses parts made under other options.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from trajlab import __version__
from trajlab.rulepacks import rules_hash
from trajlab.tables import SCHEMA_VERSION

#: layout of the part files and ids (bumped when done.json or trajectory_id change)
PARTS_LAYOUT = 4


@dataclass
class ScanOptions:
    """The options a worker needs to turn input into table parts (picklable: sent to worker processes)."""

    tool_format: str | None = None
    tools: list[dict[str, Any]] | None = None
    rules_dirs: tuple[str, ...] = ()
    input_format: str | None = None

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

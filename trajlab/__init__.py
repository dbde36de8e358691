"""trajlab: find, explain and fix malformed tool calls in agentic-RL rollouts.

The library API mirrors the CLI; heavy modules are imported lazily so ``import trajlab`` stays fast::

    from trajlab import scan, connect
    summary = scan(["rollouts/"], out="out")
    con = connect("out")
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_API = {
    "scan": "trajlab.scan",
    "ScanSummary": "trajlab.scan",
    "ScanOptions": "trajlab.scan",
    "analyze_turn": "trajlab.toolcalls",
    "detect_tool_format": "trajlab.toolcalls",
    "check_text": "trajlab.toolcalls",
    "list_rules": "trajlab.toolcalls",
    "rescore": "trajlab.rescore",
    "RescoreOptions": "trajlab.rescore",
    "build_sft_pool": "trajlab.curate",
    "PoolOptions": "trajlab.curate",
    "connect": "trajlab.query",
    "sql": "trajlab.query",
    "report": "trajlab.report",
    "ReportOptions": "trajlab.report",
    "show": "trajlab.show",
    "ShowOptions": "trajlab.show",
    "watch": "trajlab.watch",
    "WatchOptions": "trajlab.watch",
    "describe_tables": "trajlab.table_registry",
    "TrajlabError": "trajlab.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'trajlab' has no attribute {name!r}")

"""trajlab: find, explain and fix malformed tool calls in agentic-RL rollouts.

The library API mirrors the CLI; heavy modules are imported lazily so ``import trajlab`` stays fast::

    from trajlab import scan, connect
    summary = scan(["rollouts/"], out="out")
    con = connect("out")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:  # what the lazy exports are, for type checkers and editors (tests/test_packaging.py keeps it whole)
    from trajlab.curate import PoolOptions as PoolOptions
    from trajlab.curate import build_sft_pool as build_sft_pool
    from trajlab.errors import TrajlabError as TrajlabError
    from trajlab.query import connect as connect
    from trajlab.query import sql as sql
    from trajlab.report import ReportOptions as ReportOptions
    from trajlab.report import report as report
    from trajlab.rescore import RescoreOptions as RescoreOptions
    from trajlab.rescore import rescore as rescore
    from trajlab.scan import ScanOptions as ScanOptions
    from trajlab.scan import ScanSummary as ScanSummary
    from trajlab.scan import scan as scan
    from trajlab.show import ShowOptions as ShowOptions
    from trajlab.show import show as show
    from trajlab.table_registry import describe_tables as describe_tables
    from trajlab.toolcalls import analyze_turn as analyze_turn
    from trajlab.toolcalls import check_text as check_text
    from trajlab.toolcalls import detect_tool_format as detect_tool_format
    from trajlab.toolcalls import list_rules as list_rules
    from trajlab.watch import WatchOptions as WatchOptions
    from trajlab.watch import watch as watch


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'trajlab' has no attribute {name!r}")

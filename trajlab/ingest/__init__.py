"""Ingest: find input files, detect their format, and stream records out of them (the package's public API).

One module per source format (:mod:`verl_jsonl`, :mod:`verl_tool`, :mod:`openai_messages`) converts a parsed
record into a :class:`~trajlab.model.RawTrajectory`. What is common has one module per step:
:mod:`~trajlab.ingest.discover` walks directories, :mod:`~trajlab.ingest.detect` tells a file's format,
:mod:`~trajlab.ingest.plan` splits big JSONL files into byte ranges that workers read in parallel,
:mod:`~trajlab.ingest.stream` reads the records of one range and :mod:`~trajlab.ingest.salvage` rescues a
damaged JSON list. Every unreadable line becomes an :class:`~trajlab.model.IngestError` (file, line, reason)
instead of an exception; good records around a bad one are always kept. This module only re-exports.
"""

from trajlab.ingest.detect import (
    BOM,
    DETECT_BYTES,
    DETECT_LINES,
    FORMATS,
    container_of,
    detect_format,
    loads_line,
    validate_format_name,
)
from trajlab.ingest.discover import (
    DATA_SUFFIXES,
    MODEL_SIDE_FILES,
    InputFile,
    discover,
    display_name,
    find_inputs,
)
from trajlab.ingest.plan import CHUNK_BYTES, FileTask, plan_tasks, split_from_path
from trajlab.ingest.stream import iter_records

__all__ = [
    "BOM", "CHUNK_BYTES", "DATA_SUFFIXES", "DETECT_BYTES", "DETECT_LINES", "FORMATS", "MODEL_SIDE_FILES",
    "FileTask", "InputFile", "container_of", "detect_format", "discover", "display_name", "find_inputs",
    "iter_records", "loads_line", "plan_tasks", "split_from_path", "validate_format_name",
]

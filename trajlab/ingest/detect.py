"""Format detection: which input format a file holds (and how its records sit in it), judged from its head.

Also the JSON line reader that never raises (:func:`loads_line`) and the table of known formats
(:data:`FORMATS`: format name -> converter module).
"""

from __future__ import annotations

import json
import mmap
from pathlib import Path
from typing import Any

from trajlab.errors import InputError, param
from trajlab.ingest import (
    nemo_rl,
    openai_messages,
    skyrl_evals,
    slime_dump,
    trl_completions,
    verl_jsonl,
    verl_tool,
)

FORMATS: dict[str, Any] = {
    verl_jsonl.FORMAT: verl_jsonl,
    verl_tool.FORMAT: verl_tool,
    openai_messages.FORMAT: openai_messages,
    nemo_rl.FORMAT: nemo_rl,
    trl_completions.FORMAT: trl_completions,
    skyrl_evals.FORMAT: skyrl_evals,
    slime_dump.FORMAT: slime_dump,
}
BOM = b"\xef\xbb\xbf"
#: format detection reads at most this many lines / bytes of a file; longer lines are judged by their head
DETECT_LINES = 1000
DETECT_BYTES = 64 * 1024 * 1024
_DETECT_LINE_BYTES = 16 * 1024 * 1024


def loads_line(raw: bytes | str) -> tuple[Any, str | None]:
    """``json.loads`` that never raises: ``(object, None)`` or ``(None, reason)`` (bad JSON, nesting too deep for
    Python's parser, an integer literal with thousands of digits)."""
    try:
        return json.loads(raw), None
    except json.JSONDecodeError as e:
        # (some of json's messages end in "at": "Unterminated string starting at")
        return None, f"invalid JSON: {e.msg}{'' if e.msg.endswith(' at') else ' at'} column {e.colno}"
    except RecursionError:
        return None, "JSON nested too deeply to read (over ~1000 levels)"
    except ValueError as e:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        return None, f"unreadable JSON value: {e}"


def container_of(path: Path) -> str:
    """How records sit in a file: ``parquet``, ``list`` (one JSON list of records) or ``lines`` (JSON lines).

    A file starting with ``[`` is one JSON list when it is a ``.json`` file, when its first line is the ``[``
    alone (pretty-printed) or when it is one line; otherwise it is JSON lines whose first line is an array.
    """
    if path.suffix.lower() == ".parquet":
        return "parquet"
    if path.suffix.lower() == ".pt":
        return "pt"
    try:
        with open(path, "rb") as f:
            head = f.read(4096).removeprefix(BOM)
            if not head.lstrip().startswith(b"["):
                return "lines"
            if path.suffix.lower() == ".json":
                return "list"
            first_nl = head.find(b"\n")
            if first_nl >= 0 and head[:first_nl].strip() == b"[":
                return "list"
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                nl = mm.find(b"\n")
                one_line = nl < 0 or not mm[nl:].strip()
    except (OSError, ValueError):
        return "lines"
    return "list" if one_line else "lines"


def _sniff_lines(path: Path) -> tuple[list[Any], list[bytes]]:
    """Parsed JSON lines from the head of a file (``None`` for a line that is not JSON), stopping at the first
    line of a known format, after :data:`DETECT_LINES` lines or :data:`DETECT_BYTES` bytes. A line too long to
    parse here is skipped (bounded memory) and its first 64 KiB returned in the second list."""
    objs: list[Any] = []
    heads: list[bytes] = []
    read = 0
    with open(path, "rb") as f:
        for n in range(DETECT_LINES):
            line = f.readline(_DETECT_LINE_BYTES)
            if not line:
                break
            read += len(line)
            if n == 0:
                line = line.removeprefix(BOM)
            if not line.endswith(b"\n") and len(line) >= _DETECT_LINE_BYTES:
                heads.append(line[:65536])
                while read <= DETECT_BYTES:
                    more = f.readline(_DETECT_LINE_BYTES)
                    read += len(more)
                    if not more or more.endswith(b"\n"):
                        break
            elif line.strip():
                obj, _ = loads_line(line.decode("utf-8", "replace"))
                objs.append(obj)
                if _format_of(obj):
                    break
            if read > DETECT_BYTES:
                break
    return objs, heads


def _format_of(obj: Any) -> str | None:
    if nemo_rl.looks_like(obj):
        return nemo_rl.FORMAT
    if verl_jsonl.looks_like(obj):
        return verl_jsonl.FORMAT
    if openai_messages.looks_like(obj):
        return openai_messages.FORMAT
    if verl_tool.looks_like(obj):
        return verl_tool.FORMAT
    if skyrl_evals.looks_like(obj):
        return skyrl_evals.FORMAT
    return None


def _first_list_element(path: Path) -> Any:
    """The first record of a file holding one JSON list (read from at most :data:`DETECT_BYTES`), or None."""
    dec = json.JSONDecoder()
    for budget in (1 << 20, DETECT_BYTES):
        with open(path, "rb") as f:
            text = f.read(budget).removeprefix(BOM).decode("utf-8", "replace")
        i = text.find("[") + 1
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        try:
            return dec.raw_decode(text, i)[0]
        except (ValueError, RecursionError):
            if len(text) < budget // 2:
                return None
    return None


def detect_format(path: Path) -> tuple[str | None, str]:
    """The input format of a file, or ``None`` with the reason it is not recognised.

    JSON lines are judged by the first line of a known shape among the first :data:`DETECT_LINES` lines, so
    damaged or foreign lines at the top do not cost the file; a JSON list by its first record (a list of verl
    dump records reads as ``verl_jsonl``; otherwise it is verl-tool's layout). A leading UTF-8 BOM is ignored.
    """
    suffix = path.suffix.lower()
    try:
        if path.stat().st_size == 0:
            return None, "empty file"
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            names = set(pq.read_schema(path).names)
            if "messages" in names:
                return openai_messages.FORMAT, ""
            if trl_completions.looks_like_columns(names):
                return trl_completions.FORMAT, ""
            if verl_jsonl.looks_like(dict.fromkeys(names)):  # a verl dump converted to Parquet: the same fields
                return verl_jsonl.FORMAT, ""
            return None, (f"unknown Parquet layout (columns: {', '.join(sorted(names)[:8])}); expected 'messages' "
                          "(OpenAI messages), verl's 'input'/'output'/'score'/'step' or TRL's "
                          "'step'/'prompt'/'completion'")
        if suffix == ".pt":
            return slime_dump.sniff(path)
        if path.name == skyrl_evals.AGGREGATED:
            return None, "SkyRL's aggregated eval metrics (aggregated_results.jsonl): metrics, not samples"
        with open(path, "rb") as f:
            head = f.read(4096).removeprefix(BOM).lstrip()
        if container_of(path) == "list":
            first = _first_list_element(path)
            return (_format_of(first) if isinstance(first, dict) and _format_of(first) else verl_tool.FORMAT), ""
        objs, long_heads = _sniff_lines(path)
        if suffix == ".json" and head.startswith(b"{") and all(o is None for o in objs):
            return None, _single_object_reason(path)
    except OSError as e:
        return None, f"cannot read file: {e.strerror}"
    except Exception as e:  # pyarrow raises several types for a corrupt Parquet file
        return None, f"cannot read file: {type(e).__name__}: {e}"
    for o in objs:
        fmt = _format_of(o)
        if fmt:
            return fmt, ""
    for h in long_heads:  # only lines too long to parse here: judge them by the keys near their start
        if h.lstrip().startswith(b"{"):
            if b'"messages"' in h:
                return openai_messages.FORMAT, ""
            if b'"token_loss_mask"' in h or (b'"token_ids"' in h and b'"input_lengths"' in h):
                return nemo_rl.FORMAT, ""
            if b'"output"' in h or b'"input"' in h:
                return verl_jsonl.FORMAT, ""
    if not objs and not long_heads:
        return None, "no records (only blank lines)"
    if all(o is None for o in objs):
        return None, f"unknown format: none of the first {len(objs) + len(long_heads)} lines is a JSON record"
    return None, "unknown format: records have neither 'output' (verl dump) nor 'messages' (OpenAI messages)"


def _single_object_reason(path: Path) -> str:
    """Why a pretty-printed ``.json`` file (one object over many lines) is not trajectory data."""
    if path.stat().st_size > 64 * 1024 * 1024:
        return "unknown format: a large .json file that is neither JSON lines nor a JSON list"
    try:
        obj = json.loads(path.read_bytes().removeprefix(BOM).decode("utf-8", "replace"))
    except json.JSONDecodeError as e:
        return f"unknown format: not JSON lines, and not valid JSON either ({e.msg} at line {e.lineno})"
    except (ValueError, RecursionError) as e:
        return f"unknown format: not JSON lines, and not readable JSON either ({type(e).__name__})"
    keys = ", ".join(list(obj)[:6]) if isinstance(obj, dict) else type(obj).__name__
    return f"not trajectory data: a single JSON object (keys: {keys}), not JSON lines or a list of records"


def validate_format_name(name: str | None) -> str | None:
    if name is None or name == "auto":
        return None
    if name not in FORMATS:
        raise InputError(f"unknown {param('input_format')} {name!r}; choose one of: auto, {', '.join(FORMATS)}")
    return name

"""W&B run files (``run-<id>.wandb``): the run, its config and its numeric history, read without the ``wandb``
package.

The file (the same framing from wandb 0.16 to 0.31): a 7-byte header ``":W&B" | uint16 LE 0xBEE1 | uint8 0``, then
LevelDB's log format in 32 KiB blocks (the header counts toward block 0). A chunk is ``uint32 LE checksum | uint16
LE length | uint8 type (1 full, 2 first, 3 middle, 4 last) | payload``; chunks never cross a block, and fewer than
7 bytes left in a block are padding. The checksum is plain CRC-32 (``zlib.crc32``) of the type byte and the
payload. Each whole record is a ``wandb_internal.Record``; the few fields read (the minimal protobuf codec of
:func:`trajlab.metrics.tfevents.fields`):

* ``Record``: ``history`` (2), ``config`` (5), ``run`` (17), ``header`` (21: ``version_info.producer``);
* ``HistoryRecord``: ``item`` (1, repeated), ``step`` (2: ``{num: 1}``); ``HistoryItem``: ``key`` (1, the Python
  writer of wandb <= 0.16), ``nested_key`` (2, repeated: every item in the wandb-core era), the 0.31 typed
  ``value`` (``none`` 3, ``boolean`` 4, ``integer`` 5 sint64, ``number`` 6 double, ``text`` 7, ``json`` 8) and
  ``value_json`` (16, always written);
* ``RunRecord``: ``run_id`` (1), ``entity`` (2), ``project`` (3), ``config`` (4), ``run_group`` (6), ``job_type``
  (7), ``display_name`` (8), ``start_time`` (17: ``{seconds: 1, nanos: 2}``); ``ConfigRecord``: ``update`` (1) of
  ``{key 1, nested_key 2, value_json 16}``.

A history value that is a JSON object (a nested dict in old files) is flattened with ``.`` as W&B's UI names it;
keys starting with ``_`` (``_step``, ``_runtime``, ``_timestamp``) are W&B's own and dropped; a key under a
prefix that has a ``<prefix>._type`` entry is a table, image or other media (skipped and counted), and so is any
other value that is not a number. Several history records at one step: the last value of each key stands.

Damage costs only itself and is never silent: a chunk whose checksum is wrong is skipped with the rest of its
block (as wandb-core's own reader does) and reported; a record that does not decode is skipped and reported; a
cut-off tail (a writer killed mid-write, or a run still running) ends the reading, and :attr:`WandbFile.problems`
says how many bytes and records were read before it.
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from trajlab.metrics.tfevents import DecodeError, fields

MAGIC = b":W&B\xe1\xbe\x00"  # ":W&B", uint16 LE 0xBEE1, version 0
BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
#: ``Record`` field numbers read
R_HISTORY, R_CONFIG, R_RUN, R_HEADER = 2, 5, 17, 21
#: a record larger than this is skipped (a config or history record of a real run is a few KiB to a few MiB)
MAX_RECORD_BYTES = 64 << 20


def is_wandb_file(path: Path) -> bool:
    """True for a W&B run file: a regular file whose first 7 bytes are the W&B header (its name is not trusted)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


@dataclass
class WandbFile:
    """What one ``.wandb`` file holds: the run (``run_id``, ``project``, ``name`` (the display name: verl's
    experiment name), ``group``, ``job_type``, ``entity``, ``start_time`` in seconds), the ``config`` (the run
    record's and later config records', nested by key path), the ``producer`` (``<version>+<sha>`` for wandb-core,
    empty for the Python writer), ``history`` (``{step: {name: value}}``, numeric values only), ``skipped``
    (``{reason: count}`` of history values not kept), ``records`` read, ``bytes_read`` of ``size`` and
    ``problems`` (one line each)."""

    path: Path
    run_id: str = ""
    project: str = ""
    name: str = ""
    group: str = ""
    job_type: str = ""
    entity: str = ""
    start_time: float | None = None
    producer: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    history: dict[int, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    records: int = 0
    history_records: int = 0
    bytes_read: int = 0
    size: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when the whole file was read with no damage."""
        return not self.problems and self.bytes_read == self.size


def iter_records(f: BinaryIO, problems: list[str], state: dict[str, int]) -> Iterator[bytes]:
    """The whole records of an open ``.wandb`` file after its header, in order; damage is appended to
    ``problems``; ``state["read"]`` is the offset up to which the file was read intact (``state["records"]``
    counts the records yielded)."""
    head = f.read(len(MAGIC))
    if head != MAGIC:
        problems.append("not a W&B run file (no ':W&B' header)" if len(head) == len(MAGIC)
                        else f"cut off: {len(head)} bytes, no complete header")
        return
    pos = len(MAGIC)
    state["read"] = pos
    parts: list[bytes] = []
    part_start = -1
    while True:
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:
            pad = f.read(left)
            if len(pad) < left:
                if pad.strip(b"\x00") or parts:
                    problems.append(f"cut off at byte {pos + len(pad)} in a block's padding")
                state["read"] = pos + len(pad) if not parts else state["read"]
                return
            pos += left
            continue
        hdr = f.read(CHUNK_HEADER)
        if not hdr:
            if parts:
                problems.append(f"cut off: the record starting at byte {part_start} has no last chunk "
                                f"(the writer stopped mid-record); read {state['records']} records, "
                                f"{state['read']} bytes")
            return
        if len(hdr) < CHUNK_HEADER:
            problems.append(f"cut off at byte {pos}: {len(hdr)} bytes of a chunk header (the writer stopped "
                            f"mid-write); read {state['records']} records, {state['read']} bytes")
            return
        crc, length, kind = struct.unpack("<IHB", hdr)
        if kind == 0 and length == 0 and crc == 0:  # zero padding to the end of a block (preallocated space)
            rest = f.read(left - CHUNK_HEADER)
            if rest.strip(b"\x00"):
                problems.append(f"byte {pos}: an empty chunk followed by data; skipped to the next block")
            pos += left
            if len(rest) < left - CHUNK_HEADER:
                return
            continue
        if CHUNK_HEADER + length > left:
            problems.append(f"byte {pos}: a chunk of {length} bytes runs past its block (damaged header); "
                            "skipped to the next block")
            f.seek(pos + left)
            pos += left
            parts = []
            continue
        payload = f.read(length)
        if len(payload) < length:
            problems.append(f"cut off at byte {pos}: a chunk of {length} bytes, only {len(payload)} present (the "
                            f"writer stopped mid-record); read {state['records']} records, {state['read']} bytes")
            return
        if zlib.crc32(bytes([kind]) + payload) != crc:
            problems.append(f"byte {pos}: chunk checksum mismatch; skipped to the next block "
                            f"({left} bytes from there)")
            f.seek(pos + left)
            pos += left
            parts = []
            continue
        pos += CHUNK_HEADER + length
        if kind == FULL:
            if parts:
                problems.append(f"byte {part_start}: a record without its last chunk; skipped")
                parts = []
            state["read"], state["records"] = pos, state["records"] + 1
            yield payload
        elif kind == FIRST:
            if parts:
                problems.append(f"byte {part_start}: a record without its last chunk; skipped")
            parts, part_start = [payload], pos - CHUNK_HEADER - length
        elif kind in (MIDDLE, LAST):
            if not parts:
                problems.append(f"byte {pos - CHUNK_HEADER - length}: a continuation chunk without its first; "
                                "skipped")
                continue
            parts.append(payload)
            if sum(len(p) for p in parts) > MAX_RECORD_BYTES:
                problems.append(f"byte {part_start}: a record over {MAX_RECORD_BYTES >> 20} MiB; skipped")
                parts = []
                continue
            if kind == LAST:
                state["read"], state["records"] = pos, state["records"] + 1
                yield b"".join(parts)
                parts = []
        else:
            problems.append(f"byte {pos - CHUNK_HEADER - length}: unknown chunk type {kind}; skipped")


def _str(v: int | bytes) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ""


def _sub(buf: bytes, num: int) -> bytes | None:
    for n, wt, v in fields(buf):
        if n == num and wt == 2:
            return v  # type: ignore[return-value]
    return None


def _item(buf: bytes) -> tuple[list[str], Any, bool]:
    """``(key path, value, has a value)`` of a ``HistoryItem`` or ``ConfigItem``: ``value_json`` decoded, else the
    typed 0.31 value."""
    key = ""
    nested: list[str] = []
    value: Any = None
    have = False
    typed: Any = None
    typed_set = False
    for n, wt, v in fields(buf):
        if n == 1 and wt == 2:
            key = _str(v)
        elif n == 2 and wt == 2:
            nested.append(_str(v))
        elif n == 16 and wt == 2:
            try:
                value, have = json.loads(_str(v)), True
            except (ValueError, RecursionError):
                value, have = _str(v), True  # not JSON: kept as text (skipped as not numeric)
        elif n == 3:
            typed, typed_set = None, True
        elif n == 4 and wt == 0:
            typed, typed_set = bool(v), True
        elif n == 5 and wt == 0:
            iv = int(v)  # type: ignore[arg-type]
            typed, typed_set = (iv >> 1) ^ -(iv & 1), True  # sint64 (zigzag)
        elif n == 6 and wt == 1:
            typed, typed_set = struct.unpack("<d", struct.pack("<Q", v))[0], True
        elif n == 7 and wt == 2:
            typed, typed_set = _str(v), True
        elif n == 8 and wt == 2:
            try:
                typed, typed_set = json.loads(_str(v)), True
            except (ValueError, RecursionError):
                typed, typed_set = _str(v), True
    path = nested if nested else ([key] if key else [])
    if not have and typed_set:
        value, have = typed, True
    return path, value, have


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    else:
        out[prefix] = value


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    return None


def history_row(buf: bytes) -> tuple[int | None, dict[str, Any]]:
    """``(step, {name: value})`` of one ``HistoryRecord``, names as W&B shows them (a key path joined with
    ``.``, nested JSON objects flattened), every value as logged (W&B's own ``_`` keys included)."""
    step: int | None = None
    row: dict[str, Any] = {}
    for n, wt, v in fields(buf):
        if n == 1 and wt == 2:
            path, value, have = _item(v)  # type: ignore[arg-type]
            if path and have:
                _flatten(".".join(path), value, row)
        elif n == 2 and wt == 2:
            for sn, swt, sv in fields(v):  # type: ignore[arg-type]
                if sn == 1 and swt == 0:
                    step = _signed(int(sv))  # type: ignore[arg-type]
    if step is None and isinstance(row.get("_step"), int):
        step = int(row["_step"])
    return step, row


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def numeric_series(row: dict[str, Any], skipped: dict[str, int]) -> dict[str, float]:
    """The metrics of one history row: numbers only, W&B's ``_`` keys dropped, tables and media (every key under
    a ``<prefix>._type``) and other values skipped and counted in ``skipped``."""
    media = {k[: -len("._type")] for k in row if k.endswith("._type")}
    out: dict[str, float] = {}
    for k, value in row.items():
        if k.startswith("_"):
            continue
        if any(k == p or k.startswith(p + ".") for p in media):
            if k.endswith("._type"):
                skipped["table or media"] = skipped.get("table or media", 0) + 1
            continue
        v = _numeric(value)
        if v is None:
            skipped["not a number"] = skipped.get("not a number", 0) + 1
            continue
        out[k] = v
    return out


def _set_path(config: dict[str, Any], path: list[str], value: Any) -> None:
    d = config
    for p in path[:-1]:
        nxt = d.get(p)
        if not isinstance(nxt, dict):
            nxt = d[p] = {}
        d = nxt
    d[path[-1]] = value


def _config_items(buf: bytes, config: dict[str, Any]) -> None:
    for n, wt, v in fields(buf):
        if n == 1 and wt == 2:
            path, value, have = _item(v)  # type: ignore[arg-type]
            if path and have:
                if isinstance(value, dict) and set(value) == {"desc", "value"}:
                    value = value["value"]  # the Python writer's {"desc": null, "value": ...}
                _set_path(config, path, value)


def _run(buf: bytes, wf: WandbFile) -> None:
    for n, wt, v in fields(buf):
        if wt != 2:
            continue
        if n == 1:
            wf.run_id = _str(v)
        elif n == 2:
            wf.entity = _str(v)
        elif n == 3:
            wf.project = _str(v)
        elif n == 4:
            _config_items(v, wf.config)  # type: ignore[arg-type]
        elif n == 6:
            wf.group = _str(v)
        elif n == 7:
            wf.job_type = _str(v)
        elif n == 8:
            wf.name = _str(v)
        elif n == 17:
            secs = nanos = 0
            for tn, twt, tv in fields(v):  # type: ignore[arg-type]
                if tn == 1 and twt == 0:
                    secs = _signed(int(tv))  # type: ignore[arg-type]
                elif tn == 2 and twt == 0:
                    nanos = int(tv)  # type: ignore[arg-type]
            wf.start_time = secs + nanos / 1e9


def read_wandb(path: Path | str, *, history: bool = True, raw_rows: list[tuple[int | None, dict[str, Any]]]
               | None = None) -> WandbFile:
    """Read one ``.wandb`` file. ``history=False`` stops after the run record (enough to name the run).
    ``raw_rows``, when given, receives every history row as logged (``_`` keys and non-numeric values included),
    for comparing with other readers. Never raises for damage (see :attr:`WandbFile.problems`); raises
    ``OSError`` when the file cannot be opened."""
    p = Path(path)
    wf = WandbFile(p)
    state = {"read": 0, "records": 0}
    with open(p, "rb") as f:
        wf.size = f.seek(0, 2)
        f.seek(0)
        for rec in iter_records(f, wf.problems, state):
            try:
                for n, wt, v in fields(rec):
                    if wt != 2:
                        continue
                    if n == R_HISTORY and history:
                        step, row = history_row(v)  # type: ignore[arg-type]
                        wf.history_records += 1
                        if raw_rows is not None:
                            raw_rows.append((step, row))
                        if step is None:
                            wf.skipped["history row without a step"] = wf.skipped.get(
                                "history row without a step", 0) + 1
                            continue
                        wf.history.setdefault(step, {}).update(numeric_series(row, wf.skipped))
                    elif n == R_RUN:
                        _run(v, wf)  # type: ignore[arg-type]
                        if not history:
                            wf.records, wf.bytes_read = state["records"], state["read"]
                            return wf
                    elif n == R_CONFIG and history:
                        _config_items(v, wf.config)  # type: ignore[arg-type]
                    elif n == R_HEADER:
                        info = _sub(v, 1)  # type: ignore[arg-type]
                        prod = _sub(info, 1) if info else None
                        wf.producer = prod.decode("utf-8", "replace") if prod else ""
            except DecodeError as e:
                wf.problems.append(f"record {state['records']} (ending at byte {state['read']}) does not decode "
                                   f"({e}); skipped")
    wf.records, wf.bytes_read = state["records"], state["read"]
    return wf

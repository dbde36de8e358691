"""TFRecord framing, the container of TensorBoard event files: records and their masked CRC-32C checksums.

A record is ``uint64 length (little-endian) | uint32 masked crc32c(length bytes) | data | uint32 masked
crc32c(data)``. :func:`read_records` yields the records of a byte string and stops at the first damaged frame
header or a cut-off tail (a record whose data checksum is wrong is skipped and reported; the records before a
damaged spot are kept). :func:`frame` builds one record.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table() -> list[int]:
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _table()


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data`` (``crc32c(b"123456789") == 0xE3069283``)."""
    crc = 0xFFFFFFFF
    tab = _TABLE
    for b in data:
        crc = tab[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """The masked CRC-32C TFRecord stores: ``((crc >> 15) | (crc << 17)) + 0xa282ead8`` (mod 2**32)."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """One TFRecord: ``data`` with its length and both checksums."""
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc(head)) + data + struct.pack("<I", masked_crc(data))


@dataclass(frozen=True)
class FrameProblem:
    """A damaged spot: the byte offset of its record and what was wrong."""

    offset: int
    reason: str


def read_records(buf: bytes, problems: list[FrameProblem] | None = None) -> Iterator[bytes]:
    """The records of ``buf`` in order. A record with a wrong data checksum is skipped; a damaged length header
    or a cut-off record ends the reading (nothing after it can be framed reliably). Each problem is appended to
    ``problems`` when a list is given."""
    pos, n = 0, len(buf)
    while pos < n:
        if n - pos < 12:
            if problems is not None:
                problems.append(FrameProblem(pos, f"cut off: {n - pos} trailing bytes, no complete record header"))
            return
        head = buf[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", buf[pos + 8:pos + 12])
        if head_crc != masked_crc(head):
            if problems is not None:
                problems.append(FrameProblem(pos, "damaged record header (length checksum mismatch); the rest of "
                                                  "the file is not read"))
            return
        end = pos + 12 + length
        if end + 4 > n:
            if problems is not None:
                problems.append(FrameProblem(pos, f"cut off: record of {length} bytes, only {max(0, n - pos - 12)} "
                                                  "present (the writer stopped mid-record)"))
            return
        data = buf[pos + 12:end]
        (data_crc,) = struct.unpack("<I", buf[end:end + 4])
        if data_crc != masked_crc(data):
            if problems is not None:
                problems.append(FrameProblem(pos, "record data checksum mismatch; record skipped"))
        else:
            yield data
        pos = end + 4


def read_file_records(f: BinaryIO, size: int, problems: list[FrameProblem] | None = None) -> Iterator[bytes]:
    """:func:`read_records` over an open file of ``size`` bytes, one record in memory at a time."""
    pos = 0
    while pos < size:
        head = f.read(12)
        if len(head) < 12:
            if problems is not None:
                problems.append(FrameProblem(pos, f"cut off: {len(head)} trailing bytes, no complete record header"))
            return
        (length,) = struct.unpack("<Q", head[:8])
        if struct.unpack("<I", head[8:])[0] != masked_crc(head[:8]):
            if problems is not None:
                problems.append(FrameProblem(pos, "damaged record header (length checksum mismatch); the rest of "
                                                  "the file is not read"))
            return
        if pos + 12 + length + 4 > size:
            if problems is not None:
                problems.append(FrameProblem(pos, f"cut off: record of {length} bytes, only "
                                                  f"{max(0, size - pos - 12)} present (the writer stopped mid-record)"))
            return
        data = f.read(length)
        tail = f.read(4)
        if len(data) != length or len(tail) != 4:
            if problems is not None:
                problems.append(FrameProblem(pos, "cut off while reading (the file shrank)"))
            return
        if struct.unpack("<I", tail)[0] != masked_crc(data):
            if problems is not None:
                problems.append(FrameProblem(pos, "record data checksum mismatch; record skipped"))
        else:
            yield data
        pos += 16 + length

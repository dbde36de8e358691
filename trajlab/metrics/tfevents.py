"""TensorBoard event files: the scalars in them, read and written with a minimal protobuf codec (no TensorBoard,
no protobuf package).

Only the fields that carry scalars are decoded (field numbers from TensorBoard's ``event.proto``,
``summary.proto`` and ``tensor.proto``):

* ``Event``: ``wall_time`` (1, double), ``step`` (2, int64), ``file_version`` (3), ``summary`` (5),
  ``source_metadata`` (10, ``{writer: 1}``);
* ``Summary``: ``value`` (1, repeated) with ``tag`` (1), ``simple_value`` (2, float; what
  ``torch.utils.tensorboard.SummaryWriter.add_scalar`` writes by default), ``tensor`` (8) and ``metadata`` (9:
  ``plugin_data.plugin_name``, ``data_class``);
* ``TensorProto``: ``dtype`` (1), ``tensor_shape`` (2), ``tensor_content`` (4), ``float_val`` (5),
  ``double_val`` (6), ``int_val`` (7), ``int64_val`` (10), ``bool_val`` (11), ``half_val`` (13).

A tensor value is a scalar when it holds exactly one number and its tag's plugin is ``scalars`` (or it has no
plugin metadata, or ``data_class`` says scalar); writers send the metadata only with a tag's first value, so it is
remembered per tag. Histograms, images, text and graphs are skipped. Non-finite values are kept (NaN, inf).
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from trajlab.metrics.tfrecord import FrameProblem, frame, read_file_records, read_records

FILE_VERSION = "brain.Event:2"
#: the ``source_metadata.writer`` of the event files trajlab writes (how a rewrite knows the file is its own)
TRAJLAB_WRITER = "trajlab"

# TensorFlow DataType enum values that can hold a number
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64, _DT_BOOL, _DT_HALF, _DT_BFLOAT16 = 1, 2, 3, 9, 10, 19, 14
_DT_INT16, _DT_INT8, _DT_UINT8 = 5, 6, 4
_DATA_CLASS_SCALAR = 1


@dataclass(frozen=True)
class Scalar:
    """One scalar of an event file."""

    step: int
    tag: str
    value: float
    wall_time: float


class DecodeError(ValueError):
    """A protobuf message that does not decode."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise DecodeError("varint runs past the end")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes")


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of each field of one message: an int for varint and fixed fields
    (fixed64/fixed32 as their raw unsigned bits), bytes for length-delimited ones."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
            yield num, wt, v
        elif wt == 1:
            if pos + 8 > n:
                raise DecodeError("fixed64 runs past the end")
            yield num, wt, struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            if pos + ln > n:
                raise DecodeError("length-delimited field runs past the end")
            yield num, wt, buf[pos:pos + ln]
            pos += ln
        elif wt == 5:
            if pos + 4 > n:
                raise DecodeError("fixed32 runs past the end")
            yield num, wt, struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {wt}")


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _f32(bits: int) -> float:
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def _f64(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def _half(bits: int) -> float:
    return float(struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0])


def _bf16(bits: int) -> float:
    return _f32((bits & 0xFFFF) << 16)


def _packed_varints(b: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(b):
        v, pos = _varint(b, pos)
        out.append(v)
    return out


def _tensor_scalar(buf: bytes) -> float | None:
    """The one number a ``TensorProto`` holds, or None (not numeric, or not exactly one element)."""
    dtype = 0
    dims: list[int] = []
    content = b""
    vals: list[float] = []
    for num, wt, v in fields(buf):
        if num == 1 and wt == 0:
            dtype = int(v)  # type: ignore[arg-type]
        elif num == 2 and wt == 2:
            for dn, dwt, dv in fields(v):  # type: ignore[arg-type]
                if dn == 1 and dwt == 2:
                    size = next((int(x) for fn, fw, x in fields(dv) if fn == 1 and fw == 0), 0)  # type: ignore[arg-type]
                    dims.append(_signed64(size))
        elif num == 4 and wt == 2:
            content = v  # type: ignore[assignment]
        elif num == 5:  # float_val
            vals += ([_f32(v)] if wt == 5 else  # type: ignore[arg-type]
                     [float(x) for x in struct.unpack(f"<{len(v) // 4}f", v[: len(v) // 4 * 4])])  # type: ignore[arg-type,index]
        elif num == 6:  # double_val
            vals += ([_f64(v)] if wt == 1 else  # type: ignore[arg-type]
                     [float(x) for x in struct.unpack(f"<{len(v) // 8}d", v[: len(v) // 8 * 8])])  # type: ignore[arg-type,index]
        elif num in (7, 10, 11, 13):  # int_val, int64_val, bool_val, half_val (varints, packed or not)
            raw = [int(v)] if wt == 0 else _packed_varints(v)  # type: ignore[arg-type]
            if num == 13:
                vals += [_bf16(x) if dtype == _DT_BFLOAT16 else _half(x) for x in raw]
            else:
                vals += [float(_signed64(x)) for x in raw]
    if any(d != 1 for d in dims):
        return None
    if content:
        fmt = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q", _DT_BOOL: "<?",
               _DT_HALF: "<e", _DT_INT16: "<h", _DT_INT8: "<b", _DT_UINT8: "<B"}.get(dtype)
        if dtype == _DT_BFLOAT16 and len(content) == 2:
            return _bf16(struct.unpack("<H", content)[0])
        if fmt is None or len(content) != struct.calcsize(fmt):
            return None
        return float(struct.unpack(fmt, content)[0])
    return vals[0] if len(vals) == 1 else None


def _value(buf: bytes, plugins: dict[str, bool]) -> tuple[str, float] | None:
    """``(tag, number)`` of one ``Summary.Value`` when it is a scalar; ``plugins`` remembers per tag whether its
    metadata said scalar (True) or another plugin (False)."""
    tag = ""
    simple: float | None = None
    tensor: bytes | None = None
    meta: bool | None = None
    for num, wt, v in fields(buf):
        if num == 1 and wt == 2:
            tag = v.decode("utf-8", "replace")  # type: ignore[union-attr]
        elif num == 7 and wt == 2 and not tag:
            tag = v.decode("utf-8", "replace")  # type: ignore[union-attr]
        elif num == 2 and wt == 5:
            simple = _f32(v)  # type: ignore[arg-type]
        elif num == 8 and wt == 2:
            tensor = v  # type: ignore[assignment]
        elif num == 9 and wt == 2:
            plugin, data_class = "", 0
            for mn, mw, mv in fields(v):  # type: ignore[arg-type]
                if mn == 1 and mw == 2:
                    plugin = next((x.decode("utf-8", "replace") for pn, pw, x in fields(mv)  # type: ignore[union-attr,arg-type]
                                   if pn == 1 and pw == 2), "")
                elif mn == 4 and mw == 0:
                    data_class = int(mv)  # type: ignore[arg-type]
            if plugin or data_class:
                meta = plugin == "scalars" or data_class == _DATA_CLASS_SCALAR
    if meta is not None:
        plugins.setdefault(tag, meta)
    if simple is not None:
        return tag, simple
    if tensor is not None and plugins.get(tag, True):
        got = _tensor_scalar(tensor)
        if got is not None:
            return tag, got
    return None


def decode_event(buf: bytes, plugins: dict[str, bool]) -> tuple[int, float, list[tuple[str, float]], str | None]:
    """``(step, wall_time, [(tag, value)], source writer)`` of one serialized ``Event``."""
    step, wall, values, writer = 0, 0.0, [], None
    for num, wt, v in fields(buf):
        if num == 1 and wt == 1:
            wall = _f64(v)  # type: ignore[arg-type]
        elif num == 2 and wt == 0:
            step = _signed64(v)  # type: ignore[arg-type]
        elif num == 5 and wt == 2:
            for sn, sw, sv in fields(v):  # type: ignore[arg-type]
                if sn == 1 and sw == 2:
                    got = _value(sv, plugins)  # type: ignore[arg-type]
                    if got is not None:
                        values.append(got)
        elif num == 10 and wt == 2:
            writer = next((x.decode("utf-8", "replace") for n, w, x in fields(v) if n == 1 and w == 2), None)  # type: ignore[union-attr,arg-type]
    return step, wall, values, writer


def read_scalars(path: Path | str, problems: list[FrameProblem] | None = None) -> list[Scalar]:
    """Every scalar of one event file, in file order. A record that does not decode is skipped and reported in
    ``problems``; a damaged or cut-off tail costs only itself (:func:`trajlab.metrics.tfrecord.read_records`)."""
    plugins: dict[str, bool] = {}
    out: list[Scalar] = []
    offset_problems: list[FrameProblem] = []
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for rec in read_file_records(f, size, offset_problems):
            try:
                step, wall, values, _ = decode_event(rec, plugins)
            except (DecodeError, struct.error, UnicodeDecodeError) as e:
                offset_problems.append(FrameProblem(-1, f"event does not decode: {e}"))
                continue
            out.extend(Scalar(step, tag, value, wall) for tag, value in values)
    if problems is not None:
        problems.extend(offset_problems)
    return out


def file_writer(path: Path | str) -> str | None:
    """``source_metadata.writer`` of an event file's first record (``"trajlab"`` for the files trajlab writes),
    or None when the file has none or does not read."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
        rec = next(read_records(head), None)
        return decode_event(rec, {})[3] if rec is not None else None
    except (OSError, DecodeError, struct.error, UnicodeDecodeError):
        return None


# ---- writing ----------------------------------------------------------------------------------------------------

def _key(num: int, wt: int) -> bytes:
    return _enc_varint((num << 3) | wt)


def _enc_varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(num: int, payload: bytes) -> bytes:
    return _key(num, 2) + _enc_varint(len(payload)) + payload


def encode_event(step: int, wall_time: float, *, scalars: list[tuple[str, float]] | None = None,
                 file_version: str | None = None, writer: str | None = None) -> bytes:
    """One serialized ``Event``: a header (``file_version``, ``writer``) or scalars as ``simple_value``s."""
    body = _key(1, 1) + struct.pack("<d", wall_time)
    if step:
        body += _key(2, 0) + _enc_varint(step)
    if file_version is not None:
        body += _len_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _len_field(1, _len_field(1, tag.encode("utf-8")) + _key(2, 5) + struct.pack("<f", value))
            for tag, value in scalars)
        body += _len_field(5, values)
    if writer is not None:
        body += _len_field(10, _len_field(1, writer.encode()))
    return body


def event_file_bytes(rows: list[tuple[int, str, float]], wall_time: float) -> bytes:
    """A complete event file: trajlab's header, then one event per step holding that step's scalars
    (``rows``: ``(step, tag, value)``, written in step order, tags in the order given)."""
    by_step: dict[int, list[tuple[str, float]]] = {}
    for step, tag, value in rows:
        by_step.setdefault(int(step), []).append((tag, float(value)))
    parts = [frame(encode_event(0, wall_time, file_version=FILE_VERSION, writer=TRAJLAB_WRITER))]
    parts += [frame(encode_event(step, wall_time, scalars=by_step[step])) for step in sorted(by_step)]
    return b"".join(parts)


def finite(v: float) -> bool:
    """True for a finite number (the scalars trajlab writes are finite)."""
    return not (math.isnan(v) or math.isinf(v))

"""Record streaming: read the records of one :class:`~trajlab.ingest.plan.FileTask` (JSON lines, one JSON list or
Parquet) and convert each with its format's module. Bad content never raises: every unreadable line, record or
row group becomes an :class:`~trajlab.model.IngestError` and the good records around it are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from trajlab.ingest import verl_tool
from trajlab.ingest.detect import BOM, FORMATS, loads_line
from trajlab.ingest.fields import may_hold_surrogates, replace_lone_surrogates
from trajlab.ingest.plan import FileTask
from trajlab.ingest.salvage import salvage_json_list
from trajlab.model import IngestError, RawTrajectory


def _decode_line(raw: bytes, task: FileTask, lineno: int) -> tuple[str, IngestError | None]:
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return raw.decode("utf-8", "replace"), IngestError(
            task.rel, lineno, f"invalid UTF-8 at byte {e.start} of the line; bad bytes replaced with U+FFFD, record kept"
        )


def iter_records(task: FileTask) -> Iterator[RawTrajectory | IngestError]:
    """Stream the records of one task; never raises for bad content (errors are yielded instead): an
    unexpected failure on one record costs that record only, one on the file (unreadable) the file only."""
    mod = FORMATS[task.fmt]
    try:
        if task.fmt == verl_tool.FORMAT or task.container == "list":
            yield from _iter_json_list(task, mod)
        elif task.container == "pt":
            yield from _iter_torch(task, mod)
        elif task.container == "parquet" or Path(task.path).suffix.lower() == ".parquet":
            yield from _iter_parquet(task, mod)
        else:
            yield from _iter_lines(task, mod)
    except OSError as e:
        yield IngestError(task.rel, None, f"cannot read file: {e.strerror or e}")


def _iter_lines(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    path = Path(task.path)
    with open(path, "rb") as f:
        f.seek(task.start)
        data = f.read(task.end - task.start)
    at_eof = task.end >= path.stat().st_size
    if task.start == 0 and data.startswith(BOM):
        data = data[len(BOM):]
    lines = data.split(b"\n")
    del data
    if lines and lines[-1] == b"":
        lines.pop()
        last_unterminated = False
    else:
        last_unterminated = at_eof and bool(lines)
    for i, raw in enumerate(lines):
        lineno = task.first_line + i
        lines[i] = b""  # the record's bytes are not needed once it is parsed
        try:
            yield from _line_records(task, mod, raw, lineno, last_unterminated and i == len(lines) - 1)
        except Exception as e:  # never lose the rest of the range to one record
            yield IngestError(task.rel, lineno, f"record could not be read: {type(e).__name__}: {e}")


def _line_records(task: FileTask, mod: Any, raw: bytes, lineno: int,
                  unterminated: bool) -> Iterator[RawTrajectory | IngestError]:
    if not raw.strip():
        yield IngestError(task.rel, lineno, "blank line")
        return
    text, err = _decode_line(raw, task, lineno)
    if err:
        yield err
    obj, why = loads_line(text)
    if why is not None:
        if unterminated and why.startswith("invalid JSON"):
            yield IngestError(
                task.rel, lineno,
                f"truncated last line ({len(raw)} bytes, no newline at end of file; the writer probably "
                f"crashed mid-write): {why.removeprefix('invalid JSON: ')}",
            )
        else:
            yield IngestError(task.rel, lineno, why)
        return
    if not isinstance(obj, dict):
        yield IngestError(task.rel, lineno, f"not a JSON object (got {type(obj).__name__})")
        return
    if may_hold_surrogates(raw):
        obj, changed = replace_lone_surrogates(obj)
        if changed:
            yield IngestError(task.rel, lineno, "lone UTF-16 surrogate escape(s) replaced with U+FFFD; record kept")
    yield from _convert(mod, obj, task, lineno)


def _convert(mod: Any, obj: dict[str, Any], task: FileTask, lineno: int) -> Iterator[RawTrajectory | IngestError]:
    if not getattr(mod, "accepts", mod.looks_like)(obj):
        yield IngestError(task.rel, lineno, f"record does not look like {task.fmt} (keys: {', '.join(list(obj)[:8])}); skipped")
        return
    try:
        if hasattr(mod, "to_trajectories"):  # several samples per record (NeMo-RL), decoded from token ids
            recs, notes = mod.to_trajectories(obj, source_path=task.rel, line=lineno, file_step=task.step,
                                              file_split=task.split, tokenizer=task.tokenizer)
        else:
            rec, notes = mod.to_trajectory(obj, source_path=task.rel, line=lineno, file_step=task.step,
                                           file_split=task.split)
            recs = [rec] if rec is not None else []
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError, RecursionError) as e:
        yield IngestError(task.rel, lineno, f"record could not be converted: {type(e).__name__}: {e}")
        return
    yield from notes
    for rec in recs:
        rec.run = task.run
        yield rec


def _iter_json_list(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    try:
        with open(task.path, "rb") as f:
            raw = f.read()
    except OSError as e:
        yield IngestError(task.rel, None, f"cannot read file: {e.strerror}")
        return
    raw = raw.removeprefix(BOM)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        yield IngestError(task.rel, None, f"invalid UTF-8 at byte {e.start}; bad bytes replaced with U+FFFD")
        text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        yield from _convert_salvaged(task, mod, salvage_json_list(task.rel, text, e.msg, e.lineno, e.colno))
        return
    except (ValueError, RecursionError) as e:  # one record nested too deeply, or a huge integer literal
        yield from _convert_salvaged(
                task, mod, salvage_json_list(task.rel, text, f"{type(e).__name__}: {str(e)[:120]}", None, None))
        return
    if not isinstance(data, list):
        yield IngestError(task.rel, None, f"expected a JSON list of records, got {type(data).__name__}")
        return
    if may_hold_surrogates(raw):
        data, changed = replace_lone_surrogates(data)
        if changed:
            yield IngestError(task.rel, None, "lone UTF-16 surrogate escape(s) replaced with U+FFFD; records kept")
    for i, obj in enumerate(data, start=1):
        if not isinstance(obj, dict):
            yield IngestError(task.rel, i, f"record {i} is not a JSON object")
            continue
        try:
            yield from _convert(mod, obj, task, i)
        except Exception as e:  # never lose the rest of the list to one record
            yield IngestError(task.rel, i, f"record could not be read: {type(e).__name__}: {e}")


def _convert_salvaged(task: FileTask, mod: Any, items: Iterable[tuple[int, dict[str, Any]] | IngestError]
                      ) -> Iterator[RawTrajectory | IngestError]:
    """Convert the records :func:`~trajlab.ingest.salvage.salvage_json_list` kept; pass its errors on."""
    for item in items:
        if isinstance(item, IngestError):
            yield item
        else:
            yield from _convert(mod, item[1], task, item[0])


def _iter_parquet(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    """Records of a Parquet file, row group by row group: a damaged row group (bad page, bad compression)
    becomes one error naming its rows, and the other row groups are still read."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(task.path)
    except Exception as e:  # corrupt footer etc.
        yield IngestError(task.rel, None, f"cannot read Parquet file: {e}")
        return
    idx = 0
    for rg in range(pf.num_row_groups):
        n = pf.metadata.row_group(rg).num_rows
        try:
            rows = pf.read_row_group(rg).to_pylist()
        except Exception as e:  # ArrowInvalid / OSError / ... for a damaged page
            yield IngestError(task.rel, idx + 1, f"Parquet row group {rg} (rows {idx + 1}-{idx + n}) cannot be read "
                                                 f"({type(e).__name__}: {str(e)[:200]}); its {n} records skipped")
            idx += n
            continue
        for obj in rows:
            idx += 1
            try:
                yield from _convert(mod, obj, task, idx)
            except Exception as e:
                yield IngestError(task.rel, idx, f"record could not be read: {type(e).__name__}: {e}")


def _iter_torch(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    """Records of a ``torch.save`` dump (slime): loaded safely by the format module, then one record per sample."""
    samples, rollout_id, why = mod.load_samples(Path(task.path))
    if samples is None:
        yield IngestError(task.rel, None, why)
        return
    if rollout_id is not None and task.step is not None and rollout_id != task.step:
        yield IngestError(task.rel, None, f"the file's rollout_id {rollout_id} differs from its name's; "
                                          f"the name's step {task.step} is used")
    if task.step is None and rollout_id is not None:
        task = replace(task, step=rollout_id)
    for i, obj in enumerate(samples, start=1):
        if not isinstance(obj, dict):
            yield IngestError(task.rel, i, f"sample {i} is not a dict (got {type(obj).__name__}); skipped")
            continue
        try:
            yield from _convert(mod, obj, task, i)
        except Exception as e:  # never lose the rest of the file to one sample
            yield IngestError(task.rel, i, f"record could not be read: {type(e).__name__}: {e}")

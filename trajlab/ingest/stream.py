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

from trajlab.ingest.detect import BOM, FORMATS, format_of, loads_line
from trajlab.ingest.plan import FileTask
from trajlab.ingest.salvage import salvage_json_list
from trajlab.ingest.sanitize import clean_record, decode, may_hold_surrogates
from trajlab.model import IngestError, RawTrajectory


def iter_records(task: FileTask) -> Iterator[RawTrajectory | IngestError]:
    """Stream the records of one task; never raises for bad content (errors are yielded instead): an
    unexpected failure on one record costs that record only, one on the file (unreadable) the file only."""
    mod = FORMATS[task.fmt]
    try:
        if task.container == "list":
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
    text, note = decode(raw)
    if note:
        yield IngestError(task.rel, lineno, note)
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
    yield from _convert(mod, obj, task, lineno, suspect=may_hold_surrogates(raw))


def record_module(file_mod: Any, obj: dict[str, Any]) -> Any:
    """The format module that reads ``obj``: the record's own shape decides (a file may mix formats), the
    file's format first when the record has its shape; a record of no known shape goes to the file's format
    when that format's looser per-record check takes it (it then says which field is missing), else None."""
    if file_mod.looks_like(obj):
        return file_mod
    own = format_of(obj)
    if own is not None:
        return FORMATS[own]
    return file_mod if getattr(file_mod, "accepts", file_mod.looks_like)(obj) else None


def _convert(file_mod: Any, obj: dict[str, Any], task: FileTask, lineno: int, *,
             suspect: bool) -> Iterator[RawTrajectory | IngestError]:
    """One parsed record through the sanitiser (``suspect``: its JSON text may hold a lone surrogate escape)
    and the converter of its own format."""
    if suspect:
        obj, note = clean_record(obj)
        if note:
            yield IngestError(task.rel, lineno, note)
    mod = record_module(file_mod, obj)
    if mod is None:
        yield IngestError(task.rel, lineno, f"record of no known format (keys: {', '.join(list(obj)[:8])}); "
                                            f"expected {task.fmt} or another format trajlab reads; skipped")
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
    text, note = decode(raw, "the file")
    if note:
        yield IngestError(task.rel, None, note.replace("record kept", "records kept"))
    suspect = may_hold_surrogates(raw)
    del raw
    items: Iterable[tuple[int, Any] | IngestError]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        items = salvage_json_list(task.rel, text, e.msg, e.lineno, e.colno, is_record=_is_record)
    except (ValueError, RecursionError) as e:  # one record nested too deeply, or a huge integer literal
        items = salvage_json_list(task.rel, text, f"{type(e).__name__}: {str(e)[:120]}", None, None,
                                  is_record=_is_record)
    else:
        if not isinstance(data, list):
            yield IngestError(task.rel, None, f"expected a JSON list of records, got {type(data).__name__}")
            return
        items = enumerate(data, start=1)
    for item in items:
        if isinstance(item, IngestError):
            yield item
            continue
        i, obj = item
        if not isinstance(obj, dict):
            yield IngestError(task.rel, i, f"record {i} is not a JSON object (got {type(obj).__name__})")
            continue
        try:
            yield from _convert(mod, obj, task, i, suspect=suspect)
        except Exception as e:  # never lose the rest of the list to one record
            yield IngestError(task.rel, i, f"record could not be read: {type(e).__name__}: {e}")


def _is_record(obj: Any) -> bool:
    """A top-level record of a known format (what a salvaged list resynchronises on)."""
    return format_of(obj) is not None


def row_group_rows(pf: Any, rg: int) -> int:
    """How many rows row group ``rg`` of the open ``pyarrow.parquet.ParquetFile`` ``pf`` really holds, as its
    footer tells it with itself as the check: the count that most of its votes agree on -- the row group's own
    ``num_rows`` and the value count of each column chunk that has one value per row (no repeated level) --
    the larger on a tie, never negative. pyarrow reads as many rows as ``num_rows`` says (a damaged count
    drops rows without a word, or fails), so the reader compares what it got with this count."""
    g = pf.metadata.row_group(rg)
    votes: dict[int, int] = {}
    counts = [g.num_rows] + [g.column(c).num_values for c in range(g.num_columns)
                             if pf.schema.column(c).max_repetition_level == 0]
    for v in counts:
        if v >= 0:
            votes[v] = votes.get(v, 0) + 1
    return max(votes, key=lambda v: (votes[v], v)) if votes else 0


def _rows_text(first: int, n: int) -> str:
    if n <= 0:
        return "no rows by its footer"
    return f"row {first}" if n == 1 else f"rows {first}-{first + n - 1}"


def _iter_parquet(task: FileTask, mod: Any) -> Iterator[RawTrajectory | IngestError]:
    """Records of a Parquet file, row group by row group: a damaged row group (bad page, bad compression, a
    row count the footer got wrong) becomes one error naming its rows, and the other row groups are still read.
    Rows are numbered by what each row group really holds (:func:`row_group_rows`), never by a count pyarrow
    trusted; rows the footer's total promises beyond them get an error too."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(task.path)
    except Exception as e:  # corrupt footer etc.
        yield IngestError(task.rel, None, f"cannot read Parquet file: {e}")
        return
    idx = 0
    for rg in range(pf.num_row_groups):
        n = row_group_rows(pf, rg)
        said = pf.metadata.row_group(rg).num_rows
        try:
            rows = pf.read_row_group(rg).to_pylist()
        except Exception as e:  # ArrowInvalid / OSError / ... for a damaged page or row count
            yield IngestError(task.rel, idx + 1, f"Parquet row group {rg} ({_rows_text(idx + 1, n)}) cannot be "
                                                 f"read ({type(e).__name__}: {str(e)[:200]}); its {n} records "
                                                 "skipped")
            idx += n
            continue
        first = idx + 1
        for obj in rows:
            idx += 1
            try:
                yield from _convert(mod, obj, task, idx, suspect=False)  # Arrow strings are valid UTF-8
            except Exception as e:
                yield IngestError(task.rel, idx, f"record could not be read: {type(e).__name__}: {e}")
        if len(rows) < n:  # the footer's row count is damaged: pyarrow stopped short of the rows there
            lost = n - len(rows)
            yield IngestError(task.rel, idx + 1, f"Parquet row group {rg} ({_rows_text(first, n)}): its footer "
                                                 f"counts {said} rows, its columns hold {n}; "
                                                 f"{_rows_text(idx + 1, lost)} cannot be read, {lost} record(s) "
                                                 "skipped")
            idx += lost
    total = pf.metadata.num_rows
    if total > idx:
        yield IngestError(task.rel, idx + 1, f"Parquet footer counts {total} rows but its row groups hold {idx}: "
                                             f"{_rows_text(idx + 1, total - idx)} cannot be read")


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
            yield from _convert(mod, obj, task, i, suspect=True)  # unpickled strs may hold lone surrogates
        except Exception as e:  # never lose the rest of the file to one sample
            yield IngestError(task.rel, i, f"record could not be read: {type(e).__name__}: {e}")

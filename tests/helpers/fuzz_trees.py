"""Whole-file fuzzing of ``trajlab scan``: mutated dump trees over every reader, and the oracle that judges a scan.

:func:`build_base` writes the base corpus (real files of each reader: verl JSONL 0.7 and 0.9, a verl dump as
Parquet, verl-tool JSON lists pretty-printed and on one line, OpenAI messages JSONL and Parquet, a NeMo-RL step)
with the byte span of every record. :func:`make_tree` copies a seeded choice of them into a tree and damages some
(truncation, byte flips, invalid UTF-8, lone surrogate escapes, NUL bytes, a big record, deep nesting, wrong types,
duplicate keys, a record of another format) and adds links, FIFOs and a damaged compressed file. :func:`check_tree`
scans it twice through the CLI entry point (``--engine records``, then ``--engine columnar --strict``) and returns
what the oracle found wrong:

* no exception escapes (the CLI would print a traceback); exit 0, and under ``--strict`` 2 exactly when
  ``ingest_errors`` has rows (docs/reference/exit-codes.md);
* every record of an undamaged file gives the clean scan's row; every record a mutation did not touch is kept;
* every line of a damaged JSON-lines file, every row of a damaged Parquet file is a row or an error row naming it
  (or the file as a whole is an error); a damaged JSON list accounts for its records (rows, an error per damaged
  record, the count an error says was not read);
* no (file, line, sample) twice; both scans write identical table bytes (and so both engines agree).

``tests/test_scan_fuzz.py`` runs a seeded slice; ``benchmarks/fuzz_scan.py`` the long run.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import random
import re
import shutil
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_data"


@dataclass
class BaseFile:
    """One file of the base corpus: its bytes, the byte span of each record (JSON lines and lists), and how
    records sit in it."""

    rel: str
    data: bytes
    kind: str  # lines | list | parquet
    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each record's bytes
    records: list[dict[str, Any]] = field(default_factory=list)
    text_key: str = "output"  # the field holding the long text (for big / wrong-typed records)


def _lines_file(rel: str, data: bytes, text_key: str = "output", keep: int = 4) -> BaseFile:
    data = b"".join(data.splitlines(keepends=True)[:keep])  # a few records: the trees stay cheap to scan
    spans, recs, pos = [], [], 0
    for line in data.split(b"\n"):
        if line.strip():
            spans.append((pos, pos + len(line)))
            recs.append(json.loads(line))
        pos += len(line) + 1
    return BaseFile(rel, data, "lines", spans, recs, text_key)


def _list_file(rel: str, recs: list[dict[str, Any]], pretty: bool, text_key: str) -> BaseFile:
    parts = []
    for r in recs:
        s = json.dumps(r, indent=4) if pretty else json.dumps(r)
        parts.append(("\n".join("    " + x for x in s.split("\n")) if pretty else s).encode())
    sep, head, tail = (b",\n", b"[\n", b"\n]") if pretty else (b", ", b"[", b"]")
    spans, pos = [], len(head)
    for p in parts:
        spans.append((pos, pos + len(p)))
        pos += len(p) + len(sep)
    data = head + sep.join(parts) + tail
    assert json.loads(data) == recs
    return BaseFile(rel, data, "list", spans, recs, text_key)


def _parquet_file(rel: str, recs: list[dict[str, Any]], text_key: str) -> BaseFile:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(recs), buf, row_group_size=2, compression="zstd")
    return BaseFile(rel, buf.getvalue(), "parquet", [], recs, text_key)


def build_base(nemo: bool = True) -> list[BaseFile]:
    """The base corpus: real files of every reader (``nemo``: with the NeMo-RL step, which loads a tokenizer)."""
    v07 = (SAMPLES / "qwen35_xml_run_v07/rollout/3.jsonl").read_bytes()
    v09 = (SAMPLES / "qwen35_xml_run/rollout/5.jsonl").read_bytes()
    val = (SAMPLES / "qwen35_xml_run/validation/10.jsonl").read_bytes()
    pq_recs = [json.loads(x) for x in (SAMPLES / "qwen35_xml_run/rollout/6.jsonl").read_text().splitlines()[:4]]
    tool_dir = SAMPLES / "verl_tool_run/verl_step_records/run1"
    tool1 = json.loads((tool_dir / "fcl-step-1.json").read_text())[:3]
    tool2 = json.loads((tool_dir / "fcl-step-2.json").read_text())[:3]
    oai = (SAMPLES / "openai_messages/agent_log.jsonl").read_bytes()
    base = [
        _lines_file("v07/rollout/3.jsonl", v07),
        _lines_file("v09/rollout/5.jsonl", v09),
        _lines_file("v09/validation/10.jsonl", val),
        _parquet_file("vpq/rollout/6.parquet", pq_recs, "output"),
        _list_file("vtool/verl_step_records/run1/fcl-step-1.json", tool1, True, "response"),
        _list_file("vtool/verl_step_records/run1/fcl-step-2.json", tool2, False, "response"),
        _lines_file("oai/agent_log.jsonl", oai, "messages"),
        _parquet_file("oaipq/agent_log.parquet", [json.loads(x) for x in oai.splitlines()[5:9]], "messages"),
    ]
    if nemo:
        base.append(_lines_file("nemo/train_data_step1.jsonl",
                                (REPO / "tests/data/nemo_rl/train_data_step1.jsonl").read_bytes(), "token_ids"))
    return base


# -- mutations ---------------------------------------------------------------------------------------------------


@dataclass
class Damage:
    """What the mutations of one file did, in terms of the base file's records."""

    data: bytes
    touched: set[int] = field(default_factory=set)  # records a mutation may have damaged (0-based)
    gone: set[int] = field(default_factory=set)  # records cut away whole (truncation)
    inserted: int = 0  # whole records (lines, list elements) added
    cut_after_shift: bool = False  # truncated after bytes moved: how many records were cut away is unknown
    names: list[str] = field(default_factory=list)


def _near(b: BaseFile, p: int) -> set[int]:
    """The records an edit at byte ``p`` may damage: the one holding it and, at a separator, both neighbours."""
    out = set()
    for i in range(len(b.spans)):
        lo = b.spans[i - 1][1] if i else 0
        hi = b.spans[i + 1][0] if i + 1 < len(b.spans) else len(b.data) + 1
        if lo <= p < hi:
            out.add(i)
    return out


def _in_string(rng: random.Random, data: bytes) -> int:
    """A byte position just inside a JSON string value (after ``": "``), or a random one."""
    hits = [m.end() for m in re.finditer(rb'": "', data)]
    return rng.choice(hits) if hits else rng.randrange(len(data))


def _record_bytes(b: BaseFile, obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _insert_record(rng: random.Random, b: BaseFile, d: Damage, rec: bytes, name: str) -> None:
    """Insert one whole record (a line, a list element) at a record boundary of the current bytes."""
    if b.kind == "lines":
        at = rng.choice([0] + [m.end() for m in re.finditer(rb"\n", d.data)])
        ins = rec + b"\n"
    else:  # at a record boundary of the base file while its bytes are unchanged, else first in the list
        ends = [e for _, e in b.spans] if d.data == b.data else []
        if ends and rng.random() < 0.7:
            at, ins = rng.choice(ends), b", " + rec
        else:
            at, ins = d.data.find(b"[") + 1, rec + b", "
    d.data = d.data[:at] + ins + d.data[at:]
    d.inserted += 1
    d.names.append(name)


def _replace_record(b: BaseFile, d: Damage, i: int, new: bytes, name: str) -> bool:
    """Replace record ``i``'s bytes (only while the file is still the base file's bytes)."""
    if d.data != b.data:
        return False
    s, e = b.spans[i]
    d.data = d.data[:s] + new + d.data[e:]
    d.touched.add(i)
    d.names.append(name)
    return True


def _big_text(obj: dict[str, Any], key: str, size: int) -> dict[str, Any]:
    o = json.loads(json.dumps(obj))
    call = "<tool_call>\n<function=search_web>\n<parameter=q>\nx\n</parameter>\n</function>\n</tool_call>\n"
    text = "Searching the archive again before answering. " * 1000  # ~47 KB of prose between calls
    filler = ((text + call) * (size // (len(text) + len(call)) + 1))[:size]
    if key == "messages" and isinstance(o.get("messages"), list) and o["messages"]:
        o["messages"][-1] = {"role": "assistant", "content": filler}
    elif key in o and isinstance(o[key], str):
        o[key] = o[key] + filler
    else:
        o[key] = filler
    return o


WRONG_TYPES: list[Any] = [123, 1.5, [1, 2], {"a": 1}, None, True, "not a list", ""]


def mutate(rng: random.Random, b: BaseFile, others: list[BaseFile], big: int) -> Damage:
    """One or two seeded mutations of base file ``b`` (``others``: where a foreign record comes from;
    ``big``: the size of a big record in characters)."""
    d = Damage(b.data)
    kinds = ["truncate", "flip", "utf8", "surrogate", "nul", "big", "deep", "wrong_type", "dup_keys", "foreign"]
    if b.kind == "parquet":
        kinds = ["truncate", "flip", "flip", "zero_block"]
    for _ in range(rng.choice((1, 1, 1, 2))):
        k = rng.choice(kinds)
        n = len(d.data)
        # once bytes moved, positions no longer map onto the base file's records: count every record touched
        near = (lambda p: _near(b, p)) if len(d.data) == len(b.data) else (lambda p: set(range(len(b.spans))))
        if k == "truncate":
            p = rng.randrange(1, n)
            shifted = len(d.data) != len(b.data)
            d.data = d.data[:p]
            d.names.append(f"truncate@{p}")
            d.cut_after_shift = d.cut_after_shift or shifted  # then which records were cut away is unknown
            for i, (s, e) in enumerate(b.spans):
                if shifted or s < p <= e + 1:
                    d.touched.add(i)
                elif s >= p:
                    d.gone.add(i)
        elif k in ("flip", "zero_block"):
            arr = bytearray(d.data)
            for _ in range(rng.randint(1, 3) if k == "flip" else 1):
                p = rng.randrange(n)
                width = 1 if k == "flip" else min(64, n - p)
                for q in range(p, p + width):
                    arr[q] = rng.randrange(256) if k == "flip" else 0
                d.touched |= near(p) | near(p + width - 1)
                d.names.append(f"{k}@{p}")
            d.data = bytes(arr)
        elif k in ("utf8", "surrogate", "nul"):
            p = _in_string(rng, d.data) if rng.random() < 0.8 else rng.randrange(n)
            d.touched |= near(p)
            ins = {"utf8": rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]),
                   "surrogate": rng.choice([b"\\ud800", b"\\udfff", b"\\ud83d", b"\\uDC00x"]),
                   "nul": rng.choice([b"\x00", b"\\u0000", b"\x00\x00"])}[k]
            d.data = d.data[:p] + ins + d.data[p:]
            d.names.append(f"{k}@{p}")
        elif k == "big":
            obj = rng.choice(b.records)
            _insert_record(rng, b, d, _record_bytes(b, _big_text(obj, b.text_key, big)), f"big{big}")
        elif k == "deep":
            depth = rng.choice((1100, 10_000))
            deep = (b'{"output": "x", "input": "y", "score": 1, "nest": ' + b"[" * depth + b"]" * depth + b"}"
                    if rng.random() < 0.5 else b"[" * depth + b"]" * depth)
            _insert_record(rng, b, d, deep, f"deep{depth}")
        elif k == "wrong_type":
            i = rng.randrange(len(b.records))
            o = json.loads(json.dumps(b.records[i]))
            key = rng.choice([b.text_key, *list(o)[:6]])
            o[key] = rng.choice(WRONG_TYPES)
            _replace_record(b, d, i, _record_bytes(b, o), f"wrong_type:{key}@{i}")
        elif k == "dup_keys":
            i = rng.randrange(len(b.records))
            o = b.records[i]
            key = rng.choice(list(o))
            body = json.dumps(o)
            _replace_record(b, d, i, (body[:1] + json.dumps(key) + ": " + json.dumps(rng.choice(WRONG_TYPES))
                                      + ", " + body[1:]).encode(), f"dup_keys:{key}@{i}")
        elif k == "foreign":
            src = rng.choice([o for o in others if o.records and o.rel != b.rel] or [b])
            _insert_record(rng, b, d, _record_bytes(b, rng.choice(src.records)), f"foreign:{src.rel}")
    return d


# -- trees --------------------------------------------------------------------------------------------------------


@dataclass
class Tree:
    """A fuzzed tree on disk: which base files it holds, which were damaged (and how), the odd entries added."""

    root: Path
    files: dict[str, BaseFile]
    damage: dict[str, Damage]
    specials: list[str]

    def describe(self) -> str:
        return "; ".join([f"{r}: {'+'.join(d.names) or 'rewritten'}" for r, d in self.damage.items()]
                         + [f"special {s}" for s in self.specials]) or "clean"


def make_tree(rng: random.Random, base: list[BaseFile], root: Path, big: int = 300_000) -> Tree:
    """A seeded tree under ``root``: 1-3 base files, some damaged, maybe a link, a FIFO or a compressed file."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    chosen = rng.sample(base, rng.randint(1, min(3, len(base))))
    t = Tree(root, {b.rel: b for b in chosen}, {}, [])
    for b in chosen:
        data = b.data
        if rng.random() < 0.6:
            d = mutate(rng, b, base, big)
            if d.data != b.data:
                t.damage[b.rel] = d
                data = d.data
        p = root / b.rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    if rng.random() < 0.3:
        d0 = root / chosen[0].rel
        kind = rng.choice(["dangling", "loop", "device", "fifo", "gz", "dirlink"])
        name = d0.parent / f"zz-{kind}{d0.suffix}"
        if kind == "dangling":
            os.symlink("no-such-file.jsonl", name)  # relative: trees move
        elif kind == "loop":
            os.symlink(name.name, name)
        elif kind == "device":
            os.symlink("/dev/null", name)
        elif kind == "fifo":
            os.mkfifo(name)
        elif kind == "gz":
            gz = bytearray(gzip.compress(chosen[0].data, mtime=0))
            gz[len(gz) // 2] ^= 0xFF
            name = d0.parent / f"zz-gz{d0.suffix}.gz"
            name.write_bytes(bytes(gz))
        else:  # a link to a directory that loops back up
            os.symlink(".", d0.parent / "zz-dirlink")
            name = d0.parent / "zz-dirlink"
        t.specials.append(name.relative_to(root).as_posix())
    return t


# -- running and judging ---------------------------------------------------------------------------------------------


@dataclass
class ScanRun:
    rc: int
    stderr: str
    crash: str | None  # the traceback of an exception that escaped the CLI
    tables: dict[str, bytes]


def run_scan(tree: Path, out: Path, *extra: str) -> ScanRun:
    """``trajlab scan TREE -o OUT --no-progress -j 1 EXTRA...`` through the CLI entry point, in this process."""
    from trajlab.cli import main

    shutil.rmtree(out, ignore_errors=True)
    err = io.StringIO()
    crash = None
    rc = -1
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            rc = main(["scan", str(tree), "-o", str(out), "--no-progress", "-j", "1", *extra])
        except BaseException:  # noqa: BLE001 -- whatever escapes is the finding
            crash = traceback.format_exc()
    tables = {p.name: p.read_bytes() for p in sorted(out.glob("*.parquet"))} if out.is_dir() else {}
    return ScanRun(rc, err.getvalue(), crash, tables)


def _rows(tables: dict[str, bytes], name: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    if name + ".parquet" not in tables:
        return []
    return pq.read_table(io.BytesIO(tables[name + ".parquet"])).to_pylist()


_CONTENT_SKIP = ("run", "trajectory_id")


def content(row: dict[str, Any]) -> tuple[Any, ...]:
    """A trajectory row without what depends on where its file sits (its run, and its id, which hashes the
    file's path)."""
    return tuple((k, json.dumps(v, sort_keys=True, default=str)) for k, v in sorted(row.items())
                 if k not in _CONTENT_SKIP)


def clean_reference(base: list[BaseFile], work: Path) -> dict[str, list[dict[str, Any]]]:
    """Trajectory rows of the clean scan of the whole base corpus, by file."""
    tree = work / "clean-tree"
    shutil.rmtree(tree, ignore_errors=True)
    for b in base:
        (tree / b.rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / b.rel).write_bytes(b.data)
    r = run_scan(tree, work / "clean-out", "--engine", "records")
    assert r.crash is None and r.rc == 0, r.crash or r.stderr
    by_file: dict[str, list[dict[str, Any]]] = {}
    for row in _rows(r.tables, "trajectories"):
        by_file.setdefault(row["source_path"], []).append(row)
    return by_file


_RANGE = re.compile(r"\brows? (\d+)(?:-(\d+))?")
_NOT_READ = re.compile(r"about (\d+) record\(s\)")


def check_batch(trees: list[Tree], ref: dict[str, list[dict[str, Any]]], work: Path, batch: Path) -> list[list[str]]:
    """Scan ``batch`` (the directory holding ``trees``, one per subdirectory) twice and return what the oracle
    found wrong in each tree (empty lists: nothing). Scanning trees together amortises a scan's fixed cost; an
    exception or a wrong exit code is charged to every tree of the batch (the caller re-runs them alone)."""
    a = run_scan(batch, work / "out-a", "--engine", "records")
    b = run_scan(batch, work / "out-b", "--engine", "columnar", "--strict")
    common: list[str] = []
    for name, r in (("scan", a), ("scan --engine columnar --strict", b)):
        if r.crash:
            common.append(f"{name}: exception escaped the CLI: {r.crash.strip().splitlines()[-1]}")
        if "Traceback" in r.stderr:
            common.append(f"{name}: traceback on stderr")
    if common:
        return [common for _ in trees]
    errors = _rows(a.tables, "ingest_errors")
    if a.rc != 0:
        common.append(f"scan exited {a.rc} (expected 0): {a.stderr.strip()[-300:]}")
    if b.rc != (2 if errors else 0):
        common.append(f"scan --strict exited {b.rc} with {len(errors)} ingest_errors rows")
    if a.tables != b.tables:
        diff = sorted(k for k in set(a.tables) | set(b.tables) if a.tables.get(k) != b.tables.get(k))
        common.append(f"two scans (records, columnar engines) differ in {', '.join(diff)}")
    rows = _rows(a.tables, "trajectories")
    ids = [r["trajectory_id"] for r in rows]
    if len(set(ids)) != len(ids):
        common.append("a trajectory_id (file, line, sample) appears twice in trajectories")
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_file.setdefault(r["source_path"], []).append(r)
    errs_by: dict[str, list[dict[str, Any]]] = {}
    for e in errors:
        errs_by.setdefault(e["source_path"], []).append(e)
    out = []
    for t in trees:
        prefix = t.root.relative_to(batch).as_posix() + "/"
        bad = list(common)
        for rel, base in t.files.items():
            got = [dict(r, source_path=rel) for r in by_file.get(prefix + rel, [])]
            errs = errs_by.get(prefix + rel, [])
            clean = ref.get(rel, [])
            d = t.damage.get(rel)
            if d is None:
                if sorted(map(content, got)) != sorted(map(content, clean)):
                    bad.append(f"{rel} (undamaged): {len(got)} rows, the clean scan has {len(clean)} or they differ")
                continue
            whole_file_error = any(e["line"] is None for e in errs) and not got
            bad += _check_damaged(rel, base, d, got, errs, clean, whole_file_error)
        for s in t.specials:
            if not s.endswith(".gz") and "dirlink" not in s and not any(
                    (prefix + s) in e["source_path"] for e in errors):
                bad.append(f"{s}: no ingest_errors row names it")
        out.append(bad)
    return out


def _check_damaged(rel: str, base: BaseFile, d: Damage, got: list[dict[str, Any]], errs: list[dict[str, Any]],
                   clean: list[dict[str, Any]], whole_file_error: bool) -> list[str]:
    bad = []
    if base.kind != "parquet" and not whole_file_error:
        kept = {content(r) for r in got}
        clean_by_line = {}
        for r in clean:
            clean_by_line.setdefault(r["source_line"], []).append(r)
        for i in range(len(base.spans)):
            if i in d.touched or i in d.gone:
                continue
            want = clean_by_line.get(i + 1, [])
            # the record may sit at another line / index now (a record inserted before it): compare its content
            if any(_moved(w) not in {_moved_key(k) for k in kept} for w in want):
                bad.append(f"{rel}: untouched record {i + 1} ({'+'.join(d.names)}) lost or changed")
                break
    lines_of_rows = {r["source_line"] for r in got}
    err_lines = {e["line"] for e in errs if e["line"] is not None}
    if whole_file_error:
        return bad
    if base.kind == "lines":
        n_lines = len(d.data.split(b"\n")) - (1 if d.data.endswith(b"\n") else 0)
        missing = [ln for ln in range(1, n_lines + 1) if ln not in lines_of_rows | err_lines]
        if missing:
            bad.append(f"{rel}: lines {missing[:5]} of {n_lines} neither a row nor an error ({'+'.join(d.names)})")
    elif base.kind == "list":
        unread = sum(int(m.group(1)) for e in errs for m in [_NOT_READ.search(e["reason"])] if m)
        accounted = len(lines_of_rows | err_lines) + max(0, unread - 1)
        expected = len(base.spans) - len(d.gone) + d.inserted
        floor = expected - len(d.touched) + (1 if d.touched else 0)
        if accounted < floor and not d.cut_after_shift:
            bad.append(f"{rel}: {accounted} of {expected} records accounted for ({'+'.join(d.names)})")
    else:
        covered = set(lines_of_rows) | err_lines
        for e in errs:
            for m in _RANGE.finditer(e["reason"]):
                covered |= set(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
        missing = [i for i in range(1, len(base.records) + 1) if i not in covered]
        if missing:
            bad.append(f"{rel}: Parquet rows {missing[:5]} neither a row nor an error ({'+'.join(d.names)})")
    return bad


_PLACE = ("source_line", "trajectory_id", "run")


def _moved(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row without its place in the file (a record inserted before it moves it)."""
    return tuple((k, json.dumps(v, sort_keys=True, default=str)) for k, v in sorted(row.items()) if k not in _PLACE)


def _moved_key(c: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(kv for kv in c if kv[0] not in _PLACE)


def fuzz(n_trees: int, seed: int, work: Path, *, nemo: bool = True, big: int = 300_000, per_batch: int = 16,
         log: Any = None, only: set[int] | None = None) -> tuple[int, list[tuple[int, str, list[str]]], dict[str, int]]:
    """Build and judge ``n_trees`` seeded trees under ``work``, ``per_batch`` trees a scan; returns (trees
    judged, failures as (tree index, what the tree holds, findings), counts of mutation kinds). The trees of a
    batch whose scan failed as a whole are judged again one by one, so each finding names its tree. ``only``:
    judge just these tree indices (the trees before them are still built, then dropped, so each is the same
    tree as in the full run; ``n_trees`` is then raised to reach the last of them)."""
    work.mkdir(parents=True, exist_ok=True)
    base = build_base(nemo=nemo)
    ref = clean_reference(base, work)
    rng = random.Random(seed)
    failures = []
    kinds: dict[str, int] = {}
    batch = work / "batch"
    if only is not None:
        n_trees = max(only) + 1
    judged = 0
    for first in range(0, n_trees, per_batch):
        shutil.rmtree(batch, ignore_errors=True)
        trees, numbers = [], []
        for k in range(first, min(n_trees, first + per_batch)):
            if only is None or k in only:
                trees.append(make_tree(rng, base, batch / f"t{k:05d}", big))
                numbers.append(k)
            else:  # built only to draw the same random numbers as the full run
                make_tree(rng, base, work / "skipped", big)
        shutil.rmtree(work / "skipped", ignore_errors=True)
        if not trees:
            continue
        judged += len(trees)
        for t in trees:
            for name in [n for d in t.damage.values() for n in d.names] + [
                    "special:" + s.rsplit("zz-", 1)[-1].split(".")[0] for s in t.specials]:
                key = name.split("@")[0].split(":")[0] if not name.startswith("special:") else name
                kinds[key] = kinds.get(key, 0) + 1
        found = check_batch(trees, ref, work, batch)
        if any(found) and len(trees) > 1 and all(f == found[0] for f in found):  # charged to the whole batch
            found = []
            shutil.rmtree(work / "alone", ignore_errors=True)
            for t in trees:
                alone = work / "alone" / t.root.name  # its own batch (renamed: FIFOs and links move as they are)
                alone.mkdir(parents=True)
                t.root = t.root.rename(alone / t.root.name)
                found.append(check_batch([t], ref, work, alone)[0])
        for k, t, f in zip(numbers, trees, found, strict=True):
            if f:
                failures.append((k, t.describe(), f))
                keep = work / f"failed-{k}"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(t.root, keep, symlinks=True, ignore=lambda d, names: [
                    n for n in names if (Path(d) / n).is_fifo()])
            if log is not None:
                print(f"tree {k}: {'FAIL ' + '; '.join(f) if f else 'ok'} [{t.describe()[:160]}]", file=log,
                      flush=True)
    return judged, failures, kinds


if __name__ == "__main__":  # pragma: no cover - a quick local run: python tests/helpers/fuzz_trees.py N SEED
    n, f, k = fuzz(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), log=sys.stdout)
    print(n, len(f), k)

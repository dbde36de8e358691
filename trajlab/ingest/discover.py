"""Input discovery: walk the paths given to a command and list the data files to read, with their runs.

Directories are walked recursively (links to directories followed once); trajlab outputs, hidden entries, model
checkpoint directories and model/tokenizer side files are skipped and counted, never silently; unreadable
entries become :class:`~trajlab.model.IngestError` rows.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from trajlab.ingest.skyrl_evals import AGGREGATED
from trajlab.ingest.slime_dump import is_dump_name
from trajlab.metrics.filelog import is_metrics_log
from trajlab.model import IngestError
from trajlab.outpaths import output_kind
from trajlab.ownfiles import SIDECAR_SUFFIX, own_output
from trajlab.verl.records import is_record_file

DATA_SUFFIXES = (".jsonl", ".json", ".ndjson", ".parquet")


@dataclass(frozen=True)
class InputFile:
    """A file to scan: its path, its unique relative name (``source_path``) and its run."""

    path: Path
    rel: str
    run: str
    inner: str  # the path inside its root (``rel`` without the root's label)


def display_name(name: str) -> str:
    """A file name as text that fits a table (a name that is not valid UTF-8 gets ``\\xNN`` escapes)."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def discover(paths: list[str | Path]) -> tuple[list[tuple[Path, str]], list[IngestError]]:
    """Files to scan as ``(path, relative name)`` pairs, sorted, plus errors (see :func:`find_inputs`, which
    also gives each file its run and says what it skipped)."""
    files, errors, _ = find_inputs(paths)
    return [(f.path, f.rel) for f in files], errors


def find_inputs(
    paths: list[str | Path], runs: dict[str, Path] | None = None
) -> tuple[list[InputFile], list[IngestError], list[str]]:
    """Files to scan (sorted by relative name), errors (``ingest_errors`` rows), and what was skipped on purpose
    with the reason (printed in the scan summary).

    Every data file (``.jsonl``/``.json``/``.ndjson``/``.parquet``) under the paths is taken, with its name
    relative to the path given (made valid UTF-8 for the tables). A file named explicitly is taken unless trajlab
    wrote it: a file carrying trajlab's mark (:func:`trajlab.ownfiles.own_output`: a table, a ``sql -o`` export,
    a manifest) is never input, wherever it sits, and is listed in ``skipped`` with what it is.
    Directories are walked recursively, following symbolic links to directories once (a link loop is reported,
    not followed). Nothing is skipped silently: an unreadable directory, a broken or looping link and a
    data-named entry that is not a regular file become errors; hidden entries, trajlab outputs, model checkpoint
    directories (their full shape: ``config.json`` naming a model plus weight files, or verl FSDP rank shards:
    there only dump-named files are read) and model/tokenizer side files (``config.json``,
    ``tokenizer_config.json``, ...) and verl's training-metrics logs (:func:`trajlab.metrics.filelog.is_metrics_log`;
    the scan reads them into its ``metrics`` table) and the verl reward's record files
    (:func:`trajlab.verl.records.is_record_file`) are counted in ``skipped``. A model file beside dump files never hides them.

    ``runs`` (``--run NAME=PATH``) name the run of every file under PATH; a PATH not under one of ``paths`` is
    scanned as a root of its own. With several roots each relative name starts with its root's label
    (:func:`trajlab.ingest.runs.unique_labels`), so names and runs stay unique; with one root, names are
    relative to it.
    """
    from trajlab.ingest import runs as runs_mod

    runs = dict(runs or {})
    errors: list[IngestError] = []
    skipped: list[str] = []
    metrics_files: list[str] = []
    compressed: list[str] = []
    ckpt_dirs: list[str] = []
    side: list[str] = []
    owned: list[tuple[str, str]] = []  # (relative name, what trajlab output it is)
    metrics_logs: list[str] = []
    reward_records: list[str] = []
    wandb_dirs: list[str] = []
    hidden = 0
    roots: list[Path] = []
    names: list[str | None] = []
    for raw in paths:
        p = Path(raw)
        shown = display_name(str(raw))
        try:
            st = p.stat()
        except FileNotFoundError:
            errors.append(IngestError(shown, None, "broken symbolic link" if p.is_symlink() else "path does not exist"))
            continue
        except OSError as e:
            errors.append(IngestError(shown, None, f"cannot read: {e.strerror or e}"))
            continue
        if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
            errors.append(IngestError(shown, None, f"{not_regular(p, 'a regular file or directory')}; skipped"))
            continue
        roots.append(p)
        names.append(None)
    for name, rp in runs.items():
        if not rp.exists():
            errors.append(IngestError(str(rp), None, f"path of --run {name} does not exist"))
            continue
        rr = rp.resolve()
        if not any(rr == r.resolve() or r.resolve() in rr.parents for r in roots if r.is_dir()):
            roots.append(rp)
            names.append(name)
    labels = runs_mod.unique_labels(roots, names)
    several = len(roots) > 1
    found: dict[str, InputFile] = {}

    def add(fp: Path, inner: str, label: str) -> None:
        key = _real(fp)
        if key in found:
            return
        inner = display_name(inner)
        rel = f"{label}/{inner}" if several else inner
        run = runs_mod.named_run_of(fp, runs) if runs else None
        found[key] = InputFile(fp, rel, run or runs_mod.run_of(rel, label), inner)

    for root, label in zip(roots, labels, strict=True):
        if root.is_file():
            kind = own_output(root)
            if kind is not None:
                owned.append((display_name(str(root)), kind))
            elif is_metrics_log(root):
                metrics_logs.append(root.name)
            elif is_record_file(root):
                reward_records.append(root.name)
            else:
                add(root, root.name, label)
            continue
        shown = display_name(str(root))
        visited: set[str] = set()
        stack = [root]
        while stack:
            d = stack.pop()
            real = _real(d)
            rel_d = display_name(d.relative_to(root).as_posix()) if d != root else "."
            if real in visited:
                skipped.append(f"{rel_d}/: a link to a directory already walked (link loop or repeat)")
                continue
            visited.add(real)
            if output_kind(d) is not None:
                skipped.append(f"{rel_d if d != root else shown}/: a trajlab output directory")
                continue
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda x: x.name)
            except OSError as e:
                errors.append(IngestError(rel_d, None, f"cannot read directory: {e.strerror or e}; skipped"))
                continue
            entry_names = {x.name for x in entries}
            if d != root and _is_wandb_run_dir(d, entry_names):
                wandb_dirs.append(rel_d)  # W&B's run folder: its .wandb file is read as metrics, nothing as dumps
                continue
            model = _checkpoint_shape(d, entry_names)
            if model:
                ckpt_dirs.append(rel_d)
            subdirs = []
            for x in entries:
                if x.name.startswith("."):
                    if not (x.name.endswith(SIDECAR_SUFFIX) and x.name[1:-len(SIDECAR_SUFFIX)] in entry_names):
                        hidden += 1  # (an export's sidecar is trajlab's own, listed with its export)
                    continue
                fp = d / x.name
                rel = display_name(fp.relative_to(root).as_posix())
                try:
                    is_dir = x.is_dir()  # follows links
                    is_file = not is_dir and x.is_file()
                except OSError:
                    if x.name.lower().endswith(DATA_SUFFIXES):  # a link loop, an unreadable entry: say which
                        errors.append(IngestError(rel, None, f"{not_regular(Path(x.path))}; skipped"))
                    continue
                if is_dir:
                    subdirs.append(fp)
                    continue
                torch_dump = x.name.endswith(".pt") and is_dump_name(x.name) and not model
                if not x.name.lower().endswith(DATA_SUFFIXES) and not torch_dump:
                    if x.name.lower().endswith(_COMPRESSED):
                        compressed.append(rel)  # a dump a user compressed: not read, but said so
                    continue
                if not is_file:
                    errors.append(IngestError(rel, None, f"{not_regular(Path(x.path))}; skipped"))
                    continue
                if x.name in MODEL_SIDE_FILES or x.name.endswith(_MODEL_SIDE_SUFFIXES) or (
                        model and x.name.lower().endswith(".json") and not _DUMP_JSON_NAME.fullmatch(x.name)):
                    side.append(rel)  # a checkpoint's own JSON (trainer_state, results...), never a dump name
                    continue
                kind = own_output(fp)
                if kind is not None:
                    owned.append((rel, kind))  # trajlab's own output (an export, a copied table): never input
                    continue
                if x.name == AGGREGATED:
                    metrics_files.append(rel)  # SkyRL's per-step eval metrics beside its eval dumps
                    continue
                if is_metrics_log(fp):
                    metrics_logs.append(rel)  # verl's file logger: read into the metrics table, not a dump
                    continue
                if is_record_file(fp):
                    reward_records.append(rel)  # the verl reward's own per-sample records (trajlab.verl.records)
                    continue
                add(fp, fp.relative_to(root).as_posix(), label)
            stack.extend(reversed(subdirs))
    if ckpt_dirs:
        skipped.append(f"{len(ckpt_dirs)} model checkpoint director{'y' if len(ckpt_dirs) == 1 else 'ies'} "
                       f"(config.json + weights, or FSDP shards): only dump-named files read there; e.g. "
                       f"{', '.join(ckpt_dirs[:3])}")
    if side:
        skipped.append(f"{len(side)} model/tokenizer JSON file{'s' if len(side) != 1 else ''} (not trajectory data), "
                       f"e.g. {', '.join(side[:3])}")
    if owned:
        kinds = sorted({k for _, k in owned})
        skipped.append(f"{len(owned)} file{'s' if len(owned) != 1 else ''} trajlab wrote (its own outputs are never "
                       f"read as input: {', '.join(kinds[:4])}{', ...' if len(kinds) > 4 else ''}), e.g. "
                       + ", ".join(f"{r} ({k})" for r, k in owned[:3]))
    if wandb_dirs:
        skipped.append(f"{len(wandb_dirs)} W&B run director{'y' if len(wandb_dirs) == 1 else 'ies'} (their .wandb "
                       f"file is read into the metrics table, nothing there as dumps), e.g. "
                       f"{', '.join(wandb_dirs[:3])}")
    if metrics_logs:
        skipped.append(f"{len(metrics_logs)} training-metrics log{'s' if len(metrics_logs) != 1 else ''} (verl's file "
                       f"logger; read into the metrics table, not as dumps), e.g. {', '.join(metrics_logs[:3])}")
    if reward_records:
        skipped.append(f"{len(reward_records)} trajlab reward record file{'s' if len(reward_records) != 1 else ''} "
                       f"(trajlab.verl.records: per-sample figures, not dumps; read them with "
                       f"trajlab.verl.records.read_records), e.g. {', '.join(reward_records[:3])}")
    if metrics_files:
        skipped.append(f"{len(metrics_files)} SkyRL aggregated eval metrics file{'s' if len(metrics_files) != 1 else ''} "
                       f"(metrics, not samples), e.g. {', '.join(metrics_files[:3])}")
    if hidden:
        skipped.append(f"{hidden} hidden entr{'y' if hidden == 1 else 'ies'} (names starting with '.')")
    if compressed:
        skipped.append(f"{len(compressed)} compressed data file{'s' if len(compressed) != 1 else ''} (not read: "
                       f"decompress them first, e.g. gunzip -k), e.g. {', '.join(compressed[:3])}")
    files = sorted(found.values(), key=lambda f: (f.rel, str(f.path)))
    return files, errors, skipped


def _is_wandb_run_dir(d: Path, names: set[str]) -> bool:
    """A W&B run folder (``wandb/offline-run-*/``, ``wandb/run-*/``): it holds a ``run-<id>.wandb`` file that
    starts with W&B's header."""
    from trajlab.metrics.wandbfile import is_wandb_file

    return any(n.startswith("run-") and n.endswith(".wandb") and is_wandb_file(d / n) for n in names)


def _real(p: Path) -> str:
    try:
        return os.path.realpath(p)
    except (OSError, ValueError):
        return os.path.abspath(p)


#: compressed data files (``12.jsonl.gz``): not read, listed in ``skipped``
_COMPRESSED = tuple(f"{d}{c}" for d in DATA_SUFFIXES for c in (".gz", ".zst", ".bz2", ".xz", ".zip"))

#: JSON files that belong to a model or tokenizer, never to a dump (skipped wherever they are, and listed)
MODEL_SIDE_FILES = frozenset((
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "preprocessor_config.json", "chat_template.json", "fsdp_config.json",
    "adapter_config.json", "trainer_state.json",
))
_MODEL_SIDE_SUFFIXES = (".safetensors.index.json", ".bin.index.json")
_WEIGHTS = re.compile(r".+\.(?:safetensors|bin|pt|pth|gguf)$")
#: a ``.json`` name a dump may have inside a checkpoint directory: ``{step}.json``, verl-tool's ``*-step-N.json``
_DUMP_JSON_NAME = re.compile(r"(?:\d+|.*-step-(?:val-)?\d+)\.json", re.IGNORECASE)
_FSDP_SHARD = re.compile(r"model_world_size_\d+_rank_\d+\.pt$")


def _checkpoint_shape(d: Path, names: set[str]) -> str | None:
    """Why ``d`` is a model checkpoint directory (its whole shape, not one file name), or None.

    A Hugging Face checkpoint: ``config.json`` naming a model (``model_type`` or ``architectures``) next to
    weight files; a verl actor checkpoint: FSDP rank shards ``model_world_size_W_rank_R.pt``.
    """
    if any(_FSDP_SHARD.match(n) for n in names):
        return "a verl FSDP checkpoint"
    if "config.json" in names and any(_WEIGHTS.match(n) for n in names):
        try:
            with open(d / "config.json", "rb") as f:
                cfg = json.loads(f.read(1 << 20))
        except (OSError, ValueError, RecursionError):
            return None
        if isinstance(cfg, dict) and ("model_type" in cfg or "architectures" in cfg):
            return "a model checkpoint"
    return None


_SPECIAL_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def not_regular(path: Path, expected: str = "a regular file") -> str:
    """What a path that is not ``expected`` is, said plainly: a broken symbolic link, a link loop, a named
    pipe, a device or a socket, and through a link which of them it points to."""
    link = path.is_symlink()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "broken symbolic link (its target does not exist)" if link else "path does not exist"
    except OSError as e:
        return "symbolic link loop" if e.errno == errno.ELOOP else f"cannot read: {e.strerror or e}"
    kind = next((name for test, name in _SPECIAL_KINDS if test(mode)), "an unknown kind of file")
    return f"{'symbolic link to ' if link else ''}{kind}, not {expected}"

"""Where a run's training metrics are on disk, and which run each log belongs to.

Three kinds of log are read (:data:`KINDS`):

* ``file``: verl's file logger, ``{VERL_FILE_LOGGER_ROOT}/{project}/{experiment}.jsonl``
  (:mod:`trajlab.metrics.filelog`); its *experiment* is the file name without ``.jsonl``;
* ``tensorboard``: event files (a name containing ``tfevents``), verl's default
  ``tensorboard_log/{project}/{experiment}/events.out.tfevents.*``; its *experiment* is the directory holding it;
* ``wandb``: a W&B run file (``*.wandb`` starting with W&B's header, :mod:`trajlab.metrics.wandbfile`), verl's
  default ``wandb/offline-run-*/run-<id>.wandb`` (``wandb/run-*/`` when online); its *experiment* is the run's
  display name (verl's ``experiment_name``). A resumed verl run starts a new W&B run with the same name: all its
  files go to one run (:mod:`trajlab.metrics.wandbruns` merges them).

Logs are found under the scanned paths (beside the dumps), in verl's default locations near them
(``tensorboard_log/<project>/<run>/`` and ``wandb/`` in the two directories above a scanned path,
``<project>/<run>.jsonl`` in the one just above it, for each run of the scan: verl writes both relative to its working directory; a run name
found under several projects there is ambiguous and not taken) and under every ``--metrics [NAME=]PATH`` (a log
file or a directory searched recursively). Each log is matched to a run, first rule that applies:

1. ``--metrics NAME=PATH``: run NAME;
2. the experiment name equals a run's name, or the last part of it (``exp1`` matches run ``outputs/exp1``);
3. the log lies in a run's directory (the deepest one), e.g. ``exp1/tensorboard_log/...`` beside ``exp1/rollout``;
4. the scan has one run, no log of this kind matched it by rules 1-3, and this is the only log of its kind left
   (for W&B: the only experiment name left): that run (a log named for another experiment beside the run's own, or several candidates, are not guessed);
5. no match: the log keeps its experiment name as its run (the scan summary lists it as unmatched).

Links to directories are followed (each directory walked once: a link loop ends there); hidden entries and
trajlab output directories are not searched; event files trajlab itself wrote
(:mod:`trajlab.metrics.tensorboard_out`) are never read back as training metrics.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from trajlab.metrics.filelog import is_metrics_log, is_regular_file

KINDS = ("file", "tensorboard", "wandb")


@dataclass(frozen=True)
class MetricsLog:
    """One log: its path, what writes it (``file`` | ``tensorboard``), its shown name, the experiment its layout
    names and the run given with ``--metrics NAME=PATH`` (or None)."""

    path: Path
    kind: str
    rel: str
    experiment: str
    named: str | None = None


@dataclass(frozen=True)
class MatchedLog:
    """A log with the run it belongs to and the rule that decided (``named`` | ``experiment name`` |
    ``directory`` | ``only run`` | ``unmatched``)."""

    log: MetricsLog
    run: str
    rule: str


def is_event_file(path: Path) -> bool:
    """An event file by TensorBoard's own rule: ``tfevents`` in the file name."""
    return "tfevents" in path.name


def log_kind(path: Path) -> str | None:
    """``tensorboard`` for an event file, ``file`` for a file-logger log, ``wandb`` for a W&B run file, else None
    (also for anything that is not a regular file: a FIFO named like an event file is never opened)."""
    if not is_regular_file(path):
        return None
    if is_event_file(path):
        return "tensorboard"
    if path.suffix == ".wandb":
        from trajlab.metrics.wandbfile import is_wandb_file

        return "wandb" if is_wandb_file(path) else None
    if is_metrics_log(path):
        return "file"
    return None


def _experiment(path: Path, kind: str) -> str:
    if kind == "wandb":
        from trajlab.metrics.wandbfile import read_wandb

        try:
            head = read_wandb(path, history=False)
        except OSError:
            return path.stem
        return head.name or head.run_id or path.stem
    return path.parent.name if kind == "tensorboard" else path.name.rsplit(".", 1)[0]


def parse_metrics_specs(specs: Iterable[str | Path]) -> list[tuple[str | None, Path]]:
    """``--metrics`` values as ``(run name or None, path)``: ``NAME=PATH`` names the run, a bare PATH does not (a
    PATH that exists as written is taken whole, even with a ``=`` in it)."""
    out: list[tuple[str | None, Path]] = []
    for s in specs:
        name, sep, path = str(s).partition("=")
        if sep and name.strip() and path and not Path(s).exists():
            out.append((name.strip(), Path(path)))
        else:
            out.append((None, Path(s)))
    return out


#: how many directories above a scanned path are searched for ``tensorboard_log/`` and for file-logger logs
ANCESTORS = {"tensorboard": 2, "file": 1}
#: the folder W&B writes its runs to in the trainer's working directory (``$WANDB_DIR`` or the cwd)
WANDB_DIR = "wandb"


def wandb_locations(roots: Iterable[Path]) -> list[tuple[Path, Path]]:
    """``wandb/`` folders in the two directories above each scanned path (verl's working directory, where W&B
    leaves ``wandb/offline-run-*/``), as ``(the directory above, the folder)``."""
    out: list[tuple[Path, Path]] = []
    seen: set[str] = set()
    for r in roots:
        base = Path(os.path.abspath(r))
        base = base if base.is_dir() else base.parent
        for anc in list(base.parents)[:ANCESTORS["tensorboard"]]:
            loc = anc / WANDB_DIR
            if str(loc) not in seen and loc.is_dir():
                seen.add(str(loc))
                out.append((anc, loc))
    return out


def default_locations(roots: Iterable[Path], experiments: Iterable[str],
                      problems: list[str] | None = None) -> list[tuple[Path, Path]]:
    """verl's default log locations for the given experiment names near the scanned paths (verl writes them
    relative to its working directory): ``tensorboard_log/<project>/<experiment>/`` in the two directories above
    each scanned path, ``<project>/<experiment>.jsonl`` in the directory just above it. Each is returned as ``(the
    directory above, the location)``. An experiment found under several projects is ambiguous: none of its
    default locations is taken (a line in ``problems`` says so; name the log with ``--metrics RUN=PATH``)."""
    names = sorted({e for e in experiments if e and e not in (".", "..") and "/" not in e})
    found: dict[tuple[str, str], list[tuple[Path, Path]]] = {}
    seen: set[tuple[str, str]] = set()
    for r in roots:
        base = Path(os.path.abspath(r))
        base = base if base.is_dir() else base.parent
        for kind, depth in ANCESTORS.items():
            for anc in list(base.parents)[:depth]:
                if (kind, str(anc)) in seen:
                    continue
                seen.add((kind, str(anc)))
                top = anc / "tensorboard_log" if kind == "tensorboard" else anc
                try:
                    projects = sorted(d for d in top.iterdir() if d.is_dir() and not d.name.startswith("."))
                except OSError:
                    continue
                for e in names:
                    for d in projects:
                        loc = d / e if kind == "tensorboard" else d / f"{e}.jsonl"
                        if loc.is_dir() if kind == "tensorboard" else loc.is_file():
                            found.setdefault((kind, e), []).append((anc, loc))
    out: list[tuple[Path, Path]] = []
    for (kind, e), locs in sorted(found.items()):
        if len(locs) > 1:
            if problems is not None:
                problems.append(f"{len(locs)} {kind} logs named {e!r} in verl's default places "
                                f"({', '.join(str(loc) for _, loc in locs[:3])}); none taken: name one with "
                                f"--metrics {e}=PATH")
            continue
        out += locs
    return out


def find_logs(roots: Iterable[Path], named: Iterable[tuple[str | None, Path]] = (),
              experiments: Iterable[str] = ()) -> tuple[list[MetricsLog], list[str]]:
    """Every metrics log under ``roots`` (the scanned paths), in verl's default locations near them for the
    ``experiments`` (the scan's run names, :func:`default_locations`) and under the ``--metrics`` paths, plus
    problems (a ``--metrics`` path that does not exist or holds no log). A log found twice keeps its
    ``--metrics`` name."""
    from trajlab.outpaths import output_kind

    found: dict[str, MetricsLog] = {}
    problems: list[str] = []

    def walk(root: Path, name: str | None, explicit: bool, base: Path | None = None) -> int:
        n = 0
        if root.is_file():
            kind = log_kind(root)
            if kind is None:
                if explicit:
                    problems.append(f"--metrics {root}: not a verl file-logger log, a TensorBoard event file or a "
                                    "W&B run file (.wandb)")
                return 0
            add(root, kind, root.relative_to(base).as_posix() if base else root.name, name)
            return 1
        visited: set[str] = set()
        for d, dirs, files in os.walk(root, followlinks=True):  # links followed, as dump discovery does
            dp = Path(d)
            real = os.path.realpath(dp)
            if real in visited:  # a link loop, or a directory reached twice: walked once
                dirs[:] = []
                continue
            visited.add(real)
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and output_kind(dp / x) is None
                             and os.path.realpath(dp / x) not in visited)
            for fn in sorted(files):
                if fn.startswith("."):
                    continue
                fp = dp / fn
                kind = log_kind(fp)
                if kind is not None and fp.is_file():
                    if base is not None:
                        add(fp, kind, fp.relative_to(base).as_posix(), name)
                    else:
                        add(fp, kind, fp.relative_to(root).as_posix(), name, label=root.name)
                    n += 1
        return n

    def add(fp: Path, kind: str, rel: str, name: str | None, label: str = "") -> None:
        if kind == "tensorboard":
            from trajlab.metrics.tfevents import TRAJLAB_WRITER, file_writer

            if file_writer(fp) == TRAJLAB_WRITER:
                return  # trajlab's own scalars, not the trainer's
        key = os.path.realpath(fp)
        if key in found and (found[key].named or not name):
            return
        shown = f"{label}/{rel}" if label else rel
        found[key] = MetricsLog(fp, kind, shown, _experiment(fp, kind), name)

    roots = [Path(r) for r in roots]
    for r in roots:
        if r.exists() and output_kind(r) is None:
            walk(r, None, False)
    for anc, p in default_locations(roots, experiments, problems) + wandb_locations(roots):
        walk(p, None, False, base=anc)
    for name, p in named:
        if not p.exists():
            problems.append(f"--metrics {(name + '=') if name else ''}{p}: path does not exist")
            continue
        if walk(p, name, True) == 0 and p.is_dir():
            problems.append(f"--metrics {(name + '=') if name else ''}{p}: no file-logger log (.jsonl), "
                            "TensorBoard event file or W&B run file (.wandb) under it")
    return sorted(found.values(), key=lambda m: (m.rel, str(m.path))), problems


def match_runs(logs: list[MetricsLog], run_dirs: dict[str, set[Path]]) -> list[MatchedLog]:
    """Each log with its run, by the rules in the module docstring. ``run_dirs``: every run of the scan with the
    directories its dump files are in (split directories such as ``rollout/`` folded into their parent)."""
    runs = sorted(run_dirs)
    decided: dict[int, MatchedLog] = {}
    for i, log in enumerate(logs):
        if log.named:
            decided[i] = MatchedLog(log, log.named, "named")
            continue
        by_name = [r for r in runs if r == log.experiment] or [r for r in runs if r.rsplit("/", 1)[-1] == log.experiment]
        if len(by_name) == 1:
            decided[i] = MatchedLog(log, by_name[0], "experiment name")
            continue
        real = Path(os.path.realpath(log.path))
        best: tuple[int, str] | None = None
        for r in runs:
            for d in run_dirs[r]:
                rd = Path(os.path.realpath(d))
                if rd in real.parents and (best is None or len(rd.parts) > best[0]):
                    best = (len(rd.parts), r)
        if best is not None:
            decided[i] = MatchedLog(log, best[1], "directory")
    # rule 4: one run, and per kind one candidate left that nothing else claims for it
    left = [i for i in range(len(logs)) if i not in decided]
    for kind in KINDS:
        mine = [i for i in left if logs[i].kind == kind]
        taken = any(m.log.kind == kind and m.run in runs for m in decided.values())
        # W&B: the files of one experiment (a resumed run's several files share its name) are one candidate
        one = len(mine) == 1 or (kind == "wandb" and len({logs[i].experiment for i in mine}) == 1)
        if len(runs) == 1 and mine and one and not taken:
            for i in mine:
                decided[i] = MatchedLog(logs[i], runs[0], "only run")
    return [decided.get(i) or MatchedLog(log, log.experiment, "unmatched") for i, log in enumerate(logs)]


def run_directories(files: Iterable[tuple[Path, str]]) -> dict[str, set[Path]]:
    """``{run: directories}`` of ``(dump path, run)`` pairs, split directories folded into their parent."""
    from trajlab.ingest.runs import SPLIT_DIRS

    out: dict[str, set[Path]] = {}
    for path, run in files:
        d = path.parent
        if d.name.lower() in SPLIT_DIRS:
            d = d.parent
        out.setdefault(run, set()).add(d)
    return out

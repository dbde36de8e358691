"""Which training run a dump file belongs to, derived from the directory layout verl and verl-tool write.

A *run* is one experiment: the directory that holds its step files. verl writes ``{rollout_data_dir}/{step}.jsonl``
and ``{validation_data_dir}/{step}.jsonl``, usually as ``<experiment>/rollout/`` and ``<experiment>/validation/``;
verl-tool writes ``verl_step_records/{run}/...-step-{n}.json``. So the run of a file is its directory, relative to
the scanned root, with

* a split directory (``rollout``, ``rollouts``, ``train``, ``validation``, ``val``) folded into its parent, and
* verl-tool's ``verl_step_records`` component dropped (the directory under it names the run);
* the other frameworks' dump directories folded the same way: TRL's ``completions/`` (and its ``train/`` /
  ``eval/`` subdirectories), slime's ``rollout_data/``, SkyRL's ``dumped_evals/global_step_{N}_evals/`` (and
  ``eval_only/``);

a file directly in the scanned root (or in its split directory) belongs to a run named after the root. With
several roots, every relative path starts with the root's *label* (its directory name, made unique), so paths and
runs stay unique across roots. ``--run NAME=PATH`` names the run of every file under PATH explicitly.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from trajlab.errors import InputError, param

#: directory names that hold one split of a run (folded into the parent directory, which names the run)
SPLIT_DIRS = frozenset({"rollout", "rollouts", "train", "validation", "val"})
#: verl-tool's step-record directory: the directory below it names the run
VERL_TOOL_RECORDS = "verl_step_records"
#: other frameworks' dump directories, each holding (directly or in the step directories below it) one run's steps
FRAMEWORK_DIRS = frozenset({"completions", "rollout_data", "dumped_evals"})
#: SkyRL's per-step eval directories and TRL's per-mode completion directories, under a framework directory
_STEP_DIR = re.compile(r"global_step_\d{1,18}_evals|eval_only|train|eval")


def run_of(rel: str, root_label: str) -> str:
    """The run of a file at ``rel`` (POSIX path relative to its scanned root, possibly label-prefixed).

    >>> run_of("exp_a/rollout/12.jsonl", "outputs")
    'exp_a'
    >>> run_of("verl_tool_run/verl_step_records/run1/fcl-step-3.json", "sample_data")
    'verl_tool_run/run1'
    >>> run_of("validation/10.jsonl", "exp_b")
    'exp_b'
    >>> run_of("skyrl/dumped_evals/global_step_40_evals/gsm8k.jsonl", "exports")
    'skyrl'
    """
    parts = [p for p in rel.split("/")[:-1] if p not in ("", ".")]
    if len(parts) > 1 and parts[-2] in FRAMEWORK_DIRS and _STEP_DIR.fullmatch(parts[-1]):
        parts.pop()
    if parts and parts[-1] in FRAMEWORK_DIRS:
        parts.pop()
    if parts and parts[-1].lower() in SPLIT_DIRS:
        parts.pop()
    parts = [p for p in parts if p != VERL_TOOL_RECORDS]
    return "/".join(parts) if parts else root_label


def root_label(path: Path) -> str:
    """A root's own name: the directory's name (a file's parent directory name), ``.`` resolved."""
    p = path.resolve() if path.name in ("", ".", "..") else path
    if p.is_file():
        p = p.resolve().parent
    return p.name or str(p)


def unique_labels(roots: list[Path], names: list[str | None]) -> list[str]:
    """One label per root: its explicit name (``--run``) or :func:`root_label`; roots whose labels collide get
    their parent directories added (``a/out``, ``b/out``) and, as a last resort, a ``~N`` suffix."""
    base = [n or root_label(r) for r, n in zip(roots, names, strict=True)]
    labels = list(base)
    for depth in range(1, 4):
        dup = {x for x in labels if labels.count(x) > 1}
        if not dup:
            break
        for i, r in enumerate(roots):
            if labels[i] in dup and names[i] is None:
                anc = r.resolve().parents
                extra = [anc[k].name for k in range(min(depth, len(anc))) if anc[k].name]
                labels[i] = "/".join([*reversed(extra), base[i]])
    seen: dict[str, int] = {}
    for i, x in enumerate(labels):
        seen[x] = seen.get(x, 0) + 1
        if seen[x] > 1:
            labels[i] = f"{x}~{seen[x]}"
    return labels


def parse_run_specs(specs: list[str]) -> dict[str, Path]:
    """``["NAME=PATH", ...]`` (``--run``) as ``{NAME: PATH}``; one-line errors for bad or repeated names."""
    out: dict[str, Path] = {}
    for s in specs:
        name, sep, path = s.partition("=")
        name = name.strip()
        if not sep or not name or not path:
            raise InputError(f"{param('runs')} {s!r} is not NAME=PATH", hint=f"e.g. {param('runs', metavar='baseline=outputs/exp1')}")
        if "/" in name or name in (".", ".."):
            raise InputError(f"{param('runs')} name {name!r} may not contain '/'", hint="use a plain name like sft_v2")
        if name in out:
            raise InputError(f"{param('runs')} {name!r} is given twice", hint="give each run its own name")
        out[name] = Path(path)
    return out


def named_run_of(path: Path, named: dict[str, Path]) -> str | None:
    """The ``--run`` name whose PATH holds ``path`` (the deepest such PATH), or None."""
    rp = str(path.resolve())
    best: tuple[int, str] | None = None
    for name, root in named.items():
        r = str(root.resolve())
        if rp == r or rp.startswith(r.rstrip(os.sep) + os.sep):
            if best is None or len(r) > best[0]:
                best = (len(r), name)
    return best[1] if best else None

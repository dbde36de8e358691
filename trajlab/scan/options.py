"""What a scan is asked to do: :class:`ScanOptions` (every option of :func:`trajlab.scan.scan`, checked once,
when made) and :class:`WorkerOptions` (the part workers need, with its fingerprint).

The fingerprint hashes every option that changes results (plus the trajlab and schema versions and the part
layout), so the incremental cache (:mod:`trajlab.scan.cache`) never reuses parts made under other options.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trajlab import __version__
from trajlab.errors import InputError, param
from trajlab.rulepacks import rules_hash
from trajlab.tables import SCHEMA_VERSION

#: the scan engines (:mod:`trajlab.scan.engines`); ``auto`` is ``columnar`` where it applies
ENGINES = ("auto", "columnar", "records")
#: picks the engine when ``scan(engine=None)`` (tests run whole suites under each engine with it)
ENV_VAR = "TRAJLAB_ENGINE"


def resolve_engine(name: str | None) -> str:
    """The engine to use: ``name``, else ``$TRAJLAB_ENGINE``, else ``auto``; an unknown name is an input error."""
    chosen = name or os.environ.get(ENV_VAR) or "auto"
    if chosen not in ENGINES:
        src = param("engine") if name else f"${ENV_VAR}"
        raise InputError(f"unknown {src} {chosen!r}; choose one of: {', '.join(ENGINES)}")
    return chosen


#: layout of the part files and ids (bumped when done.json or trajectory_id change)
PARTS_LAYOUT = 6
#: default of :attr:`ScanOptions.control_prob`
DEFAULT_CONTROL_PROB = 0.5


@dataclass(frozen=True)
class ScanOptions:
    """Every option of :func:`trajlab.scan.scan` (frozen; each value checked when the object is made, so a bad one
    is a one-line :class:`~trajlab.errors.InputError` naming the field before anything is read or written).

    Attributes:
        tools: tool schemas that override the prompts' (a ``--tools`` file path, or a list of schemas).
        input_format: force the input format (``auto`` or None: detected per file).
        tool_format: force the call format (a name of ``trajlab.toolcalls.KNOWN_FORMATS``; ``auto`` or None:
            detected per trajectory).
        rules_dirs: user rule packs added to the built-in ``rules/``.
        jobs: worker processes (0 = one per CPU; small inputs run in-process).
        strict: raise :class:`~trajlab.errors.InputError` (exit code 2) if any record could not be read.
        incremental: reuse the parts of files unchanged since the last scan into the output directory.
        chunk_bytes: size of the byte ranges big files are cut into (None: 32 MB).
        engine: ``auto`` | ``columnar`` | ``records`` (:mod:`trajlab.scan.engines`; None: ``$TRAJLAB_ENGINE``,
            else ``auto``). Every engine writes the same tables; the manifest records which read each file.
        rollout_n: verl's ``rollout.n`` (``--rollout-n N``): records without a uid form groups of ``N``
            consecutive records of a file (:mod:`trajlab.groups`); None: groups by uid, else by prompt text.
        runs: ``{NAME: PATH}`` (``--run NAME=PATH``): every file under PATH belongs to run NAME; a PATH outside
            the scanned paths is scanned too. Other files get the run their directory names
            (:mod:`trajlab.ingest.runs`).
        tokenizer: decodes the token ids of sources that log them (NeMo-RL): a tokenizer directory or an alias
            (``qwen3.5``, ``qwen3``); None or ``auto``: the built-in tokenizer that fits the ids.
        control_prob: ``steps.control_low_prob_share`` counts sampled control tokens whose inference
            probability is below this (0 < p <= 1).
        metrics: the trainer's metrics logs (``--metrics [NAME=]PATH``): verl file-logger JSONL or TensorBoard
            event files, or directories holding them; ``NAME=`` names the run. Logs under the scanned paths are
            found without it (:mod:`trajlab.metrics.sources`). Written to the ``metrics`` table.
        lead_metric: the metric whose breakdown the lead time is measured against (None: the reward,
            ``critic/score/mean`` or ``critic/rewards/mean``; :mod:`trajlab.metrics.leadtime`).
        lead_direction: ``down`` (the metric breaks down by falling) or ``up`` (by rising, e.g. a probability
            gap).
        tensorboard: also write trajlab's per-step rates and the warning as TensorBoard scalars under this
            directory (:mod:`trajlab.metrics.tensorboard_out`).
    """

    tools: str | Path | list[dict[str, Any]] | None = None
    input_format: str | None = None
    tool_format: str | None = None
    rules_dirs: tuple[str, ...] = ()
    jobs: int = 0
    strict: bool = False
    incremental: bool = True
    chunk_bytes: int | None = None
    engine: str | None = None
    runs: Mapping[str, str | Path] = field(default_factory=dict)
    rollout_n: int | None = None
    tokenizer: str | None = None
    control_prob: float = DEFAULT_CONTROL_PROB
    metrics: tuple[str | Path, ...] = ()
    lead_metric: str | None = None
    lead_direction: str = "down"
    tensorboard: str | Path | None = None

    def __post_init__(self) -> None:
        from trajlab import toolcalls
        from trajlab.ingest import validate_format_name

        put = object.__setattr__
        put(self, "rules_dirs", tuple(str(Path(d)) for d in self.rules_dirs))
        put(self, "runs", dict(self.runs or {}))
        if isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 0:
            raise InputError(f"{param('jobs')} {self.jobs!r}: must be a whole number >= 0 (0 = one per CPU)")
        if self.chunk_bytes is not None and (not isinstance(self.chunk_bytes, int) or self.chunk_bytes < 1):
            raise InputError(f"{param('chunk_bytes')} {self.chunk_bytes!r}: must be a whole number >= 1")
        if self.rollout_n is not None and (isinstance(self.rollout_n, bool) or not isinstance(self.rollout_n, int)
                                           or self.rollout_n < 1):
            raise InputError(f"{param('rollout_n')} {self.rollout_n!r}: must be a whole number >= 1 (verl's "
                             "actor_rollout_ref.rollout.n)")
        fmt = None if self.tool_format in ("auto", "") else self.tool_format
        if fmt is not None and fmt not in toolcalls.KNOWN_FORMATS:
            raise InputError(f"unknown {param('tool_format')} {fmt!r}; choose one of: auto, "
                             f"{', '.join(toolcalls.KNOWN_FORMATS)}")
        put(self, "tool_format", fmt)
        put(self, "input_format", validate_format_name(self.input_format))
        resolve_engine(self.engine)  # an unknown engine is refused here, not in a worker
        cp = self.control_prob
        if isinstance(cp, bool) or not isinstance(cp, (int, float)) or not 0.0 < cp <= 1.0:
            raise InputError(f"{param('control_prob')} {cp!r}: must be a probability in (0, 1]")
        put(self, "control_prob", float(cp))
        put(self, "tokenizer", None if self.tokenizer in ("auto", "") else (
            None if self.tokenizer is None else str(self.tokenizer)))
        from trajlab.metrics.leadtime import DIRECTIONS

        put(self, "metrics", tuple(str(m) if isinstance(m, Path) else m for m in (
            [self.metrics] if isinstance(self.metrics, (str, Path)) else (self.metrics or ()))))
        if any(not isinstance(m, str) or not m.strip() for m in self.metrics):
            raise InputError(f"{param('metrics')} takes paths or NAME=PATH strings, got {self.metrics!r}")
        if self.lead_direction not in DIRECTIONS:
            raise InputError(f"{param('lead_direction')} {self.lead_direction!r}: choose one of {', '.join(DIRECTIONS)}")
        if self.lead_metric is not None and (not isinstance(self.lead_metric, str) or not self.lead_metric.strip()):
            raise InputError(f"{param('lead_metric')} {self.lead_metric!r}: give a metric name, e.g. critic/score/mean")
        if self.tensorboard is not None:
            put(self, "tensorboard", Path(self.tensorboard))


@dataclass
class WorkerOptions:
    """The options a worker needs to turn input into table parts (picklable: sent to worker processes)."""

    tool_format: str | None = None
    tools: list[dict[str, Any]] | None = None
    rules_dirs: tuple[str, ...] = ()
    input_format: str | None = None
    #: ``auto`` | ``columnar`` | ``records`` (:mod:`trajlab.scan.engines`); not in the fingerprint: every
    #: engine writes the same bytes
    engine: str = "auto"
    rollout_n: int | None = None  # --rollout-n: text groups become runs of N consecutive records
    tokenizer: str | None = None  # decodes sources that log token ids (None: auto)
    #: why no range goes through the columnar engine (``auto`` on a small input,
    #: :func:`trajlab.scan.engines.for_input_size`); recorded with each range read
    fallback: str | None = None

    def fingerprint(self) -> str:
        blob = json.dumps(
            {
                "v": __version__,
                "code": code_hash(),
                "schema": SCHEMA_VERSION,
                "parts": PARTS_LAYOUT,
                "rules": rules_hash(self.rules_dirs),
                "tool_format": self.tool_format,
                "tools": self.tools,
                "input_format": self.input_format,
                **({"rollout_n": self.rollout_n} if self.rollout_n else {}),
                **({"tokenizer": self.tokenizer} if self.tokenizer else {}),
            },
            sort_keys=True,
        )
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


#: the modules whose import closure (:func:`trajlab.codeprint.import_closure`) is the code a scan's tables
#: record: the worker (readers, classifier, engines, table specs), the merge and the steps aggregation
CODE_ROOTS = ("trajlab.scan.worker", "trajlab.scan.parts", "trajlab.trends")


@functools.lru_cache(maxsize=1)
def code_hash() -> str:
    """sha1 over the source of every module that shapes a scan's tables (the import closure of
    :data:`CODE_ROOTS`, derived, not listed by hand), so an upgraded classifier never reuses parts made by the
    old one, even at the same version number (a wheel without sources hashes what it has; the version and
    schema still count)."""
    from trajlab.codeprint import source_hash

    return source_hash(CODE_ROOTS)


def worker_options(options: ScanOptions) -> WorkerOptions:
    """The part of ``options`` workers need, with the ``tools`` file (if one is named) loaded and the engine
    resolved (``$TRAJLAB_ENGINE`` when none is given)."""
    from trajlab.ingest.tool_schemas import load_tools_file

    tools = options.tools
    tool_list = load_tools_file(tools) if isinstance(tools, (str, Path)) else tools
    return WorkerOptions(tool_format=options.tool_format, tools=tool_list, rules_dirs=options.rules_dirs,
                         input_format=options.input_format, engine=resolve_engine(options.engine),
                         rollout_n=options.rollout_n, tokenizer=options.tokenizer)

"""Teacher-force logged trajectories through checkpoints and find control-token probability spikes.

:func:`rescore` is the library function behind ``trajlab rescore``. It reads a scan's tables, rebuilds each
selected trajectory's token stream (:mod:`~trajlab.rescore.stream`), runs every checkpoint over it
(:mod:`~trajlab.rescore.scoring`: body once per batch, LM head in chunks at assistant positions only), and writes
per token / spike / trajectory / malformation / control-token / position / token-mass tables under
``OUT/rescore/<label>/`` plus ``OUT/rescore/compare.parquet`` (:mod:`~trajlab.rescore.outputs`). Then every
checkpoint is compared with the reference (:mod:`~trajlab.rescore.drift`: calibrated spikes, paired drift,
discovered tokens). Under ``torchrun`` each rank scores its shard and rank 0 merges and compares
(:mod:`~trajlab.rescore.distributed`).

Heavy modules (torch, transformers) are imported inside the functions.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from trajlab.errors import MissingDependencyError, TableError, TrajlabError

__all__ = ["rescore", "RescoreSummary", "CheckpointSummary", "TOKENS_MODES"]

TOKENS_MODES = ("all", "calls", "none")


@dataclass
class CheckpointSummary:
    """What one checkpoint's rescore found (rank 0 sees the totals over every rank)."""

    label: str
    path: str
    kind: str
    step: int | None
    out_dir: str
    trajectories: int = 0
    skipped_resume: int = 0
    tokens: int = 0
    scored_tokens: int = 0
    roundtrip_mismatches: int = 0
    intrusion_positions: int = 0
    intrusions: int = 0
    dropout_positions: int = 0
    dropouts: int = 0
    spike_rate: float = 0.0  # absolute τ: (intrusions + dropouts) / eligible positions
    calibrated_spike_rate: float = 0.0  # against the reference's own distribution (the --fail-above statistic)
    calibrated_spikes: int = 0
    calibrated_units: int = 0
    calibrated_intrusion_rate: float | None = None
    calibrated_dropout_rate: float | None = None
    paired_drift: float | None = None  # median Δ log odds P(malformed)/P(repaired) vs the reference
    paired_drift_lo: float | None = None
    paired_drift_hi: float | None = None
    paired_points: int = 0
    mean_logprob: float | None = None
    malformations: int = 0
    mean_malformed_prob: float | None = None
    mean_repaired_prob: float | None = None
    malformed_preferred: int = 0  # malformations where P(malformed) > P(repaired)
    log_odds_by_category: dict[str, float] = field(default_factory=dict)  # median log P(malformed)/P(repaired)
    seconds: float = 0.0
    tokens_per_s: float = 0.0
    control_family: str = ""
    skipped_control_strings: list[str] = field(default_factory=list)


@dataclass
class RescoreSummary:
    """Result of :func:`rescore`."""

    out: str
    trajectories_selected: int
    checkpoints: list[CheckpointSummary]
    compare_path: str | None
    fail_above: float | None = None
    rank: int = 0
    world_size: int = 1
    top_moves: list[dict[str, Any]] = field(default_factory=list)  # paired moves vs the reference, biggest first
    reference: str | None = None
    calibration_quantile: float = 0.999
    discovered: list[dict[str, Any]] = field(default_factory=list)
    malformation_drift: list[dict[str, Any]] = field(default_factory=list)

    @property
    def exceeded(self) -> bool:
        """True when ``fail_above`` is set and a checkpoint's calibrated spike rate is above it."""
        return self.fail_above is not None and any(
            c.calibrated_spike_rate > self.fail_above for c in self.checkpoints
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["exceeded"] = self.exceeded
        return d


# ------------------------------------------------------------------------------------------------ helpers
class _Labels:
    """Decoded display strings of token ids, cached."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.cache: dict[int, str] = {}

    def __call__(self, tid: int) -> str:
        s = self.cache.get(tid)
        if s is None:
            s = self.tok.decode([tid], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            self.cache[tid] = s
        return s

    def array(self, ids: np.ndarray) -> pa.Array:
        uniq, inv = np.unique(ids, return_inverse=True)
        labels = pa.array([self(int(u)) for u in uniq], type=pa.string())
        return labels.take(pa.array(inv.astype(np.int64)))


class _TokenizerCache:
    """Checkpoints of one run usually ship identical tokenizer files: load each distinct set once."""

    def __init__(self, trust_remote_code: bool) -> None:
        self.trust_remote_code = trust_remote_code
        self.cache: dict[str, Any] = {}

    def __call__(self, ref_or_path: Any) -> Any:
        import hashlib

        from trajlab.rescore.checkpoints import load_tokenizer
        from trajlab.rescore.tokenizers import tokenizer_dir_for

        d = tokenizer_dir_for(ref_or_path)
        h = hashlib.sha256()
        for f in sorted(d.iterdir()):
            if f.is_file() and (f.name.startswith(("tokenizer", "special_tokens", "added_tokens", "chat_template"))
                                or f.name in ("vocab.json", "merges.txt")):  # fmt: skip
                h.update(f.name.encode() + b"\0" + f.read_bytes())
        key = h.hexdigest()
        tok = self.cache.get(key)
        if tok is None:
            tok = load_tokenizer(ref_or_path, trust_remote_code=self.trust_remote_code)
            self.cache[key] = tok
        return tok


class _SpanCache:
    """Classifier spans per (trajectory, turn), computed once per run."""

    def __init__(self, rules_dirs: Sequence[str | Path] = ()) -> None:
        self.cache: dict[tuple[str, int], list[Any]] = {}
        self.rules_dirs = tuple(str(d) for d in rules_dirs)
        self._analyze: Callable[..., Any] | None = None

    def __call__(self, tr: Any, turn_index: int, text: str) -> list[Any]:
        key = (tr.trajectory_id, turn_index)
        hit = self.cache.get(key)
        if hit is None:
            if self._analyze is None:
                from trajlab.toolcalls import analyze_turn

                self._analyze = analyze_turn
            from trajlab.model import TurnContext

            ctx = TurnContext(schema_known=bool(tr.tools))
            analysis = self._analyze(
                text, tool_format=tr.tool_format or "none", tools=tr.tools, context=ctx, rules_dirs=self.rules_dirs
            )
            hit = list(analysis.spans)
            self.cache[key] = hit
        return hit


def _tokens_table(
    label: str, tr: Any, st: Any, res: Any, cset: Any, labels: _Labels, mode: str
) -> pa.Table | None:
    n = st.n_scored
    if mode == "none" or n == 0:
        return None
    keep = np.ones(n, dtype=bool)
    if mode == "calls":
        keep[:] = False
        for cs, ce in tr.call_ranges:
            keep |= (st.char_start < ce) & (st.char_end > cs)
            keep |= (st.char_start == st.char_end) & (st.char_start == ce)  # <|im_end|> right after a call
        if not keep.any():
            return None
    idx = np.nonzero(keep)[0]
    from trajlab.rescore.control_tokens import REGIONS

    logged = st.ids[st.positions[idx]]
    top_ctrl = res.top_control[idx]
    ctrl_labels = pa.array([cset.labels[i] if i >= 0 else None for i in top_ctrl.tolist()], type=pa.string())
    regions = pa.array(REGIONS, type=pa.string()).take(pa.array(st.region[idx].astype(np.int64)))
    return pa.table(
        {
            "checkpoint": pa.array([label] * len(idx), pa.string()),
            "trajectory_id": pa.array([tr.trajectory_id] * len(idx), pa.string()),
            "turn_index": pa.array(st.turn_index[idx], pa.int32()),
            "position": pa.array(st.positions[idx], pa.int64()),
            "token_id": pa.array(logged, pa.int64()),
            "token": labels.array(logged),
            "char_start": pa.array(st.char_start[idx], pa.int64()),
            "char_end": pa.array(st.char_end[idx], pa.int64()),
            "region": regions,
            "logprob": pa.array(res.logprob[idx], pa.float32()),
            "entropy": pa.array(res.entropy[idx], pa.float32()),
            "top_token": labels.array(res.top_id[idx]),
            "top_prob": pa.array(res.top_prob[idx], pa.float32()),
            "control_mass": pa.array(res.control_mass[idx], pa.float32()),
            "top_control_token": ctrl_labels,
            "top_control_prob": pa.array(res.top_control_prob[idx], pa.float32()),
        }
    )


def _positions_table(label: str, tr: Any, st: Any, res: Any, cset: Any, fl: Any) -> pa.Table:
    """Rows of ``positions`` for one trajectory (every scored token; control probabilities where eligible)."""
    from trajlab.rescore.control_tokens import REGIONS

    n = st.n_scored
    member = np.array(cset.format_masks[tr.tool_format if tr.tool_format in cset.format_masks else "none"], bool)
    elig = fl.intrusion_eligible
    K = len(cset.ids)
    cp = np.asarray(res.control_probs[elig], dtype=np.float32).copy()
    if K:
        cp[:, ~member] = np.nan
    offsets = np.zeros(n + 1, np.int32)
    offsets[1:] = np.cumsum(np.where(elig, K, 0))
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(cp.reshape(-1), pa.float32()),
                                     mask=pa.array(~elig))
    logged = st.ids[st.positions]
    return pa.table(
        {
            "checkpoint": pa.array([label] * n, pa.string()),
            "trajectory_id": pa.array([tr.trajectory_id] * n, pa.string()),
            "position": pa.array(st.positions, pa.int64()),
            "region": pa.array(REGIONS, type=pa.string()).take(pa.array(st.region.astype(np.int64))),
            "token_id": pa.array(logged, pa.int64()),
            "logprob": pa.array(res.logprob, pa.float32()),
            "is_control": pa.array(np.isin(logged, list(cset.ids_for(tr.tool_format)))),
            "control_mass": pa.array(res.control_mass, pa.float32()),
            "control_probs": lists,
        }
    )


def _mass_groups(st: Any, th: Any) -> np.ndarray:
    """Mass group of each scored position: 0 structural, 1 content (the intrusion regions), -1 neither."""
    from trajlab.rescore.stream import REGION_CODE

    g = np.full(st.n_scored, -1, np.int64)
    g[st.region == REGION_CODE["structural"]] = 0
    g[np.isin(st.region, [REGION_CODE[r] for r in th.intrusion_regions])] = 1
    return g


def _token_mass_rows(label: str, mass: np.ndarray, logged: np.ndarray) -> pa.Table:
    """Sparse rows of ``token_mass`` for one block (tokens whose summed probability is at least 1e-6)."""
    from trajlab.rescore.outputs import MASS_GROUPS

    g, v = np.nonzero(mass >= 1e-6)
    return pa.table(
        {
            "checkpoint": pa.array([label] * len(g), pa.string()),
            "group": pa.array(MASS_GROUPS, pa.string()).take(pa.array(g.astype(np.int64))),
            "token_id": pa.array(v.astype(np.int64), pa.int64()),
            "mass": pa.array(mass[g, v], pa.float64()),
            "logged_mass": pa.array(logged[g, v], pa.float64()),
        }
    )


def _auto_chunk(device: str) -> int:
    return 2048 if str(device).startswith("cuda") else 256


def _my_share(out: Path, ids: Sequence[str], info: Any) -> list[str]:
    """This rank's trajectory ids: every ``world_size``-th of a longest-first order (similar work per rank,
    and blocks of similar lengths, so little padding)."""
    from trajlab.rescore.distributed import shard
    from trajlab.rescore.select import text_lengths

    lengths = text_lengths(out, ids)
    order = sorted(ids, key=lambda t: (-lengths.get(t, 0), t))
    return shard(order, info)


# ------------------------------------------------------------------------------------------------ main
def rescore(
    out: str | Path,
    ckpts: Sequence[str | Path],
    *,
    where: str | None = None,
    steps: Iterable[int] | str | None = None,
    ckpt_steps: Iterable[int] | str | None = None,
    sample: int | None = None,
    seed: int = 0,
    limit: int | None = None,
    device: str = "auto",
    dtype: str = "auto",
    tokenizer: str | Path | None = None,
    trust_remote_code: bool = False,
    allow_unsafe_pickle: bool = False,
    cache_merged: bool = False,
    device_map: str | None = None,
    chunk: int | None = None,
    max_batch_tokens: int = 16384,
    tokens: str = "all",
    tau_intrusion: float | None = None,
    tau_dropout: float | None = None,
    rules_dirs: Sequence[str | Path] = (),
    resume: bool = False,
    fail_above: float | None = None,
    reference: str | None = "first",
    calibration_quantile: float = 0.999,
    block_size: int = 64,
    progress: bool = True,
) -> RescoreSummary:
    """Rescore the trajectories of the scan in ``out`` with each checkpoint in ``ckpts``.

    Selection: ``where`` (SQL predicate over ``trajectories``), ``steps`` (rollout steps), ``sample`` (N per step,
    stratified by has-malformed, seeded by ``seed``), ``limit``. Checkpoints: paths accepted by
    :func:`trajlab.rescore.checkpoints.resolve_checkpoints`; ``ckpt_steps`` picks ``global_step_*`` of a root.
    ``tokenizer``: a directory or alias (default: each checkpoint's own). ``chunk``: LM-head rows per chunk
    (default 2048 on GPU, 256 on CPU). ``tokens``: ``all`` | ``calls`` | ``none`` (rows in ``tokens.parquet``).
    ``tau_*`` override ``rules/control_tokens.yaml``. ``resume`` keeps what an interrupted run already scored.
    ``reference``: ``first`` (the first checkpoint in step order) or a label; ``calibration_quantile`` q sets
    each control token × region threshold from the reference's own distribution (:mod:`~trajlab.rescore.drift`).
    ``fail_above``: the summary's :attr:`RescoreSummary.exceeded` turns true when a checkpoint's *calibrated*
    spike rate is above it (the CLI exits 4). Writes ``OUT/rescore/<label>/*.parquet``,
    ``OUT/rescore/compare.parquet`` and the reference tables (calibration, paired, discovered, distribution).
    """
    import importlib.util

    from trajlab.rescore import distributed as dist_mod
    from trajlab.rescore.control_tokens import load_control_rules, thresholds_from_rules
    from trajlab.rescore.select import parse_steps, select_trajectories

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(
            f"trajlab rescore needs {' and '.join(missing)}",
            hint="pip install torch==2.13.0 'trajlab[rescore]' (pin torch, or pip pulls a CUDA build)",
        )
    out = Path(out)
    if tokens not in TOKENS_MODES:
        raise TrajlabError(f"--tokens {tokens!r}: expected one of {', '.join(TOKENS_MODES)}")
    if not (out / "trajectories.parquet").exists():
        raise TableError(f"{out}: no trajectories.parquet here", hint="run `trajlab scan DUMPS -o OUT` first")
    if fail_above is not None and not 0.0 <= fail_above <= 1.0:
        raise TrajlabError(f"--fail-above {fail_above}: expected a rate between 0 and 1")
    if not 0.5 <= calibration_quantile < 1.0:
        raise TrajlabError(f"--calibration-quantile {calibration_quantile}: expected a value in [0.5, 1), e.g. 0.999")
    if max_batch_tokens < 1:
        raise TrajlabError("--max-batch-tokens must be at least 1")
    if chunk is not None and chunk < 1:
        raise TrajlabError("--chunk must be at least 1")
    rules = load_control_rules(rules_dirs)
    th = thresholds_from_rules(rules, intrusion=tau_intrusion, dropout=tau_dropout)
    steps_set = parse_steps(steps) if not isinstance(steps, set) else steps
    ckpt_steps_set = parse_steps(ckpt_steps) if not isinstance(ckpt_steps, set) else ckpt_steps

    from trajlab.rescore.checkpoints import resolve_checkpoints

    refs = resolve_checkpoints(list(ckpts), ckpt_steps_set)
    from trajlab.rescore.drift import pick_reference

    pick_reference([(r.label, r.step) for r in refs], reference)  # an unknown label fails before any scoring
    ids = select_trajectories(out, where=where, steps=steps_set, sample=sample, seed=seed, limit=limit)

    info = dist_mod.init_distributed()
    try:
        with _quiet_libraries():
            return _run(out, refs, ids, info, th=th, rules=rules, rules_dirs=rules_dirs, device=device, dtype=dtype, tokenizer=tokenizer,
                        trust_remote_code=trust_remote_code, allow_unsafe_pickle=allow_unsafe_pickle,
                        cache_merged=cache_merged, device_map=device_map, chunk=chunk,
                        max_batch_tokens=max_batch_tokens, tokens=tokens, resume=resume, fail_above=fail_above,
                        reference=reference, calibration_quantile=calibration_quantile,
                        block_size=max(1, block_size), progress=progress)  # fmt: skip
    finally:
        dist_mod.finalize(info)


class _quiet_libraries:  # noqa: N801 - used as a context manager
    """Library chatter the user cannot act on stays hidden while rescoring: torch's DeviceMesh pickling notes
    (FSDP shards), transformers' load messages, and Python warnings raised inside torch and transformers."""

    def __enter__(self) -> None:
        import logging
        import warnings

        self._warn = warnings.catch_warnings()
        self._warn.__enter__()
        for mod in ("torch", "transformers", "accelerate"):
            warnings.filterwarnings("ignore", module=rf"{mod}(\.|$)")
        self._levels = {}
        for name in ("torch.distributed", "torch.distributed.device_mesh", "transformers", "accelerate"):
            lg = logging.getLogger(name)
            self._levels[name] = lg.level
            lg.setLevel(logging.ERROR)

    def __exit__(self, *exc: Any) -> None:
        import logging

        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)
        self._warn.__exit__(*exc)


def _run(out: Path, refs: list[Any], ids: list[str], info: Any, **kw: Any) -> RescoreSummary:
    from trajlab.rescore import distributed as dist_mod
    from trajlab.rescore import outputs
    from trajlab.rescore.select import load_malformed_calls, load_texts

    mine = _my_share(out, ids, info)
    texts = load_texts(out, mine)
    malformed = load_malformed_calls(out, mine)
    spans = _SpanCache(kw["rules_dirs"])
    tokenizers = _TokenizerCache(kw["trust_remote_code"])
    summaries: list[CheckpointSummary] = []
    decoders: dict[str, Callable[[int], str]] = {}
    reference, quantile = kw.pop("reference"), kw.pop("calibration_quantile")
    for ref in refs:
        tok = tokenizers(kw["tokenizer"] if kw["tokenizer"] is not None else ref)
        decoders[ref.label] = _Labels(tok)
        summaries.append(_run_checkpoint(out, ref, texts, malformed, spans, tok, info, **kw))
    summary = RescoreSummary(
        out=str(out), trajectories_selected=len(ids), checkpoints=summaries, compare_path=None,
        fail_above=kw["fail_above"], rank=info.rank, world_size=info.world_size, calibration_quantile=quantile,
    )  # fmt: skip
    if info.is_main:
        order = [(r.label, r.step) for r in refs]
        summary.compare_path = str(outputs.write_compare(out, order))
        apply_drift(summary, out, order, reference=reference, quantile=quantile, thresholds=kw["th"],
                    decoders=decoders)  # fmt: skip
        outputs.write_drift_json(out, summary.reference, quantile, summaries)
    dist_mod.barrier(info)
    if not info.is_main:  # every rank exits the same way under --fail-above
        outputs.read_drift_json(out, summary)
    return summary


def apply_drift(
    summary: RescoreSummary,
    out: Path,
    order: list[tuple[str, int | None]],
    *,
    reference: str | None,
    quantile: float,
    thresholds: Any,
    decoders: dict[str, Callable[[int], str]] | None = None,
) -> None:
    """Compare every checkpoint with the reference (:mod:`~trajlab.rescore.drift`) and fill the summary."""
    from trajlab.rescore.drift import compare_to_reference

    d = compare_to_reference(out, order, reference=reference, quantile=quantile, thresholds=thresholds,
                             decoders=decoders)  # fmt: skip
    summary.reference = d.reference
    summary.calibration_quantile = d.quantile
    for c in summary.checkpoints:
        h = d.checkpoints.get(c.label)
        if h is None:
            continue
        for k, v in asdict(h).items():
            if k != "label":
                setattr(c, k, v)
    summary.top_moves = d.moves[:8]
    summary.discovered = d.discovered
    summary.malformation_drift = d.malformation


def _run_checkpoint(
    out: Path,
    ref: Any,
    texts: list[Any],
    malformed: dict[str, list[dict]],
    spans: _SpanCache,
    tok: Any,
    info: Any,
    *,
    th: Any,
    rules: dict[str, Any],
    rules_dirs: Sequence[str | Path],
    device: str,
    dtype: str,
    tokenizer: Any,
    trust_remote_code: bool,
    allow_unsafe_pickle: bool,
    cache_merged: bool,
    device_map: str | None,
    chunk: int | None,
    max_batch_tokens: int,
    tokens: str,
    resume: bool,
    fail_above: float | None,
    block_size: int,
    progress: bool,
) -> CheckpointSummary:
    import torch

    from trajlab.atomic import atomic_write_json
    from trajlab.rescore import distributed as dist_mod
    from trajlab.rescore import outputs
    from trajlab.rescore.checkpoints import (
        check_tokenizer_matches,
        load_model,
        resolve_device,
    )
    from trajlab.rescore.control_tokens import resolve_control_set
    from trajlab.rescore.scoring import ChunkedScorer, ScoreRequest
    from trajlab.rescore.spikes import (
        ControlStats,
        classify,
        find_malformation_points,
        malformation_rows,
        spike_rows,
        trajectory_row,
    )
    from trajlab.rescore.stream import ChatSpecials, build_streams
    from trajlab.rescore.tokenizers import FIT_MARGIN, tokenizer_fit_gap

    t0 = time.perf_counter()
    dev = resolve_device(device)
    if dev == "cuda" and info.world_size > 1 and device_map is None:
        dev = f"cuda:{info.local_rank}"
    ldir = outputs.label_dir(out, ref.label)
    pdir = outputs.parts_dir(out, ref.label)
    done: set[str] = set()
    run_opts = {"checkpoint": str(ref.path), "tokenizer": str(tokenizer) if tokenizer else "checkpoint",
                "dtype": dtype, "tokens_mode": tokens,
                "thresholds": {"intrusion": th.intrusion, "dropout": th.dropout,
                               "intrusion_regions": list(th.intrusion_regions),
                               "dropout_regions": list(th.dropout_regions)}}
    if info.is_main:
        if resume:
            outputs.check_resume_options(out, ref.label, run_opts)  # never mix parts scored two ways
            done = outputs.prepare_resume(out, ref.label)
        else:
            outputs.clear_parts(pdir)
        outputs.write_resume_options(out, ref.label, run_opts)
    dist_mod.barrier(info)
    if resume and not info.is_main:
        done = outputs.done_ids(out, ref.label)
    todo = [t for t in texts if t.trajectory_id not in done]

    summary = CheckpointSummary(ref.label, str(ref.path), ref.kind, ref.step, str(ldir))
    summary.skipped_resume = len(texts) - len(todo)
    model = load_model(ref, device=dev, dtype=dtype, trust_remote_code=trust_remote_code,
                       allow_unsafe_pickle=allow_unsafe_pickle, cache_merged=cache_merged,
                       device_map=device_map)  # fmt: skip
    check_tokenizer_matches(model, tok)
    cset = resolve_control_set(tok, rules)
    summary.control_family = cset.family
    summary.skipped_control_strings = list(cset.skipped)
    from trajlab.rescore.outputs import MASS_GROUPS

    scorer = ChunkedScorer(
        model, cset.ids, cset.mask_rows(), chunk=chunk or _auto_chunk(dev), max_batch_tokens=max_batch_tokens,
        device=None if device_map else dev, mass_groups=len(MASS_GROUPS),
    )  # fmt: skip
    gap = tokenizer_fit_gap(scorer, tok)
    if gap is not None and gap < FIT_MARGIN:
        from trajlab.console import warn

        warn(f"checkpoint {ref.label}: the tokenizer may not fit this model: it scores ordinary text only "
             f"{gap:+.2f} nats/token better than the same tokens shuffled (a fitting tokenizer gives well over "
             f"{FIT_MARGIN}); a tokenizer with permuted ids, another model's tokenizer, or an untrained model. "
             "Check --tokenizer before trusting these scores.")
    sp = ChatSpecials.from_tokenizer(tok)
    im_end_id = sp.im_end if sp else (tok.eos_token_id if isinstance(tok.eos_token_id, int) else None)
    labels = _Labels(tok)
    seq = outputs.next_seq(pdir, info.rank)

    bar = _progress(progress and info.is_main, ref.label, sum(len(t.output) for t in todo))
    lp_sum = 0.0
    try:
        for b0 in range(0, len(todo), block_size):
            block = todo[b0 : b0 + block_size]
            streams = build_streams(block, tok, spans)
            reqs, points_all, extra_maps, groups = [], [], [], []
            for tr, st in zip(block, streams, strict=True):
                points = find_malformation_points(tr, st, malformed.get(tr.trajectory_id, []), tok, im_end_id)
                extra, emap = [], {}
                for i, p in enumerate(points):
                    if p.index is not None and p.repaired_token_id is not None:
                        emap[i] = len(extra)
                        extra.append((p.index, int(p.repaired_token_id)))
                groups.append(_mass_groups(st, th))
                reqs.append(ScoreRequest(st.ids, st.positions, cset.format_index(tr.tool_format), extra, groups[-1]))
                points_all.append(points)
                extra_maps.append(emap)
            results = scorer.score(reqs, progress=bar.tokens if bar else None)
            tok_tables, pos_tables, spike_r, traj_r, mal_r = [], [], [], [], []
            block_stats = ControlStats(cset)
            mass = scorer.take_mass()
            logged_mass = np.zeros_like(mass)
            for tr, st, res, points, emap, grp in zip(block, streams, results, points_all, extra_maps, groups,
                                                      strict=True):  # fmt: skip
                fl = classify(st, res, cset, tr.tool_format, th)
                row = trajectory_row(tr, st, res, fl)
                row["checkpoint"] = ref.label
                traj_r.append(row)
                for r in spike_rows(tr, st, res, fl, cset, labels):
                    r["checkpoint"] = ref.label
                    spike_r.append(r)
                mal_r += malformation_rows(tr, st, res, points, emap, labels, ref.label)
                t = _tokens_table(ref.label, tr, st, res, cset, labels, tokens)
                if t is not None:
                    tok_tables.append(t)
                block_stats.add(st, res, fl, tr.tool_format)
                pos_tables.append(_positions_table(ref.label, tr, st, res, cset, fl))
                gm = grp >= 0
                np.add.at(logged_mass, (grp[gm], st.ids[st.positions][gm]), np.exp(res.logprob[gm].astype(np.float64)))
                lp_sum += float(res.logprob.sum(dtype=np.float64))
                summary.tokens += st.n_tokens
                summary.scored_tokens += st.n_scored
            outputs.write_part(
                pdir, info.rank, seq,
                {"tokens": pa.concat_tables(tok_tables) if tok_tables else None, "spikes": spike_r,
                 "malformations": mal_r, "control_stats": block_stats.rows(ref.label),
                 "positions": pa.concat_tables(pos_tables) if pos_tables else None,
                 "token_mass": _token_mass_rows(ref.label, mass, logged_mass), "trajectory_scores": traj_r},
            )  # fmt: skip
            seq += 1
            summary.trajectories += len(block)
            if bar:
                bar.chars(sum(len(t.output) for t in block))
    finally:
        if bar:
            bar.close()
        del scorer, model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    dist_mod.barrier(info)
    if info.is_main:
        merged_parts = outputs.merge_parts(out, ref.label)
        _fill_from_tables(summary, ldir)
        summary.seconds = time.perf_counter() - t0
        summary.tokens_per_s = summary.scored_tokens / summary.seconds if summary.seconds > 0 else 0.0
        atomic_write_json(
            ldir / "manifest.json",
            {
                "checkpoint": {"label": ref.label, "path": str(ref.path), "kind": ref.kind, "step": ref.step},
                "tokenizer": str(tokenizer) if tokenizer else "checkpoint",
                "device": dev, "dtype": dtype, "world_size": info.world_size,
                "thresholds": {"intrusion": th.intrusion, "dropout": th.dropout,
                               "intrusion_regions": list(th.intrusion_regions),
                               "dropout_regions": list(th.dropout_regions)},
                "control_tokens": {"family": cset.family,
                                   "tokens": [{"token": lab, "id": i, "strings": s}
                                              for lab, i, s in zip(cset.labels, cset.ids, cset.sources, strict=True)],
                                   "skipped": cset.skipped},
                "tokens_mode": tokens,
                "parts": merged_parts,
                "summary": {k: v for k, v in asdict(summary).items() if k not in ("skipped_control_strings",)},
            },
        )  # fmt: skip
    dist_mod.barrier(info)
    if not info.is_main:  # every rank reports the same totals, so every rank exits the same way
        _fill_from_tables(summary, ldir)
        summary.seconds = time.perf_counter() - t0
    return summary


def _fill_from_tables(s: CheckpointSummary, ldir: Path) -> None:
    """Totals over every rank and resumed part, read back from the merged tables."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ts = pq.read_table(ldir / "trajectory_scores.parquet")
    s.trajectories = ts.num_rows
    if ts.num_rows:
        col = lambda n: ts.column(n)  # noqa: E731
        s.tokens = int(pc.sum(col("n_tokens")).as_py() or 0)
        s.scored_tokens = int(pc.sum(col("n_scored")).as_py() or 0)
        s.roundtrip_mismatches = int(pc.sum(pc.invert(col("roundtrip_ok")).cast(pa.int64())).as_py() or 0)
        s.intrusion_positions = int(pc.sum(col("n_intrusion_positions")).as_py() or 0)
        s.intrusions = int(pc.sum(col("n_intrusions")).as_py() or 0)
        s.dropout_positions = int(pc.sum(col("n_dropout_positions")).as_py() or 0)
        s.dropouts = int(pc.sum(col("n_dropouts")).as_py() or 0)
        elig = s.intrusion_positions + s.dropout_positions
        s.spike_rate = (s.intrusions + s.dropouts) / elig if elig else 0.0
        w = pc.multiply(pc.fill_null(col("mean_logprob"), 0.0), col("n_scored").cast(pa.float64()))
        s.mean_logprob = float(pc.sum(w).as_py()) / s.scored_tokens if s.scored_tokens else None
    mal = pq.read_table(ldir / "malformations.parquet")
    both = mal.filter(pc.and_(pc.is_valid(mal.column("malformed_prob")), pc.is_valid(mal.column("repaired_prob"))))
    s.malformations = both.num_rows
    if both.num_rows:
        mp = both.column("malformed_prob")
        rp = both.column("repaired_prob")
        s.mean_malformed_prob = float(pc.mean(mp).as_py())
        s.mean_repaired_prob = float(pc.mean(rp).as_py())
        s.malformed_preferred = int(pc.sum(pc.greater(mp, rp).cast(pa.int64())).as_py() or 0)
        import polars as pl

        df = pl.from_arrow(both.select(["categories", "log_odds"])).explode("categories")
        med = df.group_by("categories").agg(pl.col("log_odds").median()).sort("categories")
        s.log_odds_by_category = {r["categories"]: float(r["log_odds"]) for r in med.to_dicts() if r["categories"]}


class _Bar:
    """A rich progress bar over scored tokens (total estimated from characters, refined as blocks finish)."""

    def __init__(self, label: str, total_chars: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from trajlab.console import err_console

        self.total_chars = max(1, total_chars)
        self.done_chars = 0
        self.done_tokens = 0
        self.p = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("tokens"),
            TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=False,
        )  # fmt: skip
        self.p.start()
        self.task = self.p.add_task(f"rescore {label}", total=self.total_chars // 4)

    def tokens(self, n: int) -> None:
        self.done_tokens += n
        self.p.update(self.task, advance=n)

    def chars(self, n: int) -> None:
        self.done_chars += n
        ratio = self.done_tokens / max(1, self.done_chars)
        est = int(self.done_tokens + (self.total_chars - self.done_chars) * ratio)
        self.p.update(self.task, total=max(est, self.done_tokens))

    def close(self) -> None:
        self.p.update(self.task, total=self.done_tokens)
        self.p.stop()


def _progress(enabled: bool, label: str, total_chars: int) -> _Bar | None:
    return _Bar(label, total_chars) if enabled else None


from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, rescore)

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

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trajlab.errors import MissingDependencyError, TableError, TrajlabError
from trajlab.rescore.caches import SpanCache, TokenizerCache, TokenLabels
from trajlab.rescore.checkpoint_run import run_checkpoint
from trajlab.rescore.summary import CheckpointSummary, RescoreSummary

TOKENS_MODES = ("all", "calls", "none")


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
    spans = SpanCache(kw["rules_dirs"])
    tokenizers = TokenizerCache(kw["trust_remote_code"])
    summaries: list[CheckpointSummary] = []
    decoders: dict[str, Callable[[int], str]] = {}
    reference, quantile = kw.pop("reference"), kw.pop("calibration_quantile")
    for ref in refs:
        tok = tokenizers(kw["tokenizer"] if kw["tokenizer"] is not None else ref)
        decoders[ref.label] = TokenLabels(tok)
        summaries.append(run_checkpoint(out, ref, texts, malformed, spans, tok, info, **kw))
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

"""The rescore driver: :func:`rescore` validates the scan, resolves checkpoints and the reference, selects
trajectories, scores this rank's share with every checkpoint (:func:`~trajlab.rescore.checkpoint_run.run_checkpoint`)
and, on rank 0, writes the comparison tables and compares every checkpoint with the reference
(:func:`apply_drift`). What it does end to end: :mod:`trajlab.rescore`.

Heavy modules (torch, transformers) are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trajlab.errors import MissingDependencyError, TableError, shell_word
from trajlab.rescore.caches import SpanCache, TokenizerCache, TokenLabels
from trajlab.rescore.checkpoint_run import run_checkpoint
from trajlab.rescore.options import RescoreOptions
from trajlab.rescore.summary import CheckpointSummary, RescoreSummary
from trajlab.rules_match import check_scan_rules


def _my_share(out: Path, ids: Sequence[str], info: Any) -> list[str]:
    """This rank's trajectory ids: every ``world_size``-th of a longest-first order (similar work per rank,
    and blocks of similar lengths, so little padding)."""
    from trajlab.rescore.distributed import shard
    from trajlab.rescore.select import text_lengths

    lengths = text_lengths(out, ids)
    order = sorted(ids, key=lambda t: (-lengths.get(t, 0), t))
    return shard(order, info)


# ------------------------------------------------------------------------------------------------ main
def rescore(out: str | Path, ckpts: Sequence[str | Path], options: RescoreOptions | None = None) -> RescoreSummary:
    """Rescore the trajectories of the scan in ``out`` with each checkpoint in ``ckpts``.

    ``options`` (:class:`~trajlab.rescore.options.RescoreOptions`, default: all defaults) says which trajectories
    (``where``, ``steps``, ``sample`` per step stratified by has-malformed and seeded by ``seed``, ``limit``), which
    checkpoints (paths accepted by :func:`trajlab.rescore.checkpoints.resolve_checkpoints`; ``ckpt_steps`` picks
    ``global_step_*`` of a root) and how to score and compare them: ``reference`` is ``first`` (the first
    checkpoint in step order) or a label; ``calibration_quantile`` q sets each control token × region threshold
    from the reference's own distribution (:mod:`~trajlab.rescore.drift`); with ``fail_above``, the summary's
    :attr:`RescoreSummary.exceeded` turns true when a checkpoint's *calibrated* spike rate is above it (the CLI
    exits 4). Writes ``OUT/rescore/<label>/*.parquet``, ``OUT/rescore/compare.parquet`` and the reference tables
    (calibration, paired, discovered, distribution).

    Example::

        rescore("out", ["ckpts/"], RescoreOptions(steps="140-150", sample=1, progress=False))
    """
    import importlib.util

    from trajlab.rescore import distributed as dist_mod
    from trajlab.rescore.control_tokens import load_control_rules, thresholds_from_rules
    from trajlab.rescore.select import select_trajectories

    opts = options if options is not None else RescoreOptions()
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(
            f"trajlab rescore needs {' and '.join(missing)}",
            hint="pip install torch==2.13.0 'trajlab[rescore]' (pin torch, or pip pulls a CUDA build)",
        )
    out = Path(out)
    if not (out / "trajectories.parquet").exists():
        raise TableError(f"{out}: no trajectories.parquet here", hint=f"run `trajlab scan DUMPS -o {shell_word(out)}` first")
    rules = load_control_rules(opts.rules_dirs)
    th = thresholds_from_rules(rules, intrusion=opts.tau_intrusion, dropout=opts.tau_dropout)

    from trajlab.rescore.checkpoints.resolve import resolve_checkpoints

    refs = resolve_checkpoints(list(ckpts), _as_set(opts.ckpt_steps))
    from trajlab.rescore.drift import pick_reference

    pick_reference([(r.label, r.step) for r in refs], opts.reference)  # an unknown label fails before any scoring
    ids = select_trajectories(out, where=opts.where, steps=_as_set(opts.steps), sample=opts.sample, seed=opts.seed,
                              limit=opts.limit)
    match = check_scan_rules(out, opts.rules_dirs)  # spans come from the classifier: say when its rules differ

    info = dist_mod.init_distributed()
    try:
        with _quiet_libraries():
            summary = _run(out, refs, ids, info, opts, th=th, rules=rules)
        if match is not None:
            summary.rules_match = match.as_dict()
            warning = match.warning("rescore")
            if warning:
                summary.warnings.append(warning)
        return summary
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


def _as_set(steps: Any) -> set[int] | None:
    """Steps of the options as the selection functions take them (None: every step)."""
    return None if steps is None else set(steps)


def _run(out: Path, refs: list[Any], ids: list[str], info: Any, opts: RescoreOptions, *, th: Any,
         rules: dict[str, Any]) -> RescoreSummary:
    from trajlab.rescore import distributed as dist_mod
    from trajlab.rescore import outputs
    from trajlab.rescore.select import load_malformed_calls, load_texts

    mine = _my_share(out, ids, info)
    texts = load_texts(out, mine)
    malformed = load_malformed_calls(out, mine)
    spans = SpanCache(opts.rules_dirs)
    tokenizers = TokenizerCache(opts.trust_remote_code)
    summaries: list[CheckpointSummary] = []
    decoders: dict[str, Callable[[int], str]] = {}
    reference, quantile = opts.reference, opts.calibration_quantile
    for ref in refs:
        tok = tokenizers(opts.tokenizer if opts.tokenizer is not None else ref)
        decoders[ref.label] = TokenLabels(tok)
        summaries.append(run_checkpoint(out, ref, texts, malformed, spans, tok, info, opts, th=th, rules=rules))
    summary = RescoreSummary(
        out=str(out), trajectories_selected=len(ids), checkpoints=summaries, compare_path=None,
        fail_above=opts.fail_above, rank=info.rank, world_size=info.world_size, calibration_quantile=quantile,
    )  # fmt: skip
    if info.is_main:
        order = [(r.label, r.step) for r in refs]
        summary.compare_path = str(outputs.write_compare(out, order))
        apply_drift(summary, out, order, reference=reference, quantile=quantile, thresholds=th,
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

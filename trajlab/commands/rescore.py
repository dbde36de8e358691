"""``trajlab rescore``: the CLI wrapper over :func:`trajlab.rescore.rescore` (and its summary view)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from trajlab.commands import options as opt

EXIT_SPIKES = 4


def register(app: typer.Typer) -> None:
    @app.command("rescore")
    def rescore_cmd(
        out: Path = typer.Argument(..., help="Scan output directory (holds trajectories.parquet)."),
        ckpt: list[Path] = typer.Option(..., "--ckpt", help="Checkpoint: HF dir, verl global_step_N or global_step_N/actor (FSDP or Megatron), or a root of global_step_* dirs. Repeatable; scored in the order given."),
        where: str | None = typer.Option(None, "--where", help="SQL predicate over the trajectories table, e.g. \"split = 'train' AND score = 0\"."),
        steps: str | None = typer.Option(None, "--steps", help="Rollout steps to rescore: 60,120 or 80-130."),
        ckpt_steps: str | None = typer.Option(None, "--ckpt-steps", help="global_step_N to take from a checkpoints root (default: all)."),
        sample: int | None = typer.Option(None, "--sample", help="N trajectories per step, half with malformed calls, half without (seeded)."),
        seed: int = typer.Option(0, "--seed", help="Seed of --sample."),
        limit: int | None = typer.Option(None, "--limit", help="At most this many trajectories (after --sample)."),
        device: str = typer.Option("auto", "--device", help="auto | cuda | cuda:N | cpu."),
        dtype: str = typer.Option("auto", "--dtype", help="auto (bf16 on GPU, fp32 on CPU) | float32 | bfloat16 | float16."),
        tokenizer: str | None = opt.tokenizer_option("Tokenizer dir or alias (qwen3, qwen3.5); default: the checkpoint's own."),
        device_map: str | None = typer.Option(None, "--device-map", help="'auto' spreads a model too big for one GPU (needs accelerate)."),
        chunk: int | None = typer.Option(None, "--chunk", help="LM-head rows per chunk (default 2048 on GPU, 256 on CPU)."),
        max_batch_tokens: int = typer.Option(16384, "--max-batch-tokens", help="Padded tokens per forward batch."),
        tokens: str = typer.Option("all", "--tokens", help="Rows in tokens.parquet: all | calls (tokens inside tool calls) | none."),
        tau_intrusion: float | None = typer.Option(None, "--tau-intrusion", help="Intrusion: control mass >= TAU at a content position (default from rules)."),
        tau_dropout: float | None = typer.Option(None, "--tau-dropout", help="Dropout: a logged control token gets probability <= 1-TAU (default from rules)."),
        rules: list[Path] = opt.rules_option("Extra rule-pack directory with a control_tokens.yaml (repeatable)."),
        resume: bool = typer.Option(False, "--resume", help="Keep what an interrupted run already scored; score the rest."),
        reference: str = typer.Option("first", "--reference", help="Checkpoint the others are measured against: a label, or 'first' (the first in step order)."),
        calibration_quantile: float = typer.Option(0.999, "--calibration-quantile", help="Quantile of the reference's own control-token probabilities that sets each token x region spike threshold."),
        fail_above: float | None = typer.Option(None, "--fail-above", help="Exit 4 when a checkpoint's calibrated spike rate (against --reference; not the absolute-tau rate) exceeds RATE (0-1)."),
        trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow a checkpoint's own model code."),
        allow_unsafe_pickle: bool = typer.Option(False, "--allow-unsafe-pickle", help="Load FSDP shards with full pickle (only for shards you trust)."),
        cache_merged: bool = typer.Option(False, "--cache-merged", help="Keep merged FSDP weights as safetensors next to the shards."),
        as_json: bool = opt.json_option("Print the summary as JSON."),
        no_progress: bool = opt.no_progress_option(),
    ) -> None:
        """Teacher-force logged trajectories through checkpoints and find control-token probability spikes.

        The headline is the calibrated spike rate: control-token probabilities beyond the reference checkpoint's own
        --calibration-quantile, per token and region; paired drift compares the same positions with the reference.

        Writes OUT/rescore/<checkpoint>/*.parquet, OUT/rescore/compare.parquet and, against the reference,
        OUT/rescore/{calibration,paired,discovered,distribution}.parquet. Multi-GPU: torchrun --nproc-per-node 8
        -m trajlab rescore OUT --ckpt ...

        Example: trajlab rescore out --ckpt ckpts/ --ckpt-steps 60,120 --sample 20 --fail-above 0.05
        """
        from trajlab.rescore import RescoreOptions, rescore

        options = RescoreOptions(
            where=where,
            steps=steps,
            ckpt_steps=ckpt_steps,
            sample=sample,
            seed=seed,
            limit=limit,
            device=device,
            dtype=dtype,
            tokenizer=tokenizer,
            trust_remote_code=trust_remote_code,
            allow_unsafe_pickle=allow_unsafe_pickle,
            cache_merged=cache_merged,
            device_map=device_map,
            chunk=chunk,
            max_batch_tokens=max_batch_tokens,
            tokens=tokens,
            tau_intrusion=tau_intrusion,
            tau_dropout=tau_dropout,
            rules_dirs=tuple(str(r) for r in rules),
            resume=resume,
            fail_above=fail_above,
            reference=reference,
            calibration_quantile=calibration_quantile,
            progress=not no_progress and not as_json,
        )
        summary = rescore(out, ckpt, options)
        if summary.rank == 0:
            if as_json:
                typer.echo(json.dumps(summary.to_dict(), indent=2, default=str))
            else:
                from trajlab.console import console

                print_summary(summary, console)
        if summary.exceeded:
            if summary.rank == 0:
                from trajlab.console import warn

                worst = max(summary.checkpoints, key=lambda c: c.calibrated_spike_rate)
                warn(f"calibrated spike rate {worst.calibrated_spike_rate:.2%} of checkpoint {worst.label} "
                     f"(reference {summary.reference}) exceeds --fail-above {fail_above:.2%}")
            raise typer.Exit(EXIT_SPIKES)


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _d(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}"


def _ci(r: dict[str, Any], key: str) -> str:
    lo, hi = r.get(f"{key}_lo"), r.get(f"{key}_hi")
    return _d(r[key]) if lo is None else f"{_d(r[key])} [{_d(lo)},{_d(hi)}]"


def _col(c: Any) -> str:
    return str(c.step) if c.step is not None else c.label[-10:]


def print_summary(summary: Any, console: Any) -> None:
    """The rich end-of-run summary (every table fits 80 columns): calibrated spikes and paired drift against the
    reference first, then the absolute-τ counts, malformation points, biggest paired moves, discovered tokens."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    def table(title: str, cols: list[str]) -> Table:
        console.print()
        console.print(f"[bold]{title}[/]", highlight=False)  # titles are kept under 80 columns
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for i, col in enumerate(cols):
            t.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
        return t

    for w in summary.warnings:
        console.print(Text(f"warning: {w}", style="yellow"))
    q = summary.calibration_quantile
    t = table(
        f"rescore: {summary.trajectories_selected} trajectories against {summary.reference} (q {q:.4g})",
        ["checkpoint", "step", "calibrated spikes", "paired drift [95% CI]", "tau spikes"],
    )
    for c in summary.checkpoints:
        ref = c.label == summary.reference
        drift = "reference" if ref else _ci(
            {"d": c.paired_drift, "d_lo": c.paired_drift_lo, "d_hi": c.paired_drift_hi}, "d")
        t.add_row(c.label, "-" if c.step is None else str(c.step), f"{c.calibrated_spike_rate:.2%}", drift,
                  f"{c.spike_rate:.2%}")  # fmt: skip
    console.print(t)
    for line in (f"calibrated spikes: control-token probability beyond the reference's own {q:.4g}",
                 "  quantile, per token and region (the --fail-above statistic). paired drift:",
                 "  median change of log P(malformed)/P(repaired) at the same malformation",
                 "  points, nats [95% CI]. tau spikes: fixed thresholds (--tau-*)."):
        console.print(f"[dim]{line}[/]", highlight=False)
    a = table("fixed thresholds (tau) and speed",
              ["checkpoint", "tokens", "intrusions", "dropouts", "logprob", "tokens/s"])
    for c in summary.checkpoints:
        a.add_row(c.label, f"{c.scored_tokens:,}", f"{c.intrusions}/{c.intrusion_positions}",
                  f"{c.dropouts}/{c.dropout_positions}", _p(c.mean_logprob), f"{c.tokens_per_s:,.0f}")  # fmt: skip
    console.print(a)
    for c in summary.checkpoints:
        if c.logged_tokens and c.logged_logprob_gap is not None:  # exact-token dumps (NeMo-RL)
            console.print(f"[dim]{c.label}: mean |log-prob - logged inference log-prob| {c.logged_logprob_gap:.4f} "
                          f"nats over {c.logged_tokens:,} generated tokens with a logged log-prob[/]")
        extra = f", {c.skipped_resume} kept from an earlier run" if c.skipped_resume else ""
        rt = f", [yellow]{c.roundtrip_mismatches} round-trip mismatches[/]" if c.roundtrip_mismatches else ""
        if extra or rt:
            console.print(f"[dim]{c.label}: {c.trajectories} trajectories{extra}[/]{rt}")
    if any(c.malformations for c in summary.checkpoints):
        m = table("malformation points: P(malformed) vs P(repaired) continuation",
                  ["checkpoint", "points", "P(malformed)", "P(repaired)", "malformed wins"])
        for c in summary.checkpoints:
            m.add_row(c.label, str(c.malformations), _p(c.mean_malformed_prob), _p(c.mean_repaired_prob),
                      f"{c.malformed_preferred}/{c.malformations}")  # fmt: skip
        console.print(m)
        ref = [c for c in summary.checkpoints if c.label == summary.reference]
        shown = ref + [c for c in summary.checkpoints if c.label != summary.reference][-6:]
        cats = sorted({k for c in shown for k in c.log_odds_by_category})
        if cats:
            lo = table("median log P(malformed)/P(repaired) by category and step",
                       ["category", *[_col(c) for c in shown]])
            for cat in cats:
                lo.add_row(cat[:24], *[_p(c.log_odds_by_category.get(cat)) for c in shown])
            console.print(lo)
    if summary.malformation_drift:
        md = table(f"malformation log odds: paired change vs {summary.reference}",
                   ["category", "checkpoint", "points", "change, nats", "up"])
        last = summary.checkpoints[-1].label
        for r in summary.malformation_drift:
            if r["checkpoint"] == last:
                md.add_row(r["name"][:24], r["checkpoint"], str(r["n"]), _ci(r, "median"), f"{r['share_up']:.0%}")
        console.print(md)
    if summary.top_moves:
        mv = table(f"biggest paired moves of control tokens vs {summary.reference}",
                   ["token", "where", "checkpoint", "median [95% CI]", "up"])
        for r in summary.top_moves:
            where = "content" if r["scope"] == "intrusion" else "logged"
            mv.add_row(Text(repr(r["name"])[:14]), where, Text(str(r["checkpoint"])), _ci(r, "median"),
                       f"{r['share_up']:.0%}")
        console.print(mv)
    disc = [r for r in summary.discovered if not r["is_control"]]
    if disc:
        last = max(r["checkpoint_index"] for r in disc)
        rows = [r for r in disc if r["checkpoint_index"] == last]
        rows.sort(key=lambda r: -r["score"])
        dt = table(f"discovered tokens: {rows[0]['checkpoint']} vs {summary.reference}",
                   ["token", "positions", "reference", "now", "x"])
        console.print("[dim]  tokens that gained most probability where they were not the written token[/]")
        for r in rows[:8]:
            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}"
            dt.add_row(Text(repr(r["token"])[:20]), Text(str(r["group"])), _p(r["reference_prob"]), _p(r["prob"]),
                       ratio)
        console.print(dt)
    for c in summary.checkpoints:
        if c.skipped_control_strings:
            console.print(Text(f"{c.label}: control strings not used: {'; '.join(c.skipped_control_strings)}",
                               style="dim"))
    console.print(Text(f"tables: {Path(summary.out) / 'rescore'}/ (per checkpoint, compare, calibration, paired, "
                       "discovered)"), soft_wrap=True)

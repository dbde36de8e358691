"""``trajlab rescore``: the CLI wrapper over :func:`trajlab.rescore.rescore` (and its summary view)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

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
        tokenizer: str | None = typer.Option(None, "--tokenizer", help="Tokenizer dir or alias (qwen3, qwen3.5); default: the checkpoint's own."),
        device_map: str | None = typer.Option(None, "--device-map", help="'auto' spreads a model too big for one GPU (needs accelerate)."),
        chunk: int | None = typer.Option(None, "--chunk", help="LM-head rows per chunk (default 2048 on GPU, 256 on CPU)."),
        max_batch_tokens: int = typer.Option(16384, "--max-batch-tokens", help="Padded tokens per forward batch."),
        tokens: str = typer.Option("all", "--tokens", help="Rows in tokens.parquet: all | calls (tokens inside tool calls) | none."),
        tau_intrusion: float | None = typer.Option(None, "--tau-intrusion", help="Intrusion: control mass >= TAU at a content position (default from rules)."),
        tau_dropout: float | None = typer.Option(None, "--tau-dropout", help="Dropout: a logged control token gets probability <= 1-TAU (default from rules)."),
        rules: list[Path] = typer.Option([], "--rules", help="Extra rule-pack directory with a control_tokens.yaml (repeatable)."),
        resume: bool = typer.Option(False, "--resume", help="Keep what an interrupted run already scored; score the rest."),
        fail_above: float | None = typer.Option(None, "--fail-above", help="Exit 4 when a checkpoint's spike rate exceeds RATE (0-1)."),
        trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow a checkpoint's own model code."),
        allow_unsafe_pickle: bool = typer.Option(False, "--allow-unsafe-pickle", help="Load FSDP shards with full pickle (only for shards you trust)."),
        cache_merged: bool = typer.Option(False, "--cache-merged", help="Keep merged FSDP weights as safetensors next to the shards."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    ) -> None:
        """Teacher-force logged trajectories through checkpoints and find control-token probability spikes.

        Writes OUT/rescore/<checkpoint>/{tokens,spikes,trajectory_scores,malformations,control_stats}.parquet
        and OUT/rescore/compare.parquet. Multi-GPU: torchrun --nproc-per-node 8 -m trajlab rescore OUT --ckpt ...

        Example: trajlab rescore out --ckpt ckpts/ --ckpt-steps 60,120 --sample 20 --fail-above 0.05
        """
        from trajlab.rescore import rescore

        summary = rescore(
            out,
            ckpt,
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
            rules_dirs=rules,
            resume=resume,
            fail_above=fail_above,
            progress=not no_progress and not as_json,
        )
        if summary.rank == 0:
            if as_json:
                typer.echo(json.dumps(summary.to_dict(), indent=2, default=str))
            else:
                from trajlab.console import console

                print_summary(summary, console)
        if summary.exceeded:
            if summary.rank == 0:
                from trajlab.console import warn

                worst = max(summary.checkpoints, key=lambda c: c.spike_rate)
                warn(f"spike rate {worst.spike_rate:.2%} of checkpoint {worst.label} exceeds --fail-above {fail_above:.2%}")
            raise typer.Exit(EXIT_SPIKES)


def _p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def print_summary(summary: Any, console: Any) -> None:
    """The rich end-of-run summary: one row per checkpoint, malformation odds, biggest control-token moves."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    def table(title: str, cols: list[str]) -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for i, col in enumerate(cols):
            t.add_column(col, justify="left" if i == 0 else "right", no_wrap=i == 0)
        return t

    t = table(
        f"rescore: {summary.trajectories_selected} trajectories",
        ["checkpoint", "step", "tokens", "intrusions", "dropouts", "spike rate", "mean logprob"],
    )
    for c in summary.checkpoints:
        t.add_row(
            c.label, "-" if c.step is None else str(c.step), f"{c.scored_tokens:,}",
            f"{c.intrusions}/{c.intrusion_positions}", f"{c.dropouts}/{c.dropout_positions}",
            f"{c.spike_rate:.2%}", _p(c.mean_logprob),
        )  # fmt: skip
    console.print(t)
    for c in summary.checkpoints:
        extra = f", {c.skipped_resume} kept from an earlier run" if c.skipped_resume else ""
        rt = f", [yellow]{c.roundtrip_mismatches} round-trip mismatches[/]" if c.roundtrip_mismatches else ""
        console.print(f"[dim]{c.label}: {c.trajectories} trajectories, {c.tokens_per_s:,.0f} tokens/s{extra}[/]{rt}")
    if any(c.malformations for c in summary.checkpoints):
        m = table("malformation points: P(malformed) vs P(repaired) continuation",
                  ["checkpoint", "points", "mean P(malformed)", "mean P(repaired)", "malformed preferred"])
        for c in summary.checkpoints:
            m.add_row(c.label, str(c.malformations), _p(c.mean_malformed_prob), _p(c.mean_repaired_prob),
                      f"{c.malformed_preferred}/{c.malformations}")  # fmt: skip
        console.print(m)
        shown = summary.checkpoints[-4:]
        cats = sorted({k for c in shown for k in c.log_odds_by_category})
        if cats:
            lo = table("median log P(malformed)/P(repaired) by category (higher: the malformation is more likely)",
                       ["category", *[c.label for c in shown]])
            for cat in cats:
                lo.add_row(cat, *[_p(c.log_odds_by_category.get(cat)) for c in shown])
            console.print(lo)
    if summary.top_moves:
        mv = table("biggest moves of control-token probability (from the previous checkpoint)",
                   ["token", "region", "checkpoint", "mean prob", "spike rate"])
        for r in summary.top_moves:
            mv.add_row(
                Text(repr(r["control_token"])), Text(str(r["region"])), Text(str(r["checkpoint"])),
                f"{_p(r['previous_mean_prob'])} -> {_p(r['mean_prob'])}",
                f"{(r['previous_spike_rate'] or 0):.1%} -> {r['spike_rate']:.1%}",
            )  # fmt: skip
        console.print(mv)
    for c in summary.checkpoints:
        if c.skipped_control_strings:
            console.print(Text(f"{c.label}: control strings not used: {'; '.join(c.skipped_control_strings)}",
                               style="dim"))
    console.print(Text(f"tables: {Path(summary.out) / 'rescore'}/<checkpoint>/*.parquet and compare.parquet"),
                  soft_wrap=True)

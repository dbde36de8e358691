"""``trajlab build-sft-pool``: the CLI wrapper over :func:`trajlab.curate.build_sft_pool`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from trajlab.commands import options as opt


def register(app: typer.Typer) -> None:
    @app.command("build-sft-pool")
    def build_sft_pool_cmd(
        out: Path = typer.Argument(..., help="Output directory of `trajlab scan` (its tables are read)."),
        pool: Path | None = opt.out_option(None, help="Pool directory (default: OUT/sft_pool)."),
        ratio: str = typer.Option("5:3:2", "--ratio", help="Mix positive:error_demo:hint by sample count, e.g. 5:3:2 or 1:0:0."),
        min_score: str = typer.Option(
            "group", "--min-score",
            help="Score rule for positives: 'group' (score > 0 and above the group median or the group's best), 'any', or a number N (score >= N).",
        ),
        per_group: int = typer.Option(2, "--per-group", help="At most K positives (and hints) per prompt group."),
        tokenizer: str | None = opt.tokenizer_option("Tokenizer directory for --max-tokens and the n_tokens column."),
        max_tokens: int | None = typer.Option(None, "--max-tokens", help="Skip samples longer than N tokens (needs --tokenizer)."),
        val_fraction: float = typer.Option(0.05, "--val-fraction", help="Share of prompts held out for val.parquet (split by prompt)."),
        max_samples: int | None = typer.Option(
            None, "--max-samples",
            help="Pool size to aim at; a short kind gives all it has and the others fill in (default: the largest pool at the exact ratio).",
        ),
        style: str = typer.Option("messages", "--style", help="messages (verl MultiTurnSFTDataset) | prompt-response (verl SFTDataset) | openai."),
        ood_eval: bool = typer.Option(False, "--ood-eval", help="Also write ood_eval.parquet: held-back prompts with renamed tools / the other call format."),
        ood_prompts: int = typer.Option(32, "--ood-prompts", help="At most N prompts in the OOD set (3 variants each)."),
        ood_format: str = typer.Option(
            "auto", "--ood-format",
            help=f"Call format of the reformatted OOD variants: auto (the other Qwen format) or any of {', '.join(opt.TOOL_FORMAT_NAMES)}.",
        ),
        source_split: list[str] = typer.Option(
            ["train"], "--source-split", help="Dump split(s) samples come from (repeatable); train by default, so RL validation prompts stay out.",
        ),
        seed: int = typer.Option(0, "--seed", help="Seed of every choice (same input + seed = same bytes)."),
        run: list[str] = typer.Option([], "--run", help="Only samples from this run (repeatable; default: every run)."),
        rules: list[Path] = opt.rules_option("Extra rule-pack directory with its own hints.yaml (repeatable)."),
        as_json: bool = opt.json_option("Print the summary as JSON instead of a table."),
        no_progress: bool = opt.no_progress_option("No progress bars."),
        rollout_n: int | None = opt.rollout_n_option(),
        split_step: int | None = typer.Option(
            None, "--split-step",
            help="Emergency hand-over: positives only from steps before N, error demonstrations and hints only from step N on (e.g. the early-warning step).",
        ),
    ) -> None:
        """Build the interleaved-SFT pool (positive, error-demonstration and hint samples) from a scan.

        Writes positive/error_demo/hint.parquet (every candidate of each kind), train/val.parquet (the mix, split by prompt), README.md (dataset card) and manifest.json into the pool directory.

        Example: trajlab build-sft-pool out -o out/sft_pool --ratio 5:3:2 --val-fraction 0.1 --ood-eval
        """
        from trajlab.console import console, warn
        from trajlab.curate import PoolOptions, build_sft_pool, summary_table

        options = PoolOptions(
            ratio=ratio,
            min_score=min_score,
            per_group=per_group,
            tokenizer=tokenizer,
            max_tokens=max_tokens,
            val_fraction=val_fraction,
            max_samples=max_samples,
            style=style,
            ood_eval=ood_eval,
            ood_prompts=ood_prompts,
            ood_format=ood_format,
            seed=seed,
            rules_dirs=tuple(str(r) for r in rules),
            source_splits=tuple(source_split),
            rollout_n=rollout_n,
            runs=tuple(run),
            split_step=split_step,
        )
        summary = build_sft_pool(out, pool, options, progress=not no_progress and not as_json)
        if as_json:
            typer.echo(json.dumps(summary.as_dict(), indent=2, default=str))
            return
        for w in summary.warnings:
            warn(w)
        console.print(summary_table(summary))
        files = ", ".join(f"{name} ({rows})" for name, rows in summary.files.items())
        console.print(f"wrote {files}, README.md, manifest.json", highlight=False)

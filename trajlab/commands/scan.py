"""``trajlab scan``: the CLI wrapper over :func:`trajlab.scan.scan`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from trajlab.commands import options as opt


def register(app: typer.Typer) -> None:
    @app.command("scan")
    def scan_cmd(
        paths: list[Path] = typer.Argument(None, help="Dump files or directories (walked recursively)."),
        out: Path = opt.out_option(..., help="Output directory for the tables."),
        tools: Path | None = opt.tools_option(),
        input_format: str = opt.input_format_option(),
        tool_format: str = opt.tool_format_option(),
        rules: list[Path] = opt.rules_option(),
        jobs: int = opt.jobs_option(0),
        strict: bool = typer.Option(False, "--strict", help="Exit 2 if any record could not be read."),
        as_json: bool = opt.json_option("Print the summary as JSON instead of a table."),
        fail_above: float | None = typer.Option(None, "--fail-above", help="Exit 3 if the malformed-call rate of the last --window steps exceeds RATE (0-1)."),
        window: int = typer.Option(10, "--window", help="Steps considered by --fail-above."),
        full: bool = typer.Option(False, "--full", help="Re-scan every file and re-read the metrics logs (ignore the incremental cache)."),
        no_progress: bool = opt.no_progress_option(),
        engine: str | None = typer.Option(None, "--engine", help="auto, columnar or records (default: $TRAJLAB_ENGINE, else auto). Same tables either way; the manifest records which engine read each file."),
        run: list[str] = opt.run_paths_option("NAME=PATH: the files under PATH form run NAME (repeatable; PATH is scanned too)."),
        rollout_n: int | None = opt.rollout_n_option(),
        tokenizer: str | None = opt.tokenizer_option("Decodes the token ids of dumps that log them (NeMo-RL): a tokenizer directory or qwen3.5 / qwen3 (default: auto, the built-in one that fits)."),
        control_prob: float = typer.Option(0.5, "--control-prob", help="steps.control_low_prob_share counts sampled control tokens below this probability (exact-token dumps)."),
        metrics: list[str] = opt.metrics_option(),
        lead_metric: str | None = typer.Option(None, "--lead-metric", help="Metric whose breakdown the lead time is measured against (default: the reward, critic/score/mean or critic/rewards/mean)."),
        lead_direction: str = typer.Option("down", "--lead-direction", help="down: the metric breaks down by falling; up: by rising."),
        tensorboard: Path | None = opt.tensorboard_option(),
    ) -> None:
        """Scan rollout dumps: classify every tool call and write Parquet tables into OUT.

        Each directory of step files is a run (experiment); the summary, early warning and --fail-above are
        per run. Example: trajlab scan sample_data/qwen35_xml_run -o out --fail-above 0.2 --window 10
        """
        from trajlab.console import console, warn
        from trajlab.errors import InputError
        from trajlab.ingest.runs import parse_run_specs
        from trajlab.options import check_min, check_rate
        from trajlab.scan import ScanOptions, scan
        from trajlab.trends import tripped_runs

        named = parse_run_specs(run)
        if not paths and not named:
            raise InputError("nothing to scan", hint="give a directory of dumps, e.g. trajlab scan outputs/ -o out")

        check_rate(fail_above, "--fail-above")
        check_min(window, 1, "--window")
        check_min(jobs, 0, "--jobs")

        summary = scan(
            paths or [],
            out,
            ScanOptions(tools=tools, input_format=input_format, tool_format=tool_format, rules_dirs=tuple(rules),
                        jobs=jobs, strict=False, incremental=not full, engine=engine, runs=named,
                        rollout_n=rollout_n, tokenizer=tokenizer, control_prob=control_prob,

                        metrics=tuple(metrics), lead_metric=lead_metric, lead_direction=lead_direction,
                        tensorboard=tensorboard),
            progress=not no_progress and not as_json,
        )
        tripped = tripped_runs(summary.steps, fail_above, window) if fail_above is not None else []
        tool_less = summary.calls == 0 and summary.trajectories > 0 and not summary.trajectories_with_tools
        if as_json:
            d = summary.to_dict()
            if fail_above is not None:
                d["fail_above"] = {"threshold": fail_above, "window": window, "tripped": tripped,
                                   "evaluated": not tool_less and summary.calls > 0}
            typer.echo(json.dumps(d, indent=2, default=str))
        else:
            from trajlab.scan.view import print_summary
            from trajlab.trends import category_steps

            for ex in summary.ingest_error_examples:
                warn(ex)
            print_summary(summary, console, category_steps(out))
        if strict and summary.ingest_errors:
            raise InputError(f"--strict: {summary.ingest_errors} ingest error(s); see {out}/ingest_errors.parquet")
        if fail_above is not None and tool_less:
            # a tool-less run: a malformed-call breaker does not apply (there is no call to be malformed); say so
            # and pass, so one pipeline can watch tool and tool-less runs alike
            warn(f"--fail-above: not evaluated: a tool-less run ({summary.trajectories:,} trajectories, no prompt "
                 "declares tools, no output makes a call); the malformed-call rate does not apply")
        elif fail_above is not None and summary.calls == 0 and summary.trajectories:
            # tools declared but never called: nothing to judge, and a run that stopped calling its tools is no pass
            raise InputError(
                f"--fail-above: {summary.trajectories_with_tools:,} of {summary.trajectories:,} trajectories declare "
                "tools but no output makes a call, so there is no malformed-call rate to judge; the check cannot pass",
                hint=f"see how the outputs end: trajlab sql {out} \"SELECT tool_format, end_reason, count(*) AS n "
                     "FROM trajectories GROUP BY ALL ORDER BY n DESC\"")
        elif fail_above is not None and summary.recent_rate(window) is None:
            # the breaker fails closed: nothing to judge is not a pass
            raise InputError(
                f"--fail-above: no tool calls with a step to judge ({summary.trajectories} trajectories, "
                f"{summary.ingest_errors} ingest errors); the check cannot pass",
                hint=f"check the input paths and {out}/ingest_errors.parquet")
        if tripped:
            for t in tripped:
                who = f"run {t['run']}: " if len(summary.runs) > 1 else ""
                warn(f"{who}malformed-call rate over the last {window} steps is {t['rate']:.1%} > --fail-above {fail_above:.1%}")
            raise typer.Exit(3)

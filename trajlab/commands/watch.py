"""``trajlab watch``: the CLI wrapper over :func:`trajlab.watch.watch`."""

from __future__ import annotations

from pathlib import Path

import typer

from trajlab.commands import options as opt


def register(app: typer.Typer) -> None:
    @app.command("watch")
    def watch_cmd(
        paths: list[Path] = typer.Argument(None, help="Run directory (or a root of runs) that training writes into."),
        out: Path = opt.out_option(..., help="Output directory: a scan output, kept up to date."),
        interval: float = typer.Option(5.0, "--interval", help="Seconds between looks at the directory."),
        fail_above: float | None = typer.Option(None, "--fail-above", help="Trip when a run's malformed-call rate over its last --window steps exceeds RATE (0-1)."),
        window: int = typer.Option(10, "--window", help="Steps considered by --fail-above."),
        no_warning_trip: bool = typer.Option(False, "--no-warning-trip", help="Do not trip on a run's early warning (only on --fail-above)."),
        on_trip: str | None = typer.Option(None, "--on-trip", help="Shell command run on a trip, with TRAJLAB_RUN, TRAJLAB_STEP, TRAJLAB_RATE, TRAJLAB_REASON, TRAJLAB_OUT set."),
        no_control_trip: bool = typer.Option(False, "--no-control-trip", help="Do not trip on the control-token statistic (the verl reward's record files, exact-token dumps)."),
        control_tau: float | None = typer.Option(None, "--control-tau", help="A fixed threshold for control_logprob_mean (default: calibrated on the run's own first 20 steps)."),
        keep_watching: bool = typer.Option(False, "--keep-watching", help="After a trip, keep watching (each run trips once per reason) instead of exiting 3."),
        publish_every: float = typer.Option(60.0, "--publish-every", help="Seconds between refreshing OUT's tables (0: after every look that found data)."),
        idle_exit: float | None = typer.Option(None, "--idle-exit", help="Stop after SECONDS without new data (default: run until Ctrl-C)."),
        run: list[str] = opt.run_paths_option(),
        tools: Path | None = opt.tools_option(),
        input_format: str = opt.input_format_option(),
        tool_format: str = opt.tool_format_option(),
        rules: list[Path] = opt.rules_option(),
        jobs: int = opt.jobs_option(1, help="Worker processes of each publish's scan, as in `trajlab scan` (0 = one per CPU; default 1: watch runs beside training)."),
        metrics: list[str] = opt.metrics_option(),
        tensorboard: Path | None = opt.tensorboard_option(),
    ) -> None:
        """Follow a live run: scan each new or grown step file as it lands, print one line per step, and trip
        (exit 3, or run --on-trip) when a run's early warning fires, --fail-above is exceeded, or the control-token statistic (the verl reward's record files, or exact-token dumps) leaves the band of the run's first steps. Each trip is written to OUT/trip.json (for the verl breaker and `trajlab handoff`).

        Ctrl-C stops cleanly; OUT is then exactly what `trajlab scan PATHS -o OUT` writes.

        Example: trajlab watch outputs/exp1 -o out --interval 10 --fail-above 0.2 --on-trip ./emergency_sft.sh
        """
        from rich.text import Text

        from trajlab.console import console
        from trajlab.errors import InputError
        from trajlab.ingest.runs import parse_run_specs
        from trajlab.watch import WatchOptions, watch

        named = parse_run_specs(run)
        if not paths and not named:
            raise InputError("nothing to watch", hint="give the run directory, e.g. trajlab watch outputs/exp1 -o out")
        console.print(Text(f"watching {', '.join(str(p) for p in (paths or []))}{' ' if paths else ''}"
                           f"{' '.join(f'{k}={v}' for k, v in named.items())} every {interval:g} s → {out} "
                           f"(Ctrl-C to stop)", style="dim"))

        def emit(line: object) -> None:
            text = line.text()  # type: ignore[attr-defined]
            console.print(Text(text, style="bold red" if line.state != "ok" else ""), soft_wrap=True)  # type: ignore[attr-defined]

        def tripped(t: object) -> None:
            what = (f"early warning at step {t.step} (noticed at step {t.noticed_step})"  # type: ignore[attr-defined]
                    if t.reason == "early_warning"  # type: ignore[attr-defined]
                    else f"control tokens: {t.detail} (noticed at step {t.noticed_step})"  # type: ignore[attr-defined]
                    if t.reason == "control_tokens"  # type: ignore[attr-defined]
                    else f"malformed-call rate {t.rate:.1%} over the last {window} steps > --fail-above")  # type: ignore[attr-defined]
            rc = f"; --on-trip exited {t.command_rc}" if t.command_rc is not None else ""  # type: ignore[attr-defined]
            then = ("watching on (--keep-watching)" if keep_watching else
                    f"stopping: the steps already on disk are scanned into {out} (not printed), then exit 3")
            console.print(Text(f"tripped: run {t.run}: {what}{rc}; {then}", style="bold red"), soft_wrap=True)  # type: ignore[attr-defined]

        result = watch(WatchOptions(
            paths=list(paths or []), out=out, runs=named, interval=interval, fail_above=fail_above, window=window,
            warning=not no_warning_trip, on_trip=on_trip, keep_watching=keep_watching, publish_every=publish_every,
            idle_exit=idle_exit, tools=tools, input_format=input_format, tool_format=tool_format,
            rules_dirs=tuple(str(r) for r in rules), jobs=jobs, metrics=tuple(metrics), tensorboard=tensorboard,
            control=not no_control_trip, control_tau=control_tau,
        ), emit=emit, on_trip=tripped)
        later = f" ({result.unprinted} steps after the trip were scanned, not printed)" if result.unprinted else ""
        console.print(Text(f"stopped ({result.stopped}); {out} holds the scan of everything written so far{later}",
                           style="dim"))
        if result.trips:
            raise typer.Exit(3)

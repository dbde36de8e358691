"""``trajlab handoff``: the CLI wrapper over :func:`trajlab.handoff.handoff` (the emergency SFT after a trip)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from trajlab.commands import options as opt


def register(app: typer.Typer) -> None:
    @app.command("handoff")
    def handoff_cmd(
        out: Path = typer.Argument(..., help="Output directory of `trajlab watch` (its trip.json) or `trajlab scan`."),
        pool: Path | None = opt.out_option(None, help="Pool directory (default: OUT/emergency_sft)."),
        run: str | None = typer.Option(None, "--run", help="The run to hand over (default: the run that tripped)."),
        split_step: int | None = typer.Option(
            None, "--split-step",
            help="Positives before step N, error demonstrations and hints from N on (default: the trip's step).",
        ),
        checkpoint_root: Path | None = typer.Option(
            None, "--checkpoints", help="The run's verl checkpoint root (trainer.default_local_dir): the commands start from its latest global_step_N.",
        ),
        ratio: str = typer.Option("5:3:2", "--ratio", help="Mix positive:error_demo:hint by sample count."),
        max_length: int = typer.Option(8192, "--max-length", help="data.max_length of the printed SFT command."),
        as_json: bool = opt.json_option("Print the hand-over as JSON."),
        no_progress: bool = opt.no_progress_option("No progress bars."),
    ) -> None:
        """After a trip: build the emergency SFT pool (positives from before the warning, error demonstrations and hints from after) and print the commands that SFT from the saved checkpoint and resume RL.

        Example: trajlab handoff out --checkpoints checkpoints/exp1
        """
        from rich.text import Text

        from trajlab.console import console
        from trajlab.handoff import HandoffOptions, handoff

        got = handoff(out, HandoffOptions(run=run, split_step=split_step, pool=pool, checkpoint_root=checkpoint_root,
                                          ratio=ratio, max_length=max_length),
                      progress=not no_progress and not as_json)
        if as_json:
            typer.echo(json.dumps(got.as_dict(), indent=2, default=str))
            return
        mix = ", ".join(f"{n} {k}" for k, n in got.samples.items())
        console.print(Text(f"emergency SFT pool of run {got.run or '(every run)'} cut at step {got.split_step} → "
                           f"{got.pool} ({mix}); it loads in verl's MultiTurnSFTDataset"), soft_wrap=True)
        console.print(Text("next, in order:", style="bold"))
        for i, cmd in enumerate(got.commands, 1):
            console.print(Text(f"  {i}. {cmd}"), soft_wrap=True)

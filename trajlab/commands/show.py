"""``trajlab show``: one trajectory in the terminal, malformed spans highlighted in place."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command("show")
    def show_cmd(
        out: Path = typer.Argument(..., metavar="OUT", show_default=False, help="Output directory of `trajlab scan`."),
        trajectory_id: str | None = typer.Argument(
            None, metavar="TRAJECTORY_ID", show_default=False,
            help="Trajectory id (or a unique prefix of it), as in the trajectories table."),
        step: int | None = typer.Option(None, "--step", "-s", show_default=False,
                                        help="Pick the trajectory by training step instead of by id."),
        index: int | None = typer.Option(None, "--index", "-i", show_default=False,
                                         help="With --step: 0-based position in the step's dump order (default 0; "
                                              "negative counts from the end)."),
        split: str | None = typer.Option(None, "--split", show_default=False,
                                         help="With --step: only this split (train or val)."),
        run: str | None = typer.Option(None, "--run", show_default=False,
                                       help="With --step: the run (needed when several runs have that step)."),
        tokens: bool = typer.Option(False, "--tokens",
                                    help="Show the per-token probabilities of the call tokens: logged ones (exact-token dumps, e.g. NeMo-RL) and the rescore results."),
        checkpoint: list[str] = typer.Option([], "--checkpoint", "-c", show_default=False,
                                             help="With --tokens: only this checkpoint label (repeatable)."),
        prompt: bool = typer.Option(False, "--prompt", help="Also show the prompt (the dumped input)."),
        full: bool = typer.Option(False, "--full", help="Do not clip long turns, tool responses, the prompt or the list of findings."),
    ) -> None:
        """Show one trajectory: its turns, the tool calls with the malformed spans highlighted in place, each finding with its explanation, and the repair next to the call.

        Examples:

          trajlab show out 3f9c2a

          trajlab show out --step 120 --index 3

          trajlab show out --step 90 --run qwen35_xml_sft_run

          trajlab show out 3f9c2a --tokens
        """
        from trajlab.show import ShowOptions, show

        show(out, trajectory_id, ShowOptions(step=step, index=index, split=split, run=run, tokens=tokens,
                                             checkpoints=tuple(checkpoint), prompt=prompt, full=full))

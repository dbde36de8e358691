"""``trajlab report``: write the self-contained HTML report of a scan (and its rescore results)."""

from __future__ import annotations

from pathlib import Path

import typer

from trajlab.commands import options as opt


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        out: Path = typer.Argument(..., metavar="OUT", show_default=False,
                                   help="Output directory of `trajlab scan` (rescore/ inside it is included)."),
        out_file: Path = opt.out_option(Path("report.html"), help="HTML file to write."),
        output: Path | None = opt.output_alias_option(),
        title: str | None = typer.Option(None, "--title", help="Page title (default: trajlab report: <OUT name>).",
                                         show_default=False),
        split: str | None = typer.Option(None, "--split", show_default=False,
                                         help="Split to plot (default: train, else the split with most steps)."),
        max_categories: int = typer.Option(8, "--max-categories", help="Category lines drawn; the rest are summed as 'other'."),
        top_names: int = typer.Option(12, "--top-names", help="Garbled function names listed."),
        examples: int = typer.Option(1, "--examples", help="Examples shown per category."),
        window: int | None = typer.Option(None, "--window", show_default=False,
                                          help="Steps pooled by the chart lines (default: enough for ~50 tool "
                                               "calls; 1: every step on its own)."),
        run: str | None = typer.Option(None, "--run", show_default=False,
                                       help="Run shown by the per-step sections when the scan holds several "
                                            "(default: the largest run with an early warning)."),
        metric: list[str] = typer.Option([], "--metric", help="A trainer metric drawn in the training panel "
                                         "(repeatable; NAME/ takes the first metric under it; default: reward, "
                                         "validation, entropy, response length, turns, probability gap)."),
    ) -> None:
        """Write one self-contained HTML report (opens offline: inline SVG charts, no CDN).

        It shows the run overview (trajectories, calls, malformed rate, final-answer rate, score over steps), the malformed-call rate per step by category with the early-warning step marked, the top garbled function names and their nearest tools, one example per category with the offending span highlighted next to its repair and, when `trajlab rescore` ran, the spike rates per checkpoint and the control tokens that moved most. With several runs in the scan, the runs are compared first (a row per run, every run's malformed-call rate and mean score on one step axis, categories by run).

        Example:

          trajlab report out -o report.html
        """
        from rich.markup import escape

        from trajlab.console import console
        from trajlab.report import ReportOptions, report

        html = output if output is not None else out_file  # --output: the old spelling of -o/--out
        options = ReportOptions(title=title, split=split, max_categories=max_categories, top_names=top_names,
                                examples_per_category=examples, window=window, run=run, metrics=tuple(metric))
        path = report(out, html, options)
        size = path.stat().st_size
        from pathlib import Path

        from trajlab.console import warn
        from trajlab.outpaths import read_json_object

        damaged = read_json_object(Path(out) / "manifest.json")[1]
        if damaged:
            warn(f"{damaged}: the report was made from the tables alone (no input list, early warning recomputed); "
                 f"re-run the scan into {out} to rewrite it")
        console.print(f"wrote [bold]{escape(str(path))}[/] ({size / 1024:.0f} KiB)", highlight=False)

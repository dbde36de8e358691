"""The rescore progress bar over scored tokens."""

from __future__ import annotations


class ProgressBar:
    """A rich progress bar over scored tokens (total estimated from characters, refined as blocks finish)."""

    def __init__(self, label: str, total_chars: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from trajlab.console import err_console

        self.total_chars = max(1, total_chars)
        self.done_chars = 0
        self.done_tokens = 0
        self.p = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("tokens"),
            TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn(), console=err_console, transient=False,
        )  # fmt: skip
        self.p.start()
        self.task = self.p.add_task(f"rescore {label}", total=self.total_chars // 4)

    def tokens(self, n: int) -> None:
        self.done_tokens += n
        self.p.update(self.task, advance=n)

    def chars(self, n: int) -> None:
        self.done_chars += n
        ratio = self.done_tokens / max(1, self.done_chars)
        est = int(self.done_tokens + (self.total_chars - self.done_chars) * ratio)
        self.p.update(self.task, total=max(est, self.done_tokens))

    def close(self) -> None:
        self.p.update(self.task, total=self.done_tokens)
        self.p.stop()


def progress_bar(enabled: bool, label: str, total_chars: int) -> ProgressBar | None:
    return ProgressBar(label, total_chars) if enabled else None

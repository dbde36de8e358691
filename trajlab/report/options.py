"""What a report is asked to show: :class:`ReportOptions`, every option of :func:`trajlab.report.report`,
validated once when the object is made."""

from __future__ import annotations

from dataclasses import dataclass

from trajlab.errors import TrajlabError, param


@dataclass(frozen=True)
class ReportOptions:
    """The options of :func:`trajlab.report.report` (frozen; bad values raise :class:`TrajlabError` naming the
    fields).

    Example::

        ReportOptions(split="train", window=1)
    """

    #: page title (None: ``trajlab report: <OUT name>``)
    title: str | None = None
    #: split plotted (None: ``train``, else the split with most steps)
    split: str | None = None
    #: category lines drawn; the rest are summed as "other" (>= 1)
    max_categories: int = 8
    #: garbled function names listed (>= 0)
    top_names: int = 12
    #: examples shown per category (>= 0)
    examples_per_category: int = 1
    #: steps pooled by the chart lines (None: enough steps for about 50 tool calls; 1: every step on its own)
    window: int | None = None
    #: run shown by the per-step sections when the scan holds several (None: the largest run that warned)
    run: str | None = None
    #: the trainer's metrics drawn in the training panel (names as logged; a name ending in "/" is a prefix;
    #: empty: reward, validation, entropy, response length, turns and the probability gap, when logged)
    metrics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", tuple(str(m) for m in ((self.metrics,) if isinstance(self.metrics, str)
                                                                    else (self.metrics or ()))))
        if (self.max_categories < 1 or self.top_names < 0 or self.examples_per_category < 0
                or (self.window is not None and self.window < 1)):
            raise TrajlabError(f"{param('max_categories')} and {param('window')} must be >= 1; {param('top_names')} "
                               f"and {param('examples_per_category')} must be >= 0")

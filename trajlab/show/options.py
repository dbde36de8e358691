"""What ``trajlab show`` is asked to show: :class:`ShowOptions`, the options of :func:`trajlab.show.show`."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ShowOptions:
    """The options of :func:`trajlab.show.show` (frozen). The trajectory is named by ``show``'s
    ``trajectory_id`` or, without it, by ``step`` and ``index``.

    Example::

        ShowOptions(step=120, index=3, prompt=True)
    """

    #: pick the trajectory by training step instead of by id
    step: int | None = None
    #: with ``step``: 0-based position in the step's dump order (None: 0; negative counts from the end)
    index: int | None = None
    #: with ``step``: only this split (``train`` or ``val``)
    split: str | None = None
    #: with ``step``: the run (needed when several runs have that step)
    run: str | None = None
    #: add the per-token probabilities of each call's tokens: logged ones (exact-token dumps) and the rescore results
    tokens: bool = False
    #: with ``tokens``: only these checkpoint labels (empty: every checkpoint)
    checkpoints: tuple[str, ...] = ()
    #: also show the prompt (the dumped input)
    prompt: bool = False
    #: do not clip long turns (over 20,000 characters), tool responses, the prompt or a turn's list of findings
    full: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "checkpoints", tuple(self.checkpoints or ()))

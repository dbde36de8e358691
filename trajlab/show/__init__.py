"""``trajlab show``: one trajectory in the terminal, with its malformed calls highlighted in place.

:func:`show` reads a trajectory of a scan (by id, a unique id prefix, or by step and position) and prints
its turns with rich: the tool calls are tinted, each finding's span is highlighted where it occurs and
numbered, the findings are listed under their turn with their explanation, and every call with a repair is
shown next to it. With ``tokens=True`` and rescore results present, the per-token probabilities that each
checkpoint gave the call tokens are shown under the call (see :func:`token_renderables`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trajlab.show.load import Loaded, load
from trajlab.show.options import ShowOptions
from trajlab.show.render import STYLE_CALL, STYLE_MARK, STYLE_SPAN, STYLE_TOOL, render
from trajlab.show.tokens import PROB_STYLES, token_renderables

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

__all__ = [
    "PROB_STYLES", "STYLE_CALL", "STYLE_MARK", "STYLE_SPAN", "STYLE_TOOL", "Loaded", "ShowOptions", "load", "render",
    "show", "token_renderables",
]  # fmt: skip


def show(out: Path | str, trajectory_id: str | None = None, options: ShowOptions | None = None, *,
         console: Console | None = None) -> Loaded:
    """Print one trajectory of the scan at ``out`` with rich and return what was shown.

    Pick it by ``trajectory_id`` (or a unique prefix of it), or by ``options.step`` and ``options.index`` (0-based
    position among the trajectories of that step in dump order; negative counts from the end; ``options.run``
    picks the run when several runs have that step). ``options.tokens`` adds the per-token probabilities of each
    call's tokens from the rescore results (all checkpoints, or those named in ``options.checkpoints``); it raises
    :class:`TrajlabError` when there are none. ``options.full`` shows tool responses and the prompt unclipped;
    ``options.prompt`` shows the prompt (:class:`~trajlab.show.options.ShowOptions`). ``console``: where to print
    (default: the shared console).

    Example::

        trajlab.show("out", options=trajlab.ShowOptions(step=120, index=3))
    """
    from trajlab.console import console as default_console

    opts = options if options is not None else ShowOptions()
    con_out = console or default_console
    data = load(out, trajectory_id, step=opts.step, index=opts.index, split=opts.split, run=opts.run)
    token_view = token_renderables(out, data, checkpoints=list(opts.checkpoints) or None) if opts.tokens else None
    for part in render(data, full=opts.full, prompt=opts.prompt, token_view=token_view):
        con_out.print(part)
    return data


from trajlab._callable import make_module_callable  # noqa: E402

make_module_callable(__name__, show)

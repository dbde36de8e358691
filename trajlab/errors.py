"""User-facing error types, and how their messages name a parameter.

Every expected problem (bad input, missing table, bad option) is raised as a :class:`TrajlabError`;
the CLI prints its message in one line and exits with its ``exit_code`` instead of a traceback.

A message names the *library parameter* it is about through :func:`param` (``param("max_tokens")``). The
library renders such a reference as the parameter name (``max_tokens``, or ``max_tokens=8192`` with a value);
the CLI renders it as the flag that sets the parameter (``--max-tokens``, ``--max-tokens 8192``) through
:meth:`TrajlabError.render`, so each layer speaks its own language with one message text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A parameter reference inside a message: private-use characters (never in ordinary text) delimit the name,
# its mode and value: \ue000 NAME \ue001 MODE \ue001 VALUE \ue002. MODE "" (no value), "v" (a value shown in
# both layers) or "m" (a metavar shown by the CLI only); a
# value holds its repr (the library's) and its str (the CLI's), split by \ue003.
_OPEN, _SEP, _CLOSE, _VAL = "\ue000", "\ue001", "\ue002", "\ue003"
_REF = re.compile(f"{_OPEN}([^{_SEP}{_CLOSE}]*){_SEP}([vm]?){_SEP}([^{_CLOSE}]*){_CLOSE}")

#: turns a parameter name into the text shown for it (the CLI passes one that gives the flag)
Namer = Callable[[str], str]


def shell_word(value: object) -> str:
    """``value`` (a path) as one shell word for a command line in a hint, quoted only when it must be."""
    import shlex

    return shlex.quote(str(value))


def param(name: str, value: object = None, *, metavar: str | None = None) -> str:
    """A reference to the library parameter ``name`` for a :class:`TrajlabError` message or hint.

    Rendered as ``name`` by the library and as the parameter's flag by the CLI. With ``value``: ``name=value``
    (repr) and ``--flag value``; with ``metavar``: ``name`` and ``--flag METAVAR`` (an example for the CLI).
    """
    if value is not None:
        mode, text = "v", _clean(repr(value)) + _VAL + _clean(str(value))
    elif metavar is not None:
        mode, text = "m", _clean(metavar)
    else:
        mode, text = "", ""
    return f"{_OPEN}{name}{_SEP}{mode}{_SEP}{text}{_CLOSE}"


def _clean(text: str) -> str:
    for c in (_OPEN, _SEP, _CLOSE, _VAL):
        text = text.replace(c, "")
    return text


def render_params(text: str, namer: Namer | None = None) -> str:
    """``text`` with every :func:`param` reference rendered: as the parameter (``namer`` None) or via ``namer``."""

    def one(m: re.Match[str]) -> str:
        name, mode, value = m.group(1), m.group(2), m.group(3)
        if namer is None:
            if mode == "v":
                return f"{name}={value.split(_VAL, 1)[0]}"
            return name
        flag = namer(name)
        if mode == "v":
            return f"{flag} {value.split(_VAL, 1)[1]}"
        return f"{flag} {value}" if mode == "m" else flag

    return _REF.sub(one, text)


def param_names(text: str) -> list[str]:
    """The parameters :func:`param` references in ``text`` name, in order."""
    return [m.group(1) for m in _REF.finditer(text)]


class TrajlabError(Exception):
    """An expected problem with a message meant for the user (no traceback is shown).

    ``param``: the library parameter the problem is about (default: the first one the message names with
    :func:`param`), for callers that want to point at it; ``str(error)`` names parameters, :meth:`render`
    with a namer names flags.
    """

    exit_code: int = 2

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None,
                 param: str | None = None) -> None:
        self.template = message
        self.hint_template = hint
        names = param_names(message) + param_names(hint or "")
        self.param = param or (names[0] if names else None)
        super().__init__(render_params(message))
        self.hint = render_params(hint) if hint else None
        if exit_code is not None:
            self.exit_code = exit_code

    def render(self, namer: Namer | None = None) -> str:
        """The message (and hint) with parameters named by ``namer`` (default: the parameter names)."""
        msg = render_params(self.template, namer)
        hint = render_params(self.hint_template, namer) if self.hint_template else None
        return f"{msg}\n  hint: {hint}" if hint else msg

    def __str__(self) -> str:  # pragma: no cover - trivial
        msg = super().__str__()
        return f"{msg}\n  hint: {self.hint}" if self.hint else msg


class MissingDependencyError(TrajlabError):
    """An optional dependency (e.g. the `rescore` extra) is not installed."""


class InputError(TrajlabError):
    """The input paths or files cannot be used at all."""


class CheckpointError(TrajlabError):
    """A checkpoint directory is incomplete, unsafe or cannot be built."""


class TableError(TrajlabError):
    """A scan output directory is missing tables or has an incompatible schema."""

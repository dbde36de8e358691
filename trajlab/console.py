"""Shared rich consoles (results to stdout, progress and warnings to stderr) and the one terminal sanitiser.

Text from the data (dumps, file names, SQL results, error messages quoting them) must never drive the terminal:
:func:`literal` makes ESC, the other C0 controls (except newline and tab), DEL, the C1 controls (U+0080-U+009F,
e.g. a single-character CSI) and the bidi overrides/isolates visible as ``\\x1b`` / ``\\u202e`` escapes. Both
consoles apply it to every text segment they write (:class:`SafeConsole`), so a Text, a table cell or a panel
built from data is safe wherever it is printed; markup is only ever interpreted in trajlab's own strings
(data is printed with ``markup=False`` or as :class:`rich.text.Text`). :func:`safe_json` does the same for JSON
printed to the terminal (lossless: the characters become ``\\uXXXX`` escapes, still valid JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rich.console import Console
from rich.segment import Segment

#: characters never written raw to a terminal: C0 (less \\n, \\t), DEL, C1, bidi embeddings/overrides/isolates,
#: the Arabic letter mark and the line/paragraph separators
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    return _visible_char(m.group(0))


def literal(text: object) -> str:
    """``text`` as a string that is safe to show on a terminal (unsafe characters made visible)."""
    s = text if isinstance(text, str) else str(text)
    return UNSAFE.sub(_visible, s) if UNSAFE.search(s) else s


def literal_with_offsets(text: str) -> tuple[str, list[int] | None]:
    """:func:`literal` of ``text`` and where each of its characters starts in the result (``len(text) + 1``
    positions: the last is the result's length; None when nothing was escaped, so the offsets are the same), so
    spans over the data can be placed on the visible text. rich drops some controls (``\r``, BEL, backspace, form
    feed) from a Text before any console sees them, so text shown with styles over data offsets is made visible
    here first."""
    if not UNSAFE.search(text):
        return text, None
    out: list[str] = []
    starts: list[int] = []
    pos = 0
    for ch in text:
        starts.append(pos)
        vis = _visible_char(ch) if UNSAFE.match(ch) else ch
        out.append(vis)
        pos += len(vis)
    starts.append(pos)
    return "".join(out), starts


def _visible_char(ch: str) -> str:
    c = ord(ch)
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _json_escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def safe_json(text: str) -> str:
    """JSON text with every unsafe character written as a ``\\uXXXX`` escape (same JSON value, safe bytes)."""
    return UNSAFE.sub(_json_escape, text)


class SafeConsole(Console):
    """A rich console that makes unsafe characters visible in every text segment it writes (never in its own
    control sequences: colours, cursor moves)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            Segment(literal(t), s, c) if c is None and UNSAFE.search(t) else Segment(t, s, c) for t, s, c in buffer)


console = SafeConsole()
err_console = SafeConsole(stderr=True)


def warn(message: str) -> None:
    """Print a one-line warning to stderr (no markup interpretation of the message)."""
    err_console.print("[yellow]warning:[/] ", end="")
    err_console.print(literal(message), markup=False, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    """Print an error line to stderr: ``error:`` then ``message`` exactly as written (brackets included)."""
    err_console.print("[bold red]error:[/] ", end="")
    err_console.print(literal(message), markup=False, highlight=False, soft_wrap=True)

"""How `trajlab show` styles a finding's span, rendered the way rich writes it (for the show tests)."""

from __future__ import annotations

from rich.color import ColorSystem
from rich.style import Style

from trajlab.show import STYLE_CALL, STYLE_SPAN


def highlighted(text: str, base: str = STYLE_CALL, severity: str = "error") -> str:
    """How rich writes ``text`` inside a call with a finding's highlight on it."""
    style = Style.parse(base) + Style.parse(STYLE_SPAN[severity])
    return style.render(text, color_system=ColorSystem.TRUECOLOR)

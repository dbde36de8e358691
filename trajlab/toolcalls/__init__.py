"""The tool-call classifier: every malformed call found, named, located and, where safe, repaired.

Public API (re-exported from :mod:`trajlab`)::

    from trajlab.toolcalls import analyze_turn, check_text, detect_tool_format
    ta = check_text('<tool_call>\\n<function=search_web英文明确>\\n...', tools=[...])
    for f in ta.findings:
        print(f.category, f.severity, f.start, f.end, f.message)

See ``docs/explanation/reading-calls.md`` for the taxonomy, the span kinds and how repairs are decided.
"""

from __future__ import annotations

from typing import Any

from trajlab.model import ParsedCall, TurnAnalysis, TurnContext
from trajlab.toolcalls.analyze import analyze_turn
from trajlab.toolcalls.detect import detect_tool_format, prompt_forbids_suffix
from trajlab.toolcalls.formats import FORMATS, KNOWN_FORMATS
from trajlab.toolcalls.ruleset import get_ruleset
from trajlab.toolcalls.taxonomy import explain, list_rules, load_taxonomy

__all__ = [
    "KNOWN_FORMATS",
    "analyze_turn",
    "check_text",
    "detect_tool_format",
    "explain",
    "list_rules",
    "load_taxonomy",
    "parse_call",
    "prompt_forbids_suffix",
    "render_call",
]


def _normalise_tools(tools: Any) -> list[dict[str, Any]] | None:
    if not tools:
        return None
    out = []
    for t in tools:
        if isinstance(t, dict) and isinstance(t.get("function"), dict):
            t = t["function"]
        if isinstance(t, dict) and isinstance(t.get("name"), str):
            params = t.get("parameters") if isinstance(t.get("parameters"), dict) else {"type": "object",
                                                                                       "properties": {}}
            out.append({"name": t["name"], "description": t.get("description") or "", "parameters": params})
    return out or None


def check_text(
    text: str,
    *,
    tools: list[dict[str, Any]] | None = None,
    tool_format: str | None = None,
    rules_dirs: Any = (),
    forbids_suffix: bool = False,
) -> TurnAnalysis:
    """Classify one snippet (``trajlab rules check``): the format is detected from the text when not given.

    ``tools`` may be normalised schemas or OpenAI ``{"type": "function", "function": {...}}`` entries.
    Raises :class:`~trajlab.errors.TrajlabError` for an unknown format or a broken rule pack.
    """
    from trajlab.errors import TrajlabError

    dirs = tuple(str(d) for d in rules_dirs or ())
    rs = get_ruleset(dirs)  # raises on a broken pack, unlike analyze_turn
    if tool_format in (None, "", "auto"):
        from trajlab.toolcalls.analyze import detect_output_format

        tool_format = detect_output_format(text, rs)
    elif tool_format not in FORMATS and tool_format != "none":
        raise TrajlabError(f"unknown tool format {tool_format!r}; choose one of: auto, {', '.join(KNOWN_FORMATS)}")
    norm = _normalise_tools(tools)
    ctx = TurnContext(is_last_turn=True, forbids_suffix=forbids_suffix, schema_known=norm is not None)
    from trajlab.toolcalls.analyze import check_turn

    return check_turn(text, tool_format, norm, ctx, rs)


def render_call(name: str, arguments: dict[str, Any], tool_format: str) -> str:
    """The canonical, well-formed text of a call in ``tool_format``, as the model's chat template renders it.

    qwen3_coder: ``<tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n...</function>\\n</tool_call>``
    (objects and lists as JSON, other values with ``str()`` like the template's ``| string``); hermes:
    ``<tool_call>\\n{"name": NAME, "arguments": JSON}\\n</tool_call>``.
    """
    from trajlab.errors import TrajlabError

    fmt = FORMATS.get(tool_format)
    if fmt is None:
        raise TrajlabError(f"unknown tool format {tool_format!r}; choose one of: {', '.join(KNOWN_FORMATS)}")
    if not isinstance(arguments, dict) and not (tool_format == "hermes" and isinstance(arguments, str)):
        # the chat templates iterate `arguments|items` (qwen3_coder) or dump it (hermes, JSON string allowed)
        raise TrajlabError(f"render_call: arguments of {name!r} must be a mapping, got {type(arguments).__name__}")
    return fmt.render(name, arguments)


def parse_call(text: str, tool_format: str, tools: list[dict[str, Any]] | None = None) -> tuple[str | None, Any] | None:
    """(name, arguments) of the first call in ``text`` as the model meant it, values converted by schema type like
    verl's parser; ``None`` when there is none.

    On well-formed calls this equals verl's own parse for the format, except where verl's conversion changes a
    valid value (an integer beyond 2^53, an anyOf property: ``verl_conversion_divergence``) or reads tag text
    inside a value as markup; ``check_text(...).calls[0].verl_arguments`` then holds verl's parse.
    """
    ta = check_text(text, tools=tools, tool_format=tool_format)
    first: ParsedCall | None = ta.calls[0] if ta.calls else None
    return (first.function_name, first.arguments) if first is not None else None

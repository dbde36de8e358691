"""The families layer holds: no shared module names a call format, they read the format's hooks from the registry.

A call format's own knowledge (its prompt markers, the tool-list rendering that implies it, verl's reading of it,
its tool declarations) lives in its module or package under ``trajlab/toolcalls/formats/`` and in its family
module; shared modules read it through :data:`trajlab.toolcalls.formats.FORMATS` (the hooks of
:class:`~trajlab.toolcalls.formats.base.ToolFormat`, docs/development/add-a-family.md). The check reads the
source with :mod:`ast`: a string constant equal to a format's name, outside docstrings, in a module that is
neither the format's own nor a family module, is a shared module that knows the format. The names below predate
the layer (the Qwen/Hermes fast paths and their shared JSON readers, harmony's channel ending, ReAct's fallback);
a new family adds none.
"""

from __future__ import annotations

import ast
from pathlib import Path

from trajlab.toolcalls.formats import FORMATS, MODULE_OF_FORMAT

PKG = Path(__file__).resolve().parents[1] / "trajlab"

#: (module, format name) pairs of shared modules that name a format, kept from before the layer
KNOWN: frozenset[tuple[str, str]] = frozenset({
    ("curate/build.py", "seed"), ("curate/card.py", "seed"), ("curate/options.py", "seed"),  # the random seed
    ("ending.py", "gpt_oss"), ("scan/columnar.py", "gpt_oss"),
    ("ingest/openai_messages.py", "hermes"), ("toolcalls/__init__.py", "hermes"), ("toolcalls/call_checks.py", "hermes"),
    ("toolcalls/json_decode.py", "hermes"), ("toolcalls/jsonbody.py", "hermes"), ("toolcalls/verl_verdict.py", "hermes"),
    ("toolcalls/formats/glm.py", "hermes"), ("toolcalls/formats/qwen3_coder/machine.py", "hermes"),
    ("rescore/control_tokens.py", "hermes"), ("rescore/control_tokens.py", "qwen3_coder"),
    ("toolcalls/analyze.py", "hermes"), ("toolcalls/analyze.py", "qwen3_coder"),
    ("toolcalls/fastpath.py", "hermes"), ("toolcalls/fastpath.py", "qwen3_coder"),
    ("toolcalls/ruleset.py", "hermes"), ("toolcalls/ruleset.py", "qwen3_coder"),
    ("toolcalls/vectorized.py", "hermes"), ("toolcalls/vectorized.py", "qwen3_coder"),
    ("toolcalls/repair.py", "qwen3_coder"), ("toolcalls/detect.py", "react"),
})


def _own(rel: str, fmt: str) -> bool:
    """Whether ``rel`` is ``fmt``'s own module (or a module of its package) or a family module."""
    mod = MODULE_OF_FORMAT[fmt]
    return rel.startswith("families/") or rel in (f"toolcalls/formats/{mod}.py",) or rel.startswith(
        f"toolcalls/formats/{mod}/")


def _named_formats(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in FORMATS and id(n) not in docs}


def test_no_shared_module_names_a_format() -> None:
    found = set()
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        found |= {(rel, f) for f in _named_formats(path) if not _own(rel, f)}
    new = sorted(found - KNOWN)
    assert not new, (f"shared modules name call formats {new}: give the format a hook (ToolFormat, "
                     "docs/development/add-a-family.md) and read it through the registry")


def test_the_hooks_are_the_formats_own() -> None:
    # every format verl reads is one whose module reproduces that reading, and the tool-list renderings map to one
    # format each (the registry refuses a rendering claimed twice)
    from trajlab.toolcalls.formats import SOURCE_FORMATS
    from trajlab.toolcalls.formats.base import ToolFormat

    for name, fmt in FORMATS.items():
        if fmt.verl_parser is not None:
            assert type(fmt).verl_read is not ToolFormat.verl_read, name
        if fmt.declarations_literal is not None:
            assert type(fmt).read_declarations is not ToolFormat.read_declarations, name
    assert {SOURCE_FORMATS[s] for s in SOURCE_FORMATS} == {n for n, f in FORMATS.items() if f.tools_source}
    assert {"seed", "minimax", "gemma4"} <= {n for n, f in FORMATS.items() if f.verl_markers}

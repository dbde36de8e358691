"""Typer's parameter coercion for values that need none, without loading pydantic (the CLI's fixed cost).

typer (0.2x) coerces every parameter value -- defaults included -- through a pydantic ``TypeAdapter``, so the
first command line a process parses imports pydantic and builds adapters: about 0.1 s of CPU, more than typer
itself. Most values need no real conversion: a string option given a string, a default that already has the
parameter's type, a path or a plain ASCII number typed on the command line. :func:`install` wraps typer's
builder of a parameter's coercion so that those values come back as typer would return them (a path goes
through typer's own path checks), and every other value -- ``1_000``, ``inf``, a choice, a constrained number,
a file -- goes through typer's own coercion, built the first time a value needs it: the same values and the
same error messages, pydantic loaded only then. ``tests/test_cli_coercion.py`` compares both on every
parameter of every command. With typer internals other than the expected ones nothing is wrapped (typer's own
coercion runs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin

#: returned by :func:`fast_value` when typer's own coercion must decide
SLOW = object()
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def fast_value(descriptor: Any, value: Any, param: Any = None, ctx: Any = None) -> Any:
    """``value`` coerced for the parameter ``descriptor`` describes when no conversion is needed (what typer's
    own coercion returns for it), else :data:`SLOW`."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None:
        return SLOW
    ann = descriptor.annotation
    if get_origin(ann) is list:
        args = get_args(ann)
        if len(args) != 1 or not isinstance(value, (list, tuple)):
            return SLOW
        out = [_leaf(args[0], info, item, param, ctx) for item in value]
        return SLOW if any(v is SLOW for v in out) else out
    return _leaf(ann, info, value, param, ctx)


def _leaf(ann: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
    if ann is str:
        return value if type(value) is str else SLOW
    if ann is bool:
        return value if type(value) is bool else SLOW
    if ann in (int, float):
        if info.min is not None or info.max is not None or info.clamp:
            return SLOW
        if type(value) is ann:
            return value
        if type(value) is str and len(value) <= 100 and (_INT if ann is int else _FLOAT).fullmatch(value):
            return ann(value)  # plain ASCII numerals, where int()/float() and pydantic agree
        return SLOW
    if isinstance(ann, type) and issubclass(ann, Path) and info.path_type is None:
        if isinstance(value, ann):
            path = value
        elif type(value) is str and value:
            path = ann(value)
        else:
            return SLOW
        from typer._param_types import coerce_cli_path

        return coerce_cli_path(path, info, path_type=ann, param=param, ctx=ctx)
    return SLOW


def install() -> bool:
    """Wrap typer's coercion builder (once per process); False when typer is not the expected shape."""
    try:
        import typer.core as core
        from typer import _coercion, _param_types
    except ImportError:  # pragma: no cover - another typer
        return False
    stock: Any = getattr(core, "build_runtime_param", None)
    base: Any = getattr(_coercion, "RuntimeParam", None)
    if stock is None or base is None or not hasattr(_param_types, "coerce_cli_path"):
        return False
    if getattr(stock, "trajlab_fast", False):
        return True

    @dataclass(frozen=True)
    class FastOrStock(base):  # type: ignore[misc, valid-type]
        """Coerces the values that need no conversion itself; builds typer's own coercion for the rest."""

        descriptor: Any = None
        built: list[Any] = field(default_factory=list)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            got = fast_value(self.descriptor, value, param, ctx)
            if got is not SLOW:
                return got
            if not self.built:
                self.built.append(stock(self.descriptor))
            return self.built[0]._coerce_value(value, param=param, ctx=ctx)

    def build(descriptor: Any) -> Any:
        if descriptor.file_annotation is not None or descriptor.parameter_info.parser is not None:
            return stock(descriptor)
        return FastOrStock(parameter_info=descriptor.parameter_info, annotation=descriptor.annotation,
                           descriptor=descriptor)

    build.trajlab_fast = True  # type: ignore[attr-defined]
    core.build_runtime_param = build
    return True

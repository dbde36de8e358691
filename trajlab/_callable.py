"""Make a module callable as its main function, so ``trajlab.scan(...)`` works after ``import trajlab.scan``.

The public API names ``scan``, ``rescore``, ``report`` and ``show`` are both functions and the modules that
define them. Python's import system binds a submodule onto its parent package once it is imported, which
would shadow the lazily exported function; giving those modules a ``__call__`` keeps both spellings working.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_module_callable(module_name: str, func: Callable[..., Any]) -> None:
    """Let ``sys.modules[module_name](...)`` call ``func`` (docstring and signature are ``func``'s)."""
    mod = sys.modules[module_name]

    class _CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)

    mod.__class__ = _CallableModule

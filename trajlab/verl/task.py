"""The task reward: find the user's own scoring function and call it so that its failures never escape.

:func:`load_task_fn` resolves ``reward_kwargs task_fn`` (``module:function``, a file path with an optional
``:function``, ``none`` for the format reward alone) or, by default, verl's ``default_compute_score``. A task that
cannot be scored is a configuration error, never a silent 0: no ``task_fn`` where verl is not importable, or a
``data_source`` verl's default does not know, raises :class:`UnscorableTask` (one line naming ``task_fn``).
A task file is loaded as a module registered in ``sys.modules`` (``dataclasses`` and pickling look it up there).
:func:`call_task_fn` calls it as verl would (keyword arguments ``data_source, solution_str, ground_truth,
extra_info``), awaits a coroutine, and reads a number or a dict's ``"score"``; anything else is a failure,
returned as ``(0.0, reason)``.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from trajlab.errors import TrajlabError

TaskFn = Callable[..., Any]
#: what to write instead, in every "cannot score" error
TASK_FN_FIX = ("set reward_kwargs task_fn=/abs/path/my_task.py:compute_score (your scoring function), or "
               "task_fn=none for the format reward alone")


class UnscorableTask(TrajlabError):
    """No task function can score this run's samples (a configuration error: it stops the run at once)."""


def _from_file(path: str, name: str) -> TaskFn:
    if not os.path.isfile(path):
        raise TrajlabError(f"reward_kwargs task_fn: file not found: {path} (give an absolute path)")
    spec = importlib.util.spec_from_file_location(f"trajlab_task_{abs(hash(os.path.abspath(path)))}", path)
    if spec is None or spec.loader is None:
        raise TrajlabError(f"reward_kwargs task_fn: cannot load {path} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        sys.modules.pop(spec.name, None)
        raise TrajlabError(f"reward_kwargs task_fn: importing {path} failed: {type(e).__name__}: {e}") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise TrajlabError(f"reward_kwargs task_fn: {path} has no function {name!r} (write {path}:NAME)")
    return fn


def load_task_fn(spec: str | None) -> tuple[TaskFn | None, str]:
    """(the task function or None, a description of it) for ``reward_kwargs task_fn``."""
    if spec is None or spec == "default":
        try:
            from verl.utils.reward_score import default_compute_score  # type: ignore[import-not-found]
        except Exception:
            raise UnscorableTask(f"reward_kwargs task_fn is not set and verl is not importable here (no "
                                 f"default_compute_score): {TASK_FN_FIX}") from None
        return verl_default(default_compute_score), DEFAULT_DESC
    if spec.strip().lower() == "none":
        return None, "none: task_score is 0 (the format reward alone)"
    path, sep, name = spec.rpartition(":")
    if not sep or (len(path) == 1 and path.isalpha()):  # no ':' or a Windows drive letter only
        path, name = spec, ""
    if path.endswith(".py") or os.sep in path or "/" in path:
        fn = _from_file(path, name or "compute_score")
    else:
        if not name:
            raise TrajlabError(f"reward_kwargs task_fn={spec!r}: write 'module:function' or a .py file path")
        try:
            mod = importlib.import_module(path)
        except Exception as e:
            raise TrajlabError(f"reward_kwargs task_fn: cannot import {path}: {type(e).__name__}: {e}") from None
        found = getattr(mod, name, None)
        if not callable(found):
            raise TrajlabError(f"reward_kwargs task_fn: module {path} has no function {name!r}")
        fn = found
    if getattr(fn, "__trajlab_reward__", False):
        raise TrajlabError("reward_kwargs task_fn names trajlab's own compute_score: name your task's scoring "
                           "function (or 'none')")
    return fn, spec


DEFAULT_DESC = "verl.utils.reward_score.default_compute_score"


def is_verl_default(fn: Any) -> bool:
    """Whether ``fn`` is verl's own ``default_compute_score`` (or trajlab's wrapper of it)."""
    return getattr(fn, "__trajlab_verl_default__", False) or (
        getattr(fn, "__name__", "") == "default_compute_score"
        and str(getattr(fn, "__module__", "")).startswith("verl.utils.reward_score"))


def verl_default(default: TaskFn) -> TaskFn:
    """verl's ``default_compute_score``, raising :class:`UnscorableTask` for a ``data_source`` it does not know
    (verl raises ``NotImplementedError``: every sample would get task score 0)."""

    def scored(*, data_source: Any, **kwargs: Any) -> Any:
        try:
            return default(data_source=data_source, **kwargs)
        except NotImplementedError:
            raise UnscorableTask(f"reward_kwargs task_fn is not set and verl's default_compute_score cannot score "
                                 f"data_source={str(data_source)[:80]!r}: {TASK_FN_FIX}") from None

    scored.__signature__ = inspect.signature(default)  # type: ignore[attr-defined]
    scored.__trajlab_verl_default__ = True  # type: ignore[attr-defined]
    return scored


def _accepted(fn: TaskFn, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The extra keyword arguments ``fn`` accepts (all of them when it takes ``**kwargs``)."""
    if not kwargs:
        return kwargs
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def _run_coroutine(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:  # a loop runs in this thread: await it in a fresh one
        return ex.submit(asyncio.run, coro).result()


def read_task_result(result: Any) -> tuple[float, str | None]:
    """A task function's result as (score, failure reason or None)."""
    value = result.get("score") if isinstance(result, dict) else result
    if isinstance(value, bool):
        return float(value), None
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        what = "a dict without a numeric 'score'" if isinstance(result, dict) else type(result).__name__
        return 0.0, f"returned {what}, not a number"
    if not math.isfinite(x):
        return 0.0, f"returned {x}"
    return x, None


def call_task_fn(fn: TaskFn | None, *, data_source: Any, solution_str: str, ground_truth: Any, extra_info: Any,
                 extra: dict[str, Any]) -> tuple[float, str | None]:
    """The task score and, on failure, why (the score is then 0.0). Raises only :class:`UnscorableTask`."""
    if fn is None:
        return 0.0, None
    try:
        result = fn(data_source=data_source, solution_str=solution_str, ground_truth=ground_truth,
                    extra_info=extra_info, **_accepted(fn, extra))
        if inspect.isawaitable(result):
            result = _run_coroutine(result)
    except BaseException as e:  # noqa: BLE001 - a task function may raise anything, even SystemExit
        if isinstance(e, (KeyboardInterrupt, UnscorableTask)):
            raise
        return 0.0, f"raised {type(e).__name__}: {str(e)[:200]}"
    return read_task_result(result)

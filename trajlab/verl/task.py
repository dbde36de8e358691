"""The task reward: find the user's own scoring function and call it so that its failures never escape.

:func:`load_task_fn` resolves ``reward_kwargs task_fn`` (``module:function``, a file path with an optional
``:function``, ``none``) or, by default, verl's ``default_compute_score`` when verl is importable.
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
from collections.abc import Callable
from typing import Any

from trajlab.errors import TrajlabError

TaskFn = Callable[..., Any]


def _from_file(path: str, name: str) -> TaskFn:
    if not os.path.isfile(path):
        raise TrajlabError(f"reward_kwargs task_fn: file not found: {path} (give an absolute path)")
    spec = importlib.util.spec_from_file_location(f"trajlab_task_{abs(hash(os.path.abspath(path)))}", path)
    if spec is None or spec.loader is None:
        raise TrajlabError(f"reward_kwargs task_fn: cannot load {path} as a Python module")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
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
            return None, "none (verl is not importable here, so no default_compute_score): task_score is 0"
        return default_compute_score, "verl.utils.reward_score.default_compute_score"
    if spec.strip().lower() == "none":
        return None, "none: task_score is 0"
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
    """The task score and, on failure, why (the score is then 0.0). Never raises."""
    if fn is None:
        return 0.0, None
    try:
        result = fn(data_source=data_source, solution_str=solution_str, ground_truth=ground_truth,
                    extra_info=extra_info, **_accepted(fn, extra))
        if inspect.isawaitable(result):
            result = _run_coroutine(result)
    except BaseException as e:  # noqa: BLE001 - a task function may raise anything, even SystemExit
        if isinstance(e, KeyboardInterrupt):
            raise
        return 0.0, f"raised {type(e).__name__}: {str(e)[:200]}"
    return read_task_result(result)

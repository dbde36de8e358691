"""Locate and load the declarative rule packs (YAML) shipped in ``rules/`` and user packs (``--rules DIR``).

The repository's top-level ``rules/`` directory is installed as the package ``trajlab.rules``, so the same
files are found in a source checkout, an editable install and a wheel. A user pack is a directory with
files of the same names; its entries are merged over the built-in ones (lists are appended, mappings are
updated key by key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from trajlab.errors import TrajlabError


@lru_cache(maxsize=1)
def builtin_rules_dir() -> Path:
    """Directory of the built-in rule packs.

    Installed (wheel or editable), that is the package ``trajlab.rules``; a source checkout put on ``PYTHONPATH``
    without installing (e.g. inside a training job's own environment) has no such package, and the checkout's
    top-level ``rules/`` is used.
    """
    import importlib.util

    spec = importlib.util.find_spec("trajlab.rules")  # cheaper than importlib.resources (tempfile, shutil, ...)
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    here = Path(__file__).resolve().parents[1] / "rules"
    if (here / "taxonomy.yaml").is_file():
        return here
    raise TrajlabError("the built-in rules (package trajlab.rules) are missing: reinstall trajlab "
                       "(pip install trajlab)")


def _merge(base: Any, extra: Any) -> Any:
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for k, v in extra.items():
            out[k] = _merge(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(extra, list):
        return base + extra
    return extra


def merge_rules(base: Any, extra: Any, *, replace_lists: bool = False) -> Any:
    """``extra`` merged over ``base`` as user packs are (mappings key by key; lists appended, or replaced with
    ``replace_lists``)."""
    if not replace_lists:
        return _merge(base, extra)
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for k, v in extra.items():
            out[k] = merge_rules(base[k], v, replace_lists=True) if k in base else v
        return out
    return extra


#: libyaml's parser when PyYAML was built with it (the same documents, ~10x faster than the pure-Python one)
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load_yaml(text: str) -> Any:
    """``yaml.safe_load`` of ``text`` through libyaml when available (rule packs are read by every command)."""
    return yaml.load(text, Loader=_SafeLoader)


def _read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return safe_load_yaml(f.read())
    except yaml.YAMLError as e:
        raise TrajlabError(f"{path}: not valid YAML: {e}") from None
    except OSError as e:
        raise TrajlabError(f"{path}: cannot read rule file: {e.strerror}") from None


@lru_cache(maxsize=64)
def _load_cached(name: str, extra_dirs: tuple[str, ...]) -> Any:
    path = builtin_rules_dir() / name
    if not path.exists():
        raise TrajlabError(f"built-in rule file {name!r} is missing from {builtin_rules_dir()}")
    data = _read_yaml(path)
    for d in extra_dirs:
        p = Path(d) / name
        if p.exists():
            data = _merge(data, _read_yaml(p))
    return data


def load_rule_file(name: str, extra_dirs: Iterable[str | Path] = ()) -> Any:
    """Load ``rules/<name>`` (e.g. ``"taxonomy.yaml"``) merged with the same file in each user pack dir."""
    dirs = tuple(str(Path(d)) for d in extra_dirs)
    for d in dirs:
        if not Path(d).is_dir():
            raise TrajlabError(f"rule pack directory not found: {d}")
    return _load_cached(name, dirs)


def rules_hash(extra_dirs: Iterable[str | Path] = ()) -> str:
    """sha256 over every rule file (built-in and user), recorded in manifests so results can be traced."""
    h = hashlib.sha256()
    roots = [builtin_rules_dir(), *[Path(d) for d in extra_dirs]]
    for root in roots:
        for p in sorted(root.rglob("*.yaml")):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()[:16]

"""Fingerprints of trajlab's own source: the import closure of a few modules, and a hash over its files.

A cache of results (the scan's parts, the metrics table) must not outlive the code that made them, even at the
same version number. Rather than a hand-kept list of the modules that matter (which drifts: a new module that
shapes a table is missed), :func:`import_closure` reads the ``import`` statements of trajlab's source -- at the
top of a module and inside functions alike, ``import_module`` of a name prefix, and a package that imports every
module of its own folder (``pkgutil.iter_modules(__path__)``, a registry) -- and follows them from the given roots; the packages above each
module count too (their ``__init__`` runs on import). :func:`source_hash` hashes the closure's files. The test
suite checks the closure against the modules a real scan worker loads.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

#: the package's source directory
ROOT = Path(__file__).resolve().parent
_IMPORT = re.compile(
    r"^([ \t]*)(?:from[ \t]+(trajlab(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)|import[ \t]+(trajlab(?:\.\w+)*))",
    re.MULTILINE)
#: ``import_module(f"trajlab.pkg.prefix{...}")``: every module of ``trajlab.pkg`` whose name starts with prefix
#: a package that imports every module of its folder (a registry such as ``trajlab.toolcalls.formats``)
_REGISTRY = re.compile(r"iter_modules\(\s*__path__")
_DYNAMIC = re.compile(r"import_module\(f?[\"'](trajlab(?:\.\w+)*)\.(\w*)\{")


def module_file(name: str) -> Path | None:
    """The source file of trajlab module ``name`` (a package's ``__init__.py``), or None when there is none."""
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    for f in (ROOT / rel / "__init__.py", ROOT / rel.with_suffix(".py")) if rel.parts else (ROOT / "__init__.py",):
        if f.is_file():
            return f
    return None


def imports_of(source: str, top_only: bool = False) -> set[str]:
    """The trajlab modules one module's source imports (``from trajlab.x import y`` counts ``trajlab.x.y``
    when that is a module); ``top_only``: only the imports at the top level (what importing it runs)."""
    found: set[str] = set()
    for m in _IMPORT.finditer(source):
        if top_only and m.group(1):
            continue
        base = m.group(2) or m.group(4)
        found.add(base)
        if m.group(3):
            for item in m.group(3).strip("() \n").split(","):
                word = item.strip().split(" ")[0]
                if word and module_file(f"{base}.{word}") is not None:
                    found.add(f"{base}.{word}")
    if not top_only:
        for m in _DYNAMIC.finditer(source):
            pkg = module_file(m.group(1))
            if pkg is not None and pkg.name == "__init__.py":
                found.update(f"{m.group(1)}.{f.stem}" for f in sorted(pkg.parent.glob(f"{m.group(2)}*.py")))
    return found


@functools.lru_cache(maxsize=8)
def import_closure(roots: tuple[str, ...]) -> tuple[str, ...]:
    """Every trajlab module that importing and running ``roots`` can load (sorted): their imports (at the top
    level and inside functions), followed, and each module's parent packages with what *their* top level
    imports (a package's lazy attribute imports run only when asked for)."""
    full: set[str] = set()
    top: set[str] = set()
    todo = [(r, False) for r in roots]
    while todo:
        name, as_parent = todo.pop()
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            mod = ".".join(parts[:k])
            parent_only = as_parent or k < len(parts)
            if mod in full or (parent_only and mod in top):
                continue
            f = module_file(mod)
            if f is None:
                continue
            (top if parent_only else full).add(mod)
            source = f.read_text(encoding="utf-8")
            todo.extend((m, False) for m in imports_of(source, top_only=parent_only))
            if f.name == "__init__.py" and _REGISTRY.search(source):
                todo.extend((f"{mod}.{p.stem if p.suffix else p.name}", False) for p in sorted(f.parent.iterdir())
                            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file())
    return tuple(sorted(full | top))


def source_hash(roots: tuple[str, ...]) -> str:
    """sha1 (12 hex digits) over the source of :func:`import_closure` of ``roots`` (a wheel without sources
    hashes what it has)."""
    h = hashlib.sha1()
    for name in import_closure(roots):
        f = module_file(name)
        if f is not None:
            h.update(name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]

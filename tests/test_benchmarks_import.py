"""Every benchmark script imports (the performance page quotes them: a renamed function must not leave one broken).

Each ``benchmarks/*.py`` is loaded as a module (its ``__main__`` block does not run) in one fresh interpreter,
with ``benchmarks/`` on ``sys.path`` as when it is run as a script.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
LOADER = """
import importlib.util, json, sys, traceback
sys.path.insert(0, sys.argv[1])
bad = {}
for path in sys.argv[2:]:
    name = "bench_import_" + path.rsplit("/", 1)[-1][:-3]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException as e:
        bad[path] = f"{type(e).__name__}: {e}"
print(json.dumps(bad))
"""


def test_every_benchmark_imports() -> None:
    scripts = sorted(str(p) for p in BENCH.glob("*.py"))
    assert len(scripts) >= 10
    p = subprocess.run([sys.executable, "-c", LOADER, str(BENCH), *scripts], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    bad = json.loads(p.stdout.strip().splitlines()[-1])
    assert bad == {}, bad

#!/usr/bin/env python3
"""The long run of the scan fuzz harness: thousands of mutated dump trees over every reader, judged by the oracle.

    python benchmarks/fuzz_scan.py --trees 3000 --seed 1             # the closing-note run (~1 h on 2 busy cores)
    python benchmarks/fuzz_scan.py --trees 200 --seed 5 --no-nemo    # quicker, without the NeMo-RL step (tokenizer)
    python benchmarks/fuzz_scan.py --seed 3 --only 543,2281          # replay trees of a run (same seed, same trees)

The trees, the mutations and the oracle are ``tests/helpers/fuzz_trees.py`` (its docstring lists them); the test
suite runs a seeded slice of the same harness (``tests/test_scan_fuzz.py``). Each tree is scanned twice through the
CLI entry point (``--engine records``, then ``--engine columnar --strict``), several trees a scan. Every tree prints
one line (``ok`` or what the oracle found); a failing tree is kept under ``WORK/failed-N/`` to replay with
``trajlab scan``. The summary gives the trees judged, the failures, the mutations applied by kind and the time.
Exit status 1 when any tree failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.fuzz_trees import fuzz  # noqa: E402  (the test suite's harness)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", type=int, default=3000, help="how many trees to build and judge")
    ap.add_argument("--seed", type=int, default=1, help="seed of the tree generator (same seed, same trees)")
    ap.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "trajlab_fuzz",
                    help="where trees, scan outputs and failed trees go")
    ap.add_argument("--per-batch", type=int, default=16, help="trees scanned together (amortises a scan's start)")
    ap.add_argument("--big", type=int, default=2_000_000, help="characters in a big record's text")
    ap.add_argument("--no-nemo", action="store_true", help="leave out the NeMo-RL step (it loads a tokenizer)")
    ap.add_argument("--only", type=lambda s: {int(x) for x in s.split(",")}, default=None, metavar="N[,M...]",
                    help="judge only these tree indices (the trees before them are built and dropped); --trees "
                         "is then ignored")
    args = ap.parse_args()
    t0 = time.monotonic()
    n, failures, kinds = fuzz(args.trees, args.seed, args.work_dir, nemo=not args.no_nemo, big=args.big,
                              per_batch=args.per_batch, log=sys.stdout, only=args.only)
    took = time.monotonic() - t0
    print(f"\n{n} trees (seed {args.seed}) in {took:,.0f} s: {len(failures)} failed")
    print("mutations and odd entries applied: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    for k, desc, found in failures:
        print(f"  tree {k} [{desc}]:\n    " + "\n    ".join(found))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

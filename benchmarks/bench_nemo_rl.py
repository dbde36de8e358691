#!/usr/bin/env python3
"""How fast ``trajlab scan`` reads NeMo-RL train-data dumps (exact tokens), stage by stage, in one process.

    python benchmarks/bench_nemo_rl.py                                   # the real step in ../shared/corpus
    python benchmarks/bench_nemo_rl.py path/to/train_data_step1.jsonl --copies 5

Prints, for the file (repeated ``--copies`` times as separate steps): the tokenizer load, the reader alone
(JSON parse + decode from the ids, :func:`trajlab.ingest.nemo_rl.to_trajectories`), and the whole scan
(reader, classifier, ``rollout_tokens`` rows, merge, ``steps``), as samples/s and tokens/s.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_CORPUS = "shared/corpus/nemo_rl/smoke_hybrid_qwen_native/train_data_step1.jsonl"
#: the real step beside the checkout (``../shared``), else the two rows cut from it for the tests
DEFAULT = next((p for p in (ROOT.parent / _CORPUS, ROOT.parents[1] / _CORPUS) if p.is_file()),
               ROOT / "tests/data/nemo_rl/train_data_step1.jsonl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--copies", type=int, default=3, help="steps made of copies of the file")
    args = ap.parse_args()

    from trajlab.ingest import nemo_rl, token_text
    from trajlab.scan import ScanOptions, scan

    t0 = time.perf_counter()
    token_text.load("qwen3.5")
    t_tok = time.perf_counter() - t0

    lines = args.file.read_text(encoding="utf-8").splitlines()
    t0 = time.perf_counter()
    samples = tokens = 0
    for n, line in enumerate(lines, 1):
        recs, _ = nemo_rl.to_trajectories(json.loads(line), source_path=args.file.name, line=n, file_step=None,
                                          file_split=None)
        samples += len(recs)
        tokens += sum(len(r.tokens.ids) for r in recs if r.tokens is not None)
    t_read = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        for k in range(1, args.copies + 1):  # each copy renumbered (identical files would be skipped as duplicates)
            objs = [json.loads(line) for line in lines]
            for o in objs:
                o["idx"] = f"{o.get('idx')}-{k}"
            (run / f"train_data_step{k}.jsonl").write_text("".join(json.dumps(o) + "\n" for o in objs))
        t0 = time.perf_counter()
        s = scan([run], Path(tmp) / "out", ScanOptions(jobs=1), progress=False)
        t_scan = time.perf_counter() - t0

    mb = args.file.stat().st_size / 1e6
    print(f"file: {args.file.name}, {mb:.1f} MB, {samples} samples, {tokens:,} tokens")
    print(f"tokenizer load (qwen3.5, cached):  {t_tok:6.2f} s")
    print(f"reader alone:                      {t_read:6.2f} s  {samples / t_read:8.1f} samples/s  "
          f"{tokens / t_read:10,.0f} tokens/s  {mb / t_read:6.2f} MB/s")
    n = samples * args.copies
    print(f"whole scan, {args.copies} steps (jobs=1):   {t_scan:6.2f} s  {n / t_scan:8.1f} samples/s  "
          f"{tokens * args.copies / t_scan:10,.0f} tokens/s  ({s.trajectories} trajectories, engine "
          f"{s.engines[0]['engine']})")


if __name__ == "__main__":
    main()

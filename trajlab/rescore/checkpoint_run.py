"""Score every selected trajectory with one checkpoint: :func:`run_checkpoint` (load, score block by block,
write parts, merge them and the checkpoint's manifest).
"""

from __future__ import annotations

import gc
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from trajlab.ownfiles import JSON_KEY
from trajlab.rescore.caches import SpanCache, TokenLabels
from trajlab.rescore.options import RescoreOptions
from trajlab.rescore.progress import progress_bar
from trajlab.rescore.rows import logged_logprobs, mass_groups, positions_table, token_mass_rows, tokens_table
from trajlab.rescore.summary import CheckpointSummary, fill_from_tables


def auto_chunk(device: str) -> int:
    return 2048 if str(device).startswith("cuda") else 256


def run_checkpoint(
    out: Path,
    ref: Any,
    texts: list[Any],
    malformed: dict[str, list[dict]],
    spans: SpanCache,
    tok: Any,
    info: Any,
    opts: RescoreOptions,
    *,
    th: Any,
    rules: dict[str, Any],
) -> CheckpointSummary:
    import torch

    from trajlab.atomic import atomic_write_json
    from trajlab.rescore import distributed as dist_mod
    from trajlab.rescore import outputs
    from trajlab.rescore.checkpoints.load import load_model, resolve_device
    from trajlab.rescore.control_tokens import resolve_control_set
    from trajlab.rescore.scoring import ChunkedScorer, ScoreRequest
    from trajlab.rescore.spikes import (
        ControlStats,
        classify,
        find_malformation_points,
        malformation_rows,
        spike_rows,
        trajectory_row,
    )
    from trajlab.rescore.stream import ChatSpecials, build_streams
    from trajlab.rescore.tokenizers import FIT_MARGIN, check_tokenizer_matches, tokenizer_fit_gap

    device, dtype, tokenizer, tokens = opts.device, opts.dtype, opts.tokenizer, opts.tokens
    device_map, resume, progress = opts.device_map, opts.resume, opts.progress
    t0 = time.perf_counter()
    dev = resolve_device(device)
    if dev == "cuda" and info.world_size > 1 and device_map is None:
        dev = f"cuda:{info.local_rank}"
    ldir = outputs.label_dir(out, ref.label)
    pdir = outputs.parts_dir(out, ref.label)
    done: set[str] = set()
    run_opts = {"checkpoint": str(ref.path), "tokenizer": str(tokenizer) if tokenizer else "checkpoint",
                "dtype": dtype, "tokens_mode": tokens,
                "thresholds": {"intrusion": th.intrusion, "dropout": th.dropout,
                               "intrusion_regions": list(th.intrusion_regions),
                               "dropout_regions": list(th.dropout_regions)}}
    if info.is_main:
        if resume:
            outputs.check_resume_options(out, ref.label, run_opts)  # never mix parts scored two ways
            done = outputs.prepare_resume(out, ref.label)
        else:
            outputs.clear_parts(pdir)
            outputs.clear_merged(out, ref.label)  # replaced: never folded into a later --resume
        outputs.write_resume_options(out, ref.label, run_opts)
    dist_mod.barrier(info)
    if resume and not info.is_main:
        done = outputs.done_ids(out, ref.label)
    todo = [t for t in texts if t.trajectory_id not in done]

    summary = CheckpointSummary(ref.label, str(ref.path), ref.kind, ref.step, str(ldir))
    summary.skipped_resume = len(texts) - len(todo)
    model = load_model(ref, device=dev, dtype=dtype, trust_remote_code=opts.trust_remote_code,
                       allow_unsafe_pickle=opts.allow_unsafe_pickle, cache_merged=opts.cache_merged,
                       device_map=device_map)  # fmt: skip
    check_tokenizer_matches(model, tok)
    cset = resolve_control_set(tok, rules)
    summary.control_family = cset.family
    summary.skipped_control_strings = list(cset.skipped)
    from trajlab.rescore.outputs import MASS_GROUPS

    scorer = ChunkedScorer(
        model, cset.ids, cset.mask_rows(), chunk=opts.chunk or auto_chunk(dev), max_batch_tokens=opts.max_batch_tokens,
        device=None if device_map else dev, mass_groups=len(MASS_GROUPS),
    )  # fmt: skip
    gap = tokenizer_fit_gap(scorer, tok)
    if gap is not None and gap < FIT_MARGIN:
        from trajlab.console import warn

        warn(f"checkpoint {ref.label}: the tokenizer may not fit this model: it scores ordinary text only "
             f"{gap:+.2f} nats/token better than the same tokens shuffled (a fitting tokenizer gives well over "
             f"{FIT_MARGIN}); a tokenizer with permuted ids, another model's tokenizer, or an untrained model. "
             "Check --tokenizer before trusting these scores.")
    sp = ChatSpecials.from_tokenizer(tok)
    im_end_id = sp.im_end if sp else (tok.eos_token_id if isinstance(tok.eos_token_id, int) else None)
    labels = TokenLabels(tok)
    seq = outputs.next_seq(pdir, info.rank)

    bar = progress_bar(progress and info.is_main, ref.label, sum(len(t.output) for t in todo))
    lp_sum = 0.0
    gap_sum = 0.0
    try:
        for b0 in range(0, len(todo), opts.block_size):
            block = todo[b0 : b0 + opts.block_size]
            streams = build_streams(block, tok, spans)
            reqs, points_all, extra_maps, groups = [], [], [], []
            for tr, st in zip(block, streams, strict=True):
                points = find_malformation_points(tr, st, malformed.get(tr.trajectory_id, []), tok, im_end_id)
                extra: list[tuple[int, int]] = []
                emap: dict[int, int] = {}
                for i, p in enumerate(points):
                    if p.index is not None and p.repaired_token_id is not None:
                        emap[i] = len(extra)
                        extra.append((p.index, int(p.repaired_token_id)))
                groups.append(mass_groups(st, th))
                reqs.append(ScoreRequest(st.ids, st.positions, cset.format_index(tr.tool_format), extra, groups[-1]))
                points_all.append(points)
                extra_maps.append(emap)
            results = scorer.score(reqs, progress=bar.tokens if bar else None)
            tok_tables, pos_tables, spike_r, traj_r, mal_r = [], [], [], [], []
            block_stats = ControlStats(cset)
            mass = scorer.take_mass()
            logged_mass = np.zeros_like(mass)
            for tr, st, res, points, emap, grp in zip(block, streams, results, points_all, extra_maps, groups,
                                                      strict=True):  # fmt: skip
                fl = classify(st, res, cset, tr.tool_format, th)
                row = trajectory_row(tr, st, res, fl)
                row["checkpoint"] = ref.label
                traj_r.append(row)
                for r in spike_rows(tr, st, res, fl, cset, labels):
                    r["checkpoint"] = ref.label
                    spike_r.append(r)
                mal_r += malformation_rows(tr, st, res, points, emap, labels, ref.label)
                t = tokens_table(ref.label, tr, st, res, cset, labels, tokens)
                if t is not None:
                    tok_tables.append(t)
                block_stats.add(st, res, fl, tr.tool_format)
                pos_tables.append(positions_table(ref.label, tr, st, res, cset, fl))
                gm = grp >= 0
                np.add.at(logged_mass, (grp[gm], st.ids[st.positions][gm]), np.exp(res.logprob[gm].astype(np.float64)))
                lp_sum += float(res.logprob.sum(dtype=np.float64))
                if tr.exact is not None:  # compare with what the source logged at sampling time
                    lg = np.asarray(logged_logprobs(tr, st.positions), dtype=np.float64)
                    have = ~np.isnan(lg)
                    gap_sum += float(np.abs(res.logprob.astype(np.float64)[have] - lg[have]).sum())
                    summary.logged_tokens += int(have.sum())
                summary.tokens += st.n_tokens
                summary.scored_tokens += st.n_scored
            outputs.write_part(
                pdir, info.rank, seq,
                {"tokens": pa.concat_tables(tok_tables) if tok_tables else None, "spikes": spike_r,
                 "malformations": mal_r, "control_stats": block_stats.rows(ref.label),
                 "positions": pa.concat_tables(pos_tables) if pos_tables else None,
                 "token_mass": token_mass_rows(ref.label, mass, logged_mass), "trajectory_scores": traj_r},
            )  # fmt: skip
            seq += 1
            summary.trajectories += len(block)
            if bar:
                bar.chars(sum(len(t.output) for t in block))
    finally:
        if bar:
            bar.close()
        del scorer, model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    dist_mod.barrier(info)
    if info.is_main:
        merged_parts = outputs.merge_parts(out, ref.label)
        fill_from_tables(summary, ldir)
        summary.logged_logprob_gap = gap_sum / summary.logged_tokens if summary.logged_tokens else None
        summary.seconds = time.perf_counter() - t0
        summary.tokens_per_s = summary.scored_tokens / summary.seconds if summary.seconds > 0 else 0.0
        atomic_write_json(
            ldir / "manifest.json",
            {
                JSON_KEY: "rescore manifest",
                "checkpoint": {"label": ref.label, "path": str(ref.path), "kind": ref.kind, "step": ref.step},
                "tokenizer": str(tokenizer) if tokenizer else "checkpoint",
                "device": dev, "dtype": dtype, "world_size": info.world_size,
                "thresholds": {"intrusion": th.intrusion, "dropout": th.dropout,
                               "intrusion_regions": list(th.intrusion_regions),
                               "dropout_regions": list(th.dropout_regions)},
                "control_tokens": {"family": cset.family,
                                   "tokens": [{"token": lab, "id": i, "strings": s}
                                              for lab, i, s in zip(cset.labels, cset.ids, cset.sources, strict=True)],
                                   "skipped": cset.skipped},
                "tokens_mode": tokens,
                "parts": merged_parts,
                "summary": {k: v for k, v in asdict(summary).items() if k not in ("skipped_control_strings",)},
            },
        )  # fmt: skip
    dist_mod.barrier(info)
    if not info.is_main:  # every rank reports the same totals, so every rank exits the same way
        fill_from_tables(summary, ldir)
        summary.seconds = time.perf_counter() - t0
    return summary

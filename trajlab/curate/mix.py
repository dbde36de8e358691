"""Mixing the three kinds by a ratio, and the train/validation split by prompt.

**Sizes.** Without ``--max-samples`` the pool is the largest one that meets the ratio exactly (up to rounding):
the scarcest kind relative to its share sets the size. With ``--max-samples N`` the pool aims at N samples split
by the ratio; a kind that has fewer candidates than its share gives all it has and the shortfall is spread over
the other kinds by their ratio, so the achieved mix differs from the requested one (it is reported).

**Which samples.** Inside a kind, samples are taken in order of preference: positives and hints by their
rank inside their prompt group (every group's best first), error demonstrations round-robin over categories
(so rare categories are not crowded out) and, inside a category, the calls whose malformed continuation the
last rescored checkpoint prefers most first (``rescore/<label>/malformations.log_odds``, when present); ties
are broken by a seeded hash of the sample id.

**Split.** Every prompt (hash of the prompt text) is assigned to validation or train as a whole, so no prompt
appears on both sides: prompts are ordered by a seeded hash and the first ``ceil(val_fraction * prompts)`` go
to validation (at least one when ``val_fraction > 0`` and there are two prompts or more).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from trajlab.curate.samples import KINDS, Sample, seeded_unit


def largest_remainder(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` into integers proportional to ``weights`` (ties to the lower index)."""
    wsum = sum(weights)
    if total <= 0 or wsum <= 0:
        return [0] * len(weights)
    raw = [total * w / wsum for w in weights]
    base = [math.floor(x) for x in raw]
    rest = total - sum(base)
    order = sorted(range(len(weights)), key=lambda i: (-(raw[i] - base[i]), i))
    for i in order[:rest]:
        if weights[i] > 0:
            base[i] += 1
    return base


def exact_ratio_size(avail: Sequence[int], ratio: Sequence[float]) -> int:
    """The largest pool size whose ratio shares all fit in the available counts."""
    rsum = sum(ratio)
    sizes = [math.floor(a * rsum / r + 1e-9) for a, r in zip(avail, ratio, strict=True) if r > 0]
    return min(sizes) if sizes else 0


def allocate(avail: Sequence[int], ratio: Sequence[float], max_samples: int | None) -> list[int]:
    """Samples to take per kind (see the module docstring)."""
    target = exact_ratio_size(avail, ratio) if max_samples is None else max_samples
    alloc = [0] * len(avail)
    active = [r > 0 and a > 0 for r, a in zip(ratio, avail, strict=True)]
    while True:
        remaining = target - sum(alloc)
        if remaining <= 0 or not any(active):
            break
        share = largest_remainder(remaining, [r if act else 0.0 for r, act in zip(ratio, active, strict=True)])
        moved = 0
        for k, add in enumerate(share):
            take = min(add, avail[k] - alloc[k])
            alloc[k] += take
            moved += take
            if alloc[k] >= avail[k]:
                active[k] = False
        if moved == 0:
            break
    return alloc


def preference_order(samples: Iterable[Sample], seed: int) -> list[Sample]:
    """Samples of one kind in the order quotas take them."""
    samples = list(samples)
    if samples and samples[0].kind == "error_demo":
        # round-robin over the primary category; inside a category by rank (calls the rescored checkpoint
        # prefers most, when a rescore exists), then a seeded order
        by_cat: dict[str, list[Sample]] = {}
        for s in sorted(samples, key=lambda s: (s.rank, seeded_unit(seed, s.sample_id))):
            by_cat.setdefault(s.categories[0] if s.categories else "", []).append(s)
        keyed = [(i, seeded_unit(seed, cat), s) for cat, ss in by_cat.items() for i, s in enumerate(ss)]
        return [s for _, _, s in sorted(keyed, key=lambda x: (x[0], x[1], x[2].sample_id))]
    return sorted(samples, key=lambda s: (s.rank, seeded_unit(seed, s.sample_id), s.sample_id))


def mix(
    by_kind: dict[str, list[Sample]], ratio: Sequence[float], max_samples: int | None, seed: int
) -> tuple[list[Sample], dict[str, int]]:
    """The selected samples (all kinds) and how many of each kind were taken."""
    avail = [len(by_kind.get(k, [])) for k in KINDS]
    alloc = allocate(avail, ratio, max_samples)
    chosen: list[Sample] = []
    for k, n in zip(KINDS, alloc, strict=True):
        chosen.extend(preference_order(by_kind.get(k, []), seed)[:n])
    return chosen, dict(zip(KINDS, alloc, strict=True))


def split_prompts(prompt_keys: Iterable[str], val_fraction: float, seed: int) -> set[str]:
    """The prompt keys that go to validation."""
    keys = sorted(set(prompt_keys), key=lambda k: (seeded_unit(seed, "split\x00" + k), k))
    if val_fraction <= 0 or len(keys) < 2:
        return set()
    n_val = min(len(keys) - 1, max(1, math.ceil(val_fraction * len(keys))))
    return set(keys[:n_val])


def achieved_ratio(counts: dict[str, int], ratio: Sequence[float]) -> str:
    """The achieved mix as counted, reduced by the smallest non-zero count, with the counts themselves (e.g.
    ``1:0:1 (12:0:12 samples)``; ``5:2.1:2.9 (50:21:29 samples)``): a 1:1 mix reads 1:0:1, not 3.5:0:3.5."""
    vals = [counts.get(k, 0) for k in KINDS]
    if not any(vals):
        return ":".join("0" for _ in KINDS) + " (no samples)"
    unit = min(v for v in vals if v > 0)
    return ":".join(f"{v / unit:.3g}" for v in vals) + " (" + ":".join(str(v) for v in vals) + " samples)"

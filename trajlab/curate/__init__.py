"""Curate an SFT pool from a scan: positive demonstrations, error demonstrations and hints, mixed for verl.

The remedy for tool-use RL collapse studied in this project is to interleave SFT steps with RL, from a pool of
three kinds of supervision. :func:`build_sft_pool` builds it from the tables of ``trajlab scan``:

* :mod:`~trajlab.curate.select_positive` — clean, finished, well-scored trajectories;
* :mod:`~trajlab.curate.error_demos` — a broken call, what is wrong with it, and the corrected call;
* :mod:`~trajlab.curate.hints` — positives whose system prompt carries a hint for what their group got wrong;
* :mod:`~trajlab.curate.mix` — the ratio, the seeded choice and the split by prompt;
* :mod:`~trajlab.curate.writers` — Parquet for verl (``messages``, ``prompt-response``) or ``openai`` style;
* :mod:`~trajlab.curate.card` — ``README.md`` dataset card and ``manifest.json``;
* :mod:`~trajlab.curate.ood` — the format-OOD evaluation set.
"""

from trajlab.curate.build import build_sft_pool
from trajlab.curate.options import PoolOptions, parse_ratio
from trajlab.curate.summary import PoolSummary, summary_table

__all__ = ["PoolOptions", "PoolSummary", "build_sft_pool", "parse_ratio", "summary_table"]

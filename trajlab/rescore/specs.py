"""Table specs of ``trajlab rescore``: per checkpoint (tokens, spikes, trajectory scores, malformations, control stats,
positions, token mass), across checkpoints (compare) and against the reference (calibration, paired, discovered,
distribution). Where each is written: :mod:`trajlab.rescore.outputs` and :mod:`trajlab.rescore.drift`.
"""

from __future__ import annotations

import pyarrow as pa

from trajlab.tables import BOOL, F32, F64, I32, I64, STR, C, TableSpec

TOKENS = TableSpec(
    "rescore_tokens",
    "rescore/<label>/tokens: one row per scored (assistant) token and checkpoint.",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("trajectory_id", STR, "trajectories.trajectory_id", False),
        C("turn_index", I32, "assistant turn the token belongs to", False),
        C("position", I64, "index of the token in the rebuilt token stream (prompt included)", False),
        C("token_id", I64, "logged token id", False),
        C("token", STR, "logged token, decoded", False),
        C("char_start", I64, "offset into trajectories.output (a re-inserted <|im_end|> has an empty range)", False),
        C("char_end", I64, "end offset (exclusive)", False),
        C("region", STR, "structural | function_name | param_name | param_value | text | think", False),
        C("logprob", F32, "log-probability of the logged token", False),
        C("entropy", F32, "entropy of the next-token distribution (nats)", False),
        C("top_token", STR, "most likely token, decoded", False),
        C("top_prob", F32, "its probability", False),
        C("control_mass", F32, "probability mass on the trajectory format's control-token set", False),
        C("top_control_token", STR, "most likely control token (null when the set is empty)"),
        C("top_control_prob", F32, "its probability", False),
        C("logged_logprob", F32, "the log-prob the source logged for this token when it was sampled (the inference "
          "engine's; exact-token sources such as NeMo-RL only, else null)"),
    ),
    ("trajectory_id", "position"),
)

SPIKES = TableSpec(
    "rescore_spikes",
    "rescore/<label>/spikes: intrusion and dropout spikes (definitions in rules/control_tokens.yaml).",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("trajectory_id", STR, "trajectories.trajectory_id", False),
        C("step", I64, "rollout step of the trajectory"),
        C("split", STR, ""),
        C("turn_index", I32, "turns.turn_index of the assistant turn", False),
        C("position", I64, "index in the rebuilt token stream", False),
        C("kind", STR, "intrusion (control mass >= tau at a content position) | dropout (logged control token <= 1-tau)", False),
        C("token_id", I64, "logged token id", False),
        C("token", STR, "logged token, decoded", False),
        C("char_start", I64, "offset into trajectories.output", False),
        C("char_end", I64, "end offset into trajectories.output (exclusive)", False),
        C("region", STR, "structural | function_name | param_name | param_value | text | think", False),
        C("value", F64, "the statistic compared with tau: control mass (intrusion) or logged-token probability (dropout)", False),
        C("control_token", STR, "top control token (intrusion) or the logged control token (dropout)"),
        C("control_prob", F64, "its probability", False),
        C("logprob", F64, "log-probability of the logged token", False),
        C("top_token", STR, "most likely token", False),
        C("top_prob", F64, "probability of the most likely token", False),
    ),
    ("trajectory_id", "position", "kind"),
)

_REGION_COLS = tuple(
    C(f"mean_logprob_{r}", F64, f"mean logprob of tokens in {r} regions")
    for r in ("structural", "function_name", "param_name", "param_value", "text", "think")
)

TRAJECTORY_SCORES = TableSpec(
    "rescore_trajectory_scores",
    "rescore/<label>/trajectory_scores: one row per rescored trajectory and checkpoint.",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("trajectory_id", STR, "trajectories.trajectory_id", False),
        C("step", I64, ""),
        C("split", STR, ""),
        C("score", F64, "reward as dumped"),
        C("tool_format", STR, ""),
        C("n_tokens", I64, "tokens in the rebuilt stream (prompt included)", False),
        C("n_scored", I64, "assistant tokens scored", False),
        C("n_calls", I32, "tool calls in the trajectory (scan)", False),
        C("n_malformed_calls", I32, "malformed calls in the trajectory (scan)", False),
        C("roundtrip_ok", BOOL, "decoding the rebuilt stream gives back exactly input + output", False),
        C("stream_note", STR, "why the stream may differ from what the model saw"),
        C("mean_logprob", F64, "mean logprob over scored tokens"),
        C("mean_entropy", F64, ""),
        C("max_intrusion_mass", F64, "highest control mass at a content position"),
        C("min_structural_prob", F64, "lowest probability of a logged structural token"),
        C("n_intrusion_positions", I64, "content positions (eligible for intrusion)", False),
        C("n_intrusions", I64, "intrusion spikes", False),
        C("n_dropout_positions", I64, "logged control tokens (eligible for dropout)", False),
        C("n_dropouts", I64, "dropout spikes", False),
        *_REGION_COLS,
    ),
    ("trajectory_id",),
)

MALFORMATIONS = TableSpec(
    "rescore_malformations",
    "rescore/<label>/malformations: where each call that is not ok (status malformed or warning) departs from its "
    "repair (or, without one, where its first error starts), and the probability of the malformed vs the "
    "well-formed continuation.",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("call_id", STR, "calls.call_id", False),
        C("trajectory_id", STR, "trajectories.trajectory_id", False),
        C("turn_index", I32, "turns.turn_index of the assistant turn", False),
        C("step", I64, ""),
        C("split", STR, ""),
        C("categories", pa.list_(STR), "the call's categories", False),
        C("diff_offset", I64, "offset into output of the first char where raw and repaired differ (no repair: of the first error finding)", False),
        C("context", STR, "up to 40 chars of the call before that point", False),
        C("position", I64, "index in the token stream of the malformed token"),
        C("char_start", I64, "the malformed token's offsets into output"),
        C("char_end", I64, "end offset into trajectories.output (exclusive)"),
        C("malformed_token", STR, "logged token at the malformation"),
        C("malformed_token_id", I64, ""),
        C("malformed_prob", F64, "probability of the malformed continuation"),
        C("repaired_token", STR, "first token of the repaired text from the same char"),
        C("repaired_token_id", I64, ""),
        C("repaired_prob", F64, "probability of the well-formed continuation"),
        C("log_odds", F64, "log malformed_prob - log repaired_prob (> 0: the checkpoint prefers the malformation)"),
        C("top_token", STR, ""),
        C("top_prob", F64, "probability of the most likely token"),
        C("control_mass", F64, ""),
        C("note", STR, "why a value is missing, if one is"),
    ),
    ("trajectory_id", "turn_index", "call_id"),
)

CONTROL_STATS = TableSpec(
    "rescore_control_stats",
    "rescore/<label>/control_stats: per control token and region, the probability the checkpoint gives it.",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("control_token", STR, "decoded control token", False),
        C("control_token_id", I64, "its id in the checkpoint's tokenizer", False),
        C("control_strings", pa.list_(STR), "rule strings that resolve to this token", False),
        C("region", STR, "region of the scored positions", False),
        C("n_positions", I64, "scored positions in the region whose format's control set has this token", False),
        C("sum_prob", F64, "sum of the token's probability over those positions", False),
        C("mean_prob", F64, "sum_prob / n_positions", False),
        C("max_prob", F64, "highest probability the token got at one of those positions", False),
        C("n_logged", I64, "positions where it is the logged token", False),
        C("sum_logged_prob", F64, "sum of its probability where it is logged", False),
        C("n_intrusions", I64, "intrusion spikes where it is the top control token", False),
        C("n_dropouts", I64, "dropout spikes where it is the logged token", False),
    ),
    ("control_token_id", "region"),
)

COMPARE = TableSpec(
    "rescore_compare",
    "rescore/compare: per control token and region, how mean probability and spike rate moved from one "
    "checkpoint to the next (region 'all' sums every region).",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("checkpoint_index", I32, "order of the checkpoint in the run", False),
        C("step", I64, "global step of the checkpoint, when known"),
        C("previous_checkpoint", STR, "null for the first checkpoint"),
        C("control_token", STR, "decoded control token", False),
        C("region", STR, "region of the scored positions, or 'all'", False),
        C("n_positions", I64, "scored positions counted for this token and region", False),
        C("mean_prob", F64, "mean probability the checkpoint gives the token there", False),
        C("previous_mean_prob", F64, "the same for the previous checkpoint"),
        C("delta_mean_prob", F64, "mean_prob - previous_mean_prob"),
        C("ratio_mean_prob", F64, "mean_prob / previous_mean_prob"),
        C("spike_rate", F64, "(intrusions + dropouts attributed to the token) / n_positions", False),
        C("previous_spike_rate", F64, "the same for the previous checkpoint"),
        C("delta_spike_rate", F64, "spike_rate - previous_spike_rate"),
    ),
    ("control_token", "region", "checkpoint_index"),
)

POSITIONS = TableSpec(
    "rescore_positions",
    "rescore/<label>/positions: per scored token, what the reference comparison needs (logged-token "
    "logprob, control-token probabilities at content positions); joined across checkpoints on "
    "(trajectory_id, position).",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("trajectory_id", STR, "trajectories.trajectory_id", False),
        C("position", I64, "index of the token in the rebuilt token stream", False),
        C("region", STR, "structural | function_name | param_name | param_value | text | think", False),
        C("token_id", I64, "logged token id", False),
        C("logprob", F32, "log-probability of the logged token", False),
        C("is_control", BOOL, "the logged token is a control token of the trajectory's format", False),
        C("control_mass", F32, "probability mass on the format's control-token set", False),
        C("control_probs", pa.list_(F32), "at intrusion-eligible positions: probability of each control token "
          "(manifest.json control_tokens order; NaN for tokens outside the format's set); else null"),
    ),
    ("trajectory_id", "position"),
)

TOKEN_MASS = TableSpec(
    "rescore_token_mass",
    "rescore/<label>/token_mass: per vocabulary token, its next-token probability summed over the "
    "structural and content positions (tokens whose sum is below 1e-6 in a block are left out).",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("group", STR, "structural (region structural) | content (the intrusion regions)", False),
        C("token_id", I64, "vocabulary id", False),
        C("mass", F64, "sum over the group's positions of the token's probability", False),
        C("logged_mass", F64, "the part of mass from positions where the token is the logged one", False),
    ),
    ("group", "token_id"),
)


CALIBRATION = TableSpec(
    "rescore_calibration",
    "rescore/calibration: reference-calibrated spikes per checkpoint, kind, control token and region; the "
    "threshold is a quantile of the reference checkpoint's own distribution.",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("checkpoint_index", I32, "order of the checkpoint in the run", False),
        C("step", I64, "global step of the checkpoint, when known"),
        C("reference", STR, "label of the reference checkpoint", False),
        C("kind", STR, "intrusion (P(token) at content positions above the reference's q-quantile) | "
          "dropout (P(logged control token) below the reference's (1-q)-quantile)", False),
        C("control_token", STR, "decoded control token", False),
        C("region", STR, "region of the positions", False),
        C("quantile", F64, "--calibration-quantile q", False),
        C("threshold", F64, "the reference's quantile (intrusion: q, dropout: 1-q)", False),
        C("reference_units", I64, "reference positions the threshold comes from", False),
        C("units", I64, "this checkpoint's positions in the cell", False),
        C("spikes", I64, "positions beyond the threshold", False),
        C("rate", F64, "spikes / units", False),
    ),
    ("checkpoint_index", "kind", "control_token", "region"),
)

PAIRED = TableSpec(
    "rescore_paired",
    "rescore/paired: position-by-position change against the reference (same trajectories, same positions), "
    "with percentile bootstrap intervals over trajectories.",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("checkpoint_index", I32, "order of the checkpoint in the run", False),
        C("step", I64, "global step of the checkpoint, when known"),
        C("reference", STR, "label of the reference checkpoint", False),
        C("scope", STR, "drift (toward spikes, all eligible positions) | region | intrusion (a control token "
          "at content positions) | dropout (a logged control token) | malformation (a category)", False),
        C("name", STR, "region, control token or malformation category ('all' for drift)", False),
        C("measure", STR, "the paired quantity, e.g. 'log P(logged)', 'log P(token)', 'log P(malformed)', "
          "'log P(repaired)', 'log odds', 'P toward spikes' (+ control mass at content positions, - P(logged "
          "control token))", False),
        C("n", I64, "paired positions (or malformation points)", False),
        C("trajectories", I64, "trajectories they come from (the bootstrap resamples these)", False),
        C("median", F64, "median delta (checkpoint - reference): nats, or probability for 'P toward spikes'", False),
        C("median_lo", F64, "2.5% bootstrap bound of the median"),
        C("median_hi", F64, "97.5% bootstrap bound of the median"),
        C("mean", F64, "mean delta, same units", False),
        C("mean_lo", F64, "2.5% bootstrap bound of the mean"),
        C("mean_hi", F64, "97.5% bootstrap bound of the mean"),
        C("share_up", F64, "share of positions where the quantity went up", False),
    ),
    ("checkpoint_index", "scope", "name", "measure"),
)

DISCOVERED = TableSpec(
    "rescore_discovered",
    "rescore/discovered: tokens (any, not only the configured control tokens) whose probability at positions "
    "where they were not the logged token grew most between the reference and each checkpoint (top 20 per "
    "group).",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("checkpoint_index", I32, "order of the checkpoint in the run", False),
        C("step", I64, "global step of the checkpoint, when known"),
        C("reference", STR, "label of the reference checkpoint", False),
        C("group", STR, "structural | content positions", False),
        C("rank", I32, "1 = highest score", False),
        C("token_id", I64, "vocabulary id", False),
        C("token", STR, "decoded token", False),
        C("is_control", BOOL, "already a configured control token", False),
        C("n_positions", I64, "positions in the group", False),
        C("reference_prob", F64, "reference's mean probability of the token where it is not logged", False),
        C("prob", F64, "this checkpoint's mean probability there", False),
        C("gained", F64, "prob - reference_prob: mass gained per position", False),
        C("ratio", F64, "prob / reference_prob"),
        C("score", F64, "gained x ln((prob + 1e-6) / (reference_prob + 1e-6)): mass gained, weighted by how new "
          "it is (the token's term of a KL divergence)", False),
    ),
    ("checkpoint_index", "group", "rank"),
)

DISTRIBUTION = TableSpec(
    "rescore_distribution",
    "rescore/distribution: per checkpoint, a histogram of control-token probability (log10 bins): control "
    "mass at content positions (intrusion) and the logged control token's probability (dropout).",
    (
        C("checkpoint", STR, "checkpoint label", False),
        C("checkpoint_index", I32, "order of the checkpoint in the run", False),
        C("step", I64, "global step of the checkpoint, when known"),
        C("is_reference", BOOL, "this checkpoint is the reference", False),
        C("kind", STR, "intrusion | dropout", False),
        C("bin", I32, "bin index", False),
        C("log10_lo", F64, "lower edge, log10 probability (the first bin also holds everything below)", False),
        C("log10_hi", F64, "upper edge", False),
        C("count", I64, "positions in the bin", False),
        C("share", F64, "count / positions of the kind", False),
    ),
    ("checkpoint_index", "kind", "bin"),
)

"""The ``rollout_tokens`` rows of a trajectory whose source logs exact tokens, with each token's marks.

A token is marked ``control`` when it is a control token of its tokenizer's family and the trajectory's call
format, and ``environment`` when it is one of the family's environment tokens (both from
``rules/control_tokens.yaml``, resolved through the tokenizer that decoded the ids, once per tokenizer, format
and rule packs). Sources without exact tokens (verl's text dumps) have no rows here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from trajlab.model import ExactTokens, RawTrajectory

if TYPE_CHECKING:  # pragma: no cover
    from trajlab.trajectory import TrajectoryAnalysis


@lru_cache(maxsize=32)
def _marks(tokenizer: str, fmt: str, rules_dirs: tuple[str, ...]) -> tuple[frozenset[int], frozenset[int]]:
    """(control ids, environment ids) of ``tokenizer`` for call format ``fmt`` under ``rules_dirs``."""
    from trajlab.ingest import token_text
    from trajlab.rescore.control_tokens import environment_ids, load_control_rules, resolve_control_set

    tok = token_text.load(tokenizer)
    rules = load_control_rules(rules_dirs)
    cs = resolve_control_set(tok, rules, None)
    return frozenset(cs.ids_for(fmt)), environment_ids(tok, rules, cs.family)


def marks(tokens: ExactTokens, fmt: str, rules_dirs: tuple[str, ...] = ()) -> tuple[list[bool], list[bool]]:
    """Per position: whether the token is a control token (of format ``fmt``) and whether it is an
    environment token."""
    control, env = _marks(tokens.tokenizer, fmt, tuple(rules_dirs))
    return [i in control for i in tokens.ids], [i in env for i in tokens.ids]


def token_rows(traj_id: str, tokens: ExactTokens, fmt: str, rules_dirs: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """The ``rollout_tokens`` rows of one trajectory, in the table's column order."""
    control, env = marks(tokens, fmt, rules_dirs)
    return [
        (traj_id, tokens.turn[k], k, tokens.ids[k], tokens.text[k], tokens.generated[k], tokens.logprob[k],
         tokens.train_logprob[k], control[k], env[k])
        for k in range(len(tokens.ids))
    ]


def generated_environment(tokens: ExactTokens, rules_dirs: tuple[str, ...] = ()) -> dict[int, int]:
    """For each turn, the first position where the policy generated an environment token (turns without
    one are absent)."""
    _, env = _marks(tokens.tokenizer, "none", tuple(rules_dirs))
    out: dict[int, int] = {}
    for k, (tid, gen) in enumerate(zip(tokens.ids, tokens.generated, strict=True)):
        if gen and tid in env and tokens.turn[k] not in out:
            out[tokens.turn[k]] = k
    return out


def fabricated_findings(traj_id: str, rec: RawTrajectory, an: TrajectoryAnalysis,
                        rules_dirs: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """``findings`` rows (the table's column order) for the generated turns in which the policy sampled an
    environment token that the text classifier did not already report as ``fabricated_tool_response`` (for
    instance a role header with no call before it): the exact tokens make it certain."""
    assert rec.tokens is not None
    from trajlab.toolcalls.ruleset import get_ruleset

    found = generated_environment(rec.tokens, rules_dirs)
    if not found:
        return []
    reported = {t.index for t, ta in an.turns
                if ta is not None and any(f.category == "fabricated_tool_response" for f in ta.findings)}
    rs = get_ruleset(rules_dirs)
    fmt = an.tool_format if an.tool_format else "none"
    out: list[tuple[Any, ...]] = []
    for turn_index, pos in sorted(found.items()):
        if turn_index in reported or not 0 <= turn_index < len(rec.turns):
            continue
        turn = rec.turns[turn_index]
        marker = rec.tokens.text[pos]
        at = turn.text.find(marker)
        start = turn.char_start + max(at, 0)
        params = {"marker": marker, "position": pos, "text": marker}
        out.append((traj_id, turn_index, None, rec.step, rec.split, "fabricated_tool_response",
                    rs.severity("fabricated_tool_response", "generated_tokens", fmt), start, turn.char_end,
                    rs.message("fabricated_tool_response", "generated_tokens", params),
                    f"{fmt}/fabricated_tool_response/generated_tokens"))
    return out

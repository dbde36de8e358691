"""The reward policy: the weights that turn the classifier's verdicts on one response into a format reward, and
how that reward is combined with the task reward (``rules/reward_policy.yaml``, overridable).

:func:`load_policy` reads the built-in pack, merges a user pack's and a single file's ``reward_policy.yaml`` over it,
then single settings (``{"mode": "gate", "weights": {"valid_call": 0.2}}``), and checks the result once
(:class:`RewardPolicy` refuses a wrong value when made). :func:`judge` applies it to a
:class:`~trajlab.trajectory.TrajectoryAnalysis`. The formulas are written at the top of the YAML file.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajlab.errors import TrajlabError
from trajlab.rulepacks import load_rule_file, merge_rules

if TYPE_CHECKING:
    from trajlab.trajectory import TrajectoryAnalysis

POLICY_FILE = "reward_policy.yaml"
MODES = ("additive", "gate")
#: the keys every sample carries besides the policy's groups, in this order
CORE_KEYS = ("score", "task_score", "format_reward", "tool_calls", "malformed_calls", "warned_calls",
             "verl_dropped_calls", "classified", "task_failed", "plugin_errors")
#: keys verl itself uses with a meaning of its own: a group may not take them
RESERVED = frozenset({*CORE_KEYS, "acc", "pred", "reward", "input", "output", "gts", "step", "uid", "data_source"})


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TrajlabError(f"reward policy: {where} must be a number, not {value!r}")
    try:
        x = float(value)
    except ValueError:
        raise TrajlabError(f"reward policy: {where} must be a number, not {value!r}") from None
    if not math.isfinite(x):
        raise TrajlabError(f"reward policy: {where} must be a finite number, not {value!r}")
    return x


@dataclass(frozen=True)
class RewardPolicy:
    """The checked policy. Penalties are positive numbers that are subtracted."""

    mode: str = "additive"
    format_weight: float = 1.0
    gate_score: float = 0.0
    gate_adds_format: bool = False
    valid_call: float = 0.1
    verl_dropped: float = 0.1
    turn_error: float = 0.05
    no_call_reward: float = 0.0
    min_format_reward: float = -1.0
    max_format_reward: float = 0.5
    error_penalty: float = 0.5
    warning_penalty: float = 0.05
    category_penalties: tuple[tuple[str, float], ...] = ()
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    _penalty: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise TrajlabError(f"reward policy: mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        for name in ("format_weight", "gate_score", "valid_call", "verl_dropped", "turn_error", "no_call_reward",
                     "min_format_reward", "max_format_reward", "error_penalty", "warning_penalty"):
            object.__setattr__(self, name, _num(getattr(self, name), name))
        if self.min_format_reward > self.max_format_reward:
            raise TrajlabError(f"reward policy: min_format_reward ({self.min_format_reward}) is above "
                               f"max_format_reward ({self.max_format_reward})")
        seen: set[str] = set()
        for name, cats in self.groups:
            if not isinstance(name, str) or not name.isidentifier() or name in RESERVED or name in seen:
                raise TrajlabError(f"reward policy: group name {name!r} must be a new identifier, not one of "
                                   f"verl's or trajlab's own keys ({', '.join(sorted(RESERVED))})")
            seen.add(name)
            if not cats or not all(isinstance(c, str) for c in cats):
                raise TrajlabError(f"reward policy: group {name!r} needs a list of category names")
        self._penalty.update({c: _num(w, f"penalties.categories.{c}") for c, w in self.category_penalties})

    @property
    def group_keys(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.groups)

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key a sample carries, in order."""
        return (*CORE_KEYS, *self.group_keys)

    def call_penalty(self, findings: list[tuple[str, str]]) -> float:
        """The penalty of one malformed call from its (category, severity) error/warning findings."""
        worst = 0.0
        for cat, sev in findings:
            w = self._penalty.get(cat)
            if w is None:
                w = self.error_penalty if sev == "error" else self.warning_penalty
            worst = max(worst, w)
        return worst


def _policy_from_data(data: Any, where: str) -> RewardPolicy:
    if not isinstance(data, Mapping):
        raise TrajlabError(f"{where}: a reward policy is a mapping (see rules/{POLICY_FILE})")
    w = data.get("weights") or {}
    p = data.get("penalties") or {}
    g = data.get("groups") or {}
    if not isinstance(w, Mapping) or not isinstance(p, Mapping) or not isinstance(g, Mapping):
        raise TrajlabError(f"{where}: 'weights', 'penalties' and 'groups' must be mappings")
    known_w = {"valid_call", "verl_dropped", "turn_error", "no_call_reward", "min_format_reward", "max_format_reward"}
    unknown = sorted(set(w) - known_w) + sorted(set(p) - {"error", "warning", "categories"}) + sorted(
        set(data) - {"version", "mode", "format_weight", "gate_score", "gate_adds_format", "weights", "penalties",
                     "groups"})
    if unknown:
        raise TrajlabError(f"{where}: unknown policy setting(s) {', '.join(map(str, unknown))} "
                           f"(see rules/{POLICY_FILE} for the names)")
    cats = p.get("categories") or {}
    if not isinstance(cats, Mapping):
        raise TrajlabError(f"{where}: 'penalties.categories' must be a mapping of category: penalty")
    adds = data.get("gate_adds_format", False)
    if isinstance(adds, str):
        adds = adds.strip().lower() in ("1", "true", "yes", "on")
    return RewardPolicy(
        mode=str(data.get("mode", "additive")),
        format_weight=data.get("format_weight", 1.0),
        gate_score=data.get("gate_score", 0.0),
        gate_adds_format=bool(adds),
        **{k: w[k] for k in known_w if k in w},
        error_penalty=p.get("error", 0.5),
        warning_penalty=p.get("warning", 0.05),
        category_penalties=tuple(sorted((str(k), v) for k, v in cats.items())),
        groups=tuple((str(k), tuple(v) if isinstance(v, (list, tuple)) else ()) for k, v in g.items()
                     if v is not None and v != []),  # a later pack drops a group with null or []
    )


def _read_policy_file(path: str) -> Any:
    import yaml  # type: ignore[import-untyped]

    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f) or {}
    except OSError as e:
        raise TrajlabError(f"reward policy file {path}: cannot read it ({e.strerror}); name an existing YAML "
                           f"file like rules/{POLICY_FILE}") from None
    except yaml.YAMLError as e:
        raise TrajlabError(f"reward policy file {path}: not valid YAML: {e}".splitlines()[0]) from None


def load_policy(rules_dirs: tuple[str, ...] = (), policy_file: str | None = None,
                overrides: Mapping[str, Any] | None = None) -> RewardPolicy:
    """The built-in policy, with each user pack's ``reward_policy.yaml``, then ``policy_file``, then ``overrides``
    merged over it (key by key; a group list given later replaces the earlier one). ``overrides`` holds plain
    data (:func:`trajlab.verl.options.options_from_kwargs` converts verl's OmegaConf containers). Categories named
    in the policy must exist in the taxonomy (built-in plus ``rules_dirs``)."""
    import json

    return _load_cached(tuple(rules_dirs), policy_file, json.dumps(dict(overrides or {}), sort_keys=True, default=str))


@lru_cache(maxsize=32)
def _load_cached(rules_dirs: tuple[str, ...], policy_file: str | None, overrides_json: str) -> RewardPolicy:
    import json

    from trajlab.toolcalls import load_taxonomy

    data = load_rule_file(POLICY_FILE, rules_dirs)
    where = f"rules/{POLICY_FILE}"
    if policy_file:
        data = merge_rules(data, _read_policy_file(policy_file), replace_lists=True)
        where = str(Path(policy_file))
    overrides = json.loads(overrides_json)
    if overrides:
        data = merge_rules(data, overrides, replace_lists=True)
        where += " with reward_kwargs"
    pol = _policy_from_data(data, where)
    known = set(load_taxonomy(rules_dirs))
    named = {c for c, _ in pol.category_penalties} | {c for _, cs in pol.groups for c in cs}
    bad = sorted(named - known)
    if bad:
        raise TrajlabError(f"{where}: unknown categories {', '.join(bad)} (`trajlab rules list` prints the names)")
    return pol


@dataclass(slots=True)
class Verdict:
    """What the policy says about one response."""

    format_reward: float
    tool_calls: int
    malformed_calls: int
    verl_dropped_calls: int
    warned_calls: int
    groups: dict[str, int]
    all_valid: bool


def judge(an: TrajectoryAnalysis, policy: RewardPolicy) -> Verdict:
    """Apply ``policy`` to one classified response."""
    groups = dict.fromkeys(policy.group_keys, 0)
    member: dict[str, list[str]] = {}
    for name, cats in policy.groups:
        for c in cats:
            member.setdefault(c, []).append(name)
    total = 0.0
    n = bad = dropped = turn_errors = warned = 0
    # calls written after a tool turn the model made up answer a reply no tool gave: never paid
    invented_from = min((m.turn_index for m in an.model_turns), default=None)
    for turn, ta in an.turns:
        if ta is None:
            continue
        unpaid = invented_from is not None and turn.index > invented_from
        per_call: dict[int, list[tuple[str, str]]] = {}
        for f in ta.findings:
            if f.severity not in ("error", "warning"):
                continue
            if f.call_index is None:
                turn_errors += f.severity == "error"
                for g in member.get(f.category, ()):
                    groups[g] = 1
            else:
                per_call.setdefault(f.call_index, []).append((f.category, f.severity))
        for pc in ta.calls:
            n += 1
            if pc.verl_executes == "dropped":
                dropped += 1
            if pc.status == "malformed":
                bad += 1
                total -= policy.call_penalty(per_call.get(pc.call_index) or [(cat, "error") for cat in pc.categories])
                for cat in pc.categories:
                    for g in member.get(cat, ()):
                        groups[g] = 1
            elif pc.status == "warning":  # it runs (warnings only): paid, less the warning's penalty
                warned += 1
                total += (0.0 if unpaid else policy.valid_call) - policy.call_penalty(per_call.get(pc.call_index) or [])
            elif not unpaid:
                total += policy.valid_call
    if n == 0:
        fr = policy.no_call_reward - policy.turn_error * turn_errors
    else:
        fr = total - policy.verl_dropped * dropped - policy.turn_error * turn_errors
    fr = min(max(fr, policy.min_format_reward), policy.max_format_reward)
    return Verdict(fr, n, bad, dropped, warned, groups, bad == 0)

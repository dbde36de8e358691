"""The reward plugin's options: what ``reward_kwargs`` in a verl config may say, checked once when made.

verl passes ``reward.custom_reward_function.reward_kwargs`` as keyword arguments on every call of
``compute_score`` (and of the batch form). :func:`split_kwargs` separates the plugin's own keys (:data:`OWN_KEYS`)
from the rest: verl's call-time extras (``reward_router_address``, ``reward_model_tokenizer``) are dropped, every
other key is passed on to the task function. :func:`check_passed_keys` makes sure each of those reaches it: a key
that nothing reads, or that looks like a misspelt plugin key, is an error naming the nearest valid key. A wrong
key or value raises :class:`~trajlab.errors.TrajlabError` on the first call (before any step trains on a wrong
reward); model text never does.
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab.errors import TrajlabError

#: characters of one response classified by default: 1 Mi (about 260k tokens, beyond any rollout.response_length);
#: every assistant turn also keeps scan's per-turn caps (:data:`trajlab.trajectory.TURN_CLASSIFY_CHARS`, calls)
RESPONSE_CLASSIFY_CHARS = 1 << 20
#: reward_kwargs the plugin reads itself
OWN_KEYS = frozenset({"tools", "tool_format", "task_fn", "policy", "rules", "mode", "format_weight", "gate_score",
                      "gate_adds_format", "weights", "penalties", "groups", "max_chars", "control_prob",
                      "record_dir"})
#: the default of ``control_prob`` (scan's ``--control-prob`` default)
CONTROL_PROB = 0.5
#: call-time keyword arguments verl adds that are meant for a reward model, never for the task function
VERL_CALL_KEYS = frozenset({"reward_router_address", "reward_model_tokenizer"})
#: policy settings that may be given directly in reward_kwargs (they override the policy files)
POLICY_KEYS = ("mode", "format_weight", "gate_score", "gate_adds_format", "weights", "penalties", "groups")


def _plain(x: Any) -> Any:
    """Mappings and sequences as plain dicts and lists (verl hands OmegaConf's DictConfig / ListConfig)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, Sequence) and not isinstance(x, (str, bytes)):
        return [_plain(v) for v in x]
    return x


@dataclass(frozen=True)
class RewardOptions:
    """The plugin's settings (all optional).

    Attributes:
        tools: a tools file (JSON list of OpenAI tool schemas, or verl's tool-config YAML); otherwise the schemas
            come from ``extra_info["tools"]`` or the prompt (when the prompt is known).
        tool_format: the call format (``qwen3_coder``, ``hermes``, ...); ``None``/``"auto"``: detected.
        task_fn: the task reward: ``"module:function"``, ``"path/file.py"`` (its ``compute_score``),
            ``"path/file.py:function"``, ``"none"`` (task score 0) or ``None`` (verl's ``default_compute_score``
            when verl is importable, else 0).
        policy: a YAML file merged over the built-in ``rules/reward_policy.yaml``.
        rules_dirs: user rule packs (taxonomy and reward policy) over the built-in ones.
        policy_overrides: policy settings given directly (``mode``, ``weights``, ``penalties`` ...), as JSON.
        max_chars: characters of one response that are classified (the rest is counted as not classified).
        control_prob: the probability below which an emitted control token counts as low
            (``control_low_prob_share``; exact tokens only, :mod:`trajlab.verl.exact`).
        record_dir: a directory the reward-loop manager appends per-sample records to, one file per process
            (:mod:`trajlab.verl.records`); ``None``: no records.
    """

    tools: str | None = None
    tool_format: str | None = None
    task_fn: str | None = None
    policy: str | None = None
    rules_dirs: tuple[str, ...] = ()
    policy_overrides: str = "{}"
    max_chars: int = RESPONSE_CLASSIFY_CHARS
    control_prob: float = CONTROL_PROB
    record_dir: str | None = None

    def __post_init__(self) -> None:
        from trajlab.toolcalls import KNOWN_FORMATS

        if self.tool_format in ("", "auto"):
            object.__setattr__(self, "tool_format", None)
        if self.tool_format is not None and self.tool_format not in KNOWN_FORMATS:
            raise TrajlabError(f"reward_kwargs tool_format={self.tool_format!r} is not a known format; use one of "
                               f"{', '.join(sorted(KNOWN_FORMATS))} or auto")
        for name in ("tools", "policy"):
            v = getattr(self, name)
            if v is not None and not Path(v).is_file():
                raise TrajlabError(f"reward_kwargs {name}={v!r}: file not found (give an absolute path: verl's "
                                   f"workers may run in another directory)")
        for d in self.rules_dirs:
            if not Path(d).is_dir():
                raise TrajlabError(f"reward_kwargs rules={d!r}: rule pack directory not found")
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 1:
            raise TrajlabError(f"reward_kwargs max_chars={self.max_chars!r} must be a positive whole number")
        cp = self.control_prob
        if isinstance(cp, bool) or not isinstance(cp, (int, float)) or not 0.0 < float(cp) <= 1.0:
            raise TrajlabError(f"reward_kwargs control_prob={cp!r} must be a probability in (0, 1], e.g. 0.5")
        object.__setattr__(self, "control_prob", float(cp))
        if self.record_dir is not None and (not self.record_dir.strip() or Path(self.record_dir).is_file()):
            raise TrajlabError(f"reward_kwargs record_dir={self.record_dir!r} must name a directory (it is made when "
                               f"missing; give an absolute path: verl's workers may run in another directory)")
        if self.task_fn is not None and (not isinstance(self.task_fn, str) or not self.task_fn.strip()):
            raise TrajlabError(f"reward_kwargs task_fn={self.task_fn!r}: give 'module:function', a file path or 'none'")

    @property
    def overrides(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.policy_overrides)
        return out


def split_kwargs(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the plugin's own keys, the keys passed on to the task function)."""
    own, rest = {}, {}
    for k, v in kwargs.items():
        if k in OWN_KEYS:
            own[k] = v
        elif k not in VERL_CALL_KEYS:
            rest[k] = v
    return own, rest


def _task_params(fn: Callable[..., Any] | None) -> tuple[frozenset[str], bool]:
    """(the keyword names ``fn`` declares, whether it also takes ``**kwargs``); nothing when ``fn`` is None."""
    if fn is None:
        return frozenset(), False
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return frozenset(), True
    return (frozenset(params), any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()))


def check_passed_keys(rest: Mapping[str, Any], task_fn: Callable[..., Any] | None, task_desc: str) -> None:
    """Raise :class:`~trajlab.errors.TrajlabError` for a reward_kwargs key that would be lost.

    ``rest``: the keys :func:`split_kwargs` passes on to the task function. A key the task function declares by
    name reaches it. A key close to one of the plugin's own keys (``tool``, ``format_weigth``, ``taskfn``) is taken
    for a typo, unless declared so; any other key is an error when the task function cannot take it (or there is
    none).
    """
    names, any_kw = _task_params(task_fn)
    for key in sorted(rest):
        if key in names:
            continue
        near = difflib.get_close_matches(key, sorted(OWN_KEYS), n=1, cutoff=0.6)
        if any_kw and not near:
            continue
        hint = f"did you mean {near[0]!r}?" if near else f"trajlab reads {', '.join(sorted(OWN_KEYS))}"
        where = "no task function (task_fn=none)" if task_fn is None else f"the task function {task_desc}"
        if any_kw:
            where += " takes **kwargs but does not name it"
        else:
            where += " does not take it"
        raise TrajlabError(f"reward_kwargs key {key!r} is not a trajlab key and {where}: {hint}")


def options_from_kwargs(own: Mapping[str, Any]) -> RewardOptions:
    """:class:`RewardOptions` from the plugin's own reward_kwargs (values as Hydra gives them: strings, numbers,
    OmegaConf containers)."""
    rules = own.get("rules")
    if rules is None:
        rules_dirs: tuple[str, ...] = ()
    elif isinstance(rules, str):
        rules_dirs = tuple(p for p in rules.split(",") if p)
    else:
        rules_dirs = tuple(str(p) for p in _plain(rules))
    max_chars = own.get("max_chars", RESPONSE_CLASSIFY_CHARS)
    if isinstance(max_chars, str) and max_chars.strip().isdigit():
        max_chars = int(max_chars)
    overrides = {k: _plain(own[k]) for k in POLICY_KEYS if k in own}
    control_prob = own.get("control_prob", CONTROL_PROB)
    if isinstance(control_prob, str):
        try:
            control_prob = float(control_prob)
        except ValueError:
            pass

    def opt_str(name: str) -> str | None:
        v = own.get(name)
        return None if v is None else str(v)

    return RewardOptions(
        tools=opt_str("tools"),
        tool_format=opt_str("tool_format"),
        task_fn=opt_str("task_fn"),
        policy=opt_str("policy"),
        rules_dirs=rules_dirs,
        policy_overrides=json.dumps(overrides, sort_keys=True, default=str),
        max_chars=max_chars,
        control_prob=control_prob,
        record_dir=opt_str("record_dir"),
    )

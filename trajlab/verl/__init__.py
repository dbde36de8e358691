"""trajlab inside verl's training loop: a reward that pays for valid tool calls and says what broke.

* :mod:`trajlab.verl.reward` — ``compute_score`` / ``compute_score_batch``, verl's custom reward functions (light:
  no verl, torch, transformers or polars at import);
* :mod:`trajlab.verl.policy` — the reward policy (``rules/reward_policy.yaml``) and how it judges a response;
* :mod:`trajlab.verl.options` — the ``reward_kwargs`` the plugin reads;
* :mod:`trajlab.verl.task` — loading and calling the task's own scoring function;
* :mod:`trajlab.verl.manager` — a reward-loop manager (needs verl) that decodes token ids with special tokens kept,
  and judges from exact tokens when trajlab's agent loops hand them over;
* :mod:`trajlab.verl.agent_loop` — verl's tool and single-turn agent loops (needs verl), handing the reward the
  response mask and the sampled log-probs (registered by the shipped ``agent_loops.yaml``);
* :mod:`trajlab.verl.exact` — that payload, turns cut by the mask, control-token statistics (``EXACT_KEYS``);
* :mod:`trajlab.verl.records` — per-process record files the manager appends per sample, read back per step;
* :mod:`trajlab.verl.readback` — the plugin's keys read back from a scan of verl dumps, per step.

Nothing is imported here, so ``import trajlab.verl.reward`` stays cheap.
"""

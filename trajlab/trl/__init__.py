"""trajlab inside TRL's ``GRPOTrainer``: a reward function that pays for valid tool calls and says what broke.

* :mod:`trajlab.trl.reward` — :func:`~trajlab.trl.reward.make_reward`, the reward function TRL calls, with the
  verl plugin's policy; its figures go through TRL's ``log_metric`` / ``log_extra`` hooks.

Nothing is imported here.
"""

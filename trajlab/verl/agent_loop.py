"""verl agent loops that hand the reward the exact tokens: verl's own loops, plus a payload for the reward.

:class:`TrajlabToolAgentLoop` and :class:`TrajlabSingleTurnAgentLoop` subclass verl's ``ToolAgentLoop`` and
``SingleTurnAgentLoop``, run the parent's ``run`` unchanged (same requests, same tokens, same output) and add
``extra_fields["trajlab_exact"]`` (:func:`trajlab.verl.exact.make_payload`): the response mask run-length
encoded, the sampled log-probs when the rollout computed them (``rollout.calculate_log_probs``) and the step.
verl forwards ``extra_fields`` to the reward worker as ``non_tensor_batch["tool_extra_fields"]``, where
:class:`trajlab.verl.manager.TrajlabRewardManager` reads it. Register them with the YAML this package ships,
``trajlab/verl/agent_loops.yaml`` (verl takes a file path there, no ``pkg://``; an absolute one, since workers may
run in another directory)::

    actor_rollout_ref.rollout.agent.agent_loop_config_path=$(python -c "import trajlab.verl.exact as e; print(e.AGENT_LOOPS_YAML)")
    actor_rollout_ref.rollout.agent.default_agent_loop=trajlab_tool_agent   # or a dataset's agent_name column

This module imports verl (at import time: verl loads it only when configured).
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput  # type: ignore[import-not-found]
from verl.experimental.agent_loop.single_turn_agent_loop import (  # type: ignore[import-not-found]
    SingleTurnAgentLoop,
)
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop  # type: ignore[import-not-found]

from trajlab.verl.exact import PAYLOAD_KEY, make_payload

#: the names the shipped ``agent_loops.yaml`` registers
AGENT_LOOP_NAMES = ("trajlab_tool_agent", "trajlab_single_turn_agent")


def rollout_step(kwargs: dict[str, Any], extra_fields: dict[str, Any]) -> Any:
    """The training step of a trajectory: the dataset field ``global_steps`` the V1 trainer passes, else the
    rollout server's weight version (``extra_fields["global_steps"]``, verl's ``LLMServerClient``), else None."""
    for v in (kwargs.get("global_steps"), extra_fields.get("global_steps"), extra_fields.get("max_global_steps")):
        if v is not None:
            return v
    return None


def attach_payload(output: AgentLoopOutput, kwargs: dict[str, Any]) -> AgentLoopOutput:
    """Add the exact-token payload to ``output.extra_fields`` (nothing else of ``output`` changes)."""
    output.extra_fields[PAYLOAD_KEY] = make_payload(output.response_mask, output.response_logprobs,
                                                    rollout_step(kwargs, output.extra_fields))
    return output


class TrajlabToolAgentLoop(ToolAgentLoop):  # type: ignore[misc]
    """verl's ``ToolAgentLoop``, handing the reward its exact tokens."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        output = await super().run(sampling_params, **kwargs)
        return attach_payload(output, kwargs)


class TrajlabSingleTurnAgentLoop(SingleTurnAgentLoop):  # type: ignore[misc]
    """verl's ``SingleTurnAgentLoop``, handing the reward its exact tokens."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        output = await super().run(sampling_params, **kwargs)
        return attach_payload(output, kwargs)

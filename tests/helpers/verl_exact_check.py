"""trajlab's agent loops and exact-token reward run by verl 0.9.1's own code (executed by the verl venv's python; see
tests/test_verl_exact_in_verl.py). Usage: PY verl_exact_check.py SPEC.json OUT.json

SPEC: {"tokenizer_dir": DIR, "record_dir": DIR, "samples": {name: {"generations": [text...], "prompt": text}}}.
Each sample runs through verl's agent-loop registry (the shipped YAML, loaded as verl's AgentLoopWorker loads it),
verl's ToolAgentLoop (trajlab's subclass) with the LLM server replaced by one that returns the sample's
generations as token ids (the only part that is not verl's: no GPU, no vLLM), verl's AgentLoopWorker._compute_score
(the DataProto verl builds for the reward worker), verl's RewardLoopWorker.compute_score and trajlab's manager
loaded by verl's resolve_reward_manager_cls. Writes per sample and per loop the output and the reward result.
"""

import asyncio
import json
import os
import sys
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


class ReplayServer:
    """The rollout server's place: each generate call returns the next generation's token ids, with log-probs
    as a sampler reports them (one per token) and the weight version verl's LLMServerClient adds."""

    def __init__(self, tok, generations, step):
        self.gens = [tok.encode(g, add_special_tokens=False) for g in generations]
        self.step = step

    async def generate(self, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        ids = self.gens.pop(0)
        lps = [-0.02 - 0.3 * (k % 2 == 0) for k in range(len(ids))]
        return TokenOutput(token_ids=ids, log_probs=lps, extra_fields={"global_steps": self.step})


class Handle:
    """A Ray actor handle's place: ``handle.compute_score.remote(data)`` awaited in process."""

    def __init__(self, worker):
        class _M:
            remote = staticmethod(worker.compute_score)
        self.compute_score = _M()


def main(spec_path, out_path):
    import hydra
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, DictConfigWrap, _agent_loop_registry
    from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.reward import resolve_reward_manager_cls
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.import_utils import resolve_config_path

    from trajlab.verl.exact import AGENT_LOOPS_AS_VERL_NAMES_YAML, AGENT_LOOPS_YAML

    spec = json.load(open(spec_path))
    tok = AutoTokenizer.from_pretrained(spec["tokenizer_dir"])
    res = {}
    # the shipped YAML, as AgentLoopWorker.__init__ reads rollout.agent.agent_loop_config_path
    for c in OmegaConf.load(resolve_config_path(AGENT_LOOPS_YAML)):
        _agent_loop_registry[c.name] = c
    res["registered"] = {n: hydra.utils.get_class(_agent_loop_registry[n]["_target_"]).__name__
                         for n in ("trajlab_tool_agent", "trajlab_single_turn_agent")}
    # the file that takes verl's own names, read the same way into a copy of the registry
    names = dict(_agent_loop_registry)
    for c in OmegaConf.load(resolve_config_path(AGENT_LOOPS_AS_VERL_NAMES_YAML)):
        names[c.name] = c
    res["as_verl_names"] = {n: hydra.utils.get_class(names[n]["_target_"]).__name__
                            for n in ("tool_agent", "single_turn_agent")}
    res["subclasses"] = [issubclass(hydra.utils.get_class(_agent_loop_registry["trajlab_tool_agent"]["_target_"]),
                                    ToolAgentLoop),
                         issubclass(hydra.utils.get_class(
                             _agent_loop_registry["trajlab_single_turn_agent"]["_target_"]), SingleTurnAgentLoop)]
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {
            "prompt_length": 4096, "response_length": 4096, "full_determinism": False,
            "multi_turn": {"max_user_turns": 4, "max_assistant_turns": 4, "max_parallel_calls": 1,
                           "max_tool_response_length": 256, "tool_response_truncate_side": "middle",
                           "format": "hermes"}}},
        "data": {},
        "reward": {"custom_reward_function": {"path": "pkg://trajlab.verl.reward", "name": "compute_score",
                                              "reward_kwargs": {"task_fn": "none", "record_dir": spec["record_dir"],
                                                                "control_prob": 0.8}},
                   "reward_manager": {"source": "importlib", "name": "TrajlabRewardManager",
                                      "module": {"path": "pkg://trajlab.verl.manager"}},
                   "reward_model": {"enable": False}}})
    manager = resolve_reward_manager_cls(cfg)(cfg, tok, None)
    rworker = RewardLoopWorker.__new__(RewardLoopWorker)  # (its __init__ loads a tokenizer from a model path)
    rworker.config, rworker.reward_manager = cfg, manager
    aworker = AgentLoopWorker.__new__(AgentLoopWorker)  # (its __init__ needs a rollout server)
    aworker.reward_loop_worker_handles = [Handle(rworker)]
    aworker.processor, aworker.mm_processor_kwargs = None, {}
    # the batch path (a colocated reward model): no streaming reward; verl pads the outputs and makes every
    # extra_fields key a non-tensor column of the batch, which the reward manager gets sliced per sample
    bworker = AgentLoopWorker.__new__(AgentLoopWorker)
    bworker.reward_loop_worker_handles, bworker.processor, bworker.mm_processor_kwargs = None, None, {}
    bworker.tokenizer, bworker.rollout_config, bworker.distillation_enabled = tok, cfg.actor_rollout_ref.rollout, False
    loop = asyncio.get_event_loop()
    for name, sample in spec["samples"].items():
        for agent in (sample.get("agents") or ["trajlab_tool_agent", "tool_agent"]):
            server = ReplayServer(tok, sample["generations"], step=sample.get("step", 5))
            al = hydra.utils.instantiate(_agent_loop_registry[agent], trainer_config=DictConfigWrap(cfg),
                                         server_manager=server, tokenizer=tok, processor=None, hf_model_type="qwen3",
                                         dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data), tools=None)
            kwargs = {"raw_prompt": [{"role": "user", "content": sample["prompt"]}], "data_source": "searchqa",
                      "reward_model": {"ground_truth": "ok", "style": "rule"},
                      "extra_info": {"index": len(res), "split": "train"}, "uid": f"uid-{name}"}
            out = loop.run_until_complete(al.run({"temperature": 1.0}, **kwargs))
            import copy

            import numpy as np

            plain = copy.deepcopy(out)
            loop.run_until_complete(AgentLoopWorker._compute_score(aworker, [out], kwargs=kwargs))
            internal = loop.run_until_complete(AgentLoopWorker._agent_loop_postprocess(bworker, plain, False, **kwargs))
            nt = {k: np.array([v], dtype=object) for k, v in kwargs.items() if k != "raw_prompt"}
            batch = AgentLoopWorker._postprocess(bworker, [internal], input_non_tensor_batch=nt)
            res[f"{name}/{agent}/batch"] = {
                "columns": sorted(batch.non_tensor_batch),
                "reward_extra_info": {k: float(v) for k, v in loop.run_until_complete(
                    manager.run_single(batch[0:1]))["reward_extra_info"].items()}}
            res[f"{name}/{agent}"] = {
                "response_text": tok.decode(out.response_ids, skip_special_tokens=False),
                "stripped": tok.decode(out.response_ids, skip_special_tokens=True),
                "mask": list(out.response_mask), "n_logprobs": len(out.response_logprobs or []),
                "extra_keys": sorted(k for k in out.extra_fields if k != "reward_extra_info"),
                "reward_score": float(out.reward_score),
                "reward_extra_info": {k: float(v) for k, v in out.extra_fields["reward_extra_info"].items()}}
    json.dump(res, open(out_path, "w"))


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main(sys.argv[1], sys.argv[2])

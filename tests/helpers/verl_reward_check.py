"""Run trajlab's reward plugin inside verl 0.9.1's own code (executed by the verl venv's python; see
tests/test_verl_reward_in_verl.py). Usage: PY verl_reward_check.py SPEC.json OUT.json

SPEC: {"qwen3": [{"input", "output", "gts"}...], "kimi": [...], "gpt_oss": [...], "special_families": {family:
[special tokens]}, "task_file": PATH, "tools_file": PATH, "tokenizer_dir": DIR}. Writes per manager the per-sample results, and the decode checks.
"""

import asyncio
import json
import os
import sys
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def qwen_ids(tok, rec):
    """Token ids as the Qwen3 chat template lays them out: the dump's text with its stripped special tokens back."""
    out = rec["output"].replace("\nuser\n<tool_response>", f"{IM_END}\n{IM_START}user\n<tool_response>")
    out = out.replace("</tool_response>\nassistant\n", f"</tool_response>{IM_END}\n{IM_START}assistant\n")
    out += IM_END
    inp = rec["input"]
    head, sep, tail = inp.rpartition("\nassistant\n")
    prompt = f"{IM_START}{head.replace(chr(10) + 'user' + chr(10), IM_END + chr(10) + IM_START + 'user' + chr(10), 1)}"
    prompt += f"{IM_END}\n{IM_START}assistant\n" if sep else ""
    return tok.encode(prompt, add_special_tokens=False), tok.encode(out, add_special_tokens=False)


def batch(tok, pairs, recs, pad_id):
    import numpy as np
    import torch
    from verl import DataProto

    lp = max(len(p) for p, _ in pairs)
    lr = max(len(r) for _, r in pairs)
    prompts = torch.full((len(pairs), lp), pad_id, dtype=torch.long)
    responses = torch.full((len(pairs), lr), pad_id, dtype=torch.long)
    mask = torch.zeros((len(pairs), lp + lr), dtype=torch.long)
    for i, (p, r) in enumerate(pairs):
        prompts[i, lp - len(p):] = torch.tensor(p)
        responses[i, :len(r)] = torch.tensor(r)
        mask[i, lp - len(p):lp] = 1
        mask[i, lp:lp + len(r)] = 1
    input_ids = torch.cat([prompts, responses], dim=1)
    position_ids = torch.clamp(torch.cumsum(mask, dim=1) - 1, min=0)
    non_tensors = {
        "data_source": np.array(["searchqa"] * len(recs), dtype=object),
        "reward_model": np.array([{"ground_truth": r["gts"], "style": "rule"} for r in recs], dtype=object),
        "extra_info": np.array([{"index": i, "split": "train"} for i in range(len(recs))], dtype=object),
        "__num_turns__": np.array([r["output"].count("<tool_response>") * 2 + 2 for r in recs], dtype=object),
    }
    return DataProto.from_dict(tensors={"prompts": prompts, "responses": responses, "attention_mask": mask,
                                        "input_ids": input_ids, "position_ids": position_ids},
                               non_tensors=non_tensors)


def plain(d):
    return {k: (float(v) if not isinstance(v, str) else v) for k, v in d.items()}


def main(spec_path, out_path):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    spec = json.load(open(spec_path))
    tok = AutoTokenizer.from_pretrained(spec["tokenizer_dir"])
    res = {}
    kwargs = {"task_fn": spec["task_file"], "tools": spec["tools_file"], "mode": "additive",
              "weights": {"valid_call": 0.15}, "groups": {"fmt_names_only": ["garbled_function_name"]}}

    def config(name, manager=None):
        cfg = {"reward": {"custom_reward_function": {"path": "pkg://trajlab.verl.reward", "name": name,
                                                     "reward_kwargs": kwargs},
                          "reward_manager": manager or {"source": "register", "name": "naive"}}}
        return OmegaConf.create(cfg)

    recs = spec["qwen3"]
    pairs = [qwen_ids(tok, r) for r in recs]
    res["qwen3_decode_equal"] = [tok.decode(r, skip_special_tokens=True) == rec["output"]
                                 for (_, r), rec in zip(pairs, recs, strict=True)]
    data = batch(tok, pairs, recs, tok.pad_token_id)

    # verl's own loader, from a config written as a user writes it
    fn = get_custom_reward_fn(config("compute_score"))
    res["direct"] = [plain(fn(data_source="searchqa", solution_str=r["output"], ground_truth=r["gts"],
                              extra_info={})) for r in recs]

    # reward loop (default since 0.7.0): the naive manager, one sample per run_single as the worker does
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager as LoopNaive

    mgr = LoopNaive(config("compute_score"), tok, fn)
    loop = mgr.loop
    out = [loop.run_until_complete(mgr.run_single(data[i:i + 1])) for i in range(len(data))]
    res["loop_naive"] = [{"reward_score": float(o["reward_score"]), **plain(o["reward_extra_info"])} for o in out]

    # legacy managers (verl/workers/reward_manager): naive and batch
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager as LegacyNaive

    legacy = LegacyNaive(tok, num_examine=0, compute_score=fn)(data, return_dict=True)
    res["legacy_naive"] = {"rewards": legacy["reward_tensor"].sum(dim=1).tolist(),
                           "extra": {k: [float(x) for x in v] for k, v in legacy["reward_extra_info"].items()}}
    # GDPO (algorithm.adv_estimator=gdpo, algorithm.gdpo_reward_keys): verl's advantage over the plugin's keys, which
    # the trainer puts into non_tensor_batch from reward_extra_info
    import numpy as np
    import torch
    from verl.trainer.ppo.core_algos import compute_gdpo_outcome_advantage

    nt = dict(data.non_tensor_batch)
    nt.update({k: np.array(v) for k, v in legacy["reward_extra_info"].items()})
    resp_mask = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:]
    adv, _ = compute_gdpo_outcome_advantage(
        token_level_rewards=legacy["reward_tensor"], response_mask=resp_mask,
        index=np.array([i // 4 for i in range(len(data))]),
        config=OmegaConf.create({"gdpo_reward_keys": ["task_score", "format_reward"]}),
        non_tensor_batch=nt, batch=data.batch)
    res["gdpo"] = {"finite": bool(torch.isfinite(adv).all()), "shape": list(adv.shape),
                   "rows_with_advantage": int((adv.abs().sum(dim=1) > 0).sum())}
    bfn = get_custom_reward_fn(config("compute_score_batch"))
    batch_out = BatchRewardManager(tok, 0, bfn, **kwargs)(data, return_dict=True)
    res["legacy_batch"] = {"rewards": batch_out["reward_tensor"].sum(dim=1).tolist(),
                           "extra": {k: [float(x) for x in v] for k, v in batch_out["reward_extra_info"].items()}}

    # trajlab's own reward-loop manager, loaded by verl from the config (source=importlib)
    mcfg = config("compute_score", {"source": "importlib", "name": "TrajlabRewardManager",
                                    "module": {"path": "pkg://trajlab.verl.manager"}})
    cls = resolve_reward_manager_cls(mcfg)
    tm = cls(mcfg, tok, fn)
    res["trajlab_manager_qwen3"] = [plain(tm.loop.run_until_complete(tm.run_single(data[i:i + 1]))["reward_extra_info"])
                                    for i in range(len(data))]

    # Kimi-K2 and gpt-oss: their markers are special tokens. A real `tokenizers` tokenizer each: Qwen3's BPE with
    # the family's special tokens added (no offline Kimi or gpt-oss tokenizer exists)
    from tokenizers import Tokenizer

    kcfg = OmegaConf.create({"reward": {"custom_reward_function": {"reward_kwargs": {"task_fn": "none"}},
                                        "reward_manager": {"source": "importlib", "name": "TrajlabRewardManager",
                                                           "module": {"path": "pkg://trajlab.verl.manager"}}}})
    for fam, specials in spec["special_families"].items():
        raw = Tokenizer.from_file(os.path.join(spec["tokenizer_dir"], "tokenizer.json"))
        raw.add_special_tokens(specials)
        ktok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<|endoftext|>")
        krecs = spec[fam]
        kpairs = [(ktok.encode(r["input"], add_special_tokens=False),
                   ktok.encode(r["output"], add_special_tokens=False)) for r in krecs]
        res[f"{fam}_decode_kept_equal"] = [ktok.decode(r, skip_special_tokens=False) == rec["output"]
                                          for (_, r), rec in zip(kpairs, krecs, strict=True)]
        res[f"{fam}_stripped"] = [ktok.decode(r, skip_special_tokens=True) for _, r in kpairs]
        kdata = batch(ktok, kpairs, krecs, ktok.pad_token_id)
        km = resolve_reward_manager_cls(kcfg)(kcfg, ktok, None)
        res[f"trajlab_manager_{fam}"] = [
            plain(km.loop.run_until_complete(km.run_single(kdata[i:i + 1]))["reward_extra_info"])
            for i in range(len(kdata))]
        kn = LoopNaive(kcfg, ktok, fn)
        res[f"loop_naive_{fam}"] = [
            plain(kn.loop.run_until_complete(kn.run_single(kdata[i:i + 1]))["reward_extra_info"])
            for i in range(len(kdata))]
    json.dump(res, open(out_path, "w"))


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main(sys.argv[1], sys.argv[2])

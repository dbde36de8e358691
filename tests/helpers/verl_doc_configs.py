"""Load every reward-plugin config block of the README and the reward-plugin guide through verl 0.9.1's own code
(executed by the verl venv's python; see tests/test_verl_doc_configs.py). Usage: PY verl_doc_configs.py SPEC OUT

SPEC: {"blocks": [{"name", "overrides": [Hydra overrides, as the doc writes them], "merge": a YAML block's mapping,
as a user's config file adds it}], "record": {"input", "output", "gts"}, "tokenizer_dir": DIR}. Each block is
composed over verl's own ``ppo_trainer`` config (a YAML block merged over it), migrated as verl's
reward loop migrates a legacy config, then loaded: ``get_custom_reward_fn`` and a call on the record (a list call
for the ``batch`` manager), or, when the block names a reward manager by module path, ``resolve_reward_manager_cls``
and ``run_single`` on the record's token ids. Writes {name: result dict, or {"error": ...}}.
"""

import asyncio
import json
import os
import sys
import traceback
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(spec_path, out_path):
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_loop import migrate_legacy_reward_impl
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    spec = json.load(open(spec_path))
    rec = spec["record"]
    res = {}
    tok = None
    with initialize_config_dir(config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"),
                               version_base=None):
        for block in spec["blocks"]:
            try:
                cfg = compose(config_name="ppo_trainer", overrides=block.get("overrides", []))
                if block.get("merge"):  # a config file of the user's: its keys are added to verl's
                    OmegaConf.set_struct(cfg, False)
                    cfg = OmegaConf.merge(cfg, block["merge"])
                    OmegaConf.set_struct(cfg, True)
                cfg = migrate_legacy_reward_impl(cfg)
                mgr = cfg.reward.reward_manager
                if mgr.source == "importlib":
                    from transformers import AutoTokenizer
                    from verl_reward_check import batch, qwen_ids

                    tok = tok or AutoTokenizer.from_pretrained(spec["tokenizer_dir"])
                    data = batch(tok, [qwen_ids(tok, rec)], [rec], tok.pad_token_id)
                    m = resolve_reward_manager_cls(cfg)(cfg, tok, get_custom_reward_fn(cfg))
                    out = m.loop.run_until_complete(m.run_single(data[0:1]))["reward_extra_info"]
                    res[block["name"]] = {"loaded_from": "manager", **{k: float(v) for k, v in out.items()}}
                    continue
                fn = get_custom_reward_fn(cfg)
                where = cfg.reward.custom_reward_function.path
                if mgr.name == "batch":
                    out = fn(data_sources=["searchqa"], solution_strs=[rec["output"]], ground_truths=[rec["gts"]],
                             extra_infos=[{}])[0]
                else:
                    out = fn(data_source="searchqa", solution_str=rec["output"], ground_truth=rec["gts"],
                             extra_info={})
                res[block["name"]] = {"loaded_from": where, **{k: float(v) for k, v in out.items()}}
            except Exception as e:
                res[block["name"]] = {"error": f"{type(e).__name__}: {e}",
                                      "trace": traceback.format_exc()[-2000:]}
    json.dump(res, open(out_path, "w"))


if __name__ == "__main__":
    asyncio.set_event_loop(asyncio.new_event_loop())
    main(sys.argv[1], sys.argv[2])

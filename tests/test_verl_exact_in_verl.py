"""trajlab's agent loops and the exact-token reward run by verl 0.9.1's own code, in the verl venv
(tests/helpers/verl_exact_check.py).

The shipped ``agent_loops.yaml`` is read as verl's AgentLoopWorker reads it; verl's ToolAgentLoop (through trajlab's
subclass, and verl's own ``tool_agent`` beside it) runs multi-turn samples whose generations are real Qwen3 token ids
(the rollout server's place is taken by one that replays them; the environment's tool turns are verl's own);
verl's ``_compute_score`` builds the reward worker's ``DataProto`` and verl's RewardLoopWorker hands it to trajlab's
manager. The record file is read back with :func:`trajlab.verl.records.read_records`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.verl_venv import SKIP, run_helper, verl_python

from trajlab.verl.exact import EXACT_KEYS
from trajlab.verl.records import read_records, record_files, step_figures

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "verl_exact_check.py"
CALL = '<tool_call>\n{"name": "search_web", "arguments": {"queries": ["capital of France"]}}\n</tool_call>'
SAMPLES = {
    "clean": {"prompt": "What is the capital of France?",
              "generations": [f"I will search.\n{CALL}<|im_end|>", "<answer>Paris</answer><|im_end|>"]},
    # the model did not stop after its call: it wrote the tool's reply itself (mask 1 over <|im_start|>user ...)
    "fabricated": {"prompt": "What is the capital of France?",
                   "generations": [f"I will search.\n{CALL}\n<|im_start|>user\n<tool_response>\nParis\n"
                                   "</tool_response><|im_end|>", "<answer>Paris</answer><|im_end|>"]},
    "single": {"prompt": "Say ok.", "generations": ["<answer>ok</answer><|im_end|>"],
               "agents": ["trajlab_single_turn_agent", "single_turn_agent"]},
}


@pytest.fixture(scope="module")
def verl_exact(tmp_path_factory: pytest.TempPathFactory) -> dict:
    py = verl_python("verl.experimental.agent_loop.tool_agent_loop")
    if py is None:
        pytest.skip(SKIP + " (with cachetools, uvicorn, fastapi: the agent loops import them)")
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir

    d = tmp_path_factory.mktemp("verl_exact")
    spec = {"tokenizer_dir": str(qwen3_tokenizer_dir()), "record_dir": str(d / "records"), "samples": SAMPLES}
    out = run_helper(py, HELPER, spec, d)
    out["_record_dir"] = str(d / "records")
    return out


@pytest.mark.slow
@pytest.mark.verl
def test_shipped_yaml_registers_the_loops_with_verl(verl_exact: dict) -> None:
    assert verl_exact["registered"] == {"trajlab_tool_agent": "TrajlabToolAgentLoop",
                                        "trajlab_single_turn_agent": "TrajlabSingleTurnAgentLoop"}
    assert verl_exact["subclasses"] == [True, True]
    assert verl_exact["as_verl_names"] == {"tool_agent": "TrajlabToolAgentLoop",
                                           "single_turn_agent": "TrajlabSingleTurnAgentLoop"}


@pytest.mark.slow
@pytest.mark.verl
def test_the_rollout_is_unchanged_and_the_payload_reaches_the_reward(verl_exact: dict) -> None:
    for name, ours, theirs in (("clean", "trajlab_tool_agent", "tool_agent"),
                               ("fabricated", "trajlab_tool_agent", "tool_agent"),
                               ("single", "trajlab_single_turn_agent", "single_turn_agent")):
        a, b = verl_exact[f"{name}/{ours}"], verl_exact[f"{name}/{theirs}"]
        assert (a["response_text"], a["mask"], a["n_logprobs"]) == (b["response_text"], b["mask"], b["n_logprobs"])
        assert "trajlab_exact" in a["extra_keys"] and "trajlab_exact" not in b["extra_keys"]
        assert a["reward_extra_info"].keys() == b["reward_extra_info"].keys() >= set(EXACT_KEYS)
        assert a["reward_extra_info"]["exact_tokens"] == 1.0 and b["reward_extra_info"]["exact_tokens"] == 0.0
        assert a["reward_extra_info"]["exact_logprobs"] == 1.0
        assert a["reward_extra_info"]["generated_tokens"] == sum(a["mask"]) < len(a["mask"]) + (name == "single")
        assert a["reward_extra_info"]["control_tokens"] > 0
        share = a["reward_extra_info"]["control_low_prob_share"]  # control_prob 0.8: the -0.32 ones sit below
        assert (0.0 < share < 1.0) if name != "single" else share in (0.0, 1.0)
        assert a["reward_extra_info"]["control_logprob_min"] in (pytest.approx(-0.32), pytest.approx(-0.02))
        assert a["reward_score"] == a["reward_extra_info"]["score"]


@pytest.mark.slow
@pytest.mark.verl
def test_a_generated_tool_turn_is_flagged_from_the_mask_and_a_clean_one_is_not(verl_exact: dict) -> None:
    fab = verl_exact["fabricated/trajlab_tool_agent"]
    # verl's environment turn follows the model's own: the mask says which is which
    assert fab["response_text"].count("<|im_start|>user\n<tool_response>") == 2
    assert fab["reward_extra_info"]["fabricated_turns"] == 1.0
    assert fab["reward_extra_info"]["malformed_calls"] >= 1.0
    assert fab["reward_extra_info"]["format_reward"] < 0
    for name in ("clean/trajlab_tool_agent", "single/trajlab_single_turn_agent"):
        info = verl_exact[name]["reward_extra_info"]
        assert info["fabricated_turns"] == 0.0 and info["malformed_calls"] == 0.0, name
    assert verl_exact["clean/trajlab_tool_agent"]["reward_extra_info"]["call_tokens"] > 0


@pytest.mark.slow
@pytest.mark.verl
def test_the_batch_path_reads_the_payload_from_its_own_column(verl_exact: dict) -> None:
    """With a colocated reward model verl computes the reward on the padded batch: the payload is then a column of
    its own (every extra_fields key is), and the manager judges the same as on the streaming path."""
    for name in ("clean/trajlab_tool_agent", "fabricated/trajlab_tool_agent", "single/trajlab_single_turn_agent",
                 "clean/tool_agent"):
        b, s = verl_exact[f"{name}/batch"], verl_exact[name]
        assert ("trajlab_exact" in b["columns"]) == ("trajlab" in name)
        assert b["reward_extra_info"] == pytest.approx(s["reward_extra_info"]), name


@pytest.mark.slow
@pytest.mark.verl
def test_the_record_file_has_one_row_per_sample(verl_exact: dict) -> None:
    files = record_files(verl_exact["_record_dir"])
    assert len(files) == 1 and files[0].name.startswith("trajlab-records-")
    rows = read_records(verl_exact["_record_dir"])
    runs = [k for k in verl_exact if k.count("/") == 1]
    assert len(rows) == 2 * len(runs) == 12  # (each sample also went through the batch path)
    assert {r["uid"] for r in rows} == {"uid-clean", "uid-fabricated", "uid-single"}
    assert {r["step"] for r in rows} == {5}  # the rollout server's weight version (no global_steps in kwargs)
    figs = step_figures(rows)
    assert [f["step"] for f in figs] == [5] and figs[0]["samples"] == 12 and figs[0]["exact_samples"] == 6
    assert figs[0]["samples_with_fabricated"] == 2
    assert figs[0]["control_logprob_min"] == pytest.approx(-0.32)

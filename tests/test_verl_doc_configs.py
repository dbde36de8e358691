"""Every reward-plugin config the README and docs/guides/reward-plugin.md give, as written, loads through verl 0.9.1's
own code and scores a sample (tests/helpers/verl_doc_configs.py runs in the verl venv).

The blocks are read out of the two documents here: the README's YAML (a file path, its top-level spelling for
verl 0.5-0.7, and ``pkg://``) and every shell block of the guide that sets ``custom_reward_function`` or a reward
manager. Each is composed with Hydra over verl's own ``ppo_trainer`` config. The README's file path is the one its
comment's command prints: from the checkout (an editable install) and from a real ``pip install`` into a
site-packages directory.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.verl_venv import SKIP, TASK, run_helper, verl_python

from trajlab.verl.exact import EXACT_KEYS
from trajlab.verl.reward import compute_score, reward_keys

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "helpers" / "verl_doc_configs.py"
GUIDE = ROOT / "docs" / "guides" / "reward-plugin.md"
TOOLS_YAML = """tools:
  - class_name: verl.tools.search_tool.SearchTool
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: search_web
        description: search
        parameters: {type: object, properties: {queries: {type: array, items: {type: string}}}, required: [queries]}
  - class_name: verl.tools.search_tool.SearchTool
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: fetch_web
        description: fetch
        parameters: {type: object, properties: {urls: {type: array, items: {type: string}}}, required: [urls]}
"""


def readme_block() -> tuple[dict, str]:
    """The README's plugin YAML (a mapping a user's verl config file holds), and the command its comment gives for
    the file path."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "custom_reward_function" in b)
    cmd = re.search(r'#\s*(python -c ".*?")\s*$', block, re.M)
    assert cmd is not None, "the README's path comment gives the command that prints the path"
    return yaml.safe_load(block), cmd.group(1)


def _with(d: dict, **crf: str) -> dict:
    """The README mapping with ``custom_reward_function`` keys replaced."""
    out = json.loads(json.dumps(d))
    out["reward"]["custom_reward_function"].update(crf)
    return out


def guide_blocks() -> list[tuple[str, str]]:
    text = GUIDE.read_text(encoding="utf-8")
    return [(f"guide_{i}", b) for i, b in enumerate(re.findall(r"```bash\n(.*?)```", text, re.S))
            if "custom_reward_function" in b or "reward_manager" in b]


def _shell(cmd: str, env: dict[str, str]) -> str:
    """``cmd`` run by bash outside the checkout (as in a verl worker's directory)."""
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip()


def _overrides(block: str, env: dict[str, str], files: dict[str, str]) -> list[str]:
    """A shell block's ``key=value`` arguments, with its ``$(...)`` run and the guide's placeholder files real."""
    block = re.sub(r'\$\((python -c "[^"]*")\)', lambda m: _shell(m.group(1), env), block.replace("\\\n", " "))
    for placeholder, real in files.items():
        block = block.replace(placeholder, real)
    return [t for t in shlex.split(block, comments=True) if re.match(r"^\+?[A-Za-z_][\w.]*=", t)]


def _kwargs(block: dict) -> dict[str, str]:
    merged = block.get("merge")
    if merged:
        crf = merged.get("reward", merged)["custom_reward_function"]
        return dict(crf.get("reward_kwargs") or {})
    return {o.split("reward_kwargs.", 1)[1].split("=", 1)[0]: o.split("=", 1)[1] for o in block["overrides"]
            if "reward_kwargs." in o}


@pytest.fixture(scope="module")
def doc_configs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    py = verl_python()
    if py is None:
        pytest.skip(SKIP)
    from trajlab.rescore.qwen_tokenizers import qwen3_tokenizer_dir

    d = tmp_path_factory.mktemp("verl_docs")
    (d / "my_task.py").write_text(TASK)
    (d / "tool_config.yaml").write_text(TOOLS_YAML)
    files = {"/abs/path/my_task.py": str(d / "my_task.py"), "/abs/path/tool_config.yaml": str(d / "tool_config.yaml")}
    venv_bin = str(Path(py).parent)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": f"{venv_bin}{os.pathsep}{os.environ['PATH']}"}
    lines = (ROOT / "sample_data" / "qwen35_xml_run" / "rollout" / "60.jsonl").read_text(encoding="utf-8").splitlines()
    rec = next(r for r in map(json.loads, lines)
               if compute_score("searchqa", r["output"], r["gts"], {}, task_fn=files["/abs/path/my_task.py"])
               ["task_score"] == 1.0)

    readme, path_cmd = readme_block()
    checkout_path = _shell(path_cmd, env)
    assert checkout_path == str(ROOT / "trajlab" / "verl" / "reward.py")
    readme = json.loads(json.dumps(readme).replace("/abs/path/my_task.py", files["/abs/path/my_task.py"]))
    file_block = _with(readme, path=checkout_path)
    blocks = [{"name": "readme_file_path", "merge": file_block},
              {"name": "readme_top_level", "merge": file_block["reward"]},  # verl 0.5-0.7's spelling
              {"name": "readme_pkg", "merge": _with(readme, path="pkg://trajlab.verl.reward")}]
    prev: list[str] = []
    for name, block in guide_blocks():
        ov = _overrides(block, env, files)
        if not any(re.search(r"custom_reward_function\.path=|reward_manager\.module\.path=", o) for o in ov):
            keys = {o.lstrip("+").split("=", 1)[0].split(".")[-1] for o in ov}  # a fragment over the block before
            ov = [o for o in prev if o.lstrip("+").split("=", 1)[0].split(".")[-1] not in keys] + ov
        blocks.append({"name": name, "overrides": ov})
        prev = ov
    spec = {"blocks": blocks, "record": rec, "tokenizer_dir": str(qwen3_tokenizer_dir())}

    def run(spec: dict, pythonpath: str, tag: str) -> dict:
        return run_helper(py, HELPER, spec, d, tag=tag, env={**env, "PYTHONPATH": pythonpath}, cwd=d)

    got = run(spec, str(ROOT), "checkout")
    # a real install into a site-packages directory: the README's command prints that copy's path
    site = d / "site-packages"
    pip = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--no-build-isolation", "--target", str(site), str(ROOT)], capture_output=True, text=True,
                         timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    site_path = _shell(path_cmd, {**env, "PYTHONPATH": str(site)})
    assert site_path == str(site / "trajlab" / "verl" / "reward.py")
    site_block = {"name": "readme_site_packages", "merge": _with(readme, path=site_path)}
    got.update(run({**spec, "blocks": [site_block]}, str(site), "site"))
    return {"got": got, "blocks": blocks + [site_block], "record": rec}


@pytest.mark.slow
@pytest.mark.verl
def test_every_documented_plugin_config_loads_in_verl_and_scores(doc_configs: dict) -> None:
    got, rec = doc_configs["got"], doc_configs["record"]
    names = [b["name"] for b in doc_configs["blocks"]]
    assert {"readme_file_path", "readme_top_level", "readme_pkg", "readme_site_packages"} <= set(names)
    assert len([n for n in names if n.startswith("guide_")]) >= 4  # 0.7.1+, 0.5-0.7, batch, the manager
    for block in doc_configs["blocks"]:
        name, r = block["name"], got[block["name"]]
        assert "error" not in r, f"{name}: {r.get('error')}\n{r.get('trace')}"
        kw = _kwargs(block)
        exact = set(EXACT_KEYS) if r["loaded_from"] == "manager" else set()  # (the manager adds its exact keys)
        assert set(r) - {"loaded_from"} == set(reward_keys(**kw)) | exact, name
        expected = compute_score("searchqa", rec["output"], rec["gts"], {}, **kw)
        assert r["task_score"] == expected["task_score"] and r["plugin_errors"] == 0.0, name
        if r["loaded_from"] != "manager":  # the manager also reads the prompt; verl's functions see the response
            assert {k: r[k] for k in expected} == pytest.approx(expected), name
    assert got["readme_file_path"]["loaded_from"].endswith("trajlab/verl/reward.py")
    assert "site-packages" in got["readme_site_packages"]["loaded_from"]
    assert got["readme_pkg"]["loaded_from"] == "pkg://trajlab.verl.reward"

"""A ``--tools`` file nested deeper than any tool schema is a one-line error in ``scan`` and ``rules check``
(issue 22: 100k nested lists gave a RecursionError traceback), and a prompt's tool block nested that deep is read
as no schema rather than walked."""

from __future__ import annotations

import json

import pytest
from helpers.adversarial import assert_clean_failure, cli, write_run

from trajlab.errors import InputError
from trajlab.ingest.tool_schemas import MAX_SCHEMA_DEPTH, load_tools_file, nesting_depth, tools_from_prompt


def _deep_lists(n: int) -> str:
    return "[" * n + "]" * n


def _deep_schema(n: int) -> str:
    inner = '{"type": "object", "properties": {"a": ' * n + '{"type": "string"}' + "}}" * n
    return json.dumps([{"type": "function", "function": {"name": "f", "parameters": "PLACE"}}]).replace(
        '"PLACE"', inner)


@pytest.mark.parametrize(("name", "text"), [
    ("lists.json", _deep_lists(100_000)),          # the decoder itself recurses
    ("schema.json", _deep_schema(400)),            # decodes, but the schema walkers and the encoder recurse
    ("lists.yaml", "tools: " + _deep_lists(2_000)),  # (PyYAML composes recursively: 2k levels are plenty)
])
@pytest.mark.parametrize("command", ["scan", "rules"])
def test_deep_tools_file_is_one_line(tmp_path, capfd, name, text, command):
    f = tmp_path / name
    f.write_text(text)
    if command == "scan":
        run = write_run(tmp_path / "run", steps=1, per_step=2)
        rc, _out, err = cli(["scan", run, "-o", tmp_path / "out", "--tools", f], capfd)
    else:
        rc, _out, err = cli(["rules", "check", "<tool_call>", "--tools", f], capfd)
    assert_clean_failure(rc, err)
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert lines[0].startswith("error: --tools file") and "levels deep" in lines[0]
    assert not (tmp_path / "out" / "trajectories.parquet").exists()


def test_depth_limit_leaves_real_schemas_alone(tmp_path):
    f = tmp_path / "tools.json"
    f.write_text(_deep_schema(20))  # 20 nested objects: deeper than real schemas, well inside the limit
    tools = load_tools_file(f)
    assert [t["name"] for t in tools] == ["f"]
    assert nesting_depth(tools) < MAX_SCHEMA_DEPTH
    f.write_text(_deep_schema(MAX_SCHEMA_DEPTH))
    with pytest.raises(InputError, match="levels deep"):
        load_tools_file(f)


def test_deep_prompt_tool_block_is_no_schema():
    ok = '{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}'
    for block in (_deep_lists(100_000), _deep_schema(200)[1:-1]):
        tools, _src = tools_from_prompt(f"system\n<tools>\n{ok}\n{block}\n</tools>\nuser\nhi\nassistant\n")
        assert tools is not None and [t["name"] for t in tools] == ["search"]

"""ReAct as a call format (issue 22): detection from the prompt and the output (never from prose, never taking a
trajectory from another family), the tool list read from the prompt, Observation turns, the ReAct taxonomy, and
a scan of a ReAct run whose numbers a user checks by hand."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from helpers.adversarial import cli
from helpers.react_run import BROKEN, CLEAN, FINAL, MULTI, react_prompt, write_react_run

from trajlab.ingest.tool_schemas import tools_from_prompt
from trajlab.ingest.turns import split_turns
from trajlab.model import TurnContext
from trajlab.toolcalls import analyze_turn, detect_tool_format
from trajlab.toolcalls.formats import FORMATS
from trajlab.toolcalls.ruleset import get_ruleset

PROMPT = react_prompt("What is the capital of France?")


def _tools() -> list[dict]:
    tools, src = tools_from_prompt(PROMPT)
    assert src == "prompt_react" and tools is not None
    return tools


def _analyze(text: str, tools: list[dict] | None = None):
    return analyze_turn(text, tool_format="react", tools=tools if tools is not None else _tools(),
                        context=TurnContext(is_last_turn=True))


def test_tool_list_is_read_from_the_prompt():
    tools = {t["name"]: t for t in _tools()}
    assert list(tools) == ["search", "calculator"]
    assert tools["search"]["parameters"].get("additionalProperties") is True  # listed by name only: open
    assert tools["calculator"]["parameters"]["properties"] == {"expression": {"type": "string"}}
    # JSON schemas, one a line, and the names of "should be one of [...]"
    p = ("user\nYou have access to the following tools:\n"
         '{"name": "lookup", "description": "d", "parameters": {"type": "object", "properties": '
         '{"term": {"type": "string"}}, "required": ["term"]}}\n\n'
         "Use the following format:\nAction: the action to take, should be one of [lookup, finish]\n"
         "Action Input: the input\nassistant\n")
    got, src = tools_from_prompt(p)
    assert src == "prompt_react" and [t["name"] for t in got] == ["lookup", "finish"]
    assert got[0]["parameters"]["required"] == ["term"]


def test_qwen_react_prompt_parameters():
    p = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nAnswer the following "
         "questions as best you can. You have access to the following tools:\n\n"
         "quark_search: Call this tool to interact with the Quark Search API. What is the Quark Search API useful "
         'for? A general search engine. Parameters: [{"name": "search_query", "description": "keywords", '
         '"required": true, "schema": {"type": "string"}}] Format the arguments as a JSON object.\n\n'
         "Use the following format:\n\nQuestion: the input question you must answer\nThought: think\n"
         "Action: the action to take, should be one of [quark_search]\nAction Input: the input to the action\n"
         "Observation: the result of the action\n\nBegin!\n\nQuestion: hi<|im_end|>\n<|im_start|>assistant\n")
    tools, src = tools_from_prompt(p)
    assert src == "prompt_react" and [t["name"] for t in tools] == ["quark_search"]
    params = tools[0]["parameters"]
    assert params["properties"]["search_query"]["type"] == "string" and params["required"] == ["search_query"]
    assert detect_tool_format(p, "", tools_source=src) == "react"
    ta = _analyze('Thought: search\nAction: quark_search\nAction Input: {"query": "x"}', tools)
    assert sorted(ta.calls[0].categories) == ["missing_required_parameter", "unknown_parameter"]


def test_detection_from_prompt_and_output_never_steals():
    tools, src = tools_from_prompt(PROMPT)
    assert detect_tool_format(PROMPT, "", tools_source=src) == "react"
    # a Hermes prompt whose user quotes the ReAct steps stays hermes
    hermes = ('system\n# Tools\n\n<tools>\n{"type": "function", "function": {"name": "search", "parameters": {}}}\n'
              '</tools>\n\nFor each function call, return a json object with function name and arguments within '
              '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
              "<args-json-object>}\n</tool_call>\nuser\nExplain this:\nAction: search\nAction Input: x\nassistant\n")
    tools, src = tools_from_prompt(hermes)
    assert detect_tool_format(hermes, "Action: search\nAction Input: x", tools_source=src) == "hermes"
    # the output alone: ReAct steps are a call, prose about actions is not
    assert detect_tool_format("user\nhi\nassistant\n", CLEAN[1]) == "react"
    prose = "The action: none needed. Action items: input the data. Our Action Input is empty."
    assert detect_tool_format("user\nWhat is an action?\nassistant\n", prose) == "none"
    ta = _analyze(prose)
    assert ta.calls == [] and ta.findings == []
    # a hermes output with a `<tool_call>` is hermes even when it also writes ReAct keys
    assert detect_tool_format("user\nhi\nassistant\n", '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>'
                              "\nAction: a\nAction Input: x") == "hermes"


@pytest.mark.parametrize("text", CLEAN)
def test_pending_calls_are_calls_not_malformed(text):
    ta = _analyze(text)
    assert len(ta.calls) == 1 and ta.calls[0].status == "ok", ta.findings
    assert not [f for f in ta.findings if f.severity in ("error", "warning")]
    c = ta.calls[0]
    assert c.function_name in ("search", "calculator") and c.matched_tool == c.function_name


def test_inputs_as_the_tool_receives_them():
    calls = [_analyze(t).calls[0] for t in CLEAN]
    assert calls[0].arguments == "capital of France"  # open schema: the text itself
    assert calls[1].arguments == {"expression": "17 * 23"}
    assert calls[2].arguments == "population of Lyon"  # LangChain strips the quotes
    assert calls[3].arguments == {"expression": "2 ** 10"}  # a single-parameter tool: the text fills it


@pytest.mark.parametrize(("text", "cats"), BROKEN)
def test_each_react_problem_has_its_category(text, cats):
    ta = _analyze(text)
    got = sorted({c for call in ta.calls for c in call.categories})
    assert got == sorted(cats)
    rs = get_ruleset(())
    for f in ta.findings:
        assert f.rule_id.startswith("react/") and f.message and f.category in rs.categories


def test_plain_text_input_to_a_several_parameter_tool_does_not_fit():
    tools = [{"name": "edit", "description": "", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "text": {"type": "string"}}, "required": ["path", "text"]}}]
    ta = _analyze("Action: edit\nAction Input: a.txt hello", tools)
    assert ta.calls[0].categories == ["invalid_arguments"]
    assert "plain text" in ta.findings[0].message


def test_repairs_rerender_in_react_form():
    ta = _analyze('Action: calculator\nAction Input: {"expressoin": "2+2"}')
    c = ta.calls[0]
    assert c.categories == ["unknown_parameter"] and c.repaired == 'Action: calculator\nAction Input: {"expression": "2+2"}'
    assert c.repaired_arguments == {"expression": "2+2"}
    assert FORMATS["react"].render("search", "capital of France") == "Action: search\nAction Input: capital of France"


def test_observation_turns():
    turns = split_turns(MULTI)
    assert [t.role for t in turns] == ["assistant", "tool", "assistant"]
    assert turns[1].text == "Observation: Paris is the capital of France.\n"
    assert "".join(t.text for t in turns) == MULTI
    wrapped = ("Action: search\nAction Input: a<|im_end|>\n<|im_start|>user\nObservation: Paris<|im_end|>\n"
               "<|im_start|>assistant\nFinal Answer: Paris")
    assert [t.role for t in split_turns(wrapped)] == ["assistant", "tool", "assistant"]
    # an Observation with no model step after it stays in the model's turn (written by the model)
    assert len(split_turns(BROKEN[-1][0])) == 1
    # outputs without an Action Input are never split on "Observation:"
    assert len(split_turns("Some notes.\nObservation: x\nThought: y")) == 1


def test_rules_list_shows_the_react_categories(capfd):
    rc, out, _err = cli(["rules", "list", "--json"], capfd)
    assert rc == 0
    text = out.decode()
    for cat in ("missing_action_input", "multiple_actions", "action_after_final_answer", "model_written_observation"):
        assert cat in text


@pytest.mark.parametrize("engine", ["columnar", "records"])
def test_scan_of_a_react_run(tmp_path, capfd, engine):
    run = write_react_run(tmp_path / "run")
    rc, out, err = cli(["scan", run, "-o", tmp_path / "out", "--json", "--no-progress", "-j", "1",
                        "--engine", engine], capfd)
    assert rc == 0, err
    s = json.loads(out)
    # by hand: 6 clean pending calls; 9 broken records with 10 calls (one writes two actions); a final answer;
    # a two-turn output with one call -> 17 trajectories, 17 calls, 2 final answers; of the 10 broken calls the
    # two misspelt parameters run (unknown_parameter is a warning: the tool sees the call) -> 8 malformed, 2 warnings
    assert (s["trajectories"], s["calls"], s["malformed_calls"], s["warning_calls"]) == (17, 17, 8, 2)
    assert s["final_answer_rate"] == pytest.approx(2 / 17)
    assert {c["category"]: c["calls"] for c in s["top_categories"]} == {
        "multiple_actions": 2, "action_after_final_answer": 1, "invalid_json": 1, "missing_action_input": 1,
        "model_written_observation": 1, "unknown_function": 2, "garbled_function_name": 1}
    warned = [f for f in pq.read_table(tmp_path / "out" / "findings.parquet").to_pylist()
              if f["category"] == "unknown_parameter"]
    assert len(warned) == 2 and {f["severity"] for f in warned} == {"warning"}
    traj = pq.read_table(tmp_path / "out" / "trajectories.parquet").to_pylist()
    assert {t["tool_format"] for t in traj} == {"react"}
    assert sorted(t["n_turns"] for t in traj)[-1] == 3
    calls = pq.read_table(tmp_path / "out" / "calls.parquet").to_pylist()
    assert all(c["format"] == "react" for c in calls)
    assert FINAL not in {c["raw"] for c in calls}


def test_sft_pool_samples_are_in_react_form(tmp_path, capfd):
    from helpers.verl_lines import legacy_line, write_jsonl

    rows = []
    for q in ("q1", "q2", "q3"):  # each prompt: a right answer, a garbled action, a misspelt parameter
        p = react_prompt(q)
        rows += [legacy_line(1, p, "Thought: I now know the final answer\nFinal Answer: 42", 1.0),
                 legacy_line(1, p, 'Thought: Search.\nAction: serach\nAction Input: {"query": "x"}', 0.0),
                 legacy_line(1, p, 'Action: calculator\nAction Input: {"expresion": "6*7"}', 0.0)]
    write_jsonl(tmp_path / "run" / "rollout" / "1.jsonl", rows)
    out = tmp_path / "out"
    assert cli(["scan", tmp_path / "run", "-o", out, "--no-progress", "-j", "1"], capfd)[0] == 0
    rc, _o, err = cli(["build-sft-pool", out, "--ratio", "5:3:2", "--min-score", "any", "--val-fraction", "0"], capfd)
    assert rc == 0, err
    demos = pq.read_table(out / "sft_pool" / "error_demo.parquet").to_pylist()
    hints = pq.read_table(out / "sft_pool" / "hint.parquet").to_pylist()
    assert demos and hints
    for r in demos:
        feedback, answer = r["messages"][-2]["content"], r["messages"][-1]["content"]
        assert "(react format):\nAction: " in feedback and "<tool_call>" not in feedback
        assert answer in ('Action: search\nAction Input: {"query": "x"}',
                          'Action: calculator\nAction Input: {"expression": "6*7"}')
    for r in hints:
        system = r["messages"][0]["content"]
        assert "Action: " in system and "<tool_call>" not in system and r["tool_format"] == "react"


def test_summary_says_when_tools_are_declared_in_a_form_no_format_reads(tmp_path, capfd):
    from helpers.verl_lines import legacy_line, write_jsonl

    mistral = ('system\nYou are a helpful assistant.\n[AVAILABLE_TOOLS][{"type": "function", "function": '
               '{"name": "search"}}][/AVAILABLE_TOOLS]\nuser\nq\nassistant\n')
    gsm8k = "system\nYou are a helpful assistant.\nuser\nWhat is 2+2? Let's think step by step.\nassistant\n"
    rows = [legacy_line(1, mistral, "I will search.", 0.0), legacy_line(1, mistral, "Done.", 0.0),
            legacy_line(1, gsm8k, "4", 1.0), legacy_line(1, react_prompt("q"), CLEAN[0], 0.0)]
    write_jsonl(tmp_path / "run" / "rollout" / "1.jsonl", rows)
    rc, out, _err = cli(["scan", tmp_path / "run", "-o", tmp_path / "o", "--json", "--no-progress", "-j", "1"], capfd)
    assert rc == 0 and json.loads(out)["unread_tool_declarations"] == 2  # the Mistral prompts; ReAct is read
    rc, out, _err = cli(["scan", tmp_path / "run", "-o", tmp_path / "o2", "--no-progress", "-j", "1"], capfd)
    words = " ".join(w for w in out.decode().split() if w != "│")  # (the panel wraps the line)
    assert rc == 0 and "2 trajectories whose prompt declares tools in a form no call format reads" in words


PAPER_PROMPT = (
    "user\nSolve a question answering task with interleaving Thought, Action, Observation steps. Thought can reason "
    "about the current situation, and Action can be three types: \n(1) Search[entity], which searches the exact entity "
    "on Wikipedia and returns the first paragraph if it exists.\n(2) Lookup[keyword], which returns the next sentence "
    "containing keyword in the current passage.\n(3) Finish[answer], which returns the answer and finishes the task.\n"
    "Here are some examples.\nQuestion: What is X?\nThought 1: I need to search X.\nAction 1: Search[X]\n"
    "Observation 1: X is Y.\nThought 2: So the answer is Y.\nAction 2: Finish[Y]\n\nQuestion: Who wrote Hamlet?\n"
    "assistant\n")


def test_the_react_papers_bracket_actions():
    tools, src = tools_from_prompt(PAPER_PROMPT)
    assert src == "prompt_react" and [t["name"] for t in tools] == ["Search", "Lookup", "Finish"]
    assert tools[0]["parameters"] == {"type": "object", "properties": {"entity": {"type": "string"}},
                                      "required": ["entity"]}
    assert detect_tool_format(PAPER_PROMPT, "", tools_source=src) == "react"
    out = ("Thought 1: I need to search Hamlet.\nAction 1: Search[Hamlet]\nObservation 1: Hamlet is a tragedy.\n"
           "Thought 2: So the answer is Shakespeare.\nAction 2: Finish[William Shakespeare]")
    turns = split_turns(out)
    assert [t.role for t in turns] == ["assistant", "tool", "assistant"]
    calls = [c for t in turns if t.role == "assistant" for c in _analyze(t.text, tools).calls]
    assert [(c.function_name, c.arguments, c.status) for c in calls] == [
        ("Search", {"entity": "Hamlet"}, "ok"), ("Finish", {"answer": "William Shakespeare"}, "ok")]
    bad = _analyze("Thought 1: go\nAction 1: Serch[Hamlet]", tools).calls[0]
    assert "garbled_function_name" in bad.categories and bad.repaired == "Action 1: Search[Hamlet]"  # (the rename edits the step in place)
    assert detect_tool_format("user\nhi\nassistant\n", "Thought: x\nAction: Search[Hamlet]") == "react"


# the shapes LangChain's ReAct output parser is tested on (its behaviour, in our words): (text, calls read as
# (name, input), categories of the turn's findings)
PARSER_SHAPES = [
    ("Thought: I need to search for NBA\nAction: Search\nAction Input: NBA", [("Search", "NBA")], []),
    ("Thought: I need to search for NBA\nAction: Search \nAction Input: NBA", [("Search", "NBA")], []),
    ("Thought: I need to search for pytest\nAction: Search\nAction Input:\n```\npytest\n```",
     [("Search", "```\npytest\n```")], []),
    ("I can use `ls` to list the directory.\n\nAction: Terminal\nAction Input:\nls -l ~/.bashrc.d/\n",
     [("Terminal", "ls -l ~/.bashrc.d/")], []),
    ('Action: query_sql_db\nAction Input: SELECT * FROM "foo" LIMIT 1', [("query_sql_db", 'SELECT * FROM "foo" LIMIT 1')], []),
    ('Action: Search\nAction Input: "NBA"', [("Search", "NBA")], []),
    ("Thought: I can now answer the question\nFinal Answer: 1994", [], []),
    ("Thought: I can now answer the question\nFinal Answer:\n1994", [], []),
    ("Thought: I need to search for NBA\nAction: Search\nThought: NBA", [("Search", {})], ["missing_action_input"]),
    ("Thought: I need to search for NBA\nThought: Search\nAction Input: NBA", [], ["missing_call_open"]),
    ("Thought: I need to search for NBA\nAction: Search\nAction Input: NBA\nObservation: founded in 1994\n"
     "Thought: I can now answer the question\nFinal Answer: 1994", [("Search", "NBA")],
     ["action_after_final_answer", "model_written_observation"]),
]


@pytest.mark.parametrize(("text", "calls", "cats"), PARSER_SHAPES)
def test_shapes_the_reference_parser_is_tested_on(text, calls, cats):
    open_tools = [{"name": n, "description": "", "parameters": {"type": "object", "properties": {},
                                                                "additionalProperties": True}}
                  for n in ("Search", "Terminal", "query_sql_db")]
    ta = _analyze(text, open_tools)
    assert [(c.function_name, c.arguments) for c in ta.calls] == calls
    assert sorted({f.category for f in ta.findings if f.severity in ("error", "warning")}) == cats


def test_ood_tool_block_in_react_form_reads_back():
    from trajlab.curate.hints import load_hint_rules
    from trajlab.curate.ood import render_system

    tools = [{"name": "search_web", "description": "Search the web.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}]
    system = render_system(load_hint_rules(()), "You are a helpful assistant.", tools, "react")
    assert system is not None and system.startswith("You are a helpful assistant.\n\nAnswer the following")
    prompt = f"system\n{system}\nuser\nq\nassistant\n"
    got, src = tools_from_prompt(prompt)
    assert src == "prompt_react" and got == [{"name": "search_web", "description": "Search the web.", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}}}]
    assert detect_tool_format(prompt, "", tools_source=src) == "react"


@pytest.mark.parametrize("tail", ["\nObservation:", "\nObservation: ", "\nObservation:\n"])
def test_a_kept_stop_sequence_is_no_invented_observation(tail):
    ta = _analyze(CLEAN[1] + tail)
    assert [c.status for c in ta.calls] == ["ok"] and ta.findings == []
    assert ta.calls[0].arguments == {"expression": "17 * 23"}
    ta = _analyze(CLEAN[1] + tail + "42")  # a result after it is the model's own
    assert ta.calls[0].categories == ["model_written_observation"]


def test_end_tokens_kept_by_the_decode_are_not_part_of_the_input():
    for tail in ("<|im_end|>", "<|im_end|>\n<|endoftext|>", "</s>"):
        ta = _analyze(CLEAN[1] + tail)
        assert [(c.status, c.arguments) for c in ta.calls] == [("ok", {"expression": "17 * 23"})] and not ta.findings
        ta = _analyze(CLEAN[0] + tail)
        assert [c.arguments for c in ta.calls] == ["capital of France"]


def test_langchain_json_blob_and_name_on_the_next_line():
    """LangChain's JSON ReAct agent writes `Action:` alone and a (fenced) JSON blob below it; its ReAct parser also
    reads a name on the line after `Action:`. Both are calls with the right name and input, a blob naming
    `Final Answer` is the answer, and such a prompt and output are detected as ReAct."""
    blob = 'Thought: look it up\nAction:\n```json\n{\n  "action": "search",\n  "action_input": {"query": "x"}\n}\n```\n'
    ta = _analyze(blob, [])
    assert [(c.function_name, c.arguments, c.categories) for c in ta.calls] == [("search", {"query": "x"}, [])]
    assert ta.calls[0].raw.endswith("```")
    ta = _analyze('Action:\n```\n{"action": "calculator", "action_input": "2+2"}\n```')
    assert [(c.function_name, c.arguments, c.categories) for c in ta.calls] == [
        ("calculator", {"expression": "2+2"}, [])]
    assert _analyze('Thought: done\nAction:\n```\n{"action": "Final Answer", "action_input": "42"}\n```').calls == []
    ta = _analyze("Thought: t\r\nAction:\r\nsearch\r\nAction Input: weather in SF\r\n", [])
    assert [(c.function_name, c.arguments, c.categories) for c in ta.calls] == [("search", "weather in SF", [])]
    assert detect_tool_format("user\nhi\nassistant\n", blob) == "react"
    prompt = ('Use a json blob to specify a tool by providing an action key (tool name) and an action_input key.\n'
              '```\n{\n  "action": $TOOL_NAME,\n  "action_input": $INPUT\n}\n```\n'
              "Thought: consider\nAction:\n```\n$JSON_BLOB\n```\nObservation: action result\n")
    assert detect_tool_format(prompt, "") == "react"


def test_tool_list_with_windows_newlines_and_a_note_line():
    """A prompt with CRLF newlines still yields each tool's description; a "Note: ..." line in the tool block is
    no tool when the prompt's "should be one of [...]" list names the tools."""
    p = ("You have access to the following tools:\r\n\r\nsearch: a search engine. Useful for: current events\r\n"
         "Note: the tools may fail\r\n\r\nUse the following format:\r\n\r\nQuestion: q\r\nThought: t\r\n"
         "Action: the action to take, should be one of [search, calculator]\r\nAction Input: the input\r\n"
         "Observation: the result\r\n")
    tools, src = tools_from_prompt(p)
    assert src == "prompt_react"
    assert [(t["name"], t["description"]) for t in tools] == [
        ("search", "a search engine. Useful for: current events"), ("calculator", "")]


def test_blank_region_after_an_empty_action_line_is_read_in_linear_time():
    """40k blank lines after `Action:` (the JSON-blob reader once backtracked quadratically over them: seconds per
    turn) and a line that is no JSON blob are one call with no input, read at once."""
    ta = _analyze("Action:\n" + " \n" * 20000 + "{" * 1000, [])
    assert len(ta.calls) == 1 and ta.calls[0].function_name == "{" * 1000
    assert "missing_action_input" in ta.calls[0].categories

"""A ReAct agent run shaped like the verl dumps ReAct agents publish: a chat-template-stripped ``input`` whose user
message teaches LangChain's ReAct steps and lists the tools as ``name: description`` lines, and an ``output`` that
stops at the model's turn (a pending call: the environment has not yet appended its Observation). Step 1 is
clean; step 2 holds one record per ReAct problem (the categories a user checks by hand in the summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.verl_lines import legacy_line, write_jsonl

TOOLS_TEXT = (
    "search: Search the web. Input should be a search query.\n"
    'calculator: Evaluate an arithmetic expression, args: {"expression": {"type": "string"}}'
)


def react_prompt(question: str) -> str:
    return (
        "system\nYou are a helpful assistant.\nuser\n"
        "Answer the following questions as best you can. You have access to the following tools:\n\n"
        f"{TOOLS_TEXT}\n\n"
        "Use the following format:\n\n"
        "Question: the input question you must answer\n"
        "Thought: you should always think about what to do\n"
        "Action: the action to take, should be one of [search, calculator]\n"
        "Action Input: the input to the action\n"
        "Observation: the result of the action\n"
        "... (this Thought/Action/Action Input/Observation can repeat N times)\n"
        "Thought: I now know the final answer\n"
        "Final Answer: the final answer to the original input question\n\n"
        f"Begin!\n\nQuestion: {question}\nassistant\n"
    )


#: step 1: well-formed pending calls (JSON and plain-text inputs) -- 6 calls, none malformed
CLEAN = [
    'Thought: I should search for this.\nAction: search\nAction Input: capital of France',
    'Thought: Let me compute it.\nAction: calculator\nAction Input: {"expression": "17 * 23"}',
    'Thought: I need the population.\nAction: search\nAction Input: "population of Lyon"',
    'Thought: Compute.\nAction: calculator\nAction Input: 2 ** 10',
    'Thought: Look it up.\nAction: search\nAction Input: {"query": "tallest mountain"}',
    'Thought: Search first.\nAction: search\nAction Input: boiling point of water\n',
]

#: step 2: (output, the categories its call(s) must carry) -- one record per problem
BROKEN: list[tuple[str, list[str]]] = [
    ('Thought: I will use the browser.\nAction: browser\nAction Input: open google.com', ["unknown_function"]),
    ('Thought: Compute.\nAction: calculator\nAction Input: {"expression": "2+2"', ["invalid_json"]),
    ('Thought: Compute.\nAction: calculator\nAction Input: {"expr": "2+2"}',
     ["unknown_parameter"]),  # (LangChain's `args:` carry no `required`)
    ('Thought: I should search.\nAction: search\n', ["missing_action_input"]),
    ('Thought: Compute.\nAction: calculator\nAction Input: {"expresion": "6*7"}', ["unknown_parameter"]),  # repairable
    ('Thought: Search.\nAction: serach\nAction Input: {"query": "Lyon"}',
     ["garbled_function_name", "unknown_function"]),  # repairable
    ('Thought: Two things.\nAction: search\nAction Input: a\nAction: calculator\nAction Input: {"expression": "1"}',
     ["multiple_actions"]),
    ('Thought: I know it.\nFinal Answer: Paris\nAction: search\nAction Input: Paris', ["action_after_final_answer"]),
    ('Thought: Search.\nAction: search\nAction Input: capital of France\nObservation: Paris is the capital.',
     ["model_written_observation"]),
]

#: step 2 also: a final answer (no call) and a multi-turn output whose inline Observation the environment appended
FINAL = "Thought: I now know the final answer\nFinal Answer: 391"
MULTI = ("Thought: Search.\nAction: search\nAction Input: capital of France\n"
         "Observation: Paris is the capital of France.\n"
         "Thought: I now know the final answer\nFinal Answer: Paris")


def react_records() -> dict[int, list[dict[str, Any]]]:
    s1 = [legacy_line(1, react_prompt(f"q{i}"), out, 0.0) for i, out in enumerate(CLEAN)]
    s2 = [legacy_line(2, react_prompt(f"b{i}"), out, 0.0) for i, (out, _c) in enumerate(BROKEN)]
    s2 += [legacy_line(2, react_prompt("final"), FINAL, 1.0), legacy_line(2, react_prompt("multi"), MULTI, 1.0)]
    return {1: s1, 2: s2}


def write_react_run(root: Path) -> Path:
    for step, rows in react_records().items():
        write_jsonl(root / "rollout" / f"{step}.jsonl", rows)
    return root

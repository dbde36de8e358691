#!/usr/bin/env python3
"""Generate the per-family sample runs: small seeded verl V1 dumps of GLM-4.5, Kimi-K2, DeepSeek-V3.1, gpt-oss,
DeepSeek-V3.2 and V4 (DSML) and Llama-3 JSON tool runs, each rotting in its family's own ways after step ``ONSET``.

Run ``python sample_data/generate_families.py`` (stdlib only) to (re)write ``sample_data/<family>_run/rollout/
{1..STEPS}.jsonl``; the output is byte-for-byte identical on every run (fixed seeds, no clocks). Sibling of
``generate.py`` (the Qwen runs); the story and the rates are in ``sample_data/README.md``.

Each run renders prompts and outputs as that family's chat template does and as a verl dump shows them
(call-formats.md): GLM-4.5 with its special tokens (``[gMASK]<sop>``, role tokens) dropped by the decode, Kimi-K2 with its markers kept (decoded
with ``skip_special_tokens=False``, as vLLM and verl do for Kimi), DeepSeek-V3.1 markers kept (they are ordinary
tokens), gpt-oss harmony with its markers dropped (a plain ``skip_special_tokens=True`` dump), DeepSeek-V3.2 / V4
DSML as the V3.2 template writes it (``｜DSML｜`` is an ordinary token: the markup survives; V4's block is
``tool_calls``; non-thinking mode, tool results in ``<function_results>``), Llama 3.1 JSON with its header tokens
dropped (``system\n\n``, ``user\n\n``, ``ipython\n\n`` tool turns, ``assistant\n\n``). Malformed calls are
rare (2%) until ``ONSET``, then climb to ``FINAL_RATE`` at the last step; the defects are each family's own
(:data:`DEFECTS`).

Reusable API: :func:`iter_step` yields ``(record, labels)`` for one step of one family, where ``labels`` lists
the intended defect of every call (``""`` for a well-formed call).
"""

import argparse
import json
import random
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SEED = 20261201
HERE = Path(__file__).resolve().parent
STEPS = 30
ONSET = 18
BASE_RATE = 0.02
FINAL_RATE = 0.5
PROMPTS_PER_STEP = 2
ROLLOUTS = 4
FAMILIES = ("glm45", "kimi_k2", "deepseek_v31", "gpt_oss", "deepseek_v32", "deepseek_v4", "llama3_json", "seed",
            "minimax", "gemma4")
#: the run directory of each family
RUN_DIRS = {"glm45": "glm45_run", "kimi_k2": "kimi_k2_run", "deepseek_v31": "deepseek_v31_run", "gpt_oss": "gpt_oss_run",
            "deepseek_v32": "deepseek_v32_run", "deepseek_v4": "deepseek_v4_run", "llama3_json": "llama3_json_run",
            "seed": "seed_oss_run", "minimax": "minimax_m2_run", "gemma4": "gemma4_run"}
DSML = "｜DSML｜"
#: the DSML block name per version
DSML_BLOCK = {"deepseek_v32": "function_calls", "deepseek_v4": "tool_calls"}
Q = '<|"|>'

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather and forecast for a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name."},
                                          "days": {"type": "integer", "description": "Forecast days."}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Search the web.",
                                      "parameters": {"type": "object", "properties": {
                                          "query": {"type": "string", "description": "Search query."}},
                                          "required": ["query"]}}},
]
CITIES = ("Beijing", "Lisbon", "Oslo", "Nairobi", "Lima", "Hanoi", "Quebec", "Tbilisi", "Perth", "Bergen")
WEATHER = ("sunny", "light rain", "overcast", "snow showers", "windy", "foggy")

#: each family's defects (name, weight) once the run rots
DEFECTS: dict[str, tuple[tuple[str, float], ...]] = {
    "glm45": (("garbled_name", 3), ("value_unclosed", 2), ("missing_close", 2), ("json_inside", 1),
              ("layout", 1)),
    "kimi_k2": (("garbled_name", 2), ("invalid_json", 3), ("openai_id", 2), ("missing_separator", 1),
                ("truncated", 1)),
    "deepseek_v31": (("garbled_name", 2), ("invalid_json", 3), ("v3_layout", 2), ("lookalike", 1),
                     ("unclosed_call", 1)),
    "gpt_oss": (("garbled_name", 2), ("invalid_json", 3), ("analysis_channel", 2), ("double_encoded", 1),
                ("truncated", 1)),
    "deepseek_v32": (("garbled_name", 2), ("not_json", 2), ("doubled_bar", 2), ("bare_invoke", 1),
                     ("unclosed_param", 2), ("stray_attr", 1)),
    "deepseek_v4": (("garbled_name", 2), ("doubled_bar", 2), ("bare_invoke", 1), ("param_as_invoke", 1),
                    ("corrupted_closer", 1), ("v32_closer", 2), ("stray_attr", 1), ("unclosed_param", 1),
                    ("not_json", 1)),
    "llama3_json": (("garbled_name", 2), ("invalid_json", 3), ("truncated", 1), ("arguments_string", 1),
                    ("undeclared_name", 1)),
    "seed": (("garbled_name", 3), ("value_unclosed", 2), ("stray_attr", 2), ("missing_close", 1),
             ("python_literal", 1)),
    "minimax": (("garbled_name", 3), ("value_unclosed", 2), ("missing_wrapper", 2), ("unquoted_name", 1),
                ("missing_close", 1)),
    "gemma4": (("garbled_name", 2), ("undelimited", 2), ("json_string", 2), ("missing_brace", 2),
               ("missing_head", 1)),
}


def malformed_rate(step: int) -> float:
    if step <= ONSET:
        return BASE_RATE
    return BASE_RATE + (FINAL_RATE - BASE_RATE) * (step - ONSET) / (STEPS - ONSET)


# -- prompts ----------------------------------------------------------------------------------------------------

def prompt(family: str, question: str) -> str:
    """The decoded prompt of one question, as the family's template renders it (special tokens dropped where the
    verl dump drops them)."""
    fns = [t["function"] for t in TOOLS]
    if family == "glm45":
        lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in TOOLS)
        return ("\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + lines +
                "\n</tools>\n\nFor each function call, output the function name and arguments within the following "
                "XML format:\n<tool_call>{function-name}\n<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}"
                "</arg_value>\n<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n"
                "</tool_call>\n" + question + "\n")
    if family in DSML_BLOCK:
        blk = DSML_BLOCK[family]
        funcs = "".join("\n" + json.dumps(f, ensure_ascii=False) for f in fns)
        return ("You are a helpful assistant.\n\n## Tools\n\nYou have access to a set of tools you can use to answer "
                f"the user's question.\nYou can invoke functions by writing a \"<{DSML}{blk}>\" block like the "
                f"following as part of your reply to the user:\n<{DSML}{blk}>\n<{DSML}invoke name=\"$FUNCTION_NAME\">"
                f"\n<{DSML}parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</{DSML}parameter>"
                f"\n...\n</{DSML}invoke>\n</{DSML}{blk}>\n\nString and scalar parameters should be specified as is "
                "without any escaping or quotes, while lists and objects should use JSON format. The \"string\" "
                "attribute should be set to \"true\" for string type parameters and \"false\" for other types "
                "(numbers, booleans, arrays, objects).\n\nHere are the functions available in JSONSchema format:\n"
                f"<functions>{funcs}\n</functions>\n<｜User｜>" + question + "<｜Assistant｜></think>")
    if family == "llama3_json":
        tools = "".join(json.dumps(t, indent=4, ensure_ascii=False) + "\n\n" for t in TOOLS)
        return ("system\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                "You are a helpful assistant.user\n\nGiven the following functions, please respond with a JSON for "
                "a function call with its proper arguments that best answers the given prompt.\n\nRespond in the "
                "format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not "
                "use variables.\n\n" + tools + question + "assistant\n\n")
    if family == "kimi_k2":
        return ("<|im_system|>tool_declare<|im_middle|>" + json.dumps(TOOLS, ensure_ascii=False) + "<|im_end|>"
                "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>"
                "<|im_user|>user<|im_middle|>" + question + "<|im_end|><|im_assistant|>assistant<|im_middle|>")
    if family == "deepseek_v31":
        tools = "".join(f"### {f['name']}\nDescription: {f['description']}\n\nParameters: "
                        f"{json.dumps(f['parameters'], ensure_ascii=False)}\n\n" for f in fns)
        return ("## Tools\nYou have access to the following tools:\n\n" + tools +
                "IMPORTANT: ALWAYS adhere to this exact format for tool use:\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
                "tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{{additional_tool_calls}}"
                "<｜tool▁calls▁end｜>\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available "
                "tools\n- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters "
                "Schema\n- For multiple tool calls, chain them directly without separators or spaces\n"
                "<｜User｜>" + question + "<｜Assistant｜></think>")
    if family == "seed":
        defs = []
        for f in fns:
            props, req = f["parameters"]["properties"], f["parameters"].get("required", [])
            py = {"string": "str", "integer": "int", "boolean": "bool"}
            sig = ", ".join(f"{k}: {py[p['type']]}" for k, p in props.items())
            args = "".join(f"\n    - {k} ({py[p['type']]}) {'[必填]' if k in req else '[选填]'}: {p['description']}"
                           for k, p in props.items())
            defs.append(f'\n\nFunction:\ndef {f["name"]}({sig}):\n    """\n    {f["description"]}\n\n    Args:{args}'
                        '\n\n    """')
        return ("<seed:bos>system\nYou are Doubao, a helpful AI assistant. You may call one or more functions to assist "
                "with the user query." + "".join(defs) + "\n\n工具调用请遵循如下格式:\n<seed:tool_call>\n"
                "<function=example_function_name>\n<parameter=example_parameter_1>value_1</parameter>\n"
                "<parameter=example_parameter_2>This is the value for the second parameter\nthat can span\n"
                "multiple lines</parameter>\n</function>\n</seed:tool_call>\n<seed:eos><seed:bos>user\n" + question +
                "<seed:eos><seed:bos>assistant\n")
    if family == "minimax":
        tools = "".join(f"<tool>{json.dumps(f, ensure_ascii=False)}</tool>\n" for f in fns)
        return ("]~!b[]~b]system\nYou are a helpful assistant.\n\n# Tools\nYou may call one or more tools to assist "
                "with the user query.\nHere are the tools available in JSONSchema format:\n\n<tools>\n" + tools +
                "</tools>\n\nWhen making tool calls, use XML format to invoke tools and pass parameters:\n\n"
                "<minimax:tool_call>\n<invoke name=\"tool-name-1\">\n<parameter name=\"param-key-1\">param-value-1"
                "</parameter>\n<parameter name=\"param-key-2\">param-value-2</parameter>\n...\n</invoke>\n"
                "</minimax:tool_call>[e~[\n]~b]user\n" + question + "[e~[\n]~b]ai\n<think>\n")
    if family == "gemma4":
        decls = []
        for f in fns:
            props, req = f["parameters"]["properties"], f["parameters"].get("required", [])
            body = ",".join(f"{k}:{{description:{Q}{p['description']}{Q},type:{Q}{p['type'].upper()}{Q}}}"
                            for k, p in sorted(props.items()))
            reqs = ",".join(f"{Q}{r}{Q}" for r in req)
            decls.append(f"<|tool>declaration:{f['name']}{{description:{Q}{f['description']}{Q},parameters:{{"
                         f"properties:{{{body}}},required:[{reqs}],type:{Q}OBJECT{Q}}}}}<tool|>")
        return ("<bos><|turn>system\n" + "".join(decls) + "<turn|>\n<|turn>user\n" + question +
                "<turn|>\n<|turn>model\n")
    ts = []
    for f in fns:
        props = f["parameters"]["properties"]
        req = f["parameters"].get("required", [])
        body = "".join(f"// {p['description']}\n{k}{'' if k in req else '?'}: "
                       f"{'number' if p['type'] == 'integer' else p['type']},\n" for k, p in props.items())
        ts.append(f"// {f['description']}\ntype {f['name']} = (_: {{\n{body}}}) => any;\n")
    return ("systemYou are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\n"
            "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
            "message.\nCalls to these tools must go to the commentary channel: 'functions'.developer# Instructions"
            "\n\nAnswer weather questions.\n\n# Tools\n\n## functions\n\nnamespace functions {\n\n" + "\n".join(ts) +
            "\n} // namespace functions" + "user" + question + "assistant")


# -- calls ------------------------------------------------------------------------------------------------------

def _garble(rng: random.Random, name: str) -> str:
    return name + rng.choice(("英文", "_v2", "s", "明确"))


def call_text(family: str, name: str, args: dict[str, Any], idx: int, defect: str, rng: random.Random) -> str:
    """One call (or, for section families, one call inside its section) with ``defect`` applied."""
    if defect == "garbled_name":
        name = _garble(rng, name)
    js = json.dumps(args, ensure_ascii=False)
    if defect == "invalid_json":
        js = rng.choice((js[:-1], js.replace('": ', '": ,', 1) if len(args) > 1 else js[:-1] + ",}",
                         "{" + js))
    if family == "glm45":
        if defect == "json_inside":
            return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"
        vals = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in args.items()]
        sep = " " if defect == "layout" else "\n"
        parts = []
        for i, (k, v) in enumerate(vals):
            close = "" if defect == "value_unclosed" and i == 0 and len(vals) > 1 else "</arg_value>"
            parts.append(f"<arg_key>{k}</arg_key>{sep}<arg_value>{v}{close}{sep}")
        return f"<tool_call>{name}{sep}{''.join(parts)}" + ("" if defect == "missing_close" else "</tool_call>")
    if family == "kimi_k2":
        cid = rng.choice(("call_", "call_0")) + uuid.UUID(int=rng.getrandbits(128)).hex[:24] \
            if defect == "openai_id" else f"functions.{name}:{idx}"
        sep = "" if defect == "missing_separator" else "<|tool_call_argument_begin|>"
        if defect == "truncated":
            return f"<|tool_calls_section_begin|><|tool_call_begin|>{cid}{sep}{js[:len(js) // 2]}"
        return (f"<|tool_calls_section_begin|><|tool_call_begin|>{cid}{sep}{js}<|tool_call_end|>"
                "<|tool_calls_section_end|>")
    if family in DSML_BLOCK:
        return dsml_call(family, name, args, defect, rng)
    if family == "llama3_json":
        if defect == "undeclared_name":
            name = "get_forecast"
        if defect == "arguments_string":
            return json.dumps({"name": name, "parameters": js}, ensure_ascii=False)
        head = '{"type": "function", ' if rng.random() < 0.3 else "{"
        body = f'{head}"name": "{name}", "parameters": {js}}}'
        return body[:len(body) // 2] if defect == "truncated" else body
    if family == "deepseek_v31":
        begin = "<|tool▁calls▁begin|>" if defect == "lookalike" else "<｜tool▁calls▁begin｜>"
        if defect == "v3_layout":
            body = f"function<｜tool▁sep｜>{name}\n```json\n{js}\n```"
        else:
            body = f"{name}<｜tool▁sep｜>{js}"
        end = "" if defect == "unclosed_call" else "<｜tool▁call▁end｜>"
        return f"{begin}<｜tool▁call▁begin｜>{body}{end}<｜tool▁calls▁end｜>"
    if family == "seed":
        ps = []
        for i, (k, v) in enumerate(args.items()):
            v = str(v)
            if defect == "python_literal" and i == 0:
                k, v = "metric", "True"  # the template's Python str() of a boolean, as the history showed it
            close = "" if defect == "value_unclosed" and i == 0 and len(args) > 1 else "</parameter>"
            ps.append(f"<parameter={k}>{v}{close}\n")
        fn = f'<function={name} v2="">' if defect == "stray_attr" else f"<function={name}>"
        end = "" if defect == "missing_close" else "\n</seed:tool_call>"
        return f"<seed:tool_call>\n{fn}\n{''.join(ps)}</function>{end}"
    if family == "minimax":
        ps = []
        for i, (k, v) in enumerate(args.items()):
            v = v if isinstance(v, str) else json.dumps(v)
            close = "" if defect == "value_unclosed" and i == 0 and len(args) > 1 else "</parameter>"
            ps.append(f'<parameter name="{k}">{v}{close}\n')
        inv = f"<invoke name={name}>" if defect == "unquoted_name" else f'<invoke name="{name}">'
        body = f"{inv}\n{''.join(ps)}</invoke>\n"
        if defect == "missing_wrapper":
            return body
        return "<minimax:tool_call>\n" + body + ("" if defect == "missing_close" else "</minimax:tool_call>")
    if family == "gemma4":
        def val(v: Any) -> str:
            if isinstance(v, str):
                return v if defect == "undelimited" else (json.dumps(v) if defect == "json_string" else Q + v + Q)
            return json.dumps(v)
        body = ",".join(f"{k}:{val(v)}" for k, v in sorted(args.items()))
        head = "" if defect == "missing_head" else "call:"
        return f"<|tool_call>{head}{name}{{{body}{'' if defect == 'missing_brace' else '}'}<tool_call|>"
    # gpt-oss, as a skip_special_tokens=True dump shows it
    chan = "analysis" if defect == "analysis_channel" else "commentary"
    if defect == "double_encoded":
        js = json.dumps(js)
    if defect == "truncated":
        js = js[:len(js) // 2]
    return f"{chan} to=functions.{name} json{js}"


def dsml_call(family: str, name: str, args: dict[str, Any], defect: str, rng: random.Random) -> str:
    """One DSML call block as the DeepSeek-V3.2 template writes it (V4: ``tool_calls``), with ``defect`` applied."""
    blk = DSML_BLOCK[family]
    params = []
    for i, (k, v) in enumerate(args.items()):
        flag, val = ("true", v) if isinstance(v, str) else ("false", json.dumps(v))
        if defect == "not_json" and flag == "false":
            val = rng.choice(("three", f"{v} days", f"[{v}"))
        attrs = f'name="{k}" string="{flag}"' + (' v2=""' if defect == "stray_attr" and i == 0 else "")
        close = "" if defect == "unclosed_param" and i == 0 else f"</{DSML}parameter>"
        if defect == "param_as_invoke" and i == 0:
            params.append(f'<{DSML}invoke name="{k}" string="{flag}">{val}</{DSML}invoke>')
        else:
            params.append(f"<{DSML}parameter {attrs}>{val}{close}")
    inv_close = f"<{DSML}/invoke>" if defect == "corrupted_closer" else f"</{DSML}invoke>"
    inv = f'<{DSML}invoke name="{name}">\n' + "\n".join(params) + f"\n{inv_close}"
    if defect == "bare_invoke":
        return "\n\n" + inv
    end = f"</{DSML}function_calls>" if defect == "v32_closer" else f"</{DSML}{blk}>"
    text = f"\n\n<{DSML}{blk}>\n{inv}\n{end}"
    if defect == "doubled_bar":
        text = text.replace(f"<{DSML}invoke", "<｜｜DSML｜｜invoke", 1)
    return text


def tool_block(family: str, name: str, idx: int, result: str) -> str:
    """The tool-response scaffolding between two assistant turns, as the dump shows it."""
    if family == "glm45":
        return f"\n<tool_response>\n{result}\n</tool_response>"
    if family == "kimi_k2":
        return (f"<|im_end|><|im_system|>tool<|im_middle|>## Return of functions.{name}:{idx}\n{result}<|im_end|>"
                "<|im_assistant|>assistant<|im_middle|>")
    if family == "deepseek_v31":
        return f"<｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜>"
    if family in DSML_BLOCK:
        return f"\n\n<function_results>\n<result>{result}</result>\n</function_results>\n\n</think>"
    if family == "llama3_json":
        return f"ipython\n\n{result}assistant\n\n"
    if family == "seed":
        return f"<seed:eos><seed:bos>tool\n{result}<seed:eos><seed:bos>assistant\n"
    if family == "minimax":
        return f"[e~[\n]~b]tool\n<response>{result}</response>[e~[\n]~b]ai\n<think>\n"
    if family == "gemma4":
        return f"<|tool_response>response:{name}{{value:{Q}{result}{Q}}}<tool_response|>"
    return f"functions.{name} to=assistantcommentary{json.dumps(result)}assistant"


def think(family: str, text: str) -> str:
    if family == "glm45":
        return f"\n<think>{text}</think>\n"
    if family == "kimi_k2":
        return f"<think>{text}</think>"
    if family in ("deepseek_v31", "deepseek_v32", "deepseek_v4", "llama3_json"):
        return ""  # tool calls run in non-thinking mode (Llama: no reasoning)
    if family == "seed":
        return f"<seed:think>{text}</seed:think>\n"
    if family == "minimax":
        return f"{text}\n</think>\n\n"  # (the generation prompt and every tool block open `<think>\n`)
    if family == "gemma4":
        return f"<|channel>thought\n{text}<channel|>"
    return f"analysis{text}assistant"


def final(family: str, text: str) -> str:
    if family == "gpt_oss":
        return f"final{text}"
    if family == "kimi_k2":
        return text + "<|im_end|>"
    if family == "seed":
        return text + "<seed:eos>"
    if family == "minimax":
        return text + "[e~["
    if family == "gemma4":
        return text + "<turn|>"
    return text


# -- trajectories -----------------------------------------------------------------------------------------------

def _pick(rng: random.Random, family: str) -> str:
    table = DEFECTS[family]
    r = rng.random() * sum(w for _, w in table)
    for name, w in table:
        r -= w
        if r < 0:
            return name
    return table[-1][0]


#: the end-of-turn token a family's model generates after its calls (kept in these runs' decode)
END_OF_TURN = {"seed": "<seed:eos>", "minimax": "[e~["}


#: defects after which the family's parser produces no call, so the episode ends
_ENDS = {"value_unclosed": False, "missing_close": True, "json_inside": True, "layout": False, "garbled_name": False,
         "invalid_json": False, "openai_id": True, "missing_separator": True, "truncated": True, "v3_layout": True,
         "lookalike": True, "unclosed_call": True, "analysis_channel": True, "double_encoded": False,
         # DSML: what verl's deepseek_v4 parser (and vLLM's deepseek_v32) does: no call at all for these
         "not_json": False, "doubled_bar": True, "bare_invoke": True, "unclosed_param": False, "stray_attr": False,
         "param_as_invoke": False, "corrupted_closer": True, "v32_closer": True,
         # Llama-3 JSON (vLLM's llama3_json): an object that does not decode is no call
         "arguments_string": False, "undeclared_name": False,
         "python_literal": False, "missing_wrapper": True, "unquoted_name": True,
         "undelimited": False, "json_string": False, "missing_brace": True, "missing_head": True}


def trajectory(rng: random.Random, family: str, step: int) -> tuple[dict[str, Any], list[str]]:
    city = rng.choice(CITIES)
    days = rng.randint(1, 5)
    question = f"What will the weather be in {city} over the next {days} days?"
    p_bad = malformed_rate(step)
    labels: list[str] = []
    out: list[str] = []
    calls = [("get_weather", {"city": city, "days": days})]
    if rng.random() < 0.4:
        calls.append(("search", {"query": f"{city} weather warnings"}))
    ended = False
    for i, (name, args) in enumerate(calls):
        defect = _pick(rng, family) if rng.random() < p_bad else ""
        labels.append(defect)
        out.append(think(family, f"I need the {'forecast' if i == 0 else 'warnings'} for {city}."))
        out.append(call_text(family, name, args, i, defect, rng))
        if defect and (_ENDS[defect] or (family, defect) == ("llama3_json", "invalid_json")):
            ended = True
            out.append(END_OF_TURN.get(family, ""))  # (the end-of-turn token the model generates after its calls)
            break
        result = (json.dumps({"city": city, "forecast": rng.choice(WEATHER), "high_c": rng.randint(-5, 30)})
                  if name == "get_weather" else f"No warnings for {city}.")
        out.append(tool_block(family, name, i, result))
    score = 0.0
    if not ended:
        w = rng.choice(WEATHER)
        out.append(think(family, "I have what I need."))
        out.append(final(family, f"Expect {w} in {city} for the next {days} days."))
        good = not any(labels) and rng.random() < 0.8 - 0.5 * max(0.0, (step - ONSET) / (STEPS - ONSET))
        score = 1.0 if good else 0.0
    rec = {"input": prompt(family, question), "output": "".join(out), "gts": city, "score": score, "step": step}
    return rec, labels


def iter_step(family: str, step: int) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """The records of one step (V1 0.9 dump rows, sorted by uid like verl writes them) and their call labels."""
    rng = random.Random(f"{SEED}:{family}:{step}")
    rows = []
    for _p in range(PROMPTS_PER_STEP):
        group = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        for session in range(ROLLOUTS):
            rec, labels = trajectory(rng, family, step)
            rec["uid"] = f"{group}_{session}_0"
            rows.append((rec, labels))
    rows.sort(key=lambda x: x[0]["uid"])
    yield from rows


def generated_files() -> Iterator[tuple[str, str]]:
    """(relative path, content) of every file this generator owns."""
    for family in FAMILIES:
        for step in range(1, STEPS + 1):
            body = "".join(json.dumps(rec, ensure_ascii=False) + "\n" for rec, _ in iter_step(family, step))
            yield f"{RUN_DIRS[family]}/rollout/{step}.jsonl", body


def write_all(root: Path = HERE) -> list[Path]:
    written = []
    for rel, body in generated_files():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body, encoding="utf-8", newline="\n")
        written.append(p)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE, help="directory to write into (default: sample_data/)")
    args = ap.parse_args(argv)
    files = write_all(args.out)
    print(f"wrote {len(files)} files under {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

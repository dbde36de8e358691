"""Sample call texts of the Seed-OSS, MiniMax-M2 and Gemma 4 formats, one well-formed and one per broken kind each
family shows (call-formats.md §6), with the category trajlab names (None: no error finding). Shared by the
classifier tests and the in-verl comparison (tests/test_verl_parsers_in_verl.py)."""

from __future__ import annotations

Q = '<|"|>'

TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
        "required": ["city"]}},
    {"name": "search", "description": "Search the web.", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}, "required": ["query"]}},
]

SEED: list[tuple[str, str, str | None]] = [
    ("good", "Let me check.\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
             "<parameter=days>3</parameter>\n</function>\n</seed:tool_call>", None),
    ("good_two", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>\n"
                 "</seed:tool_call>\n<seed:tool_call>\n<function=search>\n<parameter=query>oslo news</parameter>\n"
                 "</function>\n</seed:tool_call>", None),
    ("garbled_name", "<seed:tool_call>\n<function=get_weather英文>\n<parameter=city>Oslo</parameter>\n</function>\n"
                     "</seed:tool_call>", "garbled_function_name"),
    ("undeclared_name", "<seed:tool_call>\n<function=get_forecast>\n<parameter=city>Oslo</parameter>\n</function>\n"
                        "</seed:tool_call>", "unknown_function"),
    ("stray_attribute", '<seed:tool_call>\n<function=get_weather v2="">\n<parameter=city>Oslo</parameter>\n'
                        "</function>\n</seed:tool_call>", "stray_attribute"),
    ("unclosed_parameter", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo\n"
                           "<parameter=days>3</parameter>\n</function>\n</seed:tool_call>", "unclosed_tag"),
    ("unclosed_function", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
                          "</seed:tool_call>", "unclosed_tag"),
    ("missing_wrapper_close", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
                              "</function>\nDone.", "missing_call_close"),
    ("doubled_opener", "<seed:tool_call>\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo"
                       "</parameter>\n</function>\n</seed:tool_call>", "malformed_tag"),
    ("half_closer", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter\n</function>\n"
                    "</seed:tool_call>", "malformed_tag"),
    ("two_functions_one_wrapper", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
                                  "</function>\n<function=search>\n<parameter=query>x</parameter>\n</function>\n"
                                  "</seed:tool_call>", "multiple_functions_in_call"),
    ("python_literal", "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n"
                       "<parameter=metric>True</parameter>\n</function>\n</seed:tool_call>", "type_mismatch"),
    ("minimax_syntax", '<seed:tool_call>\n<function=get_weather>\n<parameter name="city">Oslo</parameter>\n'
                       "</function>\n</seed:tool_call>", "malformed_tag"),
]

MINIMAX: list[tuple[str, str, str | None]] = [
    ("good", 'Checking.\n<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
             '<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>', None),
    ("good_two", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
                 '</invoke>\n<invoke name="search">\n<parameter name="query">oslo news</parameter>\n</invoke>\n'
                 "</minimax:tool_call>", None),
    ("garbled_name", '<minimax:tool_call>\n<invoke name="get_weather明确">\n<parameter name="city">Oslo</parameter>\n'
                     "</invoke>\n</minimax:tool_call>", "garbled_function_name"),
    ("stray_attribute", '<minimax:tool_call>\n<invoke name="get_weather" v2="">\n<parameter name="city">Oslo'
                        "</parameter>\n</invoke>\n</minimax:tool_call>", "stray_attribute"),
    ("stray_attribute_close", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo'
                              '</parameter v2="">\n</invoke>\n</minimax:tool_call>', "stray_attribute"),
    ("unclosed_parameter", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo\n'
                           '<parameter name="days">3</parameter>\n</invoke>\n</minimax:tool_call>', "unclosed_tag"),
    ("unclosed_invoke", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
                        '<invoke name="search">\n<parameter name="query">x</parameter>\n</invoke>\n'
                        "</minimax:tool_call>", "unclosed_tag"),
    ("missing_wrapper", 'Checking.\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n</invoke>\n'
                        "</minimax:tool_call>", "missing_call_open"),
    ("missing_wrapper_close", '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo'
                              "</parameter>\n</invoke>\n", "missing_call_close"),
    ("unquoted_name", '<minimax:tool_call>\n<invoke name=get_weather>\n<parameter name="city">Oslo</parameter>\n'
                      "</invoke>\n</minimax:tool_call>", "malformed_tag"),
    ("half_opener", '<minimax:tool_call>\n<invoke name="get_weather"\n<parameter name="city">Oslo</parameter>\n'
                    "</invoke>\n</minimax:tool_call>", "malformed_tag"),
]

GEMMA4: list[tuple[str, str, str | None]] = [
    ("good", f"<|tool_call>call:get_weather{{city:{Q}Oslo{Q},days:3}}<tool_call|>", None),
    ("good_bool", f"<|tool_call>call:get_weather{{city:{Q}Oslo, Norway{Q},days:3,metric:true}}<tool_call|>", None),
    ("garbled_name", f"<|tool_call>call:get_weather英文{{city:{Q}Oslo{Q}}}<tool_call|>", "garbled_function_name"),
    ("dashed_name", f"<|tool_call>call:get-weather{{city:{Q}Oslo{Q}}}<tool_call|>", "garbled_function_name"),
    ("undelimited_string", "<|tool_call>call:get_weather{city:Oslo,days:3}<tool_call|>", "invalid_json"),
    ("json_string", '<|tool_call>call:get_weather{city:"Oslo",days:3}<tool_call|>', "invalid_json"),
    ("missing_brace", f"<|tool_call>call:get_weather{{city:{Q}Oslo{Q},days:3<tool_call|>", "unclosed_tag"),
    ("missing_opener", f"I will call it.\ncall:get_weather{{city:{Q}Oslo{Q}}}<tool_call|>", "missing_call_open"),
    ("missing_closer", f"<|tool_call>call:get_weather{{city:{Q}Oslo{Q}}}", "missing_call_close"),
    ("missing_head", f"<|tool_call>get_weather{{city:{Q}Oslo{Q}}}<tool_call|>", "malformed_tag"),
    ("lookalike_opener", f"<|tool_call|>call:get_weather{{city:{Q}Oslo{Q}}}<tool_call|>", "malformed_tag"),
    ("doubled_opener", f"<|tool_call><|tool_call>call:get_weather{{city:{Q}Oslo{Q}}}<tool_call|>", "malformed_tag"),
    ("unclosed_string", f"<|tool_call>call:get_weather{{city:{Q}Oslo,days:3}}<tool_call|>", "unclosed_tag"),
]

#: the markers each family's tokenizer marks special (call-formats.md §6, verl-reward.md; Gemma 4's tokenizer.json
#: added tokens), added to a real BPE tokenizer by the tests that encode these families' texts
VERL3_SPECIALS: dict[str, list[str]] = {
    "seed": ["<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>", "</seed:tool_call>"],
    "minimax": ["]~!b[", "]~b]", "[e~[", "<minimax:tool_call>", "</minimax:tool_call>"],
    "gemma4": ["<bos>", "<|turn>", "<turn|>", "<|tool>", "<tool|>", "<|tool_call>", "<tool_call|>", "<|tool_response>",
               "<tool_response|>", '<|"|>', "<|channel>", "<channel|>"],
}

FAMILIES: dict[str, list[tuple[str, str, str | None]]] = {"seed": SEED, "minimax": MINIMAX, "gemma4": GEMMA4}

"""DeepSeek DSML call texts, good and broken, one per kind the classifier names (tests of the DSML formats and of
verl's deepseek_v4 reading). :func:`cases` gives ``{kind: (text, expected rule id or "")}`` for one version."""

from __future__ import annotations

D = "｜DSML｜"
TOOLS = [
    {"name": "get_weather", "description": "Weather for a city.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "search", "description": "Search the web.", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}, "required": ["query"]}},
]
GOOD_INVOKE = (f'<{D}invoke name="get_weather">\n<{D}parameter name="city" string="true">Beijing</{D}parameter>\n'
               f'<{D}parameter name="days" string="false">3</{D}parameter>\n</{D}invoke>')


def block(name: str, inner: str) -> str:
    return f"<{D}{name}>\n{inner}\n</{D}{name}>"


def cases(version: str) -> dict[str, tuple[str, str]]:
    """``{kind: (text, rule id the kind must give, "" for a good call)}`` for ``deepseek_v32`` or ``deepseek_v4``."""
    b = "tool_calls" if version == "deepseek_v4" else "function_calls"
    other = "function_calls" if b == "tool_calls" else "tool_calls"
    g = GOOD_INVOKE
    two = g + "\n" + g.replace("get_weather", "search").replace('name="city"', 'name="query"').replace(
        f'\n<{D}parameter name="days" string="false">3</{D}parameter>', "")
    pre = "I will look it up.\n\n"
    return {
        "good": (pre + block(b, g), ""),
        "good_two_calls": (pre + block(b, two), ""),
        "doubled_bars": (pre + block(b, g).replace(f"<{D}invoke", "<｜｜DSML｜｜invoke"), "malformed_tag/dsml_doubled_bar"),
        "ascii_bars": (pre + block(b, g).replace(f"<{D}parameter name=\"days\"", "<|DSML|parameter name=\"days\""),
                       "malformed_tag/lookalike_token"),
        "bare_invoke": (pre + g, "missing_call_open/dsml_block"),
        "no_prefix_invoke": (pre + block(b, g.replace(f'<{D}invoke name=', '<invoke name=')),
                             "malformed_tag/dsml_prefix_missing"),
        "param_as_self_closing_invoke": (pre + block(b, f'<{D}invoke name="get_weather">\n<{D}invoke name="city" '
                                                         f'string="true"/>\n</{D}invoke>'),
                                         "malformed_tag/dsml_param_as_invoke"),
        "self_closing_parameter": (pre + block(b, g.replace(f'string="false">3</{D}parameter>', 'string="false"/>')),
                                   "malformed_tag/dsml_self_closing"),
        "corrupted_invoke_closer": (pre + block(b, g.replace(f"</{D}invoke>", f"<{D}/invoke>")),
                                    "malformed_tag/dsml_closer"),
        "closer_with_attribute": (pre + block(b, g.replace(f"Beijing</{D}parameter>", f'Beijing</{D}parameter v2="">')),
                                  "stray_attribute/dsml_tag"),
        "other_version_closer": (pre + f"<{D}{b}>\n{g}\n</{D}{other}>", "malformed_tag/dsml_other_version"),
        "stray_attribute": (pre + block(b, g.replace('string="true">', 'string="true" v2="">')),
                            "stray_attribute/dsml_tag"),
        "unclosed_parameter": (pre + block(b, g.replace(f"Beijing</{D}parameter>", "Beijing")),
                               "unclosed_tag/dsml_parameter"),
        "unclosed_invoke": (pre + block(b, g.replace(f"\n</{D}invoke>", "") + "\n" + g),
                            "unclosed_tag/dsml_invoke"),
        "unclosed_block": (pre + f"<{D}{b}>\n{g}\n", "missing_call_close/dsml_block"),
        "string_false_not_json": (pre + block(b, g.replace(">3<", ">three days<")), "invalid_json/dsml_value"),
        "string_flag_missing": (pre + block(b, g.replace(' string="false"', "")), "malformed_tag/dsml_string_missing"),
        "garbled_name": (pre + block(b, g.replace("get_weather", "get_weather英文")), "garbled_function_name/mixed_script"),
        "undeclared_name": (pre + block(b, g.replace("get_weather", "get_forecast")), "unknown_function/undeclared"),
        "truncated": (pre + f"<{D}{b}>\n" + g[:60], "truncated_call/inside_function"),
    }

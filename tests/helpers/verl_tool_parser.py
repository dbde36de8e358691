"""Run verl 0.9.1's own tool parsers on texts: a script for the verl venv (tests/test_verl_parsers_in_verl.py).

``tool_parser.py`` is loaded by file path (importing ``verl.experimental.agent_loop`` pulls optional dependencies).
The parsers decode token ids with ``tokenizer.decode(ids, skip_special_tokens=False)``; the tokenizer here is a
character-level one (one id per code point), so the text the parser decodes is exactly the text given.

stdin: ``{"<verl parser name>": ["text", ...], ...}``; stdout: the same keys, each text's ``[[name, arguments],
...]`` (arguments ``json.loads``-ed from verl's ``FunctionCall.arguments``) and the content verl returns.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path


class CharTokenizer:
    """One token per code point; ``pad_token`` unset (verl strips it when set)."""

    pad_token = None

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(chr(i) for i in ids)

    def convert_tokens_to_ids(self, token: str) -> int:
        return 0x10FFFF  # (a stop-token id only; never decoded here)


def load_tool_parser():
    import verl

    path = Path(verl.__file__).parent / "experimental" / "agent_loop" / "tool_parser.py"
    spec = importlib.util.spec_from_file_location("verl_tool_parser_by_path", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def _run(req: dict) -> dict:
    mod = load_tool_parser()
    tok = CharTokenizer()
    out: dict = {}
    for name, texts in req.items():
        parser = mod.ToolParser.get_tool_parser(name, tok)
        rows = []
        for text in texts:
            content, calls = await parser.extract_tool_calls(tok.encode(text))
            rows.append({"calls": [[c.name, json.loads(c.arguments)] for c in calls], "content": content})
        out[name] = rows
    return out


def main() -> int:
    req = json.loads(sys.stdin.read())
    print(json.dumps(asyncio.run(_run(req)), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

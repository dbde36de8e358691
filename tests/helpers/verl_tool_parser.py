"""Run verl 0.9.1's own tool parsers on texts, as its agent loop does (executed by the verl venv's python; see
tests/test_verl_dsml_in_verl.py). Two ways to call it:

* ``PY verl_tool_parser.py SPEC.json OUT.json``: one parser, a real tokenizer (below);
* ``PY verl_tool_parser.py < REQUEST.json``: ``{"<verl parser name>": ["text", ...], ...}`` on stdin, each text given
  to the parser as one id per code point (so the parser decodes exactly the text), and on stdout the same keys with
  per text ``{"calls": [[name, arguments decoded], ...], "content"}``.

verl's ``tool_parser.py`` is loaded by its file path (importing ``verl.experimental.agent_loop`` pulls optional
dependencies). SPEC: {"parser": a name registered in verl's ToolParser, "tokenizer_json": a real ``tokenizer.json``,
"added_tokens": [ordinary tokens to add], "special_tokens": [special tokens to add], "eos_token", "pad_token",
"texts": [...]}. Each text is encoded with that tokenizer, the ids are given to the parser's
``extract_tool_calls``, and OUT gets per text {"decoded": the ids decoded with special tokens kept, "content",
"calls": [[name, arguments JSON text], ...]}.
"""

import asyncio
import importlib.util
import json
import os
import sys
import warnings

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")


def load_parsers():
    import verl

    path = os.path.join(os.path.dirname(verl.__file__), "experimental", "agent_loop", "tool_parser.py")
    spec = importlib.util.spec_from_file_location("verl_tool_parser_by_path", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tokenizer(spec):
    from tokenizers import AddedToken, Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer.from_file(spec["tokenizer_json"])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in spec.get("added_tokens", [])])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in spec.get("special_tokens", [])])
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=spec.get("eos_token"),
                                   pad_token=spec.get("pad_token"))


async def run(spec):
    mod = load_parsers()
    tok = tokenizer(spec)
    parser = mod.ToolParser.get_tool_parser(spec["parser"], tok)
    out = []
    for text in spec["texts"]:
        ids = tok.encode(text, add_special_tokens=False)
        content, calls = await parser.extract_tool_calls(ids, None)
        out.append({"decoded": tok.decode(ids, skip_special_tokens=False), "content": content,
                    "calls": [[c.name, c.arguments] for c in calls]})
    return out


class CodePoints:
    """A tokenizer with one id per code point and no pad token: what verl decodes is the text itself."""

    pad_token = None

    def encode(self, text, add_special_tokens=False):
        return [ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(map(chr, ids))

    def convert_tokens_to_ids(self, token):
        return 0x10FFFF  # (only asked for stop-token ids, which are never decoded here)


async def run_request(req):
    mod = load_parsers()
    tok = CodePoints()
    out = {}
    for name, texts in req.items():
        parser = mod.ToolParser.get_tool_parser(name, tok)
        rows = []
        for text in texts:
            content, calls = await parser.extract_tool_calls(tok.encode(text))
            rows.append({"calls": [[c.name, json.loads(c.arguments)] for c in calls], "content": content})
        out[name] = rows
    return out


def main():
    if len(sys.argv) < 3:
        print(json.dumps(asyncio.run(run_request(json.loads(sys.stdin.read()))), ensure_ascii=False))
        return
    spec = json.load(open(sys.argv[1], encoding="utf-8"))
    res = asyncio.run(run(spec))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump({"results": res}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

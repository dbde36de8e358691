"""Run one of verl 0.9.1's own tool parsers on texts, as its agent loop does (executed by the verl venv's python; see
tests/test_verl_dsml_in_verl.py). Usage: PY verl_tool_parser.py SPEC.json OUT.json

verl's ``tool_parser.py`` is loaded by its file path (importing ``verl.experimental.agent_loop`` pulls optional
dependencies). SPEC: {"parser": a name registered in verl's ToolParser, "tokenizer_json": a real ``tokenizer.json``,
"added_tokens": [ordinary tokens to add], "special_tokens": [special tokens to add], "eos_token", "pad_token",
"texts": [...]}. Each text is encoded with that tokenizer, the ids are given to the parser's
``extract_tool_calls``, and OUT gets per text {"decoded": the ids decoded with special tokens kept, "content",
"calls": [[name, arguments JSON text], ...]}. SPEC may also be a list of such specs (one verl start for several
parsers): OUT's "results" is then the list of their results.
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


async def run_all(specs):
    return [await run(s) for s in specs]


def main():
    spec = json.load(open(sys.argv[1], encoding="utf-8"))
    res = asyncio.run(run_all(spec) if isinstance(spec, list) else run(spec))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump({"results": res}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

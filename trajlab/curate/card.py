"""The pool's ``README.md`` dataset card and ``manifest.json`` (no timestamps: same input, same bytes)."""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path
from typing import Any

from trajlab import __version__
from trajlab.atomic import atomic_write_bytes, atomic_write_json
from trajlab.curate.options import DEFAULT_OOD_PROMPTS, DEFAULT_PER_GROUP, DEFAULT_VAL_FRACTION, PoolOptions
from trajlab.curate.samples import KINDS
from trajlab.tables import SCHEMA_VERSION


def _prompts(n: int, what: str) -> str:
    return f"{n} {what} prompt{'s' if n != 1 else ''}"


def val_prompts_line(info: dict[str, Any]) -> str:
    """The validation prompts, said as they are: none held out, or held out but with no sample in ``val.parquet``."""
    n = info["split"]["val_prompts"]
    samples = sum(k.get("val", 0) for k in info["kinds"].values())
    if n and not samples:
        return f"{_prompts(n, 'held-out')}, but none of the selected samples is from them: `val.parquet` is empty"
    return _prompts(n, "validation") if n else "no validation prompts (`val.parquet` is empty)"


KIND_TITLES = {"positive": "positive", "error_demo": "error demonstration", "hint": "hint"}


def command_line(scan_dir: str, pool_dir: str, opts: PoolOptions) -> str:
    """The ``trajlab build-sft-pool`` command that reproduces the pool (non-default options only)."""
    args = ["trajlab", "build-sft-pool", scan_dir, "-o", pool_dir]
    if opts.rollout_n:
        args += ["--rollout-n", str(opts.rollout_n)]
    if opts.ratio_text != "5:3:2":
        args += ["--ratio", opts.ratio_text]
    rule = opts.score_rule
    if rule.mode == "threshold":
        args += ["--min-score", f"{rule.threshold:g}"]
    elif rule.mode == "any":
        args += ["--min-score", "any"]
    if opts.per_group != DEFAULT_PER_GROUP:
        args += ["--per-group", str(opts.per_group)]
    if opts.tokenizer:
        args += ["--tokenizer", opts.tokenizer]
    if opts.max_tokens is not None:
        args += ["--max-tokens", str(opts.max_tokens)]
    if opts.val_fraction != DEFAULT_VAL_FRACTION:
        args += ["--val-fraction", f"{opts.val_fraction:g}"]
    if opts.max_samples is not None:
        args += ["--max-samples", str(opts.max_samples)]
    if opts.style != "messages":
        args += ["--style", opts.style]
    if opts.ood_eval:
        args += ["--ood-eval"]
        if opts.ood_prompts != DEFAULT_OOD_PROMPTS:
            args += ["--ood-prompts", str(opts.ood_prompts)]
    if opts.seed != 0:
        args += ["--seed", str(opts.seed)]
    for d in opts.rules_dirs:
        args += ["--rules", d]
    if tuple(opts.source_splits) != ("train",):
        for s in opts.source_splits:
            args += ["--source-split", s]
    return shlex.join(args)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _steps(steps: list[int]) -> str:
    if not steps:
        return "unknown"
    return f"{min(steps)}–{max(steps)} ({len(set(steps))} distinct steps)"


def write_card(pool: Path, info: dict[str, Any]) -> Path:
    """Write ``README.md`` from the summary ``info`` (the same dict as ``manifest.json``'s body)."""
    style = info["options"]["style"]
    lines = [
        "# SFT pool built by trajlab",
        "",
        f"Made from the scan `{info['scan_dir']}` with:",
        "",
        "```",
        info["command"],
        "```",
        "",
        f"trajlab {__version__} · style `{style}` · seed {info['options']['seed']} · "
        f"requested ratio positive:error:hint = {info['ratio']['requested']} · "
        f"achieved {info['ratio']['achieved']}",
        "",
        *[f"> **Prompt groups:** {g['message']}\n" for g in info.get("grouping") or []],
        "## Files",
        "",
        _table(
            ["file", "rows", "what"],
            [[f"`{f['path']}`", f["rows"], f["what"]] for f in info["files"]],
        ),
        "",
        "## Counts per kind",
        "",
        _table(
            ["kind", "candidates", "in the mix", "train", "val", "steps covered"],
            [
                [
                    KIND_TITLES[k],
                    info["kinds"][k]["candidates"],
                    info["kinds"][k]["selected"],
                    info["kinds"][k]["train"],
                    info["kinds"][k]["val"],
                    _steps(info["kinds"][k]["steps"]),
                ]
                for k in KINDS
            ],
        ),
        "",
    ]
    if info.get("shortfall"):
        lines += [f"**Mix note:** {info['shortfall']}", ""]
    cats = info.get("categories") or {}
    if cats:
        lines += [
            "## Categories (in the mix)",
            "",
            _table(
                ["category", "error demonstrations", "hints"],
                [[c, v.get("error_demo", 0), v.get("hint", 0)] for c, v in sorted(cats.items())],
            ),
            "",
        ]
    lines += [
        "## How the samples were chosen",
        "",
        f"- **positive**: trajectories from the `{', '.join(info['options']['source_splits'])}` dumps with no "
        f"error/warning finding, a final answer, not truncated, and {info['score_rule']}; duplicates dropped "
        f"(whitespace-normalised text hash), at most {info['options']['per_group']} per prompt group.",
        "- **error_demo**: the trajectory up to a malformed call that has a confident repair, then a "
        f"`{info['feedback_role']}` message quoting the broken call and explaining it, then the corrected call "
        "as the only new assistant message. The broken text is never in an assistant message; every target "
        "re-parses as one well-formed call with zero findings.",
        "- **hint**: a positive trajectory of a prompt group that also had malformed or low-scoring rollouts, "
        "with a hint for the category the group got wrong appended to its system prompt.",
        f"- **split**: by prompt (hash of the prompt text), validation fraction {info['options']['val_fraction']:g}; "
        f"{_prompts(info['split']['train_prompts'], 'train')}, {val_prompts_line(info)}.",
        *([f"- **tool-less prompts**: {n} hint sample(s) come from prompts that declare no tools; their hint is "
           "about the answer's structure (e.g. the <think>/<answer> layout), never a tool-call template."]
          if (n := info["kinds"]["hint"]["dropped"].get("tool_less", 0)) else []),
        "",
        "## Training with verl",
        "",
    ]
    if style == "messages":
        lines += [
            "```",
            "torchrun -m verl.trainer.sft_trainer data.train_files=train.parquet data.val_files=val.parquet \\",
            "  data.messages_key=messages data.ignore_input_ids_mismatch=True data.max_length=<tokens> ...",
            "```",
            "",
            "`data.ignore_input_ids_mismatch=True` is needed with Qwen3-family templates: verl renders each "
            "message alone and the whole-conversation rendering adds an empty think block to the last turn. "
            "With Qwen3's template verl never trains a `<think>` block inside assistant content (only what "
            "follows `</think>`); tool calls and answers are trained verbatim. There is no `tools` column: the "
            "system message already holds the tool block the model saw.",
        ]
    elif style == "prompt-response":
        lines += [
            "One row per assistant message: `prompt` (chat list) / `response` (string), for "
            "`data.prompt_key=prompt data.response_key=response`.",
        ]
    else:
        lines += [
            "`messages` carry structured `tool_calls` (`arguments` as JSON strings) and `tools` is a JSON "
            "string of OpenAI tool schemas; for trainers that render tool calls themselves. The system "
            "message keeps the prompt's own tool block.",
        ]
    lines += [""]
    ood = info.get("ood")
    if ood:
        lines += [
            "## Format-OOD evaluation set",
            "",
            f"`ood_eval.parquet`: {ood['rows']} rows from {ood['prompts']} held-back (validation) prompts, "
            "variants `renamed` (tools renamed), `reformatted` (the other call format) and "
            "`renamed+reformatted`. Use it after training to measure format generalisation.",
            "",
        ]
    data = ("\n".join(lines).rstrip() + "\n").encode("utf-8")
    path = pool / "README.md"
    atomic_write_bytes(path, data)
    return path


def write_manifest(pool: Path, info: dict[str, Any]) -> Path:
    from trajlab.ownfiles import marked_json

    body = marked_json("sft pool manifest", {"trajlab_version": __version__, "schema_version": SCHEMA_VERSION, **info})
    path = pool / "manifest.json"
    atomic_write_json(path, body)
    return path

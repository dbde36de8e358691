"""NeMo-RL GRPO train-data dumps: ``train_data_step{N}.jsonl``, one JSON line per micro-batch row.

Every key holds one entry per sample of the row: ``token_ids`` (prompt, generations and environment in one
sequence, padded), ``token_loss_mask`` (1 where the policy generated), ``generation_logprobs`` (the inference
engine's log-prob of each sampled token, 0.0 elsewhere), ``prev_logprobs`` (the trainer's), ``input_lengths``
(the unpadded length), ``rewards``, ``advantages`` (per token), ``sample_loss_mask``, and ``content`` (the text
segments; it may lack special tokens the model generated, so the ids are the truth). ``idx`` numbers the row.

One trajectory per sample. The prompt is every token before the first generated one; after it, each run of
generated tokens is an ``assistant`` turn and each run of the others a ``tool`` turn (the environment's reply
with its chat scaffolding), decoded from the ids with special tokens kept (:mod:`trajlab.ingest.token_text`).
The exact tokens travel with the record (:class:`~trajlab.model.ExactTokens`) into ``rollout_tokens``.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from trajlab.errors import TrajlabError
from trajlab.families.chatml import strip_specials
from trajlab.ingest import token_text
from trajlab.ingest.fields import coerce_float, finite_float, prompt_hash
from trajlab.ingest.token_turns import decode_turns
from trajlab.model import ExactTokens, IngestError, RawTrajectory

FORMAT = "nemo_rl_jsonl"
#: the keys that mark a NeMo-RL train-data line (every one is present in its writer's output)
REQUIRED_KEYS = ("token_ids", "token_loss_mask")
SIGNATURE_KEYS = ("token_ids", "token_loss_mask", "input_lengths")
MAPPED_KEYS = ("content", "rewards", "input_lengths", "token_ids", "token_loss_mask", "sample_loss_mask",
               "advantages", "generation_logprobs", "prev_logprobs", "idx")
_NAME = re.compile(r"(?:^|[_-])(train|val|validation)_data_step_?(\d{1,18})\.jsonl$")


def looks_like(obj: Any) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in SIGNATURE_KEYS) and isinstance(obj.get("token_ids"), list)


def accepts(obj: Any) -> bool:
    """Per-record check (looser than detection): a line missing a key gets a precise message."""
    return isinstance(obj, dict) and any(k in obj for k in REQUIRED_KEYS)


def step_and_split(source_path: str) -> tuple[int | None, str | None]:
    """Step and split from NeMo-RL's file name ``train_data_step{N}.jsonl`` (``val_data_step{N}``: val)."""
    m = _NAME.search(PurePosixPath(source_path).name)
    if not m:
        return None, None
    return int(m.group(2)), ("train" if m.group(1) == "train" else "val")


def _per_sample(obj: dict[str, Any], key: str, n: int) -> list[Any] | None:
    v = obj.get(key)
    return v if isinstance(v, list) and len(v) == n else None


def _floats(v: Any, n: int) -> list[float | None] | None:
    """A per-token float list of length ``n`` (non-finite values as None), or None when it is not one."""
    if not isinstance(v, list) or len(v) < n:
        return None
    out: list[float | None] = []
    for x in v[:n]:
        out.append(finite_float(x))
    return out



def to_trajectories(
    obj: dict[str, Any], *, source_path: str, line: int, file_step: int | None, file_split: str | None,
    tokenizer: str | None = None,
) -> tuple[list[RawTrajectory], list[IngestError]]:
    """Convert one dump line into one record per sample; returns the records and notes for ``ingest_errors``
    (a sample that cannot be read costs that sample only)."""
    ids_all = obj.get("token_ids")
    if not isinstance(ids_all, list) or not ids_all:
        return [], [IngestError(source_path, line, "field 'token_ids' is missing or empty; record skipped")]
    if not any(isinstance(x, list) for x in ids_all):  # one sample written without the per-sample list
        obj = {k: [v] for k, v in obj.items()}
        ids_all = obj["token_ids"]
    n = len(ids_all)
    name_step, name_split = step_and_split(source_path)
    step = file_step if file_step is not None else name_step
    split = file_split or name_split or "train"
    recs: list[RawTrajectory] = []
    notes: list[IngestError] = []
    for i in range(n):
        try:
            rec, why = _sample(obj, i, n, source_path=source_path, line=line, step=step, split=split,
                               tokenizer=tokenizer)
        except TrajlabError as e:
            hint = f" ({e.hint})" if e.hint else ""
            rec, why = None, [("error", f"sample {i}: {e.args[0] if e.args else e}{hint}; sample skipped")]
        notes += [IngestError(source_path, line, w, sev) for sev, w in why]
        if rec is not None:
            recs.append(rec)
    return recs, notes


def _sample(obj: dict[str, Any], i: int, n: int, *, source_path: str, line: int, step: int | None, split: str,
            tokenizer: str | None) -> tuple[RawTrajectory | None, list[tuple[str, str]]]:
    why: list[tuple[str, str]] = []  # (severity, text): "note" where nothing is lost, "error" where something is
    ids = obj["token_ids"][i]
    if not isinstance(ids, list) or not ids:
        return None, [("error", f"sample {i}: no token ids; sample skipped")]
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        return None, [("error", f"sample {i}: 'token_ids' holds values that are not integers; sample skipped")]
    lengths = _per_sample(obj, "input_lengths", n)
    length = lengths[i] if lengths is not None else None
    if not isinstance(length, int) or isinstance(length, bool) or not 0 < length <= len(ids):
        if length is not None:
            why.append(("note", f"sample {i}: input_lengths {length!r} does not fit its {len(ids)} token ids; "
                                f"all ids used"))
        length = len(ids)
    ids = ids[:length]
    masks = _per_sample(obj, "token_loss_mask", n)
    mask_raw = masks[i] if masks is not None else None
    if not isinstance(mask_raw, list) or len(mask_raw) < length:
        return None, [("error", f"sample {i}: 'token_loss_mask' is missing or shorter than the sample; "
                                f"sample skipped")]
    if not all(isinstance(x, (int, float)) for x in mask_raw[:length]):  # (bool is an int)
        return None, [("error", f"sample {i}: 'token_loss_mask' holds values that are not numbers; sample skipped")]
    mask = [bool(x) for x in mask_raw[:length]]
    gen_lp = _per_sample(obj, "generation_logprobs", n)
    train_lp = _per_sample(obj, "prev_logprobs", n)
    lp = _floats(gen_lp[i], length) if gen_lp is not None else None
    tlp = _floats(train_lp[i], length) if train_lp is not None else None
    if gen_lp is not None and lp is None:
        why.append(("error", f"sample {i}: 'generation_logprobs' does not fit the sample; inference log-probs "
                             f"left null"))
    logprob = [(lp[k] if lp is not None and mask[k] else None) for k in range(length)]
    train_logprob = [(tlp[k] if tlp is not None and k > 0 else None) for k in range(length)]

    contents = _per_sample(obj, "content", n)
    content = contents[i] if contents is not None else None
    logged_text = "".join(c for c in content if isinstance(c, str)) if isinstance(content, list) else None
    first_gen = next((k for k, m in enumerate(mask) if m), length)
    # the logged text may lack generated special tokens: only the prompt (never generated) must match it
    prompt_text = content[0] if isinstance(content, list) and content and isinstance(content[0], str) else None
    if first_gen < length:  # check against the prompt's logged text (never generated, so complete)
        tok, tok_name, pick_note = token_text.pick(tokenizer, ids[:first_gen] if prompt_text is not None else ids,
                                                   prompt_text)
    else:
        tok, tok_name, pick_note = token_text.pick(tokenizer, ids, logged_text)
    if pick_note:
        why.append(("note", f"sample {i}: {pick_note}"))
    if not token_text.fits(tok, ids):
        return None, [*why, ("error", f"sample {i}: token ids outside the vocabulary of the tokenizer {tok_name} "
                                      f"({len(tok)} tokens); sample skipped")]
    if first_gen == length:
        why.append(("note", f"sample {i}: no generated token (the loss mask is all zero); kept with an empty output"))
    cut = decode_turns(tok, ids, mask)
    inp, output, turns, turn_of = cut.input, cut.output, cut.turns, cut.turn_of
    if logged_text is not None:
        decoded, logged = strip_specials(inp + output), strip_specials(logged_text)
        if decoded != logged:  # (generated special tokens the log lacks are expected; other text is not)
            why.append(("note", f"sample {i}: the logged 'content' differs from the decoded ids "
                                f"({_diff_note(decoded, logged)}); the ids are used"))

    rewards = _per_sample(obj, "rewards", n)
    score, note = coerce_float(rewards[i] if rewards is not None else None, "rewards")
    if note:
        why.append(("error", f"sample {i}: {note}"))
    advs = _per_sample(obj, "advantages", n)
    adv_row = _floats(advs[i], length) if advs is not None else None
    advantage = next((adv_row[k] for k in range(length) if mask[k]), None) if adv_row else None
    slm = _per_sample(obj, "sample_loss_mask", n)
    extra: dict[str, Any] = {
        "idx": obj.get("idx"),
        "sample": i,
        "advantage": advantage,
        "sample_loss_mask": slm[i] if slm is not None else None,
        "input_length": length,
        "generated_tokens": sum(mask),
        "tokenizer": tok_name,
    }
    for key, v in obj.items():  # keys NeMo-RL may add: the sample's entry when per sample, else the value
        if key not in MAPPED_KEYS:
            extra[key] = v[i] if isinstance(v, list) and len(v) == n else v
    rec = RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=split,
        step=step,
        group_id="p:" + prompt_hash(inp),
        score=score,
        input=inp,
        output=output,
        turns=turns,
        tools=None,
        tools_source=None,
        extra=extra,
        sample=i,
        tokens=ExactTokens(list(ids), mask, logprob, train_logprob, turn_of, token_text.token_strings(tok, ids),
                           tok_name),
    )
    return rec, why


def _diff_note(decoded: str, logged: str) -> str:
    k = next((j for j, (a, b) in enumerate(zip(decoded, logged, strict=False)) if a != b), min(len(decoded), len(logged)))
    return f"first difference at character {k}: decoded {decoded[k:k + 20]!r}, logged {logged[k:k + 20]!r}"

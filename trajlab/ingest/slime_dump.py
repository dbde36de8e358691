"""slime rollout dumps: ``--dump-details DIR`` writes ``DIR/rollout_data/{rollout_id}.pt`` (and ``eval_{id}.pt``
for evaluations), ``torch.save({"rollout_id": N, "samples": [Sample.to_dict(), ...]})``.

Each sample dict carries ``tokens`` (prompt and response ids in one sequence), ``response_length`` (the last that
many ids are the response), ``loss_mask`` (one entry per response token: 1 where the policy generated, 0 for the
environment's tokens of a multi-turn rollout), ``rollout_log_probs`` (the inference engine's log-prob of each
response token), ``reward`` (a number, or a dict of them), ``status`` (``completed``, ``truncated``, ``aborted``,
``failed``), ``group_index`` / ``index``, ``prompt``, ``response``, ``label`` and ``metadata``. One trajectory per
sample, its turns cut by the loss mask and decoded from the ids with special tokens kept, as for NeMo-RL
(:mod:`trajlab.ingest.token_turns`); the exact tokens travel with it into ``rollout_tokens``.

Files are loaded with ``torch.load(weights_only=True)``: a file that needs more than plain containers, numbers,
strings and tensors (a pickle that would import or run code) is refused with one line, never unpickled. slime's
train-side dump (``train_data/{id}.pt``, ``format_version`` 2) repeats the rollout samples re-packed for the
trainer; it is recognised and left out (read ``rollout_data/``). Reading needs torch (the ``rescore`` extra).
"""

from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from trajlab.errors import TrajlabError
from trajlab.ingest import token_text
from trajlab.ingest.fields import coerce_float, prompt_hash
from trajlab.ingest.token_turns import decode_turns
from trajlab.model import ExactTokens, IngestError, RawTrajectory

FORMAT = "slime_pt"
#: slime's dump file names: ``{rollout_id}.pt`` and ``eval_{rollout_id}.pt``
NAME = re.compile(r"(eval_)?(\d{1,18})\.pt")
MAPPED_KEYS = ("tokens", "response_length", "loss_mask", "rollout_log_probs", "reward", "status", "prompt",
               "response", "group_index", "index")
#: keys of a sample dict that slime's ``Sample.to_dict`` always writes; two of them mark a sample
SAMPLE_KEYS = ("tokens", "response_length")
#: per-token side channels left out of ``extra`` (large, and about tokens the table does not hold)
_TOKEN_SIDE_KEYS = ("rollout_top_p_token_ids", "rollout_top_p_token_offsets", "rollout_routed_experts",
                    "teacher_log_probs", "multimodal_train_inputs")


def is_dump_name(name: str) -> bool:
    """Whether a file name is one slime gives its dumps (``12.pt``, ``eval_12.pt``)."""
    return NAME.fullmatch(name) is not None


def step_and_split(source_path: str) -> tuple[int | None, str]:
    """The rollout id (trajlab's step) and split of a dump from its name (``eval_`` prefix: val)."""
    m = NAME.fullmatch(PurePosixPath(source_path).name)
    if not m:
        return None, "train"
    return int(m.group(2)), ("val" if m.group(1) else "train")


def sniff(path: Path) -> tuple[str | None, str]:
    """Whether ``path`` is a slime rollout dump, judged without unpickling anything: the keys of slime's sample
    dict in the head of the archive's pickle. ``(FORMAT, "")``, or ``(None, why not)``."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
            if not names:
                return None, "a .pt file without a torch pickle (data.pkl) in it"
            with zf.open(names[0]) as f:
                head = f.read(1 << 20)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        return None, f"not a torch zip archive ({type(e).__name__}); slime dumps are torch.save files"
    if b"format_version" in head and b"samples" in head and b"response_length" not in head[:4096]:
        return None, ("slime train-side dump (train_data/, format_version): the same samples as "
                      "rollout_data/{id}.pt, re-packed for the trainer; read rollout_data/")
    if b"samples" in head and all(k.encode() in head for k in SAMPLE_KEYS):
        return FORMAT, ""
    return None, "a torch .pt file that is not a slime rollout dump (no 'samples' with 'tokens'/'response_length')"


def load_samples(path: Path) -> tuple[list[Any] | None, int | None, str | None]:
    """``(samples, rollout_id, None)`` from a dump, or ``(None, None, reason)`` when it cannot be read safely."""
    try:
        import torch
    except ImportError:
        return None, None, ("reading slime .pt dumps needs torch: pip install torch==2.13.0 "
                            "(or the 'rescore' extra)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # weights_only refuses any global it does not allow: UnpicklingError and friends
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        return None, None, (f"refused: the file needs more than torch.load(weights_only=True) allows, so it was "
                            f"not unpickled ({type(e).__name__}: {first})")
    if not isinstance(obj, dict) or not isinstance(obj.get("samples"), list):
        return None, None, "not a slime rollout dump: expected a dict with a 'samples' list"
    rid = obj.get("rollout_id")
    return obj["samples"], (rid if isinstance(rid, int) and not isinstance(rid, bool) else None), None


def looks_like(obj: Any) -> bool:
    """One sample dict of a slime dump."""
    return isinstance(obj, dict) and all(k in obj for k in SAMPLE_KEYS)


def accepts(obj: Any) -> bool:
    return isinstance(obj, dict) and any(k in obj for k in SAMPLE_KEYS)


def _plain(v: Any) -> Any:
    """Tensors as lists (numbers), so a sample's values are plain data."""
    if hasattr(v, "tolist") and callable(v.tolist):
        try:
            return v.tolist()
        except Exception:
            return None
    return v


def _ints(v: Any) -> list[int] | None:
    v = _plain(v)
    if not isinstance(v, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in v):
        return None
    return v


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    try:
        f = float(x)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _reward(v: Any) -> tuple[float | None, str | None]:
    """The sample's score: the reward, or from a reward dict its ``score`` / ``reward`` / ``acc`` entry."""
    v = _plain(v)
    if isinstance(v, dict):
        for key in ("score", "reward", "acc"):
            if key in v:
                return coerce_float(v[key], f"reward.{key}")
        return None, "reward is a dict without a 'score', 'reward' or 'acc' entry; score is null (kept in extra)"
    return coerce_float(v, "reward")


def to_trajectories(
    obj: dict[str, Any], *, source_path: str, line: int, file_step: int | None, file_split: str | None,
    tokenizer: str | None = None,
) -> tuple[list[RawTrajectory], list[IngestError]]:
    """Convert one sample dict (``line``: its 1-based index in ``samples``) into a trajectory."""
    def fail(why: str) -> tuple[list[RawTrajectory], list[IngestError]]:
        return [], [IngestError(source_path, line, f"sample {line}: {why}; sample skipped")]

    ids = _ints(obj.get("tokens"))
    if not ids:
        return fail("'tokens' is missing, empty or not a list of integers")
    rlen = obj.get("response_length")
    if isinstance(rlen, bool) or not isinstance(rlen, int) or not 0 <= rlen <= len(ids):
        return fail(f"response_length {rlen!r} does not fit its {len(ids)} token ids")
    n_prompt = len(ids) - rlen
    notes: list[str] = []
    mask_raw = _plain(obj.get("loss_mask"))
    if mask_raw is None:
        resp_mask = [True] * rlen
        notes.append("no loss_mask: every response token counted as generated")
    elif not isinstance(mask_raw, list) or not all(isinstance(x, (int, float)) for x in mask_raw):
        return fail("'loss_mask' is not a list of numbers")
    elif len(mask_raw) != rlen:
        return fail(f"loss_mask has {len(mask_raw)} entries for {rlen} response tokens")
    else:
        resp_mask = [bool(x) for x in mask_raw]
    mask = [False] * n_prompt + resp_mask
    lp_raw = _plain(obj.get("rollout_log_probs"))
    resp_lp: list[float | None] = [None] * rlen
    if isinstance(lp_raw, list) and len(lp_raw) == rlen:
        resp_lp = [(_finite(x) if m else None) for x, m in zip(lp_raw, resp_mask, strict=True)]
    elif lp_raw is not None:
        notes.append(f"rollout_log_probs has {len(lp_raw) if isinstance(lp_raw, list) else type(lp_raw).__name__} "
                     f"entries for {rlen} response tokens; log-probs left null")
    logprob = [None] * n_prompt + resp_lp

    prompt = obj.get("prompt")
    prompt_text = prompt if isinstance(prompt, str) and prompt else None
    try:
        tok, tok_name, pick_note = token_text.pick(tokenizer, ids[:n_prompt] if prompt_text else ids, prompt_text)
    except TrajlabError as e:
        hint = f" ({e.hint})" if e.hint else ""
        return fail(f"{e.args[0] if e.args else e}{hint}")
    if pick_note:
        notes.append(pick_note)
    if not token_text.fits(tok, ids):
        return fail(f"token ids outside the vocabulary of the tokenizer {tok_name} ({len(tok)} tokens)")
    cut = decode_turns(tok, ids, mask)

    name_step, name_split = step_and_split(source_path)
    step = file_step if file_step is not None else name_step
    split = file_split or name_split
    score, note = _reward(obj.get("reward"))
    if note:
        notes.append(note)
    status = obj.get("status")
    group = obj.get("group_index")
    group_id = (f"slime:{group}" if isinstance(group, int) and not isinstance(group, bool)
                else "p:" + prompt_hash(cut.input))
    extra: dict[str, Any] = {
        "status": status if isinstance(status, str) else None,
        "index": obj.get("index"),
        "group_index": group,
        "response_length": rlen,
        "input_length": n_prompt,
        "generated_tokens": sum(resp_mask),
        "tokenizer": tok_name,
    }
    if isinstance(obj.get("reward"), dict):
        extra["reward"] = _plain(obj["reward"])
    for key, v in obj.items():
        if key not in MAPPED_KEYS and key not in extra and key not in _TOKEN_SIDE_KEYS:
            extra[key] = _plain(v)
    rec = RawTrajectory(
        source_path=source_path,
        source_line=line,
        source_format=FORMAT,
        split=split,
        step=step,
        group_id=group_id,
        score=score,
        input=cut.input,
        output=cut.output,
        turns=cut.turns,
        tools=None,
        tools_source=None,
        extra=extra,
        uid=None,
        tokens=ExactTokens(list(ids), mask, logprob, [None] * len(ids), cut.turn_of,
                           token_text.token_strings(tok, ids), tok_name),
    )
    return [rec], [IngestError(source_path, line, f"sample {line}: {w}") for w in notes]

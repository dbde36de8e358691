"""Teacher-forced scoring of token streams through a causal LM, without a ``[sequence x vocabulary]`` tensor.

For each length-sorted batch the transformer body runs once for hidden states. Only the hidden states that
predict a scored token are kept (position ``p`` is predicted by the state at ``p - 1``), and the LM head runs
over them in chunks of ``chunk`` rows. Each chunk of logits yields, in one exp pass:

* ``logprob``: log-probability of the logged token (logit minus logsumexp),
* ``entropy`` of the next-token distribution (``log Z - sum(p * shifted logit)``),
* the top-1 token and its probability,
* the probability of every control token (the union over formats; masks pick each trajectory's set),
* the log-probability of extra requested tokens (the well-formed alternative at a malformation),
* optionally (``mass_groups > 0``), the probability of *every* vocabulary token summed over the positions of each
  group (``ScoreRequest.groups``): a ``[groups x vocabulary]`` running sum, one small matrix product per chunk,
  read with :meth:`ChunkedScorer.take_mass` (how discovered tokens are found without a ``[seq x vocab]`` tensor).

Peak memory beyond the model is about two ``chunk x vocabulary`` fp32 buffers plus the hidden states of one
batch, whatever the sequence length. Logits are computed in the model dtype (bf16 on GPU) and reduced in fp32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class ScoreRequest:
    """One sequence to score: token ids, the positions to score, and the format row of the control masks."""

    ids: np.ndarray  # int64 [T]
    positions: np.ndarray  # int64 [N], each >= 1
    format_index: int = 0
    extra: list[tuple[int, int]] = field(default_factory=list)  # (index into positions, token id)
    groups: np.ndarray | None = None  # int [N]: mass group of each scored position (-1: none)


@dataclass
class ScoreResult:
    """Per scored position statistics (arrays of length N)."""

    logprob: np.ndarray
    entropy: np.ndarray
    top_id: np.ndarray
    top_prob: np.ndarray
    control_probs: np.ndarray  # [N, K] probability of each control id (union)
    control_mass: np.ndarray  # mass on this sequence's format set
    top_control: np.ndarray  # index into the union (-1 when the set is empty)
    top_control_prob: np.ndarray
    extra_logprob: np.ndarray  # [len(extra)]


def plan_batches(lengths: Sequence[int], max_batch_tokens: int) -> list[list[int]]:
    """Group sequence indices into batches, longest first, with ``batch_size * longest <= max_batch_tokens``.

    A sequence longer than ``max_batch_tokens`` gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        n = lengths[i]
        new_longest = max(longest, n)
        if cur and new_longest * (len(cur) + 1) > max_batch_tokens:
            batches.append(cur)
            cur, new_longest = [], n
        cur.append(i)
        longest = new_longest
    if cur:
        batches.append(cur)
    return batches


def _decoder(model: Any) -> Any:
    get = getattr(model, "get_decoder", None)
    if callable(get):
        dec = get()
        if dec is not None and dec is not model:
            return dec
    base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    if base is None or base is model:
        raise TypeError(f"{type(model).__name__}: cannot find the transformer body (get_decoder/base model)")
    return base


def _softcap(model: Any) -> float | None:
    cfg = getattr(model, "config", None)
    cap = getattr(cfg, "final_logit_softcapping", None) if cfg is not None else None
    if cap is None and cfg is not None and hasattr(cfg, "get_text_config"):
        cap = getattr(cfg.get_text_config(), "final_logit_softcapping", None)
    return float(cap) if cap else None


class ChunkedScorer:
    """Scores :class:`ScoreRequest` batches with a loaded causal LM (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        control_ids: Sequence[int],
        format_masks: Sequence[Sequence[bool]],
        *,
        chunk: int = 256,
        max_batch_tokens: int = 16384,
        device: Any = None,
        mass_groups: int = 0,
    ) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.body = _decoder(model)
        self.head = model.get_output_embeddings()
        if self.head is None:
            raise TypeError(f"{type(model).__name__} has no output embeddings (LM head)")
        self.softcap = _softcap(model)
        self.chunk = max(1, int(chunk))
        self.max_batch_tokens = max(1, int(max_batch_tokens))
        if device is None:  # e.g. a device_map model: inputs go where the embeddings are
            device = model.get_input_embeddings().weight.device
        self.device = torch.device(device)
        self.head_device = self.head.weight.device
        self.control_ids = torch.tensor(list(control_ids), dtype=torch.long, device=self.head_device)
        masks = torch.tensor([list(m) for m in format_masks] or [[]], dtype=torch.bool)
        if masks.numel() == 0:
            masks = torch.zeros((max(1, len(format_masks)), len(control_ids)), dtype=torch.bool)
        self.format_masks = masks.to(self.head_device)
        self._bufs: tuple[Any, Any] | None = None
        self.mass_groups = max(0, int(mass_groups))
        self._mass: Any = None

    def take_mass(self) -> np.ndarray:
        """``[mass_groups, V]`` float64: summed next-token probabilities per group since the last call."""
        V = int(self.head.weight.shape[0])
        m = self._mass
        self._mass = None
        if m is None:
            return np.zeros((self.mass_groups, V), np.float64)
        return m.cpu().numpy().astype(np.float64)

    # ------------------------------------------------------------------------------------------ batches
    def score(
        self, requests: Sequence[ScoreRequest], progress: Callable[[int], None] | None = None
    ) -> list[ScoreResult]:
        """Score every request; ``progress(n)`` is called with the number of scored tokens per batch."""
        results: list[ScoreResult | None] = [None] * len(requests)
        lengths = [int(r.ids.shape[0]) for r in requests]
        for batch in plan_batches(lengths, self.max_batch_tokens):
            for i, res in zip(batch, self._score_batch([requests[i] for i in batch]), strict=True):
                results[i] = res
            if progress is not None:
                progress(sum(int(requests[i].positions.shape[0]) for i in batch))
        return results  # type: ignore[return-value]

    def hidden_states(self, reqs: Sequence[ScoreRequest]) -> Any:
        """Hidden states ``[N_total, H]`` that predict the scored positions of ``reqs`` (in request order)."""
        torch = self.torch
        L = max(int(r.ids.shape[0]) for r in reqs)
        B = len(reqs)
        ids = torch.zeros((B, L), dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        rows, cols = [], []
        for b, r in enumerate(reqs):
            n = int(r.ids.shape[0])
            ids[b, :n] = torch.from_numpy(np.ascontiguousarray(r.ids, dtype=np.int64))
            mask[b, :n] = 1
            rows.append(np.full(r.positions.shape[0], b, dtype=np.int64))
            cols.append(np.asarray(r.positions, dtype=np.int64) - 1)
        kwargs: dict[str, Any] = {"input_ids": ids.to(self.device), "use_cache": False}
        if B > 1 and int(mask.sum()) != B * L:
            kwargs["attention_mask"] = mask.to(self.device)
        out = self.body(**kwargs)
        h = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        r_idx = torch.from_numpy(np.concatenate(rows)).to(h.device)
        c_idx = torch.from_numpy(np.concatenate(cols)).to(h.device)
        sel = h[r_idx, c_idx]
        del out, h
        return sel

    def _score_batch(self, reqs: Sequence[ScoreRequest]) -> list[ScoreResult]:
        torch = self.torch
        with torch.inference_mode():
            counts = [int(r.positions.shape[0]) for r in reqs]
            total = sum(counts)
            if total == 0:
                return [_empty(len(self.control_ids), len(r.extra)) for r in reqs]
            hsel = self.hidden_states(reqs).to(self.head_device)
            tgt = torch.from_numpy(
                np.concatenate([np.asarray(r.ids, dtype=np.int64)[r.positions] for r in reqs])
            ).to(self.head_device)
            fmt = torch.from_numpy(
                np.concatenate([np.full(c, r.format_index, dtype=np.int64) for r, c in zip(reqs, counts, strict=True)])
            ).to(self.head_device)
            # extra targets, as (flat row, token id)
            offsets = np.cumsum([0, *counts])
            ex_rows = np.array([offsets[b] + i for b, r in enumerate(reqs) for i, _ in r.extra], dtype=np.int64)
            ex_ids = np.array([t for r in reqs for _, t in r.extra], dtype=np.int64)
            grp = None
            if self.mass_groups:
                grp = torch.from_numpy(np.concatenate([
                    np.asarray(r.groups, dtype=np.int64) if r.groups is not None else np.full(c, -1, np.int64)
                    for r, c in zip(reqs, counts, strict=True)])).to(self.head_device)  # fmt: skip
            stats = self._stats(hsel, tgt, fmt, ex_rows, ex_ids, grp)
        out = []
        e0 = 0
        for b, r in enumerate(reqs):
            s, e = int(offsets[b]), int(offsets[b + 1])
            ne = len(r.extra)
            out.append(
                ScoreResult(
                    logprob=stats["logprob"][s:e],
                    entropy=stats["entropy"][s:e],
                    top_id=stats["top_id"][s:e],
                    top_prob=stats["top_prob"][s:e],
                    control_probs=stats["control_probs"][s:e],
                    control_mass=stats["control_mass"][s:e],
                    top_control=stats["top_control"][s:e],
                    top_control_prob=stats["top_control_prob"][s:e],
                    extra_logprob=stats["extra_logprob"][e0 : e0 + ne],
                )
            )
            e0 += ne
        return out

    # ------------------------------------------------------------------------------------------ chunks
    def _logits(self, h: Any) -> tuple[Any, Any]:
        """fp32 logits ``[n, V]`` of hidden states ``h`` and a same-shaped scratch buffer (or ``None``).

        On CPU two ``chunk x V`` buffers are allocated once and reused: a fresh multi-hundred-MB tensor per
        chunk costs more in page faults than the arithmetic. On GPU the caching allocator does that already.
        """
        torch = self.torch
        n = h.shape[0]
        w = self.head.weight
        plain = (
            type(self.head) is torch.nn.Linear
            and self.head.bias is None
            and not getattr(self.head, "_hf_hook", None)
            and w.dtype == torch.float32
            and h.dtype == torch.float32
            and w.device.type == "cpu"
        )
        if w.device.type == "cpu":
            if self._bufs is None or self._bufs[0].shape[0] < n:
                shape = (min(self.chunk, max(n, 1)), w.shape[0])
                self._bufs = (torch.empty(shape, dtype=torch.float32), torch.empty(shape, dtype=torch.float32))
            a, b = self._bufs[0][:n], self._bufs[1][:n]
            if plain:
                torch.mm(h, w.t(), out=a)
            else:
                a.copy_(self.head(h))
        else:
            a = self.head(h)
            a = a.float() if a.dtype != torch.float32 else a
            b = None
        if self.softcap:
            a.div_(self.softcap).tanh_().mul_(self.softcap)
        return a, b

    def _stats(
        self, h: Any, tgt: Any, fmt: Any, ex_rows: np.ndarray, ex_ids: np.ndarray, grp: Any = None
    ) -> dict[str, np.ndarray]:
        """Statistics for hidden states ``h [N, H]`` predicting ``tgt [N]``, LM head applied in chunks."""
        torch = self.torch
        N = h.shape[0]
        K = int(self.control_ids.shape[0])
        # per-chunk results stay on the device and are copied once at the end (no sync per chunk on GPU)
        parts: dict[str, list[Any]] = {k: [] for k in ("logprob", "entropy", "top_id", "top_prob", "control_probs",
                                                       "control_mass", "top_control", "top_control_prob")}
        ex_vals: list[Any] = []
        ex_order: list[np.ndarray] = []
        for s in range(0, N, self.chunk):
            e = min(N, s + self.chunk)
            lg, buf = self._logits(h[s:e])
            mx, top = lg.topk(1, dim=-1)
            lg.sub_(mx)  # shifted logits, <= 0
            t_shift = lg.gather(1, tgt[s:e].unsqueeze(-1)).squeeze(-1)
            c_shift = lg.index_select(1, self.control_ids) if K else None
            in_chunk = np.nonzero((ex_rows >= s) & (ex_rows < e))[0]
            x_shift = None
            if in_chunk.size:
                r = torch.from_numpy(ex_rows[in_chunk] - s).to(lg.device)
                c = torch.from_numpy(ex_ids[in_chunk]).to(lg.device)
                x_shift = (r, lg[r, c])
            ex = torch.exp(lg, out=buf) if buf is not None else lg.exp()
            z = ex.sum(dim=-1)
            if grp is not None:
                self._add_mass(ex, z, grp[s:e])
            ex.mul_(lg)
            num = ex.sum(dim=-1)
            del ex, lg, buf
            logz = z.log()
            parts["logprob"].append(t_shift - logz)
            parts["entropy"].append(logz - num / z)
            parts["top_id"].append(top.squeeze(-1))
            parts["top_prob"].append(1.0 / z)
            if K:
                cp = c_shift.exp() / z.unsqueeze(-1)
                masked = cp * self.format_masks[fmt[s:e]]
                tcp, tci = masked.max(dim=-1)
                parts["control_probs"].append(cp)
                parts["control_mass"].append(masked.sum(dim=-1))
                parts["top_control"].append(torch.where(tcp > 0, tci, torch.full_like(tci, -1)))
                parts["top_control_prob"].append(tcp)
            if x_shift is not None:
                ex_vals.append(x_shift[1] - logz[x_shift[0]])
                ex_order.append(in_chunk)
        res: dict[str, np.ndarray] = {}
        for k, v in parts.items():
            if v:
                res[k] = torch.cat(v).cpu().numpy()
        if not K:
            res["control_probs"] = np.zeros((N, 0), np.float32)
            res["control_mass"] = np.zeros(N, np.float32)
            res["top_control"] = np.full(N, -1, np.int64)
            res["top_control_prob"] = np.zeros(N, np.float32)
        extra = np.full(len(ex_ids), np.nan, np.float32)
        if ex_vals:
            extra[np.concatenate(ex_order)] = torch.cat(ex_vals).cpu().numpy()
        res["extra_logprob"] = extra
        return res


    def _add_mass(self, ex: Any, z: Any, g: Any) -> None:
        """Add each row's probabilities (``ex / z``) to its group's running sum (rows with ``g < 0`` skipped)."""
        torch = self.torch
        keep = g >= 0
        if not bool(keep.any()):
            return
        w = torch.zeros((self.mass_groups, ex.shape[0]), dtype=ex.dtype, device=ex.device)
        rows = torch.nonzero(keep).squeeze(-1)
        w[g[rows], rows] = (1.0 / z[rows]).to(ex.dtype)
        part = (w @ ex).double()
        self._mass = part if self._mass is None else self._mass.add_(part)


def _empty(k: int, n_extra: int) -> ScoreResult:
    z = np.empty(0, np.float32)
    return ScoreResult(
        z, z, np.empty(0, np.int64), z, np.empty((0, k), np.float32), z, np.empty(0, np.int64), z,
        np.full(n_extra, np.nan, np.float32),
    )

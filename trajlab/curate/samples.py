"""The in-memory SFT sample shared by the builders (positive, error demonstration, hint) and the writers."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from trajlab.curate.conversation import Message, content_digest, normalise_for_hash

KINDS = ("positive", "error_demo", "hint")


@dataclass(slots=True)
class Sample:
    """One conversation of the pool with its provenance.

    ``messages`` always ends with the assistant message(s) to train; every non-assistant message is context.
    """

    kind: str
    trajectory_id: str
    step: int | None
    group_id: str
    prompt_key: str  # sha1 of the prompt text: the unit of the train/validation split
    tool_format: str | None
    enable_thinking: bool
    messages: list[Message]
    categories: list[str] = field(default_factory=list)
    source_call_id: str | None = None
    hint_id: str | None = None
    score: float | None = None
    rank: float = 0.0  # order of preference inside a kind when quotas cut it (lower first)
    n_tokens: int | None = None
    split: str = "train"
    tools_json: str | None = None  # the trajectory's declared tools (JSON), for hints and the openai style

    @property
    def sample_id(self) -> str:
        key = "\x1f".join([self.kind, self.trajectory_id, self.source_call_id or "", self.hint_id or ""])
        return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def dedupe_key(self) -> str:
        """Hash of the whitespace-normalised conversation (duplicates are dropped within a kind)."""
        h = hashlib.sha1()
        for m in self.messages:
            h.update(m.role.encode())
            h.update(b"\x00")
            if m.turn_index is None:  # prompt text repeats across a group: cached
                h.update(content_digest(m.content))
            else:
                h.update(normalise_for_hash(m.content).encode("utf-8", "surrogatepass"))
            h.update(b"\x01")
        return h.hexdigest()


def prompt_key(input_text: str | None) -> str:
    """Stable key of a prompt: every sample built from the same prompt lands in the same split."""
    return hashlib.sha1((input_text or "").encode("utf-8", "surrogatepass")).hexdigest()[:16]


def seeded_unit(seed: int, key: str) -> float:
    """A deterministic pseudo-random number in [0, 1) for ``key`` (stable across runs and platforms)."""
    d = hashlib.sha1(f"{seed}\x00{key}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(d[:8], "big") / 2**64


@dataclass(slots=True)
class Gate:
    """Admits samples of one kind: drops duplicates and those over the token limit, counting both."""

    fits: Callable[[Sample], bool] | None = None
    seen: set[str] = field(default_factory=set)
    duplicates: int = 0
    too_long: int = 0

    def admit(self, s: Sample) -> bool:
        key = s.dedupe_key()
        if key in self.seen:
            self.duplicates += 1
            return False
        if self.fits is not None and not self.fits(s):
            self.too_long += 1
            return False
        self.seen.add(key)
        return True

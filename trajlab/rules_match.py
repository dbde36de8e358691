"""Whether a later command classifies turns with the rules its scan used (:func:`check_scan_rules`).

``rescore`` and ``build-sft-pool`` run the call classifier again on logged turns (for token regions and to verify
repair targets). When the classifier rules they are given differ from those of the scan (its ``manifest.json``
records the hash of every rule file and the user rule-pack directories), their spans need not match the scan's
findings; the command says so with :attr:`RulesMatch.warning` in its summary and :meth:`RulesMatch.as_dict` in its
JSON. Only the classifier's files count (``taxonomy.yaml`` and ``formats/*.yaml``): a pack that only adds control
tokens or hints does not change the spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trajlab.rulepacks import builtin_rules_dir, rules_hash


def classifier_hash(extra_dirs: Iterable[str | Path] = ()) -> str:
    """sha256 over the classifier's rule files (``taxonomy.yaml``, ``formats/*.yaml``), built-in then user packs."""
    h = hashlib.sha256()
    for root in (builtin_rules_dir(), *[Path(d) for d in extra_dirs]):
        files = [p for p in (root / "taxonomy.yaml", *sorted((root / "formats").glob("*.yaml"))) if p.is_file()]
        for p in files:
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
        if files:  # a pack without classifier files leaves the hash as it is
            h.update(b"\1")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class RulesMatch:
    """How the rules of a command compare with the rules of its scan."""

    #: user rule-pack directories the scan was run with (as recorded in its manifest)
    scan_rules_dirs: tuple[str, ...]
    #: user rule-pack directories the command runs the classifier with
    rules_dirs: tuple[str, ...]
    #: hash of every rule file when the scan ran (``manifest.json`` ``rules_hash``)
    scan_rules_hash: str
    #: why the classifier rules differ from the scan's; None when they are the same
    reason: str | None

    @property
    def same(self) -> bool:
        return self.reason is None

    def warning(self, command: str) -> str | None:
        """One line for ``command``'s summary, or None when the rules are the same."""
        if self.reason is None:
            return None
        return (f"{command} classifies turns with other rules than the scan: {self.reason}; its spans may not "
                "match the scan's findings (use the scan's rule packs, or re-scan with these)")

    def as_dict(self) -> dict[str, Any]:
        return {"same": self.same, "reason": self.reason, "scan_rules_dirs": list(self.scan_rules_dirs),
                "rules_dirs": list(self.rules_dirs), "scan_rules_hash": self.scan_rules_hash}


def _packs(dirs: Iterable[str]) -> str:
    shown = ", ".join(dirs)
    return f"rule packs {shown}" if shown else "the built-in rules only"


def check_scan_rules(out: str | Path, rules_dirs: Iterable[str | Path]) -> RulesMatch | None:
    """Compare ``rules_dirs`` (with the built-in rules) with the rules the scan in ``out`` recorded.

    None when the scan has no manifest with a rules hash (nothing to compare with). The rules differ when the rule
    files the scan used changed since (its recorded hash no longer matches them) or when the classifier files of
    ``rules_dirs`` differ from those of the scan's packs.
    """
    from trajlab.outpaths import read_json_object

    manifest, _ = read_json_object(Path(out) / "manifest.json")
    if not isinstance(manifest.get("rules_hash"), str):
        return None
    opts = manifest.get("options")
    if not isinstance(opts, dict):
        opts = {}
    scan_dirs = tuple(str(d) for d in (opts.get("rules_dirs") or ()))
    dirs = tuple(str(Path(d)) for d in rules_dirs)
    recorded = manifest["rules_hash"]
    reason = None
    if rules_hash(scan_dirs) != recorded:
        reason = (f"the rule files changed since the scan (rules hash {recorded} then, {rules_hash(scan_dirs)} now; "
                  f"the scan used {_packs(scan_dirs)})")
    elif classifier_hash(scan_dirs) != classifier_hash(dirs):
        reason = f"the scan used {_packs(scan_dirs)}, this run {_packs(dirs)}"
    return RulesMatch(scan_dirs, dirs, recorded, reason)

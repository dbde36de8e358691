"""Shared helpers of the adversarial suites (tests/test_adversarial_*.py): build hostile inputs from real verl
dump lines and observe what the CLI does -- exit code, captured bytes, files on disk."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from helpers.verl_lines import legacy_line, output_of, qwen35_prompt, xml_call

#: raw bytes that must never reach a terminal: ESC, other C0 controls but \n \t \r, DEL, C1 (as UTF-8), bidi
RAW_CONTROL = re.compile(
    rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]|\xd8\x9c")


def good_record(step: int, i: int = 0, *, malformed: bool = False) -> dict[str, Any]:
    """A real-shaped legacy verl dump record with one tool call (malformed: a garbled function name)."""
    name = "search_web英文" if malformed else "search_web"
    out = output_of([xml_call(name, queries=[f"q{i}"])], [f"result {i}"]) + f"answer {i}"
    return legacy_line(step, qwen35_prompt(f"question {i}"), out, float(i % 2))


def good_line(step: int, i: int = 0, **kw: Any) -> bytes:
    return json.dumps(good_record(step, i, **kw), ensure_ascii=False).encode() + b"\n"


def write_run(root: Path, steps: int = 3, per_step: int = 4, malformed_every: int = 3) -> Path:
    """A small verl rollout directory ``root/rollout/{step}.jsonl``."""
    d = root / "rollout"
    d.mkdir(parents=True, exist_ok=True)
    for s in range(1, steps + 1):
        (d / f"{s}.jsonl").write_bytes(b"".join(
            good_line(s, i, malformed=(s * per_step + i) % malformed_every == 0) for i in range(per_step)))
    return root


def cli(args: list[str], capfd: Any) -> tuple[int, bytes, bytes]:
    """Run the trajlab CLI in-process; return (exit code, stdout bytes, stderr bytes). An unexpected exception
    propagates (the test fails with its traceback: the CLI would have printed one)."""
    from trajlab.cli import main

    capfd.readouterr()
    rc = main([str(a) for a in args])
    out, err = capfd.readouterr()
    return rc, out.encode("utf-8", "surrogateescape"), err.encode("utf-8", "surrogateescape")


def assert_clean_failure(rc: int, err: bytes, code: int = 2) -> None:
    """Exit ``code``, an ``error:`` line, no traceback."""
    assert rc == code, err.decode(errors="replace")
    assert b"Traceback" not in err
    assert b"error:" in err


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (by relative path), to prove user files are byte-identical."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def scan_json(args: list[str], capfd: Any) -> tuple[int, dict[str, Any] | None, bytes]:
    rc, out, err = cli(["scan", *args, "--json", "--no-progress", "-j", "1"], capfd)
    try:
        return rc, json.loads(out), err
    except ValueError:
        return rc, None, err

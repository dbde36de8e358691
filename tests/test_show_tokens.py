"""`trajlab show --tokens`: per-token probabilities of the call tokens, from the rescore tables."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from helpers.query_run import build_rescore, build_run
from rich.color import ColorSystem
from rich.console import Console
from rich.style import Style
from rich.text import Text

from trajlab.cli import main
from trajlab.errors import TrajlabError
from trajlab.query import sql
from trajlab.show import ShowOptions, show
from trajlab.show.tokens import prob_style, token_label


@pytest.fixture(scope="module")
def rescored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_rescore(build_run(tmp_path_factory.mktemp("st") / "run"))


def test_tokens_are_coloured_by_probability_per_checkpoint(rescored: Path) -> None:
    m = sql(rescored, "SELECT trajectory_id, call_id FROM rescore_malformations ORDER BY step, call_id LIMIT 1").to_pylist()[0]
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, color_system="truecolor", width=220)
    show(rescored, m["trajectory_id"], ShowOptions(tokens=True), console=con)
    out = buf.getvalue()
    plain = Text.from_ansi(out).plain
    labels = [r["checkpoint"] for r in sql(rescored, "SELECT DISTINCT checkpoint, checkpoint_index FROM rescore_compare "
                                                     "ORDER BY checkpoint_index").to_pylist()]
    heads = [plain.index(f"{lab} · ") for lab in labels]
    assert heads == sorted(heads)  # checkpoints in run order
    call = sql(rescored, f"SELECT char_start, char_end FROM calls WHERE call_id = '{m['call_id']}'").to_pylist()[0]
    toks = sql(rescored, f"""SELECT checkpoint, token, logprob FROM rescore_tokens
                             WHERE trajectory_id = '{m['trajectory_id']}' AND char_end > {call['char_start']}
                               AND char_start < {call['char_end']} ORDER BY position""").to_pylist()
    lowest = min((t for t in toks if t["checkpoint"] == labels[0]), key=lambda t: t["logprob"])
    p = math.exp(lowest["logprob"])
    assert f"lowest p {p:.3g} at {lowest['token']!r}" in plain
    # that token is drawn with the style of its probability bucket
    assert Style.parse(prob_style(p)).render(token_label(lowest["token"]), color_system=ColorSystem.TRUECOLOR) in out
    mal = sql(rescored, f"SELECT malformed_prob, repaired_prob FROM rescore_malformations WHERE call_id = '{m['call_id']}' "
                        f"AND checkpoint = '{labels[-1]}'").to_pylist()[0]
    assert f"= {mal['malformed_prob']:.3g} vs well-formed" in plain and f"= {mal['repaired_prob']:.3g}" in plain


def test_checkpoint_filter_and_errors(rescored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tid = sql(rescored, "SELECT trajectory_id FROM rescore_trajectory_scores LIMIT 1").to_pylist()[0]["trajectory_id"]
    labels = sorted({r["checkpoint"] for r in sql(rescored, "SELECT checkpoint FROM rescore_trajectory_scores").to_pylist()})
    assert main(["show", str(rescored), tid, "--tokens", "-c", labels[0]]) == 0
    out = capsys.readouterr().out
    assert f"{labels[0]} · " in out and not any(f"{lab} · " in out for lab in labels[1:])
    with pytest.raises(TrajlabError, match="not rescored for this trajectory"):
        show(rescored, tid, ShowOptions(tokens=True, checkpoints=("nope",)), console=Console(file=io.StringIO()))
    not_scored = sql(rescored, "SELECT trajectory_id FROM trajectories WHERE trajectory_id NOT IN "
                               "(SELECT trajectory_id FROM rescore_tokens) LIMIT 1").to_pylist()[0]["trajectory_id"]
    with pytest.raises(TrajlabError, match="has no rescored tokens"):
        show(rescored, not_scored, ShowOptions(tokens=True), console=Console(file=io.StringIO()))
    plain_run = build_run(tmp_path / "plain")
    with pytest.raises(TrajlabError, match="no rescore results"):
        show(plain_run, tid, ShowOptions(tokens=True), console=Console(file=io.StringIO()))

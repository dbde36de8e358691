"""The report's rescore section: spike rates per checkpoint and the control tokens that moved most."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.query_run import build_rescore, build_run
from helpers.report_html import parse_page

from trajlab.query import sql
from trajlab.report import report


@pytest.fixture(scope="module")
def rescored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_rescore(build_run(tmp_path_factory.mktemp("rr") / "run"))


@pytest.mark.slow  # > 5 s on 2 shared cores
def test_rescore_section_has_spike_and_token_charts(rescored: Path, tmp_path: Path) -> None:
    page = report(rescored, tmp_path / "r.html")
    html = page.read_text(encoding="utf-8")
    s = parse_page(page)
    assert s.charts == ["overview", "categories", "spikes", "tokens"]
    assert s.refs == []
    spikes = " ".join(s.svg_text["spikes"])
    assert "checkpoint" in spikes and "% of eligible positions" in spikes
    assert "intrusion" in spikes and "dropout" in spikes
    # checkpoints in training order (compare.checkpoint_index), not alphabetical (step_100 < step_60)
    order = [r["checkpoint"] for r in sql(rescored, "SELECT DISTINCT checkpoint, checkpoint_index FROM rescore_compare "
                                                    "ORDER BY checkpoint_index").to_pylist()]
    pos = [spikes.index(c) for c in order]
    assert pos == sorted(pos)
    # the table's rates are the trajectory_scores totals
    tot = sql(rescored, "SELECT checkpoint, sum(n_intrusions) / sum(n_intrusion_positions) AS r "
                        "FROM rescore_trajectory_scores GROUP BY checkpoint").to_pylist()
    section = html[html.index('id="rescore"'):]
    for t in tot:
        row = re.search(rf"<td class=\"mono label\">{t['checkpoint']}</td>(.*?)</tr>", section, re.S)
        assert row and f"{t['r'] * 100:.1f}%" in row.group(1)
    # a checkpoint label never wraps (global_step_20 over three lines) and headers break only between words
    css = html[html.index("<style"):html.index("</style>")]
    assert re.search(r"td\.label \{ white-space: nowrap;", css)
    assert re.search(r"\bth \{[^}]*overflow-wrap: normal; word-break: normal;", css)
    # the most-moved token is the one with the largest |last - first| in rescore_compare
    moved = sql(rescored, f"""
        SELECT control_token, abs(max(mean_prob) FILTER (WHERE checkpoint = '{order[-1]}')
                                - max(mean_prob) FILTER (WHERE checkpoint = '{order[0]}')) AS d
        FROM rescore_compare WHERE region = 'all' GROUP BY control_token ORDER BY d DESC LIMIT 1""").to_pylist()[0]
    tok_texts = s.svg_text["tokens"]
    assert tok_texts and moved["control_token"] in tok_texts
    assert f"change from {order[0]} to {order[-1]}" in " ".join(tok_texts)

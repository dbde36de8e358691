"""The ``columnar`` engine (the fast path): clean verl JSONL byte ranges → the same part tables as the
``records`` engine (:mod:`trajlab.scan.records`), from whole columns.

The engine seam (:mod:`trajlab.scan.engines`) calls :func:`process_segments` for the verl JSONL ranges of a
unit of work. It reads them with one ``polars.read_ndjson`` call (:mod:`trajlab.ingest.verl_columnar`), splits
every output into turns with one regex pass (:func:`trajlab.ingest.turns.split_turns_frame`) and lets
:mod:`trajlab.toolcalls.vectorized` recognise the canonical, well-formed turns; only the rest -- malformed
calls, unusual markup -- goes through the per-turn classifier, and only records the columnar split cannot
vouch for go through :func:`trajlab.scan.records.record_rows`. The tables it returns are identical, row for
row and byte for byte, to what the ``records`` engine writes for the same ranges
(``tests/test_scan_engines.py``). When a range is not clean (a bad line, a missing field, mixed JSON types,
...) it returns the reason, and the ``records`` engine reads the range and reports each problem.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import pyarrow as pa

from trajlab.ingest import FileTask
from trajlab.ingest.turns import split_turns, split_turns_frame
from trajlab.ingest.verl_columnar import Segment, read_clean_segments
from trajlab.model import RawTrajectory, TurnContext
from trajlab.scan.ids import trajectory_id
from trajlab.scan.options import WorkerOptions
from trajlab.scan.records import columns_table, record_rows, row_columns, turn_rows
from trajlab.tables import CALLS, FINDINGS, INGEST_ERRORS, ROLLOUT_TOKENS, TRAJECTORIES, TURNS, TableSpec


def process_segments(items: list[tuple[FileTask, bytes, str]], opts: WorkerOptions) -> list[dict[str, pa.Table]] | str:
    """The part tables (``trajectories``, ``turns``, ``calls``, ``findings``, ``ingest_errors``) of each clean
    verl range in ``items`` (``(task, bytes of the range, file sha1)``, processed together), or the reason
    they must go through the ``records`` engine."""
    from trajlab.toolcalls.ruleset import get_ruleset
    from trajlab.toolcalls.vectorized import available

    if not items:
        return "nothing to read"
    rs = get_ruleset(opts.rules_dirs)
    if not available(rs, opts.rules_dirs):
        return "rule packs with regex or untriggered rules (the canonical-call recogniser is off)"
    df, why = read_clean_segments([Segment(d, t.step, t.split, t.first_line) for t, d, _ in items])
    if df is None:
        return f"not a clean verl range: {why}"
    if _over_turn_cap(df):  # the per-turn cap is the record loop's
        return "a turn over the per-turn cap (the record engine classifies the first part and reports the rest)"
    return _Range([t for t, _, _ in items], [h for _, _, h in items], opts, df, rs).tables()


def _over_turn_cap(df: pl.DataFrame) -> bool:
    """Whether an ``output`` of ``df`` may hold a turn over the per-turn cap (more characters or call openers
    than :func:`trajlab.trajectory.turn_cut` allows): every turn is a piece of one output, so an output under
    both caps has no turn over them. One pass over the column, in polars."""
    from trajlab.trajectory import CALL_OPENER, TURN_CLASSIFY_CALLS, TURN_CLASSIFY_CHARS

    over = df.select(
        ((pl.col("output").str.len_chars() > TURN_CLASSIFY_CHARS)
         | (pl.col("output").str.count_matches(CALL_OPENER, literal=True) > TURN_CLASSIFY_CALLS)).any()
    ).item()
    return bool(over)


class _Range:
    """The work on clean ranges; rows are keyed by ``row`` (record position) for the final sort."""

    def __init__(self, tasks: list[FileTask], digests: list[str], opts: WorkerOptions, df: pl.DataFrame,
                 rs: Any) -> None:
        self.tasks, self.opts, self.rs = tasks, opts, rs
        rels = [t.rel for t in tasks]
        ids = [trajectory_id(rels[seg], line, digests[seg])
               for seg, line in zip(df["seg"].to_list(), df["source_line"].to_list(), strict=True)]
        self.df = df.with_columns(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
            pl.Series("trajectory_id", ids, pl.String),
            pl.col("seg").replace_strict(dict(enumerate(rels)), return_dtype=pl.String).alias("source_path"),
            pl.col("seg").replace_strict(dict(enumerate(t.run for t in tasks)), return_dtype=pl.String).alias("run"),
        )
        # the first row of each segment (rows are numbered in source order, segment after segment)
        seg_sizes = self.df.group_by("seg").len().sort("seg")
        starts = dict.fromkeys(range(len(tasks)), 0)
        first = 0
        for seg, n in seg_sizes.iter_rows():
            starts[seg] = first
            first += n
        self.seg_starts = pl.Series([starts[i] for i in range(len(tasks))], dtype=pl.Int64)
        self.tool_sets: list[list[dict[str, Any]]] = []
        self._prompt_columns()

    # -- prompt facts --------------------------------------------------------------------------------------

    def _prompt_columns(self) -> None:
        """Call format, tool schemas and the "NO suffix" rule per distinct prompt (cached across ranges)."""
        from trajlab.trajectory import prompt_facts

        opts = self.opts
        forced_tools = json.dumps(opts.tools, ensure_ascii=False, sort_keys=True) if opts.tools is not None else None
        rows = []
        tools_ids: dict[str, int] = {}
        for inp in self.df["input"].unique().to_list():
            f = prompt_facts(inp)
            tj = forced_tools if forced_tools is not None else f.tools_json
            tid = None
            if tj is not None:
                tid = tools_ids.get(tj)
                if tid is None:
                    tid = tools_ids[tj] = len(self.tool_sets)
                    self.tool_sets.append(opts.tools if opts.tools is not None else json.loads(tj))
            rows.append((inp, opts.tool_format or f.tool_format, tj, tid, f.forbids_suffix, f.opens_think))
        facts = pl.DataFrame(rows, schema={"input": pl.String, "fmt": pl.String, "tools": pl.String,
                                           "tools_id": pl.Int32, "forbids": pl.Boolean, "opens_think": pl.Boolean},
                             orient="row")
        self.df = self.df.join(facts, on="input", how="left", maintain_order="left")

    # -- the whole range -------------------------------------------------------------------------------------

    def tables(self) -> list[dict[str, pa.Table]]:
        """One dict of part tables per segment, in segment order."""
        df = self.df
        # records whose call format comes from the output (no format in the prompt) take the record path
        fmt_unknown = df.filter(pl.col("fmt").is_null() | pl.col("fmt").is_in(["", "none"]))["row"]
        turns, bad = split_turns_frame(df.filter(~pl.col("row").is_in(fmt_unknown.implode())).select("row", "output"))
        slow_rows = pl.concat([fmt_unknown, bad]).unique().sort()
        fast = df.filter(~pl.col("row").is_in(slow_rows.implode()))

        rec_rows = _RowsByKey()
        for r in df.filter(pl.col("row").is_in(slow_rows.implode())).iter_rows(named=True):
            self._record_path(r, rec_rows)

        turn_stats, calls, findings, py_calls = self._classify(fast, turns)
        # a rollout with a tool turn the model wrote (trajlab.provenance) takes the record path, which reports it
        moved = model_written_rows(fast, turns, turn_stats)
        if moved.len():
            keep = ~pl.col("row").is_in(moved.implode())
            fast, turns, turn_stats = fast.filter(keep), turns.filter(keep), turn_stats.filter(keep)
            calls, findings, py_calls = calls.filter(keep), findings.filter(keep), py_calls.filter(keep)
            for r in df.filter(pl.col("row").is_in(moved.implode())).iter_rows(named=True):
                self._record_path(r, rec_rows)
        traj = self._trajectories(fast, turns, turn_stats)
        merged = {
            "trajectories": self._concat(TRAJECTORIES, [traj], rec_rows, ["row"]),
            "turns": self._concat(TURNS, [turns.join(fast.select("row", "trajectory_id"), on="row",
                                                     maintain_order="left")], rec_rows,
                                  ["row", "turn_index"]),
            "calls": self._concat(CALLS, [calls, py_calls], rec_rows, ["row", "turn_index", "call_index"]),
            "findings": self._concat(FINDINGS, [findings], rec_rows, ["row", "turn_index", "seq"]),
        }
        no_errors = pa.table({c.name: pa.array([], c.type) for c in INGEST_ERRORS.columns}, schema=INGEST_ERRORS.schema)
        no_tokens = ROLLOUT_TOKENS.schema.empty_table()  # verl JSONL is text: no exact tokens
        out = []
        for seg in range(len(self.tasks)):
            out.append({**{name: parts.get(seg, _empty(spec)) for (name, parts), spec in
                           zip(merged.items(), (TRAJECTORIES, TURNS, CALLS, FINDINGS), strict=True)},
                        "ingest_errors": no_errors, "rollout_tokens": no_tokens})
        return out

    def _concat(self, spec: TableSpec, frames: list[pl.DataFrame], rec_rows: _RowsByKey,
                key: list[str]) -> dict[int, pa.Table]:
        """Columnar rows + record-path rows, in source order, split by segment, with the table's exact schema."""
        table = spec.name
        parts = [*frames, _with_keys(spec, rec_rows.rows[table], rec_rows.keys[table], _KEY_COLS[table])]
        names = spec.column_names
        extra = [k for k in key if k not in names]
        target = pl.from_arrow(spec.schema.empty_table()).schema
        typed = [f.select(*[pl.col(c).cast(target[c]) for c in names], *[pl.col(k).cast(pl.Int64) for k in extra])
                 for f in parts if f.height]
        if not typed:
            return {}
        merged = pl.concat(typed)
        if len(typed) > 1 or table in ("calls", "findings"):  # trajectories and turns come in source order
            merged = merged.sort(key, maintain_order=True)
        # rows are in source order: each segment is one slice (zero-copy), cut where its first row begins
        cuts = [*merged["row"].search_sorted(self.seg_starts, side="left").to_list(), merged.height]
        table = merged.select(names).to_arrow().cast(spec.schema)
        return {seg: table.slice(cuts[seg], cuts[seg + 1] - cuts[seg])
                for seg in range(len(self.tasks)) if cuts[seg + 1] > cuts[seg]}

    def _record_path(self, r: dict[str, Any], rec_rows: _RowsByKey) -> None:
        """One record through :func:`trajlab.scan.records.record_rows` (as the record loop would process it)."""

        rec = RawTrajectory(
            source_path=r["source_path"], source_line=r["source_line"], source_format="verl_jsonl", split=r["split"],
            step=r["step"], group_id=r["group_id"], score=r["score"], input=r["input"], output=r["output"],
            turns=split_turns(r["output"]), tools=None, tools_source=None, extra={}, uid=None, run=r["run"],
        )
        rows = rec_rows.start(r["row"])
        record_rows(rec, self.opts, rows, r["trajectory_id"], r["extra"])
        rec_rows.finish()

    # -- classification ----------------------------------------------------------------------------------

    def _classify(self, fast: pl.DataFrame, turns: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame,
                                                                           pl.DataFrame, pl.DataFrame]:
        """Per assistant turn: calls, malformed calls, whether it has a call / a truncated call; plus the
        calls and findings rows."""
        from trajlab.provenance import executed_calls
        from trajlab.toolcalls import analyze_turn
        from trajlab.toolcalls.vectorized import classify_canonical

        asst = (
            turns.filter(pl.col("role") == "assistant")
            .join(fast.select("row", "fmt", "tools_id", "forbids", "trajectory_id", "step", "split"), on="row")
            .with_columns(
                (pl.col("turn_index") == pl.col("turn_index").max().over("row")).alias("is_last"),
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("tkey"),
            )
        )
        res = classify_canonical(asst.select("tkey", "text", "fmt", "tools_id"), self.tool_sets, self.rs)
        acc = asst.filter(pl.col("tkey").is_in(res.accepted.implode()))
        n_fast = res.calls.group_by("tkey").len("n_calls")
        fast_stats = acc.join(n_fast, on="tkey", how="left").select(
            "row", "turn_index", pl.col("n_calls").fill_null(0).cast(pl.Int64),
            pl.lit(0, pl.Int64).alias("n_bad"), pl.lit(False).alias("trunc_call"),
            pl.col("n_calls").fill_null(0).cast(pl.Int64).alias("n_exec"))  # canonical calls: verl runs each
        calls = res.calls.join(acc.select("tkey", "row", "turn_index", "char_start", "trajectory_id", "step", "split"),
                               on="tkey").select(
            (pl.col("trajectory_id") + ":" + pl.col("turn_index").cast(pl.String) + ":"
             + pl.col("call_index").cast(pl.String)).alias("call_id"),
            "trajectory_id", "turn_index", "call_index", "step", "split", "format", "raw",
            (pl.col("start") + pl.col("char_start")).alias("char_start"),
            (pl.col("end") + pl.col("char_start")).alias("char_end"),
            "function_name", "matched_tool", "arguments", pl.lit("ok").alias("status"),
            pl.lit([], pl.List(pl.String)).alias("categories"), pl.lit(None, pl.String).alias("repaired"),
            pl.lit(None, pl.String).alias("repaired_arguments"), pl.lit(None, pl.String).alias("repair_note"),
            pl.lit("as_intended").alias("verl_executes"), pl.lit(None, pl.String).alias("verl_function_name"),
            pl.lit(None, pl.String).alias("verl_arguments"),
            "row",
        )

        # the rest, turn by turn
        slow = asst.filter(~pl.col("tkey").is_in(res.accepted.implode()))
        contexts: dict[tuple[bool, bool, bool], TurnContext] = {}
        stats: list[tuple[int, int, int, int, bool, int]] = []
        call_rows: list[tuple[Any, ...]] = []
        finding_rows: list[tuple[Any, ...]] = []
        call_keys: list[tuple[int, int]] = []
        finding_keys: list[tuple[int, int, int]] = []
        for r in slow.iter_rows(named=True):
            tid = r["tools_id"]
            tools = self.tool_sets[tid] if tid is not None else None
            ck = (r["is_last"], bool(r["forbids"]), tools is not None)
            ctx = contexts.get(ck)
            if ctx is None:
                ctx = contexts[ck] = TurnContext(is_last_turn=ck[0], output_truncated=False, forbids_suffix=ck[1],
                                                 schema_known=ck[2])
            ta = analyze_turn(r["text"], tool_format=r["fmt"] or "none", tools=tools, context=ctx,
                              rules_dirs=self.opts.rules_dirs, spans=False)
            n0, f0 = len(call_rows), len(finding_rows)
            turn_rows(r["trajectory_id"], r["turn_index"], r["char_start"], ta, r["step"], r["split"], call_rows,
                      finding_rows)
            row, ti = r["row"], r["turn_index"]
            call_keys += [(row, ti)] * (len(call_rows) - n0)
            finding_keys += [(row, ti, i) for i in range(len(finding_rows) - f0)]
            stats.append((row, ti, len(ta.calls), sum(1 for c in ta.calls if c.status == "malformed"),
                          any(f.category == "truncated_call" for f in ta.findings), executed_calls(ta)))
        slow_stats = pl.DataFrame(stats, schema={"row": pl.UInt32, "turn_index": pl.Int32, "n_calls": pl.Int64,
                                                 "n_bad": pl.Int64, "trunc_call": pl.Boolean, "n_exec": pl.Int64},
                                  orient="row")
        py_calls = _with_keys(CALLS, call_rows, call_keys, ("row", "turn_index"))
        findings = _with_keys(FINDINGS, finding_rows, finding_keys, ("row", "turn_index", "seq"))
        return pl.concat([fast_stats, slow_stats]), calls, findings, py_calls

    def _trajectories(self, fast: pl.DataFrame, turns: pl.DataFrame, turn_stats: pl.DataFrame) -> pl.DataFrame:
        """The ``trajectories`` rows of the columnar records (the analysis columns from the turn stats)."""
        last = _endings(turns, turn_stats, fast.select("row", "fmt", "opens_think"))
        per_row = turn_stats.group_by("row").agg(pl.col("n_calls").sum().alias("n_calls"),
                                                 pl.col("n_bad").sum().alias("n_malformed_calls"))
        n_turns = turns.group_by("row").len("n_turns")
        return (
            fast.join(per_row, on="row", how="left", maintain_order="left")
            .join(last, on="row", how="left", maintain_order="left")
            .join(n_turns, on="row", maintain_order="left")
            .select(
                "trajectory_id", "source_path", "source_line",
                pl.lit("verl_jsonl").alias("source_format"), "run", "split", "step", "group_id", "score",
                pl.col("fmt").alias("tool_format"), "n_turns", pl.col("n_calls").fill_null(0),
                pl.col("n_malformed_calls").fill_null(0),
                "has_final_answer", "truncated", "end_reason", pl.col("tools").is_not_null().alias("schema_checked"),
                "input", "output", "tools", "extra", "row",
            )
        )


def model_written_rows(fast: pl.DataFrame, turns: pl.DataFrame, turn_stats: pl.DataFrame, *,
                       prefilter: bool = True) -> pl.Series:
    """The ``row`` values of rollouts with a tool turn the environment cannot have written, judged by
    :func:`trajlab.provenance.model_written_turns` (the one judge) from the turns and the calls verl runs in each.

    ``fast``: one row per rollout (``row``, ``input``); ``turns``: the split turns (``row``, ``turn_index``,
    ``role``, ``text``, ``char_start``, ``char_end``) in row / turn order; ``turn_stats``: ``n_exec`` per
    classified turn. With ``prefilter`` (the fast path) whole columns first pick the rollouts with a tool turn
    that meets one of the judge's conditions -- no call run before it, more responses than calls run, a role
    header not after ``<|im_end|>``, a closing bare ``assistant`` header under a thinking-off prompt (a superset of
    the last condition) -- and only those go through the judge; without it every rollout does (the reference,
    compared in ``tests/test_scan_engines.py``)."""
    from trajlab.families.chatml import IM_END, IM_START
    from trajlab.model import Turn
    from trajlab.provenance import THINKS_OFF_PROMPT_END, model_written_turns

    multi = turns.filter((pl.col("role") == "tool").any().over("row"))
    if not multi.height:
        return pl.Series("row", [], pl.UInt32)
    ran = multi.join(turn_stats.select("row", "turn_index", "n_exec"), on=["row", "turn_index"], how="left",
                     maintain_order="left").sort("row", "turn_index", maintain_order=True)
    prompts = fast.select("row", "input")
    if prefilter:
        thinks_off = prompts.filter(pl.col("input").str.ends_with(THINKS_OFF_PROMPT_END))["row"]
        text, resp = pl.col("text"), "<tool_response>"
        prev_ran = (pl.when(pl.col("role").shift(1).over("row") == "assistant")
                    .then(pl.col("n_exec").shift(1).over("row").fill_null(0)).otherwise(0))
        suspect = ((pl.col("role") == "tool") & text.str.contains(resp, literal=True)
                   & ((prev_ran == 0) | (text.str.count_matches(resp, literal=True) > prev_ran)
                      | (text.str.contains(IM_START, literal=True) & ~text.str.starts_with(IM_END))
                      | (pl.col("row").is_in(thinks_off.implode()) & text.str.ends_with("assistant\n"))))
        rows = ran.filter(suspect)["row"].unique()
        if not rows.len():
            return pl.Series("row", [], pl.UInt32)
        ran, prompts = ran.filter(pl.col("row").is_in(rows.implode())), prompts.filter(pl.col("row").is_in(rows.implode()))
    prompt_of = dict(prompts.iter_rows())
    out: list[int] = []
    cur: int | None = None
    ts: list[Turn] = []
    executed: dict[int, int] = {}

    def judge() -> None:
        if cur is not None and model_written_turns(ts, executed, prompt=prompt_of.get(cur, "")):
            out.append(cur)

    for row, ti, role, text_, cs, ce, n in ran.select("row", "turn_index", "role", "text", "char_start", "char_end",
                                                      "n_exec").iter_rows():
        if row != cur:
            judge()
            cur, ts, executed = row, [], {}
        ts.append(Turn(ti, role, text_, cs, ce))
        executed[ti] = n or 0
    judge()
    return pl.Series("row", sorted(out), pl.UInt32)


def _endings(turns: pl.DataFrame, turn_stats: pl.DataFrame, facts: pl.DataFrame) -> pl.DataFrame:
    """``truncated``, ``has_final_answer`` and ``end_reason`` per row (:func:`trajlab.ending.output_ending`):
    from whole columns where the last turn is an assistant turn without think/answer markup (then only its calls
    and blankness decide), the rest through the function itself."""
    from trajlab.ending import BLANK, MARKERS, output_ending

    last = (
        turns.filter(pl.col("role") == "assistant")
        .filter(pl.col("turn_index") == pl.col("turn_index").max().over("row"))
        .join(turn_stats, on=["row", "turn_index"], how="left")
        .select("row", "turn_index", "text", pl.col("n_calls").fill_null(0), pl.col("trunc_call").fill_null(False))
    )
    final = turns.filter(pl.col("turn_index") == pl.col("turn_index").max().over("row")).select(
        "row", pl.col("role").alias("final_role"), pl.col("text").alias("final_text"))
    both = (last.join(final, on="row", how="full", coalesce=True, maintain_order="left")
            .join(facts, on="row", how="left", maintain_order="left"))
    marked = pl.lit(False)
    for m in MARKERS:
        marked = marked | pl.col("text").str.contains(m, literal=True)
    simple = ((pl.col("final_role") == "assistant") & pl.col("text").is_not_null() & ~marked
              & ~pl.col("opens_think").fill_null(False) & (pl.col("fmt").fill_null("none") != "gpt_oss"))
    easy = both.filter(simple).select(
        "row",
        pl.col("trunc_call").alias("truncated"),
        (~pl.col("trunc_call") & (pl.col("n_calls") == 0)
         & (pl.col("text").str.strip_chars(BLANK) != "")).alias("has_final_answer"),
        pl.when(pl.col("trunc_call")).then(pl.lit("open_call"))
        .when(pl.col("n_calls") > 0).then(pl.lit("call_pending"))
        .when(pl.col("text").str.strip_chars(BLANK) == "").then(pl.lit("empty_answer"))
        .otherwise(pl.lit(None, pl.String)).alias("end_reason"),
    )
    rest = []
    for r in both.filter(~simple).iter_rows(named=True):
        e = output_ending(r["text"], n_calls=r["n_calls"] or 0, truncated_call=bool(r["trunc_call"]),
                          final_role=r["final_role"], final_text=r["final_text"] or "", tool_format=r["fmt"] or "none",
                          starts_in_think=bool(r["opens_think"]) and r["turn_index"] == 0)
        rest.append((r["row"], e.truncated, e.has_final_answer, e.reason))
    hard = pl.DataFrame(rest, schema={"row": easy.schema["row"], "truncated": pl.Boolean,
                                      "has_final_answer": pl.Boolean, "end_reason": pl.String}, orient="row")
    return pl.concat([easy, hard])


class _RowsByKey:
    """Row tuples of records taken through the record path, each remembered with its record's ``row``."""

    def __init__(self) -> None:
        self.rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in ("trajectories", "turns", "calls", "findings",
                                                                      "ingest_errors")}
        self.keys: dict[str, list[tuple[int, ...]]] = {t: [] for t in self.rows}
        self._row = 0
        self._n: dict[str, int] = {}

    def start(self, row: int) -> dict[str, list[tuple[Any, ...]]]:
        self._row = row
        self._n = {t: len(v) for t, v in self.rows.items()}
        return self.rows

    def finish(self) -> None:
        for t, v in self.rows.items():
            new = v[self._n[t]:]
            if t == "turns":
                self.keys[t] += [(self._row, x[1]) for x in new]
            elif t == "calls":
                self.keys[t] += [(self._row, x[2], x[3]) for x in new]
            elif t == "findings":
                base = len(self.keys[t])
                self.keys[t] += [(self._row, x[1], base + i) for i, x in enumerate(new)]
            else:
                self.keys[t] += [(self._row,)] * len(new)


_KEY_COLS = {"trajectories": ("row",), "turns": ("row", "turn_index"), "calls": ("row", "turn_index", "call_index"),
             "findings": ("row", "turn_index", "seq")}


def _with_keys(spec: TableSpec, rows: list[tuple[Any, ...]], keys: list[tuple[int, ...]],
               key_cols: tuple[str, ...]) -> pl.DataFrame:
    """Row tuples (in the spec's column order) as a frame typed like the table, plus the sort key columns."""
    if not rows:
        return pl.from_arrow(spec.schema.empty_table()).with_columns(  # type: ignore[union-attr]
            [pl.lit(None, pl.Int64).alias(k) for k in key_cols if k not in spec.column_names])
    frame = pl.from_arrow(columns_table(spec, row_columns(spec.name, rows)))
    assert isinstance(frame, pl.DataFrame)
    kdf = pl.DataFrame(keys or None, schema={k: pl.Int64 for k in key_cols}, orient="row")
    return pl.concat([frame, kdf.select([k for k in key_cols if k not in spec.column_names])], how="horizontal")


def _empty(spec: TableSpec) -> pa.Table:
    return spec.schema.empty_table()

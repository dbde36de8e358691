"""The helper views and table macros created on top of the tables: the common questions as SQL (:data:`HELPERS`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Helper:
    """A named view or table macro created on top of the tables (when the tables it needs exist)."""

    name: str
    kind: str  # view | macro
    needs: tuple[str, ...]
    doc: str
    sql: str
    example: str


HELPERS: tuple[Helper, ...] = (
    Helper(
        "malformed_by_step",
        "view",
        ("steps",),
        "malformed-call rate per (run, split, step, category): one row for every step and every category seen, "
        "rate = calls flagged with the category / calls at that step (0 when none were flagged)",
        """
        CREATE VIEW malformed_by_step AS
        WITH entries AS (
            SELECT run, split, step, unnest(map_entries(category_counts)) AS e FROM steps
        ), flat AS (
            SELECT run, split, step, e.key AS category, e.value AS n FROM entries
        ), cats AS (
            SELECT DISTINCT category FROM flat
        )
        SELECT s.run, s.split, s.step, c.category, s.calls,
               coalesce(f.n, 0)::BIGINT AS flagged_calls,
               CASE WHEN s.calls > 0 THEN coalesce(f.n, 0) / s.calls END AS rate
        FROM steps s CROSS JOIN cats c
        LEFT JOIN flat f
          ON f.run = s.run AND f.split = s.split AND f.step IS NOT DISTINCT FROM s.step AND f.category = c.category
        ORDER BY s.run, s.split, s.step NULLS FIRST, c.category
        """,
        "SELECT run, step, category, round(rate, 3) AS rate FROM malformed_by_step "
        "WHERE split = 'train' AND rate > 0 ORDER BY run, step, category",
    ),
    Helper(
        "run_steps",
        "view",
        ("steps",),
        "per (run, split, step): calls, malformed calls, the step's malformed-call rate, the rate pooled over "
        "the run's last 3 steps (rolling_rate) and over all its steps so far (cumulative_rate), mean score; "
        "steps of different runs side by side",
        """
        CREATE VIEW run_steps AS
        SELECT run, split, step, trajectories, calls, malformed_calls, malformed_rate,
               sum(malformed_calls) OVER w3 / nullif(sum(calls) OVER w3, 0) AS rolling_rate,
               sum(malformed_calls) OVER wc / nullif(sum(calls) OVER wc, 0) AS cumulative_rate,
               mean_score, final_answer_rate
        FROM steps
        WHERE step IS NOT NULL
        WINDOW w3 AS (PARTITION BY run, split ORDER BY step ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
               wc AS (PARTITION BY run, split ORDER BY step ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
        ORDER BY run, split, step
        """,
        "SELECT step, run, round(rolling_rate, 3) AS rate FROM run_steps WHERE split = 'train' AND step >= 80 "
        "ORDER BY step, run",
    ),
    Helper(
        "finding_spans",
        "view",
        ("findings", "trajectories"),
        "every finding with the text it points at (span) and, for call findings, the call, its raw text and repair",
        """
        CREATE VIEW finding_spans AS
        SELECT f.trajectory_id, f.turn_index, f.call_id, f.step, f.split, f.category, f.severity,
               f.message, f.rule_id, f.char_start, f.char_end,
               substring(t.output, f.char_start + 1, f.char_end - f.char_start) AS span,
               c.function_name, c.matched_tool, c.status, c.raw, c.char_start AS call_start,
               c.repaired, c.repair_note
        FROM findings f
        JOIN trajectories t ON t.trajectory_id = f.trajectory_id
        LEFT JOIN calls c ON c.call_id = f.call_id
        """,
        "SELECT step, category, span, repaired FROM finding_spans WHERE severity = 'error' LIMIT 5",
    ),
    Helper(
        "call_findings",
        "view",
        ("calls", "findings", "trajectories"),
        "every call with its findings as a list of structs (category, severity, message, rule_id, "
        "char_start, char_end, span) and their count n_findings",
        """
        CREATE VIEW call_findings AS
        SELECT c.*, coalesce(len(fl.findings), 0)::INTEGER AS n_findings, fl.findings
        FROM calls c
        LEFT JOIN (
            SELECT call_id,
                   list(struct_pack(category, severity, message, rule_id, char_start, char_end, span)
                        ORDER BY char_start, category, rule_id) AS findings
            FROM finding_spans WHERE call_id IS NOT NULL GROUP BY call_id
        ) fl ON fl.call_id = c.call_id
        """,
        "SELECT call_id, function_name, n_findings, findings[1].category AS first FROM call_findings "
        "WHERE status = 'malformed' LIMIT 5",
    ),
    Helper(
        "garbled_names",
        "view",
        ("calls", "trajectories"),
        "function names written in calls that are not a declared tool, with the nearest declared tool "
        "(the classifier's match, else the most similar name by Jaro-Winkler), how often and at which steps",
        """
        CREATE VIEW garbled_names AS
        WITH tool_sets AS (
            SELECT md5_number(tools) AS tools_key,
                   CAST(json_extract_string(any_value(tools), '$[*].name') AS VARCHAR[]) AS declared
            FROM trajectories WHERE tools IS NOT NULL GROUP BY tools_key
        ), traj AS (
            SELECT t.trajectory_id, s.declared
            FROM (SELECT trajectory_id, md5_number(tools) AS tools_key FROM trajectories) t
            LEFT JOIN tool_sets s ON s.tools_key = t.tools_key
        ), cand AS (
            SELECT c.call_id, c.trajectory_id, c.step, c.function_name, c.matched_tool, t.declared
            FROM calls c JOIN traj t ON t.trajectory_id = c.trajectory_id
            WHERE c.function_name IS NOT NULL AND c.function_name <> ''
        ), unknown AS (
            SELECT * FROM cand
            WHERE (declared IS NOT NULL AND len(declared) > 0 AND NOT list_contains(declared, function_name))
               OR ((declared IS NULL OR len(declared) = 0)
                   AND matched_tool IS NOT NULL AND matched_tool <> function_name)
        ), nearest AS (
            SELECT call_id, arg_max(d.name, jaro_winkler_similarity(function_name, d.name)) AS nearest
            FROM unknown, unnest(declared) AS d(name) GROUP BY call_id
        ), per_call AS (
            SELECT u.*, coalesce(u.matched_tool, n.nearest) AS nearest_tool
            FROM unknown u LEFT JOIN nearest n ON n.call_id = u.call_id
        )
        SELECT function_name, mode(nearest_tool) AS nearest_tool,
               round(jaro_winkler_similarity(function_name, coalesce(mode(nearest_tool), '')), 3) AS similarity,
               count(*) AS calls, count(DISTINCT trajectory_id) AS trajectories,
               min(step) AS first_step, max(step) AS last_step
        FROM per_call GROUP BY function_name
        ORDER BY calls DESC, function_name
        """,
        "SELECT function_name, nearest_tool, calls, first_step FROM garbled_names LIMIT 10",
    ),
    Helper(
        "trajectories_at",
        "macro",
        ("trajectories",),
        "table macro trajectories_at(step, split_name := NULL, run_name := NULL): the trajectories of one step "
        "(summary columns, in dump order; NULL means any split / any run)",
        """
        CREATE MACRO trajectories_at(s, split_name := NULL, run_name := NULL) AS TABLE
        SELECT trajectory_id, run, split, step, score, n_turns, n_calls, n_malformed_calls, has_final_answer,
               truncated, tool_format, source_path, source_line
        FROM trajectories
        WHERE step = s AND (split_name IS NULL OR split = split_name) AND (run_name IS NULL OR run = run_name)
        ORDER BY run, split, source_path, source_line
        """,
        "SELECT trajectory_id, score, n_calls, n_malformed_calls FROM trajectories_at(120) "
        "WHERE n_malformed_calls > 0",
    ),
)


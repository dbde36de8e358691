#!/usr/bin/env python3
"""Generate trajlab's sample data: synthetic but realistic verl rollout dumps that tell the collapse story.

Run ``python sample_data/generate.py`` (stdlib only) to (re)write every file under ``sample_data/``; the
output is byte-for-byte identical on every run and platform (fixed seeds, no set iteration, no clocks).

What it writes (see ``sample_data/README.md`` for the story and the rates):

* ``qwen35_xml_run/rollout/{1..150}.jsonl`` -- verl 0.9.x V1 train dumps of a Qwen3.5-style XML tool run
  (tools ``search_web`` / ``fetch_web``); malformed calls are rare until step ~80, then climb to ~50%.
* ``qwen35_xml_run/validation/{0,10,..,150}.jsonl`` -- V1 validation dumps (``reward``, ``acc``, ``pred``, ``uid``).
* ``qwen35_xml_run_v07/rollout/{1..20}.jsonl`` -- the same kind of run written by verl 0.7.1's legacy trainer
  (no uid, ``acc``/``pred`` keys, ``</tool_call>user`` separator); the last file ends in a truncated line.
* ``qwen3_hermes_run/rollout/{1..40}.jsonl`` -- a Qwen3 Hermes-JSON run written by verl 0.8 (legacy, ``acc``).
* ``verl_tool_run/verl_step_records/run1/fcl-step-{N}.json`` / ``fcl-step-val-{N}.json`` -- verl-tool /
  Tool-RL-Box step records.
* ``openai_messages/agent_log.jsonl`` -- OpenAI-messages agent logs with structured ``tool_calls``.

Reusable API (other scripts load this file with importlib, so it is self-contained and works whether or not
the loader registers it in ``sys.modules``; hence no ``from __future__ import annotations`` here):

* :func:`iter_step_trajectories` yields :class:`SampleTrajectory` objects (the dump record plus the ground
  truth labels of every call) for one step of one run, in file order;
* :func:`step_records` yields just the dump records (dicts, key order as verl writes them);
* :func:`dump_line` serialises a record exactly as the run's verl version does;
* :func:`malformed_rate` is the per-call malformation probability schedule.
"""

import argparse
import json
import random
import re
import struct
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

SEED = 20260316
HERE = Path(__file__).resolve().parent

# --------------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunConfig:
    """One synthetic training run: which model format, which verl writer, how long, when it rots."""

    name: str
    tool_format: str  # qwen3_coder | hermes
    writer: str  # v1_0.9 | legacy_0.7 | legacy_0.8
    steps: int  # last train step (first is 1)
    prompts_per_step: int
    rollouts: int
    onset: int  # first step after which malformed calls start to climb
    base_rate: float  # per-call malformation probability before the onset
    final_rate: float  # probability at the last step of the schedule
    schedule_steps: int  # the step at which final_rate is reached (the run may stop earlier)
    val_every: int = 0  # 0: no validation dumps
    val_prompts: int = 0
    sft_every: int = 0  # interleaved SFT: after the onset, an SFT step every this many steps pulls the rate back
    bump_rate: float = 0.0  # with sft_every: the rate a bump climbs to just before the next SFT step


RUNS: dict[str, RunConfig] = {
    "qwen35_xml": RunConfig(
        "qwen35_xml", "qwen3_coder", "v1_0.9", steps=150, prompts_per_step=2, rollouts=4,
        onset=80, base_rate=0.015, final_rate=0.57, schedule_steps=150, val_every=10, val_prompts=6,
    ),
    # the same kind of run, an earlier attempt on verl 0.7.1: it rotted faster and crashed while writing step 20
    "qwen35_xml_v07": RunConfig(
        "qwen35_xml_v07", "qwen3_coder", "legacy_0.7", steps=20, prompts_per_step=2, rollouts=4,
        onset=10, base_rate=0.02, final_rate=0.35, schedule_steps=20,
    ),
    # the same task as qwen35_xml, trained with interleaved SFT on well-formed calls: from the same onset the
    # rate rises in short bumps, and each SFT step (every 10 steps) brings it back to the base rate
    "qwen35_xml_sft": RunConfig(
        "qwen35_xml_sft", "qwen3_coder", "v1_0.9", steps=120, prompts_per_step=2, rollouts=4,
        onset=80, base_rate=0.015, final_rate=0.015, schedule_steps=150, sft_every=10, bump_rate=0.10,
    ),
    "qwen3_hermes": RunConfig(
        "qwen3_hermes", "hermes", "legacy_0.8", steps=40, prompts_per_step=2, rollouts=4,
        onset=22, base_rate=0.02, final_rate=0.45, schedule_steps=40,
    ),
}

MAX_TOOL_RESPONSE = 256  # verl multi_turn.max_tool_response_length default
TRUNC_MARK = "...(truncated)..."  # verl's middle truncation marker


def malformed_rate(step: int, cfg: RunConfig) -> float:
    """Per-call probability that the model writes a malformed call at ``step`` (the story's schedule).

    Flat ``base_rate`` up to ``onset``, then a slightly concave climb to ``final_rate`` at ``schedule_steps``.
    """
    if step <= cfg.onset:
        return cfg.base_rate
    if cfg.sft_every:
        return cfg.base_rate + (cfg.bump_rate - cfg.base_rate) * sft_phase(step, cfg)
    x = min(1.0, (step - cfg.onset) / max(1, cfg.schedule_steps - cfg.onset))
    return cfg.base_rate + (cfg.final_rate - cfg.base_rate) * x**0.85


def sft_phase(step: int, cfg: RunConfig) -> float:
    """With interleaved SFT: how far ``step`` is into its bump (1/sft_every just after an SFT step, 1 just
    before the next); 0 before the onset or without interleaved SFT."""
    if not cfg.sft_every or step <= cfg.onset:
        return 0.0
    return ((step - cfg.onset - 1) % cfg.sft_every + 1) / cfg.sft_every


def _progress(step: int, cfg: RunConfig) -> float:
    """0 before the onset, 1 at the end of the schedule (interleaved SFT: a fifth of the bump's phase)."""
    if step <= cfg.onset:
        return 0.0
    if cfg.sft_every:
        return 0.2 * sft_phase(step, cfg)
    return min(1.0, (step - cfg.onset) / max(1, cfg.schedule_steps - cfg.onset))


def _f32(x: float) -> float:
    """A reward as verl dumps it: computed in float32, widened to a Python float (0.8 -> 0.800000011920929)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _uuid4(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# --------------------------------------------------------------------------------------------------
# A small synthetic world: places, people, companies... and questions about them
# --------------------------------------------------------------------------------------------------

_PRE = ("Ash", "Bel", "Car", "Dun", "Eld", "Fen", "Glen", "Har", "Ivel", "Kel", "Lin", "Mar", "Nor", "Oak",
        "Pem", "Ros", "Sal", "Tor", "Wex", "Brad", "Cold", "Hol", "Stan", "Whit", "Thorn", "Mel", "Ald", "Brom")
_SUF = ("ford", "mere", "bury", "wick", "haven", "stead", "field", "ton", "more", "dale", "combe", "ley",
        "worth", "gate", "by", "holm", "well", "bridge")
_FIRST = ("Ellen", "Thomas", "Margaret", "Oskar", "Priya", "Henrik", "Amelia", "Jonas", "Clara", "Rafael",
          "Ingrid", "Samuel", "Lucia", "Walter", "Mei", "Arthur", "Noor", "Felix", "Harriet", "Tomasz",
          "Beatrice", "Yusuf", "Edith", "Lars", "Agnes", "Dmitri", "Rosa", "Kenji")
_LAST = ("Marsh", "Whitcombe", "Lindqvist", "Okafor", "Brenner", "Castell", "Doyle", "Fairbairn", "Grieve",
         "Halloran", "Iversen", "Jakes", "Kowalczyk", "Lambe", "Morrow", "Nakamura", "Ostrander", "Pryce",
         "Quayle", "Rasmussen", "Sutcliffe", "Tennant", "Vasquez", "Wardlaw", "Ysen", "Zeller")
_COMPANY = ("Northwind Systems", "Halcyon Labs", "Corvid Analytics", "Brightline Holdings", "Meridian Data",
            "Tessellate Inc.", "Ironbark Software", "Quillfeather Group", "Bluefen Capital", "Arclight Media",
            "Vantage Robotics", "Kestrel Networks")
_STARTUP_A = ("Loop", "Pixel", "Quant", "Sprout", "Vector", "Nimbus", "Relay", "Cobalt", "Lumen", "Tandem",
              "Orbit", "Ferro")
_STARTUP_B = ("ly", "ware", "hub", "stack", "sense", "forge", "labs", "flow", "kit", "mind")
_FIELDS = ("Marine Biology", "Applied Optics", "Folk Music", "Soil Science", "Maritime History",
           "Glass Technology", "Textile Design", "Atmospheric Physics")
_BRIDGE_KIND = ("cast-iron arch", "stone viaduct", "suspension", "swing", "concrete arch", "cable-stayed")
_ALBUM_W1 = ("Paper", "Northern", "Glass", "Hollow", "Quiet", "Electric", "Salt", "Winter", "Copper", "Lantern")
_ALBUM_W2 = ("Lanterns", "Harbour", "Signals", "Orchard", "Machines", "Rivers", "Weather", "Tides", "Rooms")
_BAND_W = ("The Wexford Lights", "Marrow Kings", "Saltmarsh", "The Paper Cranes", "Ostrander", "Low Meadows",
           "Brightwater", "The Kelby Set", "Hollow Pines", "Velvet Harbour")
_ORDINAL = ("first", "second", "third", "fourth")


def _town(rng: random.Random) -> str:
    return rng.choice(_PRE) + rng.choice(_SUF)


def _person(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def _kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True)
class Question:
    """One dataset prompt with its answer, the facts the tools can reveal, and search queries for it."""

    qid: str
    kind: str
    text: str
    answer: str
    subject: str  # what to look up, e.g. "the Marlow Bridge in Carrowby"
    fact: str  # the sentence a good source states
    queries: tuple[str, ...]
    pages: tuple[tuple[str, str], ...]  # (title, url) of pages that state the fact
    wrong: tuple[str, ...]  # plausible wrong answers
    hops: int = 1


def _make_question(rng: random.Random, qid: str) -> Question:
    kind = rng.choice(("bridge_year", "architect", "population", "acquisition", "elevation", "director",
                       "river_length", "album", "mayor", "compare_rivers"))
    town = _town(rng)
    if kind == "bridge_year":
        name = rng.choice(_LAST)
        year = rng.randint(1836, 1988)
        kind_txt = rng.choice(_BRIDGE_KIND)
        subject = f"the {name} Bridge in {town}"
        text = rng.choice((
            f"In which year was the {name} Bridge in {town} completed?",
            f"When was the {name} Bridge at {town} finished? Give the year.",
            f"What year did construction of {town}'s {name} Bridge end?",
        ))
        fact = f"The {name} Bridge is a {kind_txt} bridge in {town}, completed in {year}."
        queries = (f"{name} Bridge {town} completed", f"{name} Bridge {town} history year built")
        pages = ((f"{name} Bridge - Wikipedia", f"https://en.wikipedia.org/wiki/{_slug(name)}_Bridge_({town})"),
                 (f"{name} Bridge | Structurae", f"https://structurae.net/en/structures/{_kebab(name)}-bridge-{town.lower()}"))
        wrong = (str(year + rng.choice((-12, -3, 1, 4, 20))), str(year - 100 + rng.randint(0, 9)))
        return Question(qid, kind, text, str(year), subject, fact, queries, pages, wrong)
    if kind == "architect":
        person = _person(rng)
        bld = rng.choice(("Library", "Town Hall", "Corn Exchange", "Observatory", "Market Hall", "Museum"))
        year = rng.randint(1870, 1975)
        subject = f"the {town} {bld}"
        text = rng.choice((
            f"Who was the architect of the {town} {bld}?",
            f"Who designed the {bld} in {town}?",
        ))
        fact = f"The {town} {bld} was designed by the architect {person} and opened in {year}."
        queries = (f"{town} {bld} architect", f"{town} {bld} designed by")
        pages = ((f"{town} {bld} - Wikipedia", f"https://en.wikipedia.org/wiki/{town}_{_slug(bld)}"),
                 (f"History of the {bld} | {town} Council", f"https://www.{town.lower()}.gov.uk/{_kebab(bld)}/history"))
        return Question(qid, kind, text, person, subject, fact, queries, pages, (_person(rng), _person(rng)))
    if kind == "population":
        year = rng.choice((2001, 2011, 2021))
        pop = rng.randint(1200, 98000)
        pops = f"{pop:,}"
        subject = f"{town}'s population in {year}"
        text = rng.choice((
            f"What was the population of {town} at the {year} census?",
            f"How many people lived in {town} according to the {year} census?",
        ))
        fact = f"At the {year} census {town} had a population of {pops}."
        queries = (f"{town} population {year} census", f"{town} census {year} inhabitants")
        pages = ((f"{town} - Wikipedia", f"https://en.wikipedia.org/wiki/{town}"),
                 (f"{town} (Parish) - Population Statistics", f"https://www.citypopulation.de/en/uk/admin/{town.lower()}"))
        wrong = (f"{pop + rng.randint(300, 4000):,}", f"{max(900, pop - rng.randint(300, 4000)):,}")
        return Question(qid, kind, text, pops, subject, fact, queries, pages, wrong)
    if kind == "acquisition":
        startup = rng.choice(_STARTUP_A) + rng.choice(_STARTUP_B)
        comp = rng.choice(_COMPANY)
        year = rng.randint(2009, 2024)
        subject = f"the acquisition of {startup}"
        text = rng.choice((
            f"Which company acquired the start-up {startup} in {year}?",
            f"{startup} was bought in {year}. Who bought it?",
        ))
        fact = f"In {year} {startup} was acquired by {comp} for an undisclosed sum."
        queries = (f"{startup} acquired {year}", f"{startup} acquisition")
        pages = ((f"{comp} acquires {startup} - TechCrunch", f"https://techcrunch.com/{year}/0{rng.randint(1, 9)}/{rng.randint(10, 28)}/{_kebab(comp)}-acquires-{startup.lower()}/"),
                 (f"{startup} - Crunchbase Company Profile", f"https://www.crunchbase.com/organization/{startup.lower()}"))
        others = [c for c in _COMPANY if c != comp]
        return Question(qid, kind, text, comp, subject, fact, queries, pages, (rng.choice(others), rng.choice(others)))
    if kind == "elevation":
        peak = rng.choice(("Ben ", "Mount ", "Sgurr ", "Pic de ", "")) + rng.choice(_PRE) + rng.choice(("horn", "fell", "pike", "crag", "ridge"))
        elev = rng.randint(480, 4300)
        subject = f"the elevation of {peak}"
        text = rng.choice((
            f"How high is {peak} above sea level, in metres?",
            f"What is the elevation of {peak} (in metres)?",
        ))
        fact = f"{peak} rises to {elev} m ({round(elev * 3.28084):,} ft) above sea level."
        queries = (f"{peak} elevation metres", f"{peak} height")
        pages = ((f"{peak} - Wikipedia", f"https://en.wikipedia.org/wiki/{_slug(peak)}"),
                 (f"{peak} - Peakbagger.com", f"https://www.peakbagger.com/peak.aspx?pid={rng.randint(10000, 99999)}"))
        return Question(qid, kind, text, str(elev), subject, fact, queries, pages,
                        (str(elev + rng.randint(5, 120)), str(round(elev * 3.28084))))
    if kind == "director":
        person = _person(rng)
        fld = rng.choice(_FIELDS)
        year = rng.randint(1890, 1990)
        subject = f"the first director of the {town} Institute of {fld}"
        text = f"Who was the first director of the {town} Institute of {fld}?"
        fact = f"The {town} Institute of {fld} was founded in {year}; its first director was {person}."
        queries = (f"{town} Institute of {fld} first director", f"{town} Institute of {fld} founded {year}")
        pages = ((f"{town} Institute of {fld} - Wikipedia", f"https://en.wikipedia.org/wiki/{town}_Institute_of_{_slug(fld)}"),
                 (f"Our history | {town} Institute of {fld}", f"https://www.{town.lower()}-{_kebab(fld)}.ac.uk/about/history"))
        return Question(qid, kind, text, person, subject, fact, queries, pages, (_person(rng), _person(rng)))
    if kind == "river_length":
        river = rng.choice(_PRE) + rng.choice(("e", "a", "en", "wy", "ey", "ock"))
        length = rng.randint(18, 410)
        subject = f"the length of the River {river}"
        text = rng.choice((
            f"How long is the River {river}, in kilometres?",
            f"What is the length of the River {river} in km?",
        ))
        fact = f"The River {river} flows for {length} km ({round(length * 0.621371)} mi) before joining the sea near {town}."
        queries = (f"River {river} length km", f"River {river} {town}")
        pages = ((f"River {river} - Wikipedia", f"https://en.wikipedia.org/wiki/River_{river}"),
                 (f"River {river} catchment | Environment Agency", f"https://environment.data.gov.uk/catchment-planning/River/{river}"))
        return Question(qid, kind, text, str(length), subject, fact, queries, pages,
                        (str(length + rng.randint(3, 40)), str(round(length * 0.621371))))
    if kind == "album":
        band = rng.choice(_BAND_W)
        ordn = rng.choice(_ORDINAL)
        title = f"{rng.choice(_ALBUM_W1)} {rng.choice(_ALBUM_W2)}"
        year = rng.randint(1979, 2023)
        subject = f"{band}'s {ordn} studio album"
        text = f"What is the title of {band}'s {ordn} studio album?"
        fact = f"{title} is the {ordn} studio album by {band}, released in {year}."
        queries = (f"{band} {ordn} studio album", f"{band} discography")
        pages = ((f"{band} discography - Wikipedia", f"https://en.wikipedia.org/wiki/{_slug(band)}_discography"),
                 (f"{band} - {title} | Releases | Discogs", f"https://www.discogs.com/master/{rng.randint(100000, 999999)}-{_kebab(band)}-{_kebab(title)}"))
        wrong = (f"{rng.choice(_ALBUM_W1)} {rng.choice(_ALBUM_W2)}", f"{rng.choice(_ALBUM_W1)} {rng.choice(_ALBUM_W2)}")
        return Question(qid, kind, text, title, subject, fact, queries, pages, wrong)
    if kind == "mayor":
        name = rng.choice(_LAST)
        year = rng.randint(1860, 1980)
        mayor = _person(rng)
        subject = f"who was mayor of {town} when the {name} Bridge was completed"
        text = f"Who was the mayor of {town} when the {name} Bridge there was completed?"
        fact = f"The {name} Bridge in {town} was completed in {year}, when {mayor} was mayor of {town}."
        queries = (f"{name} Bridge {town} completed", f"mayor of {town} {year}")
        pages = ((f"{name} Bridge - Wikipedia", f"https://en.wikipedia.org/wiki/{_slug(name)}_Bridge_({town})"),
                 (f"List of mayors of {town} - Wikipedia", f"https://en.wikipedia.org/wiki/List_of_mayors_of_{town}"))
        return Question(qid, kind, text, mayor, subject, fact, queries, pages, (_person(rng), _person(rng)), hops=2)
    # compare_rivers
    a = rng.choice(_PRE) + rng.choice(("e", "a", "en"))
    b = rng.choice(_PRE) + rng.choice(("wy", "ey", "ock"))
    la, lb = rng.sample(range(20, 300), 2)
    longer = a if la > lb else b
    subject = f"the lengths of the Rivers {a} and {b}"
    text = f"Which is longer, the River {a} or the River {b}?"
    fact = f"The River {a} is {la} km long and the River {b} is {lb} km long."
    queries = (f"River {a} length", f"River {b} length")
    pages = ((f"River {a} - Wikipedia", f"https://en.wikipedia.org/wiki/River_{a}"),
             (f"River {b} - Wikipedia", f"https://en.wikipedia.org/wiki/River_{b}"))
    return Question(qid, kind, text, f"River {longer}", subject, fact, queries, pages,
                    (f"River {b if longer == a else a}",), hops=2)


@cache
def question_pool(name: str, size: int = 480) -> tuple[Question, ...]:
    """A fixed pool of questions (``name`` selects an independent pool, e.g. ``train`` / ``val``)."""
    rng = random.Random(f"{SEED}:questions:{name}")
    return tuple(_make_question(rng, f"{name}-{i:04d}") for i in range(size))


# --------------------------------------------------------------------------------------------------
# Tool schemas and prompts
# --------------------------------------------------------------------------------------------------

XML_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "search_web",
        "description": "Search the web. Returns the top results (title, url, snippet) for every query.",
        "parameters": {"type": "object", "properties": {"queries": {
            "type": "array", "items": {"type": "string"},
            "description": "One or more search queries, run in parallel."}}, "required": ["queries"]}}},
    {"type": "function", "function": {
        "name": "fetch_web",
        "description": "Fetch web pages and return their main text.",
        "parameters": {"type": "object", "properties": {"urls": {
            "type": "array", "items": {"type": "string"},
            "description": "Absolute http(s) URLs to fetch."}}, "required": ["urls"]}}},
]
XML_PARAM = {"search_web": "queries", "fetch_web": "urls"}

HERMES_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "search",
        "description": "Searches a Wikipedia index and returns the top 3 passages for each query.",
        "parameters": {"type": "object", "properties": {"query_list": {
            "type": "array", "items": {"type": "string"}, "description": "A list of search queries."}},
            "required": ["query_list"]}}},
    {"type": "function", "function": {
        "name": "calculator",
        "description": "Evaluates an arithmetic expression and returns the result.",
        "parameters": {"type": "object", "properties": {"expression": {
            "type": "string", "description": "A Python arithmetic expression, e.g. '(3 + 4) * 2'."}},
            "required": ["expression"]}}},
]

SYSTEM_XML = ("You are a careful research assistant. Use the tools to look things up before answering. "
              "When you are done, give the final answer inside <answer></answer>.")
SYSTEM_HERMES = ("You are a helpful assistant. Answer the question; search when you need facts. "
                 "Put the final answer inside <answer></answer>.")


def qwen35_system_block(tools: list[dict[str, Any]], system: str) -> str:
    """The system turn a Qwen3.5/3.6 chat template renders with ``tools=`` (after special tokens are stripped)."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n" + lines + "\n</tools>\n\n"
        "If you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
        "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
        "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\n"
        "multiple lines\n</parameter>\n</function>\n</tool_call>\n\n"
        "<IMPORTANT>\nReminder:\n"
        "- Function calls MUST follow the specified format: an inner <function=...></function> block must be "
        "nested within <tool_call></tool_call> XML tags\n"
        "- Required parameters MUST be specified\n"
        "- You may provide optional reasoning for your function call in natural language BEFORE the function "
        "call, but NOT after\n"
        "- If there is no function call available, answer the question like normal with your current knowledge "
        "and do not tell the user about function calls\n</IMPORTANT>\n\n" + system
    )


def qwen3_hermes_system_block(tools: list[dict[str, Any]], system: str) -> str:
    """The system turn of the Qwen3 (Hermes JSON) chat template rendered with ``tools=``."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "system\n" + system + "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + lines +
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>"
    )


def prompt_text(cfg: RunConfig, q: Question) -> str:
    """The decoded ``input`` of a dump line: system block, user question, generation prompt."""
    if cfg.tool_format == "qwen3_coder":
        block = qwen35_system_block(XML_TOOLS, SYSTEM_XML)
    else:
        block = qwen3_hermes_system_block(HERMES_TOOLS, SYSTEM_HERMES)
    return f"{block}\nuser\n{q.text}\nassistant\n"


# --------------------------------------------------------------------------------------------------
# Tool outputs
# --------------------------------------------------------------------------------------------------

_FILLER = (
    "Coordinates, history, and notable events are listed below.",
    "This article is about the local landmark; for other uses see the disambiguation page.",
    "It is a listed structure and appears in several regional guides.",
    "The record was last updated by the archive team and may be incomplete.",
    "Local newspapers covered the opening ceremony at length.",
    "See also the list of similar places in the county.",
    "Figures are rounded and may differ between sources.",
    "Several books on regional history discuss it in detail.",
)
_DISTRACT_SITES = (
    ("Tripadvisor", "https://www.tripadvisor.co.uk/Attraction_Review-g{n}-d{m}"),
    ("Reddit", "https://www.reddit.com/r/AskHistorians/comments/{k}/"),
    ("Quora", "https://www.quora.com/What-is-{k}"),
    ("Facebook", "https://www.facebook.com/groups/{k}/"),
    ("YouTube", "https://www.youtube.com/watch?v={k}"),
)


def truncate_middle(text: str, limit: int = MAX_TOOL_RESPONSE) -> str:
    """verl's default tool-response truncation: head + ``...(truncated)...`` + tail."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + TRUNC_MARK + text[-half:]


def _rand_token(rng: random.Random, n: int = 11) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
    return "".join(rng.choice(alphabet) for _ in range(n))


def search_response(rng: random.Random, q: Question, queries: list[str]) -> str:
    """What a ``search_web`` / ``search`` tool returns (before verl truncates it)."""
    parts = []
    for query in queries:
        hits = []
        good = list(q.pages)
        rng.shuffle(good)
        n_hits = rng.randint(3, 4)
        for i in range(n_hits):
            if good and (i == 0 or rng.random() < 0.5):
                title, url = good.pop()
                snippet = q.fact + " " + rng.choice(_FILLER)
            else:
                site, pat = rng.choice(_DISTRACT_SITES)
                url = pat.format(n=rng.randint(180000, 190000), m=rng.randint(1000000, 9999999), k=_rand_token(rng))
                title = f"{q.subject[0].upper()}{q.subject[1:]} - {site}"
                snippet = rng.choice(_FILLER)
            hits.append(f"{i + 1}. {title}\n   {url}\n   {snippet}")
        parts.append(f'Results for "{query}":\n' + "\n".join(hits))
    return "\n\n".join(parts)


def fetch_response(rng: random.Random, q: Question, urls: list[str]) -> str:
    """What ``fetch_web`` returns: the main text of each page."""
    parts = []
    for url in urls:
        title = next((t for t, u in q.pages if u == url), q.subject)
        paras = [q.fact, rng.choice(_FILLER), rng.choice(_FILLER)]
        rng.shuffle(paras)
        parts.append(f"URL: {url}\nTitle: {title}\n\n" + "\n\n".join(paras))
    return "\n\n---\n\n".join(parts)


# --------------------------------------------------------------------------------------------------
# Model text (thinking, calls, answers)
# --------------------------------------------------------------------------------------------------

_THINK_FIRST = (
    "The user asks about {subject}. I don't know this for certain, so I'll search the web.",
    "I need to find {subject}. Let me search for it.",
    "To answer this I should look up {subject}. I'll run a search first.",
    "This is a factual question about {subject}. Searching is the safest way to get it right.",
    "Let me think. The question is about {subject}; I should verify it with a search.",
)
_THINK_FETCH = (
    "The snippet is cut off. I'll open the {site} page to confirm.",
    "The results mention it but I want the exact figure. Fetching the {site} page.",
    "One result looks relevant. Let me read the {site} page.",
)
_THINK_SECOND = (
    "That gives me part of the answer. Now I need {subject}.",
    "Good, one part is known. Next I'll search for {subject}.",
)
_THINK_FINAL = (
    "According to {site}: {fact} So the answer is {answer}.",
    "The page says: {fact} The answer is {answer}.",
    "{fact} That answers the question: {answer}.",
)
_THINK_DRIFT = ("我需要确认一下。", "英文明确 search again.", "wait wait, let me search again again.",
                "the the results results", "明确搜索结果。")
_TEXT_AFTER = (
    "\n\nI will wait for the search results before answering.",
    "\n\nLet me know if you need anything else!",
    "\n\nThe results will tell us the answer.",
    "\nuser",
    "\n\n(Waiting for tool output...)",
)
_ANSWER_SENT = (
    "{answer_cap}.",
    "Based on the sources, the answer is {answer}.",
    "The answer is {answer}.",
)

GARBLED_NAMES = {
    "search_web": ("search_web英文明确", "search_web英文", "search_webhook", "search_web_search", "search_web明确",
                   "search_websearch", "search_web2"),
    "fetch_web": ("fetch_web_v2", "fetch_webpage", "fetch_web英文明确", "fetch_webs", "fetch_web网页"),
    "search": ("web_search", "search_tool", "google_search", "searching", "search_web"),
    "calculator": ("calc", "calculate", "python"),
}
WRONG_PARAM = {"search_web": "query", "fetch_web": "url", "search": "query", "calculator": "expr"}

# malformation kinds, and how likely each one is early (before the onset) and late (end of the schedule)
XML_DEFECTS = (
    # kind, weight early, weight late
    ("garbled_name", 0.10, 0.34),
    ("stray_attribute", 0.05, 0.22),
    ("unclosed_parameter", 0.15, 0.07),
    ("unclosed_function", 0.05, 0.04),
    ("missing_tool_call_close", 0.15, 0.07),
    ("json_in_xml", 0.10, 0.07),
    ("text_after_call", 0.30, 0.08),
    ("wrong_parameter", 0.10, 0.06),
    ("truncated_call", 0.00, 0.05),
)
HERMES_DEFECTS = (
    ("invalid_json", 0.40, 0.25),
    ("name_equals_hybrid", 0.10, 0.20),
    ("unknown_function", 0.05, 0.30),
    ("double_braces", 0.15, 0.07),
    ("missing_arguments_key", 0.15, 0.08),
    ("arguments_string", 0.15, 0.05),
    ("truncated_call", 0.00, 0.05),
)
# defects whose call verl executes but answers with an error tool response
_TOOL_ERROR = ("garbled_name", "stray_attribute", "wrong_parameter", "unknown_function", "arguments_string")
# defects after which verl's parser finds no call at all, so the trajectory ends with that turn
_ENDS_TRAJECTORY = ("json_in_xml", "truncated_call", "invalid_json", "name_equals_hybrid", "double_braces",
                    "missing_arguments_key")


def _pick_defects(rng: random.Random, table: tuple[tuple[str, float, float], ...], prog: float) -> list[str]:
    weights = [e + (late - e) * prog for _, e, late in table]
    first = rng.choices([k for k, _, _ in table], weights)[0]
    out = [first]
    # late in the run defects pile up: a garbled name often comes with stray attributes
    if first == "garbled_name" and rng.random() < 0.35 * prog:
        out.append("stray_attribute")
    return out


def xml_call(name: str, param: str, values: list[str], defects: list[str], rng: random.Random) -> tuple[str, str]:
    """Render one Qwen3-Coder/Qwen3.5 XML call with the given defects; returns (text, name as written)."""
    value = json.dumps(values, ensure_ascii=False)
    written = name
    if "garbled_name" in defects:
        written = rng.choice(GARBLED_NAMES[name])
    if "json_in_xml" in defects:
        body = json.dumps({"name": written, "arguments": {param: values}}, ensure_ascii=False)
        return f"<tool_call>\n{body}\n</tool_call>", written
    pname = WRONG_PARAM[name] if "wrong_parameter" in defects else param
    p_close = '</parameter v2="">' if "stray_attribute" in defects else "</parameter>"
    f_close = "</function>"
    if "stray_attribute" in defects and rng.random() < 0.6:
        f_close = '</function v2="">'
    lines = ["<tool_call>", f"<function={written}>", f"<parameter={pname}>", value]
    if "unclosed_parameter" not in defects:
        lines.append(p_close)
    if "unclosed_function" not in defects:
        lines.append(f_close)
    if "missing_tool_call_close" not in defects:
        lines.append("</tool_call>")
    text = "\n".join(lines)
    if "text_after_call" in defects:
        text += rng.choice(_TEXT_AFTER)
    return text, written


def hermes_call(name: str, args: dict[str, Any], defects: list[str], rng: random.Random) -> tuple[str, str]:
    """Render one Hermes JSON call with the given defects; returns (text, name as written)."""
    written = rng.choice(GARBLED_NAMES[name]) if "unknown_function" in defects else name
    a = json.dumps(args, ensure_ascii=False)
    if "invalid_json" in defects:
        style = rng.randrange(4)
        if style == 0:  # missing closing brace
            body = f'{{"name": "{written}", "arguments": {a}'
        elif style == 1:  # trailing comma
            body = f'{{"name": "{written}", "arguments": {a[:-1]},}}}}'
        elif style == 2:  # "key=value" strings instead of pairs
            inner = ", ".join(f'"{k}={v[0] if isinstance(v, list) else v}"' for k, v in args.items())
            body = f'{{"name": "{written}", "arguments": {{{inner}}}}}'
        else:  # single quotes
            body = "{'name': '" + written + "', 'arguments': " + a.replace('"', "'") + "}"
    elif "name_equals_hybrid" in defects:
        body = f'{{"name="{written}", "arguments": {a}}}'
    elif "double_braces" in defects:
        body = f'{{{{"name": "{written}", "arguments": {a}}}}}'
    elif "missing_arguments_key" in defects:
        flat = {"name": written, **args}
        body = json.dumps(flat, ensure_ascii=False)
    elif "arguments_string" in defects:
        body = json.dumps({"name": written, "arguments": a}, ensure_ascii=False)
    else:
        body = json.dumps({"name": written, "arguments": args}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>", written


# --------------------------------------------------------------------------------------------------
# Trajectory builder
# --------------------------------------------------------------------------------------------------


@dataclass
class CallLabel:
    """Ground truth for one call the generator wrote."""

    turn: int  # index of the assistant turn (0-based, counting assistant turns only)
    function: str  # intended tool
    written_name: str
    defects: list[str]

    @property
    def malformed(self) -> bool:
        return bool(self.defects)


@dataclass
class SampleTrajectory:
    """One generated trajectory: the dump record and what the generator knows about it."""

    run: str
    split: str
    step: int
    question: Question
    record: dict[str, Any]
    calls: list[CallLabel] = field(default_factory=list)
    has_final_answer: bool = False
    truncated: bool = False
    correct: bool = False

    @property
    def n_malformed(self) -> int:
        return sum(c.malformed for c in self.calls)


@dataclass
class _Turn:
    think: str
    calls: list[tuple[str, Any]]  # (tool, argument values)


def _plan(rng: random.Random, q: Question, cfg: RunConfig) -> list[_Turn]:
    """The tool-use turns a competent model would take for this question (before any malformation)."""
    turns: list[_Turn] = []
    if cfg.tool_format == "qwen3_coder":
        first_q = [q.queries[0]] if q.hops == 1 and rng.random() < 0.6 else list(q.queries[: 1 + (q.kind == "compare_rivers")])
        if q.hops == 1 and len(first_q) == 1 and rng.random() < 0.3:
            first_q.append(q.queries[1])
        turns.append(_Turn(rng.choice(_THINK_FIRST).format(subject=q.subject), [("search_web", first_q)]))
        if q.kind == "mayor":
            turns.append(_Turn(rng.choice(_THINK_SECOND).format(subject=q.subject), [("search_web", [q.queries[1]])]))
        r = rng.random()
        if r < 0.45:
            site = q.pages[0][0].split(" - ")[-1].split(" | ")[-1]
            urls = [q.pages[0][1]]
            if rng.random() < 0.25:
                urls.append(q.pages[1][1])
            turns.append(_Turn(rng.choice(_THINK_FETCH).format(site=site), [("fetch_web", urls)]))
        elif r < 0.55:  # parallel calls in one turn
            turns[-1].calls.append(("fetch_web", [q.pages[0][1]]))
    else:
        turns.append(_Turn(rng.choice(_THINK_FIRST).format(subject=q.subject),
                           [("search", {"query_list": [q.queries[0]]})]))
        if q.hops == 2 or rng.random() < 0.35:
            turns.append(_Turn(rng.choice(_THINK_SECOND).format(subject=q.subject),
                               [("search", {"query_list": [q.queries[1]]})]))
        if q.kind in ("elevation", "river_length", "population") and rng.random() < 0.4:
            n = q.answer.replace(",", "")
            turns.append(_Turn("Let me double-check the number with the calculator.",
                               [("calculator", {"expression": f"{n} * 1"})]))
    return turns


def _tool_result(rng: random.Random, cfg: RunConfig, q: Question, tool: str, values: Any, written: str,
                 defects: list[str]) -> str:
    """The tool-response text verl puts into the conversation for one call (truncated like verl does)."""
    names = [t["function"]["name"] for t in (XML_TOOLS if cfg.tool_format == "qwen3_coder" else HERMES_TOOLS)]
    param = XML_PARAM.get(tool) if cfg.tool_format == "qwen3_coder" else next(iter(values))
    legacy07 = cfg.writer == "legacy_0.7"
    if written not in names:
        return f"Error when executing tool: '{written}'" if legacy07 else \
            f"Unknown function '{written}'. Available tools: {names}"
    if "wrong_parameter" in defects:
        return f"Error when executing tool: '{param}'" if legacy07 else f"Error executing tool '{written}': '{param}'"
    if "arguments_string" in defects:  # double-encoded arguments: the tool receives a str, not a dict
        return f"Error executing tool '{written}': 'str' object has no attribute 'get'"
    if "stray_attribute" in defects:
        msg = f"{param} must be a list of strings, got str"
        return f"Error when executing tool: {msg}" if legacy07 else f"Error executing tool '{written}': {msg}"
    if tool == "search_web":
        text = search_response(rng, q, values)
    elif tool == "fetch_web":
        text = fetch_response(rng, q, values)
    elif tool == "search":
        text = search_response(rng, q, values["query_list"])
    else:
        expr = values["expression"]
        text = str(expr.split(" * ")[0]) if " * " in expr else "Error: could not evaluate"
    return truncate_middle(text)


def _cut_response(text: str, rng: random.Random) -> str:
    """Cut a text the way ``rollout.response_length`` does: somewhere in the middle."""
    return text[: rng.randint(max(1, len(text) // 3), max(2, len(text) - 1))]


def build_trajectory(rng: random.Random, cfg: RunConfig, q: Question, step: int, *, split: str = "train") -> SampleTrajectory:
    """Build one trajectory (``output`` text, labels, score) for question ``q`` at ``step``."""
    prog = _progress(step, cfg)
    p_bad = malformed_rate(step, cfg) * (0.5 if split == "val" else 1.0)
    xml = cfg.tool_format == "qwen3_coder"
    sep_lead = "\n" if cfg.writer == "v1_0.9" else ""
    defect_table = XML_DEFECTS if xml else HERMES_DEFECTS
    traj = SampleTrajectory(cfg.name, split, step, q, record={})
    out: list[str] = []
    plan = _plan(rng, q, cfg)
    any_error = False
    ended = False
    for t_idx, turn in enumerate(plan):
        think = turn.think
        if prog > 0 and rng.random() < 0.5 * prog:
            think = think + " " + rng.choice(_THINK_DRIFT)
        pieces = [f"<think>\n{think}\n</think>\n\n"]
        results: list[str] = []
        turn_ends = False
        for c_idx, (tool, values) in enumerate(turn.calls):
            defects = _pick_defects(rng, defect_table, prog) if rng.random() < p_bad else []
            if "text_after_call" in defects and c_idx < len(turn.calls) - 1:
                # text between two calls of one turn is ambiguous; keep the label unambiguous instead
                defects = ["missing_tool_call_close"]
            if xml:
                text, written = xml_call(tool, XML_PARAM[tool], values, defects, rng)
            else:
                text, written = hermes_call(tool, values, defects, rng)
            if "truncated_call" in defects:
                cut = rng.randint(len("<tool_call>\n") + 3, max(len("<tool_call>\n") + 4, len(text) - 3))
                text = text[:cut]
            traj.calls.append(CallLabel(t_idx, tool, written, defects))
            pieces.append(("\n" if c_idx else "") + text)
            if "truncated_call" in defects:
                traj.truncated = True
                turn_ends = True
                break
            if any(d in _ENDS_TRAJECTORY for d in defects):
                turn_ends = True  # the parser returns no call for it; if it is the only call the run stops
                continue
            results.append(_tool_result(rng, cfg, q, tool, values, written, defects))
            if any(d in _TOOL_ERROR for d in defects):
                any_error = True
        out.append("".join(pieces))
        if traj.truncated:
            ended = True
            break
        if turn_ends and not results:
            ended = True
            any_error = True
            break
        if turn_ends:
            any_error = True
        body = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in results)
        out.append(f"{sep_lead}user\n{body}\nassistant\n")
    if not ended:
        # the final answer turn (or, late in the run, a rambling turn cut by the response length)
        if prog > 0 and rng.random() < 0.25 * prog:
            ramble = " ".join(rng.choice(_THINK_DRIFT) for _ in range(rng.randint(6, 14)))
            out.append(_cut_response(f"<think>\n{ramble} {ramble}", rng))
            traj.truncated = True
        else:
            p_ok = (0.45 + 0.3 * min(step, cfg.onset) / cfg.onset) * (1.0 - 0.95 * prog)
            if any_error:
                p_ok *= 0.25
            if split == "val":
                p_ok = min(0.95, p_ok + 0.1)
            correct = rng.random() < p_ok
            answer = q.answer if correct else rng.choice(q.wrong)
            site = q.pages[0][0].split(" - ")[-1].split(" | ")[-1]
            fact = q.fact if correct else q.fact.replace(q.answer, answer)
            think = rng.choice(_THINK_FINAL).format(site=site, fact=fact, answer=answer)
            sent = rng.choice(_ANSWER_SENT).format(answer=answer, answer_cap=answer[:1].upper() + answer[1:])
            out.append(f"<think>\n{think}\n</think>\n\n{sent}\n\n<answer>{answer}</answer>")
            traj.has_final_answer = True
            traj.correct = correct
    traj.record = {"output": "".join(out)}
    return traj


def _score(traj: SampleTrajectory) -> tuple[float, float, str]:
    """(score, acc, pred) as a token-F1 style reward function would return them."""
    if not traj.has_final_answer:
        return 0.0, 0.0, ""
    out = traj.record["output"]
    pred = out[out.rfind("<answer>") + 8: out.rfind("</answer>")]
    if traj.correct:
        return 1.0, 1.0, pred
    gold, got = set(traj.question.answer.lower().split()), pred.lower().split()
    overlap = sum(1 for w in got if w in gold)
    if overlap:
        p, r = overlap / len(got), overlap / len(gold)
        return _f32(2 * p * r / (p + r)), 0.0, pred
    return 0.0, 0.0, pred


# --------------------------------------------------------------------------------------------------
# Dump records per verl writer
# --------------------------------------------------------------------------------------------------


def _np_str_list(values: list[str]) -> str:
    """``str(numpy.array(values))`` as verl 0.8's ``json.dumps(default=str)`` writes an ndarray."""
    return "[" + " ".join("'" + v.replace("'", "\\'") + "'" for v in values) + "]"


def iter_step_trajectories(step: int, *, run: str = "qwen35_xml", split: str = "train",
                           prompts_per_step: int | None = None, rollouts: int | None = None,
                           total_steps: int | None = None, seed: int = SEED) -> Iterator[SampleTrajectory]:
    """Yield the trajectories of one dump file (``{step}.jsonl``) of ``run``, in file order.

    ``prompts_per_step`` / ``rollouts`` override the run's batch shape and ``total_steps`` stretches the
    malformation schedule (onset and end scale with it), which is how ``benchmarks/gen_large_dump.py`` makes
    a long run. Each step is generated from its own seeded RNG, so steps can be produced independently
    (in parallel) and always come out the same.
    """
    base = RUNS[run]
    cfg = base
    if total_steps and total_steps != base.schedule_steps:
        scale = total_steps / base.schedule_steps
        cfg = RunConfig(base.name, base.tool_format, base.writer, total_steps, base.prompts_per_step,
                        base.rollouts, onset=max(1, round(base.onset * scale)), base_rate=base.base_rate,
                        final_rate=base.final_rate, schedule_steps=total_steps)
    rng = random.Random(f"{seed}:{run}:{split}:{step}")
    if split == "val":
        n_prompts, n_roll = base.val_prompts, 1
        pool = question_pool("val", max(base.val_prompts, 1))
        questions = list(pool[: base.val_prompts])
    else:
        n_prompts = prompts_per_step or base.prompts_per_step
        n_roll = rollouts or base.rollouts
        pool = question_pool("train")
        questions = [rng.choice(pool) for _ in range(n_prompts)]
    trajs: list[tuple[str, SampleTrajectory]] = []
    for q in questions:
        group = _uuid4(rng)
        inp = prompt_text(cfg, q)
        for session in range(n_roll):
            t = build_trajectory(rng, cfg, q, step, split=split)
            score, acc, pred = _score(t)
            output = t.record["output"]
            if cfg.writer == "v1_0.9":
                rec: dict[str, Any] = {"input": inp, "output": output, "gts": q.answer, "score": score, "step": step}
                if split == "val":
                    rec.update({"reward": score, "acc": acc, "pred": pred})
                rec["uid"] = f"{group}_{session}_0"
            elif cfg.writer == "legacy_0.7":
                rec = {"input": inp, "output": output, "gts": q.answer, "score": score, "step": step,
                       "acc": acc, "pred": pred}
            else:  # legacy_0.8, compute_score returns a float -> only "acc"; gts is an ndarray -> str()
                rec = {"input": inp, "output": output, "gts": _np_str_list([q.answer]), "score": score,
                       "step": step, "acc": score}
            t.record = rec
            trajs.append((rec.get("uid", ""), t))
    if cfg.writer == "v1_0.9":
        trajs.sort(key=lambda x: x[0])  # V1 sorts rows by (uid, session, index)
    else:
        rng.shuffle(trajs)  # trainer.balance_batch reorders legacy rows
    for _, t in trajs:
        yield t


def step_records(step: int, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """The dump records (dicts) of one step; same arguments as :func:`iter_step_trajectories`."""
    for t in iter_step_trajectories(step, **kwargs):
        yield t.record


def dump_line(record: dict[str, Any]) -> str:
    """One dump line as verl writes it: ``json.dumps(entry, ensure_ascii=False)`` + newline."""
    return json.dumps(record, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------------
# verl-tool / Tool-RL-Box step records (Qwen2.5, Hermes, special tokens kept)
# --------------------------------------------------------------------------------------------------

FCL_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_flight_details", "description": "Get the available flights between two cities on a date.",
                                      "parameters": {"type": "object", "properties": {
                                          "origin": {"type": "string", "description": "Departure city."},
                                          "destination": {"type": "string", "description": "Arrival city."},
                                          "date": {"type": "string", "description": "Date, YYYY-MM-DD."}},
                                          "required": ["origin", "destination"]}}},
    {"type": "function", "function": {"name": "reserve_flight", "description": "Book a flight for a user.",
                                      "parameters": {"type": "object", "properties": {
                                          "user_id": {"type": "string", "description": "The user's id."},
                                          "flight_no": {"type": "string", "description": "Flight number."}},
                                          "required": ["user_id", "flight_no"]}}},
    {"type": "function", "function": {"name": "view_messages_between_users", "description": "List the messages one user sent another.",
                                      "parameters": {"type": "object", "properties": {
                                          "sender_name": {"type": "string", "description": "Sender."},
                                          "receiver_name": {"type": "string", "description": "Receiver."}},
                                          "required": ["sender_name", "receiver_name"]}}},
    {"type": "function", "function": {"name": "send_message", "description": "Send a text message.",
                                      "parameters": {"type": "object", "properties": {
                                          "sender_name": {"type": "string", "description": "Sender."},
                                          "receiver_name": {"type": "string", "description": "Receiver."},
                                          "message": {"type": "string", "description": "Text to send."}},
                                          "required": ["sender_name", "receiver_name", "message"]}}},
]
_CITIES = ("Beijing", "Shanghai", "Shenzhen", "Nanjing", "Chengdu", "Hangzhou", "Wuhan", "Xi'an")
_USERS = ("Helen", "Grace", "Frank", "Irene", "Kevin", "Laura")


def _fcl_task(rng: random.Random, idx: int) -> dict[str, Any]:
    if rng.random() < 0.5:
        a, b = rng.sample(_CITIES, 2)
        day = rng.randint(1, 28)
        date = f"2024-07-{day:02d}"
        flight = f"{rng.choice(('CA', 'MU', 'CZ', 'HU'))}{rng.randint(1000, 9999)}"
        uid = f"{rng.choice(_USERS).lower()}{rng.randint(10, 99)}"
        return {
            "id": f"multi_turn_base_{idx}",
            "question": f"I need to book a flight from {a} to {b} on July {day}th. My user id is {uid}.",
            "steps": [("get_flight_details", {"origin": a, "destination": b, "date": date}),
                      ("reserve_flight", {"user_id": uid, "flight_no": flight})],
            "obs": [json.dumps({"flights": [{"flight_no": flight, "depart": f"{rng.randint(6, 21):02d}:{rng.choice(('05', '30', '45'))}", "price": rng.randint(600, 2400)}]}),
                    json.dumps({"status": True, "booking_id": f"B{rng.randint(100000, 999999)}"})],
        }
    s, r = rng.sample(_USERS, 2)
    return {
        "id": f"multi_turn_base_{idx}",
        "question": f"I am {s}. Check the messages {r} sent me, then reply to {r} that I will call tonight.",
        "steps": [("view_messages_between_users", {"sender_name": r, "receiver_name": s}),
                  ("send_message", {"sender_name": s, "receiver_name": r, "message": "I will call you tonight."})],
        "obs": [json.dumps({"messages": [{"id": rng.randint(1, 9), "text": rng.choice(("Can you call me?", "Are we still on for Friday?", "Please send the report."))}]}),
                json.dumps({"sent_status": True, "message_id": rng.randint(10, 99)})],
    }


def _fcl_call(rng: random.Random, name: str, args: dict[str, Any], bad: bool) -> tuple[str, bool]:
    """A Hermes call as a Qwen2.5 model writes it; ``bad`` picks one of the shapes seen in Tool-RL-Box logs."""
    if not bad:
        return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>", True
    style = rng.randrange(3)
    if style == 0:  # arguments written as a set of "k=v" strings
        inner = ", ".join(f'"{k}={v}"' for k, v in args.items())
        return f'<tool_call>\n{{"name": "{name}", "arguments": {{{inner}}}}}\n</tool_call>', False
    if style == 1:  # flat arguments, no "arguments" key
        return "<tool_call>\n" + json.dumps({"name": name, **args}) + "\n</tool_call>", False
    return "<tool_call>\nuser" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>", False


def verl_tool_records(step: int, *, val: bool = False, n_tasks: int = 2, n_traj: int = 4) -> list[dict[str, Any]]:
    """The records of one ``fcl-step-{N}.json`` (or ``fcl-step-val-{N}.json``) file."""
    rng = random.Random(f"{SEED}:verl_tool:{'val' if val else 'train'}:{step}")
    tools_json = "\n".join(json.dumps(t) for t in FCL_TOOLS)
    system = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\n"
              "You may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" + tools_json +
              "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
              "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
              "<args-json-object>}\n</tool_call><|im_end|>\n")
    p_bad = 0.15 + 0.1 * step
    records = []
    for t in range(n_tasks if not val else 4):
        task = _fcl_task(rng, rng.randint(0, 199))
        prompt = system + f"<|im_start|>user\n{task['question']}<|im_end|>\n<|im_start|>assistant\n"
        gt = [[f"{n}(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")" for n, a in task["steps"]]]
        base_id = _uuid4(rng)
        for k in range(n_traj if not val else 1):
            traj_id = f"{base_id}_{k}"
            resp: list[str] = []
            info: list[dict[str, Any]] = []
            valid = 0
            ok_all = True
            for s_idx, (name, args) in enumerate(task["steps"]):
                call, ok = _fcl_call(rng, name, args, rng.random() < p_bad)
                ok_all &= ok
                obs = task["obs"][s_idx] if ok else "Error during execution: {str(e)}"
                valid += ok
                resp.append(call + "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + obs +
                            "\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
                info.append({"trajectory_id": traj_id, "action": call, "is_valid": ok,
                             "invalid_reason": "" if ok else "Error JSON format", "obs": obs, "done": False})
            resp.append("All done: " + ("the flight is booked." if "flight" in task["question"] else "your reply was sent.") +
                        "<|im_end|>")
            info.append({"trajectory_id": traj_id, "action": resp[-1].replace("<|im_end|>", ""), "is_valid": False,
                         "invalid_reason": "no tool call", "obs": "", "done": True})
            score = 1 if ok_all else 0
            records.append({
                "id": task["id"], "traj_ids": traj_id, "data_source": "fcl_multi_turn",
                "prompt": prompt, "response": "".join(resp), "ground_truth": gt, "score": score,
                "tool_interact_info": info,
                "extra_info": {"id": task["id"], "index": t, "split": "test" if val else "train",
                               "question": [[{"role": "user", "content": task["question"]}]]},
                "error_turn": -1 if ok_all else next(i for i, x in enumerate(info) if not x["is_valid"]),
                "final_actions_is_gt": False, "sft_replace": False, "hint_assistant": False,
                "num_turn": len(info), "num_valid_action": valid, "is_done": True,
            })
    return records


# --------------------------------------------------------------------------------------------------
# OpenAI-messages agent log
# --------------------------------------------------------------------------------------------------


def openai_records(n: int = 10) -> list[dict[str, Any]]:
    """A few agent-log records with structured ``tool_calls`` (``arguments`` as JSON strings)."""
    rng = random.Random(f"{SEED}:openai")
    pool = question_pool("openai", n)
    tools = [{"type": "function", "function": dict(t["function"])} for t in XML_TOOLS]
    out = []
    for i, q in enumerate(pool):
        args = json.dumps({"queries": list(q.queries[:1])}, ensure_ascii=False)
        bad = i % 3 == 2
        if bad:
            args = rng.choice((args[:-2], args.replace('"', "'"), '{"queries": "' + q.queries[0] + '"'))
        call_id = "call_" + "".join(rng.choice("0123456789abcdef") for _ in range(24))
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM_XML},
            {"role": "user", "content": q.text},
            {"role": "assistant", "content": rng.choice(_THINK_FIRST).format(subject=q.subject),
             "tool_calls": [{"id": call_id, "type": "function",
                             "function": {"name": "search_web" if i % 5 != 4 else "web_search", "arguments": args}}]},
        ]
        if bad:
            msgs.append({"role": "tool", "tool_call_id": call_id,
                         "content": "Error: could not parse tool arguments as JSON"})
            msgs.append({"role": "assistant", "content": "I could not run the search; I don't know the answer."})
            score = 0.0
        else:
            res = truncate_middle(search_response(rng, q, list(q.queries[:1])), 600)
            msgs.append({"role": "tool", "tool_call_id": call_id, "content": res})
            msgs.append({"role": "assistant", "content": f"{q.fact}\n\n<answer>{q.answer}</answer>"})
            score = 1.0
        out.append({"id": f"agent-{i:03d}", "model": "qwen3.5-9b-agent", "messages": msgs, "tools": tools,
                    "score": score})
    return out


# --------------------------------------------------------------------------------------------------
# Writing everything
# --------------------------------------------------------------------------------------------------


def _truncate_last_line(text: str, rng: random.Random) -> str:
    """Cut the final line mid-way (a crash while writing), inside its ASCII JSON scaffolding."""
    start = text.rstrip("\n").rfind("\n") + 1
    last = text[start:]
    cut = rng.randint(7 * len(last) // 10, 19 * len(last) // 20)  # somewhere in the output
    while cut < len(last) and not last[cut].isascii():
        cut += 1
    return text[: start + cut]


def generated_files() -> Iterator[tuple[str, str]]:
    """Yield ``(relative path, text)`` for every sample file, in a fixed order."""
    cfg = RUNS["qwen35_xml"]
    for step in range(1, cfg.steps + 1):
        yield (f"qwen35_xml_run/rollout/{step}.jsonl",
               "".join(dump_line(r) for r in step_records(step, run="qwen35_xml")))
    for step in range(0, cfg.steps + 1, cfg.val_every):
        yield (f"qwen35_xml_run/validation/{step}.jsonl",
               "".join(dump_line(r) for r in step_records(step, run="qwen35_xml", split="val")))
    cfg07 = RUNS["qwen35_xml_v07"]
    for step in range(1, cfg07.steps + 1):
        text = "".join(dump_line(r) for r in step_records(step, run="qwen35_xml_v07"))
        if step == cfg07.steps:
            text = _truncate_last_line(text, random.Random(f"{SEED}:v07-crash"))
        yield f"qwen35_xml_run_v07/rollout/{step}.jsonl", text
    cfgs = RUNS["qwen35_xml_sft"]
    for step in range(1, cfgs.steps + 1):
        yield (f"qwen35_xml_sft_run/rollout/{step}.jsonl",
               "".join(dump_line(r) for r in step_records(step, run="qwen35_xml_sft")))
    cfgh = RUNS["qwen3_hermes"]
    for step in range(1, cfgh.steps + 1):
        recs = list(step_records(step, run="qwen3_hermes"))
        if step == 37:  # the reward function blew up on one sample: verl writes NaN
            recs[3]["score"] = float("nan")
            recs[3]["acc"] = float("nan")
        yield f"qwen3_hermes_run/rollout/{step}.jsonl", "".join(dump_line(r) for r in recs)
    for step in (1, 2, 3):
        yield (f"verl_tool_run/verl_step_records/run1/fcl-step-{step}.json",
               json.dumps(verl_tool_records(step), indent=4))
    for step in (2, 4):
        yield (f"verl_tool_run/verl_step_records/run1/fcl-step-val-{step}.json",
               json.dumps(verl_tool_records(step, val=True), indent=4))
    yield "openai_messages/agent_log.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in openai_records())


def write_all(out_dir: Path) -> list[Path]:
    """Write every sample file under ``out_dir`` (UTF-8, ``\\n`` newlines); returns the paths written."""
    written = []
    for rel, text in generated_files():
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate trajlab's sample verl dumps (deterministic).")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: sample_data/)")
    args = ap.parse_args(argv)
    paths = write_all(args.out)
    total = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} files, {total / 1e6:.2f} MB under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The command-line options several commands share: one definition (flag spellings, type, help) each.

Every ``trajlab`` command in this package takes its shared options from these factories, so a flag means the same
thing and reads the same way everywhere: ``--json``, ``--rules``, ``--no-progress``, ``--tokenizer``, ``--tools``,
``--format`` (input format), ``--tool-format``, ``--run NAME=PATH`` and ``-o/--out``. A short flag has one meaning
across commands: ``-o`` is always ``--out``, the path a command writes. Commands that once spelled it ``--output``
keep that spelling as a hidden alias (:func:`output_alias_option` with :func:`pick_out`), so scripts keep working.
A factory takes ``help=`` only where the option's effect differs by command (e.g. which rule-pack file is read).
Only the CLI speaks flags: nothing in the library imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trajlab.families import CALL_FORMATS

#: the call formats ``--tool-format`` accepts, in detection order: read from the families' registry (plain data, so
#: ``--help`` imports no format module; the call-format registry refuses a format no family declares)
TOOL_FORMAT_NAMES: tuple[str, ...] = CALL_FORMATS

#: the input formats ``--format`` accepts in ``scan`` and ``watch`` (``auto`` and every converter of
#: :data:`trajlab.ingest.detect.FORMATS`, which tests/test_cli_options.py holds this to; spelled out so ``--help``
#: does not import the converters)
INPUT_FORMAT_NAMES: tuple[str, ...] = ("auto", "verl_jsonl", "verl_tool_json", "openai_messages", "nemo_rl_jsonl",
                                       "trl_completions", "skyrl_eval_jsonl", "slime_pt")


def json_option(help: str = "Print as JSON.") -> Any:
    """``--json``: print the command's result as JSON instead of a table."""
    return typer.Option(False, "--json", help=help)


def rules_option(help: str = "Extra rule-pack directory (repeatable).") -> Any:
    """``--rules DIR`` (repeatable): extra rule-pack directories on top of the built-in rules."""
    return typer.Option([], "--rules", help=help)


def no_progress_option(help: str = "No progress bar.") -> Any:
    """``--no-progress``: draw no progress bar."""
    return typer.Option(False, "--no-progress", help=help)


def tokenizer_option(help: str) -> Any:
    """``--tokenizer DIR|ALIAS``: the tokenizer to load (what it is used for depends on the command)."""
    return typer.Option(None, "--tokenizer", help=help)


def tools_option(help: str = "Tool schemas: JSON list of OpenAI tools, or verl tool-config YAML. Overrides the prompt's.") -> Any:
    """``--tools FILE``: tool schemas that enable the schema checks."""
    return typer.Option(None, "--tools", help=help)


def jobs_option(default: int, help: str = "Worker processes (0 = one per CPU).") -> Any:
    """``--jobs/-j N``: worker processes that classify the dumps (``scan``, ``watch``; 0 = one per CPU)."""
    return typer.Option(default, "--jobs", "-j", help=help)


def input_format_option() -> Any:
    """``--format``: the dump's input format (``scan``, ``watch``)."""
    return typer.Option("auto", "--format", help=f"Input format: {', '.join(INPUT_FORMAT_NAMES)}.")


def tool_format_option(auto: str = "auto") -> Any:
    """``--tool-format``: the call format; ``auto`` is described by ``auto`` (e.g. "auto (detect from the text)")."""
    return typer.Option("auto", "--tool-format", help=f"Tool-call format: {', '.join((auto, *TOOL_FORMAT_NAMES))}.")


def run_paths_option(help: str = "NAME=PATH: the files under PATH form run NAME (repeatable).") -> Any:
    """``--run NAME=PATH`` (repeatable): name the run the files under PATH form (``scan``, ``watch``)."""
    return typer.Option([], "--run", help=help)


def rollout_n_option() -> Any:
    """``--rollout-n N``: verl's ``actor_rollout_ref.rollout.n``; records without a uid form groups of N consecutive
    records (``scan``, ``build-sft-pool``)."""
    return typer.Option(None, "--rollout-n",
                        help="verl's rollout.n: records without a uid form prompt groups of N consecutive records "
                             "(verl writes a prompt's samples together). Default: group by uid, else by prompt text.")


def metrics_option() -> Any:
    """``--metrics [NAME=]PATH`` (repeatable): the trainer's metrics logs (``scan``, ``watch``)."""
    return typer.Option([], "--metrics", help="The trainer's metrics: a verl file-logger .jsonl, a TensorBoard event "
                        "file or a directory of them; NAME=PATH names the run (repeatable). Logs beside the dumps "
                        "are found without it.")


def wandb_option() -> Any:
    """``--wandb DIR``: also write trajlab's per-step figures as an offline W&B run (``scan``)."""
    return typer.Option(None, "--wandb", help="Write the malformed rate, per-category rates, the warning and "
                        "control-token figures as a separate offline W&B run per run under DIR/wandb/ (group = the "
                        "experiment, job_type trajlab; then: wandb sync). Needs pip install -e '.[wandb]' (in the checkout).")


def wandb_project_option() -> Any:
    """``--wandb-project NAME``: the project of ``--wandb`` runs when the run has no W&B file."""
    return typer.Option(None, "--wandb-project", help="W&B project of the --wandb runs when the scan found no W&B "
                        "file of the run (else that run's project; default trajlab).")


def tensorboard_option() -> Any:
    """``--tensorboard DIR``: also write trajlab's per-step numbers as TensorBoard scalars (``scan``, ``watch``)."""
    return typer.Option(None, "--tensorboard", help="Write the malformed rate, per-category rates and the warning "
                        "as TensorBoard scalars under DIR/<run>/trajlab/ (e.g. verl's tensorboard_log/<project>).")


def out_option(default: Any, help: str, **kw: Any) -> Any:
    """``-o/--out``: the path the command writes (a directory or a file, per command)."""
    return typer.Option(default, "-o", "--out", help=help, **kw)


def output_alias_option() -> Any:
    """``--output``: hidden old spelling of ``-o/--out`` where a command used it; combine with :func:`pick_out`."""
    return typer.Option(None, "--output", hidden=True, help="Old spelling of -o/--out.")


def pick_out(out: Path | None, output: Path | None) -> Path | None:
    """The path given by ``-o/--out`` or by its hidden alias ``--output`` (the alias, when given, wins)."""
    return output if output is not None else out


#: library parameter → the flag (or argument) that sets it, where the flag is not ``--`` + the name with dashes
PARAM_FLAGS: dict[str, str] = {
    "ckpts": "--ckpt",
    "rules_dirs": "--rules",
    "dest": "-o",
    "fmt": "--format",
    "input_format": "--format",
    "timeout_s": "--timeout",
    "examples_per_category": "--examples",
    "checkpoints": "--checkpoint",
    "source_splits": "--source-split",
    "runs": "--run",
    "trajectory_id": "TRAJECTORY_ID",
}


def flag_for(param: str) -> str:
    """The flag a library parameter is set by (``max_tokens`` → ``--max-tokens``, ``rules_dirs`` → ``--rules``): the
    CLI names flags where the library's errors name parameters (:meth:`trajlab.errors.TrajlabError.render`)."""
    return PARAM_FLAGS.get(param, "--" + param.replace("_", "-"))

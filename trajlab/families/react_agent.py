"""ReAct agents (LangChain-style ``Thought`` / ``Action`` / ``Action Input`` / ``Observation``): plain text on a host
model's chat template.

The calls and the environment's observations are ordinary text inside the host model's turns (ChatML in the
dumps trajlab reads): an ``Observation:`` comes back as a user message, or inline after the ``Action Input`` up to
the model's next step. Both are split only where the output writes a ReAct action (``requires``), since other
outputs may say ``Observation`` too.
"""

from __future__ import annotations

import re

from trajlab.families.base import TokenLayout, ToolBlock
from trajlab.families.chatml import IM_END, IM_START

#: a ReAct step the model writes after an observation (a line that starts Thought:, Action: or Final Answer:)
REACT_STEP = r"[ \t]*(?:Thought|Action|Final[ \t]+Answer)[ \t]*\d*[ \t]*:"
#: an output that writes a ReAct action (an ``Action Input:`` line, or the paper's ``Action 1: Search[...]``)
_ACTION = re.compile(r"(?m)^[ \t]*Action[ \t]*\d*[ \t]*(?:Input[ \t]*\d*[ \t]*:|:[ \t]*[A-Za-z_][\w.\-]*\[)")

NAME = "react_agent"
MODELS = "ReAct agents (LangChain-style Thought / Action / Action Input / Observation / Final Answer)"
CALL_FORMATS = ("react",)
ROLE_HEADERS = {"system": f"{IM_START}system\n", "user": f"{IM_START}user\n", "assistant": f"{IM_START}assistant\n",
                "tool": f"{IM_START}user\nObservation: "}
SPECIAL_TOKENS = (IM_START, IM_END)
TOOL_BLOCKS = (
    ToolBlock("user\nObservation", re.compile(
        r"(?:<\|im_end\|>)?\n?(?:<\|im_start\|>)?user\nObservation[ \t]*\d*[ \t]*:.*?"
        r"(?:(?:<\|im_end\|>)?\n(?:<\|im_start\|>)?assistant\n|\Z)", re.DOTALL), requires=_ACTION, shared=True),
    ToolBlock("\nObservation", re.compile(
        rf"(?<=\n)Observation[ \t]*\d*[ \t]*:(?:(?!\n{REACT_STEP}).)*\n(?={REACT_STEP})", re.DOTALL),
        requires=_ACTION, shared=True),
)
#: the host model's layout (ChatML in the dumps trajlab reads)
LAYOUT = TokenLayout("chatml", kept_markers=(IM_START,), turn_end_call=IM_END, turn_end_final=IM_END)
CONTROL_TOKENS = "generic"
TOKENIZER_ALIASES: dict[str, str] = {}

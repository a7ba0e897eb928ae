"""How the agent talks to a small embedded model: fewer tools, a short prompt, a turn budget.

A 0.5B model on two CPU cores pays for every prompt token (about 50 tokens/s of prompt
reading) and is confused by choice: the default system prompt plus three tool schemas cost
~540 tokens and 7-14 s before the first output token, and extra tools invite invented calls.
``small_model_profile(model)`` says what to use instead for ``local/*`` models; the magics
apply it when they build a conversation (docs/design/local-model.md, "Wiring the profile"):

- ``system_prompt``: replaces the default system prompt;
- ``tool_names``: the only tools offered (others are dropped; names that do not exist are
  ignored);
- ``max_turns``: model turns per prompt before the run is stopped (the provider already
  allows only prose after ``max_tool_calls`` results, so a run always ends with an answer);
- ``include_namespace_summary``: put the namespace summary (tools/context/namespace.py) at the start of
  each prompt's user message, not into the system prompt, so that the system prompt + tools
  prefix stays identical between prompts and llama-server reuses it from its cache;
- ``model_summary``: whether compaction asks the model to summarise old turns (else the
  extract of session/compaction.py: each message's first words and the code it called). For
  the small model a summary is a whole extra request, its ~1.6k-token transcript read and up
  to 2k tokens written on two cores (minutes the user waits with nothing shown).

``PI_NOTEBOOK_SMALL_PROFILE=0`` turns the profile off (``1`` forces it for any model).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..ai.types import Model

__all__ = ["SmallModelProfile", "SMALL_MODEL_SYSTEM_PROMPT", "small_model_profile"]

# No examples: measured, the 0.5B model copies them (an example path "data/shop.csv" turned
# "notebooks/data/sales.csv" into "data/sales.csv", an example name "sales" replaced "df").
SMALL_MODEL_SYSTEM_PROMPT = """\
You work in the user's live Jupyter notebook. Run Python with the python tool: the notebook's \
variables are there, and what you define stays there.
Rules:
- Do the whole request in one short piece of code.
- Use the names and file paths exactly as the user wrote them. "into x" or "called x" means: \
assign the result to x.
- End the code with the expression to show.
- Answer from the tool output only, never from memory: state only numbers the output shows.
- If the output shows an error, change the code and run it again.
- Answer in one or two sentences."""


@dataclass(frozen=True)
class SmallModelProfile:
    system_prompt: str
    tool_names: tuple[str, ...]
    max_turns: int | None
    include_namespace_summary: bool
    model_summary: bool = True


_SMALL = SmallModelProfile(
    system_prompt=SMALL_MODEL_SYSTEM_PROMPT,
    # python only: offered notebook_history, the 0.5B called it for "how many rows does df
    # have?" and answered from the cell list ("1 row"); the history it needs (the last error,
    # the cells a prompt names, the notebook's Markdown) is in the prompt's context instead
    tool_names=("python",),
    max_turns=5,
    include_namespace_summary=True,
    model_summary=False,
)


def small_model_profile(model: Model | None) -> SmallModelProfile | None:
    """The profile for ``model``, or None to keep the defaults (cloud and server models)."""
    setting = os.environ.get("PI_NOTEBOOK_SMALL_PROFILE", "").strip()
    if setting == "0" or model is None:
        return None
    if setting == "1" or model.provider == "local":
        return _SMALL
    return None

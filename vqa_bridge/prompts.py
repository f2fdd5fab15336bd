"""VLM4D's two prompts, verbatim, so scores stay comparable with the published ones.

Both are ``string.Template``s filled with the question and ``optionized_str``
("A: text\\nB: text\\n..."). In the chain-of-thought prompt ``$$LETTER`` renders
as the literal ``$LETTER`` the model is asked to replace.
"""

from __future__ import annotations

from collections.abc import Mapping
from string import Template

COT = Template(
    "\nQuestion: $question\n$optionized_str\n\n"
    "Answer the given multiple-choice question step by step. Begin by explaining your reasoning process clearly. "
    "In the last sentence of your response, you must conclude by stating the final answer using the following "
    "format: 'Therefore, the final answer is: $$LETTER' (without quotes), where $$LETTER must be only one of the "
    "options (A or B or C or D). Think step by step before answering."
)

DIRECT = Template(
    "\nQuestion: $question\n$optionized_str\n\n"
    "Do not generate any intermediate reasoning process. Answer directly with the option letter from the given choices.\n"
)

# Keys follow VLM4D's own names for the modes (its judged_synthetic_cot / _do folders).
TEMPLATES = {"cot": COT, "do": DIRECT}


def optionized_str(choices: Mapping[str, object]) -> str:
    """'A: text\\nB: text\\n...' in letter order; option texts may be integers, as in VLM4D."""
    return "\n".join(f"{letter}: {choices[letter]}" for letter in sorted(choices))


def build_prompt(question: str, choices: Mapping[str, object], mode: str) -> str:
    """The text VLM4D sends after the frames; ``mode`` is ``"cot"`` (chain of thought) or ``"do"`` (direct output)."""
    if mode not in TEMPLATES:
        raise ValueError(f"unknown prompt mode {mode!r}; expected one of {sorted(TEMPLATES)}")
    return TEMPLATES[mode].substitute(question=question, optionized_str=optionized_str(choices))


CUES_HEADER = "Motion of the objects in this video, measured on its 4D reconstruction:\n"


def with_cues(cues: str, prompt: str) -> str:
    """The ``raw+cues`` prompt: the trajectory description, then VLM4D's prompt unchanged."""
    return f"{CUES_HEADER}{cues.strip()}\n{prompt}"

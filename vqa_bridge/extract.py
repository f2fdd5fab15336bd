"""Turn a VLM's free-text answer to a multiple-choice question into an option letter.

VLM4D grades models by the letter they chose, but models rarely answer in the
requested format alone: they wrap the letter in markdown or LaTeX, restate the
option text, name only the text ("the robot is moving left"), hedge between two
options, or echo the prompt's ``$LETTER`` placeholder. The rules below were
worked out against VLM4D's judge-graded outputs (see ``vqa_bridge.judged``);
they run from the most to the least explicit signal, and the first one that
decides wins:

1. ``final`` (letter): a letter right after the last final-answer phrase
   ("the final answer is: **B**", "is: D: not moving"). A hedge ("B or C"), a
   conditional ("B if it moves right") or a case analysis ("If left, the
   answer is: A ... If right, the answer is: D") is ``NO_ANSWER``.
2. ``opening``: the response opens with an answer ("B", "(B) left",
   "Answer: C. The video shows ..."). The judges rank a letter above option
   text, so this comes before (3).
3. ``final`` (text): otherwise the last final-answer phrase is decisive by
   what it names: one option text is the answer; none or several ("$LETTER",
   "N/A", "left or right") is ``NO_ANSWER``.
4. ``conclusion``: with no final-answer phrase, the last two sentences and any
   sentence opened by "therefore", "thus", ... are read back to front for a
   single option, by letter ("option D", "(B)") or by text ("the robot is
   moving to the left", "there is no dragon"); a refusal ("I cannot determine
   ...") is ``NO_ANSWER``. A response cut off mid-sentence has no last
   sentence to read.

Otherwise ``NO_ANSWER``. Option texts are compared after normalisation
(spelling variants, "from left to right" -> "right", "stationary" -> "not
moving"); negated mentions ("not A", "rule out left") never count as a choice.
Everything here is a pure function of the text and the choices.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

NO_ANSWER = "No Valid Answer"
LETTERS = "ABCD"

# Markup that wraps answers without changing them: **B**, $\boxed{B}$, `B`, \mathbf{B}, curly quotes.
_MARKUP = [
    (re.compile(r"\\(?:boxed|text|textbf|mathbf|mathrm)\s*\{([^{}]*)\}"), r"\1"),
    (re.compile(r"[*_`$#]+"), ""),
    (re.compile(r"[“”\"‘’]"), "'"),
    (re.compile(r"[：]"), ": "),
]

# Spelling variants and paraphrases mapped onto the wording VLM4D's options use.
_PARAPHRASES = [
    (r"\btoward\b", "towards"),
    (r"\b(?:counter ?clockwise|anti clockwise)\b", "anticlockwise"),
    (r"\b(forward|backward|inward|outward)\b", r"\1s"),
    (r"\b(up|down)wards?\b", r"\1"),
    (r"\b(?:closer|nearer) to (?:the )?camera\b", "towards the camera"),
    (r"\b(?:farther|further) (?:away )?from (?:the )?camera\b", "away from the camera"),
    (r"\b(?:from )?left (?:to|towards) right\b", "right"),
    (r"\b(?:from )?right (?:to|towards) left\b", "left"),
    (r"\b(left|right)wards?\b", r"\1"),
    (r"\b(?:stationary|motionless|immobile|static)\b", "not moving"),
    (r"\b(?:does not|doesn t|did not|didn t|is not|isn t|has not|hasn t|not) (?:move|moving|moved|in motion)\b", "not moving"),
    (r"\bno (?:movement|motion)\b", "not moving"),
]
_PARAPHRASES = [(re.compile(p), r) for p, r in _PARAPHRASES]

# Options that only say the thing stays put.
_STILL = {"not moving", "not rotating"}

# Words that turn the option mentioned right after them into a rejected one.
_NEGATORS = re.compile(
    r"(?:\b(?:not|no|nor|neither|never|rather than|instead of|rule out|ruled out|eliminate|eliminated|exclude|excluded|than)|n t)\b"
    r"(?: \S+){0,2}(?: (?:[a-d]|or|and|nor|options?))* $"
)

# How many closing sentences a response without a final-answer phrase is read from.
_LAST_SENTENCES = 2

# A closing sentence that declines to answer: "I cannot determine the direction".
_REFUSAL = re.compile(
    r"\b(?:cannot|can't|can not|unable to|not possible to|impossible to|not able to)\s+(?:\w+\s+){0,2}?"
    r"(?:determine|answer|tell|say|confirm|provide|identify|conclude|know)",
    re.IGNORECASE,
)

_CONCLUSION_START = re.compile(r"^\W*(?:therefore|thus|so|hence|consequently|in conclusion|conclusion|overall|in summary)\b", re.I)

_FINAL = re.compile(
    r"(?:(?:final|correct|best|right|resulting|closest|likely|appropriate|plausible)\s+(?:answer|option|choice)"
    r"|\bthe\s+answer|^\W*answer)"
    r"(?:\s+(?:to [^.:\n]{0,60}?|based on [^.:\n]{0,60}?|without [^.:\n]{0,40}?))?"
    r"(?:\s*\b(?:is|would be|should be|will be|must be|could be|may be)\b(?:\s+therefore)?\s*:?|\s*[:=])"
    r"|答案(?:是|\s*:)",
    re.IGNORECASE | re.MULTILINE,
)

# After a chosen letter: another one offered in its place ("B or C", "C,D", "D or any other option").
_ALTERNATIVE = re.compile(r"\s*(?:\([^()]*\)\s*)?(?:\bor\b|[,/]\s*(?:option\s*)?[\(\[]?[A-D](?![A-Za-z]))", re.IGNORECASE)

# One letter as a token: 'B', '(B)', 'B:', "'B'"; never part of a word or "A's".
_LETTER = r"(?<![A-Za-z0-9/])[\(\[]?([A-D])[\)\]]?(?![A-Za-z0-9]|'[a-z])"
_OPENING = re.compile(
    r"^\W*(?:answer\s*[:\-]?\s*|(?:the\s+)?(?:correct\s+)?(?:option|choice)\s*)?" + _LETTER + r"\s*(?:[:.)\-,]|$)",
    re.IGNORECASE,
)


def clean(text: str) -> str:
    """Strip markdown/LaTeX wrappers and collapse blanks; case is kept (letters are upper-case)."""
    for pattern, repl in _MARKUP:
        text = pattern.sub(repl, text)
    return re.sub(r"[ \t]+", " ", text).strip()


def normalise(text: str) -> str:
    """Lower-case words with spelling variants and paraphrases unified: the form option texts are compared in."""
    text = re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()
    for pattern, repl in _PARAPHRASES:
        text = pattern.sub(repl, text)
    return text


def extract_answer(response: str, choices: Mapping[str, object]) -> str:
    """The option letter a response chose, or ``NO_ANSWER``.

    ``choices`` maps letters to option texts (integers allowed, as in VLM4D).
    """
    return explain_answer(response, choices)[0]


def explain_answer(response: str, choices: Mapping[str, object]) -> tuple[str, str]:
    """``(letter or NO_ANSWER, name of the rule that decided)``; the rule is ``"none"`` when none did."""
    options = {k: normalise(str(v)) for k, v in choices.items() if k in LETTERS}
    text = clean(response or "")
    for name, rule in (
        ("final", _final_letter),
        ("opening", _opening),
        ("final", _final_text),
        ("conclusion", _conclusion),
    ):
        decided = rule(text, options)
        if decided is not None:
            return decided, name
    return NO_ANSWER, "none"


def _opening(text: str, options: dict[str, str]) -> str | None:
    """A response that starts with an answer: 'B', 'C: left', '(D) ...', 'Answer: A. The video ...'.

    An opening line followed by another letter label ('A: left' then 'B: right')
    is an echo of the option list, not an answer; a next line that is only a
    different letter ("Answer: C" then "D") contradicts it.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    m = _OPENING.match(lines[0])
    if not m or m.group(1) not in options:
        return None
    letter = m.group(1)
    if _ALTERNATIVE.match(lines[0][m.end(1) :].lstrip(")]")):
        return NO_ANSWER
    if letter == "A" and _is_article(lines[0][m.end(1) :], options["A"]):
        return None
    later = [_OPENING.match(line) for line in lines[1:]]
    if later and later[0] and later[0].group(1) != letter:
        return None if len(later[0].string) > 3 else NO_ANSWER
    return letter


def _is_article(rest: str, option_a: str) -> bool:
    """True when an 'A' starts a phrase ('A robot is ...') rather than naming option A."""
    return bool(re.match(r"\s+[a-z]", rest)) and not normalise(rest).startswith(option_a)


def _final_letter(text: str, options: dict[str, str]) -> str | None:
    """A letter right after the last final-answer phrase ("is: B (left)", "is: D: not moving").

    No choice was made when an alternative follows ("B or C", "C, D"), when the
    answer carries a condition ("B if it moves right"), or when it closes a
    case analysis: an 'if' before it and a different letter under an earlier
    final-answer phrase ("If left, the answer is: A ... If right, the answer is: C").
    """
    answers = _final_answers(text, options)
    if not answers:
        return None
    letter, before, tail = answers[-1]
    if letter is None:
        return None
    if _ALTERNATIVE.match(tail) or re.search(r"\bif\b", tail, re.IGNORECASE):
        return NO_ANSWER
    if _is_conditional(before) and any(other not in (None, letter) for other, _, _ in answers[:-1]):
        return NO_ANSWER
    return letter


def _final_text(text: str, options: dict[str, str]) -> str | None:
    """The one option the last final-answer phrase names some other way; several or none is no answer.

    Runs after ``_opening`` because the judges rank a letter above text:
    "Answer: A. The final answer is: left." chose A.
    """
    answers = _final_answers(text, options)
    if not answers:
        return None
    tail = answers[-1][2]
    chosen = _letters_in(tail, options, leading=True) | _options_in(normalise(tail), options)
    return chosen.pop() if len(chosen) == 1 else NO_ANSWER


def _final_answers(text: str, options: dict[str, str]) -> list[tuple[str | None, str, str]]:
    """``(leading letter or None, text before, rest of the sentence)`` for each final-answer phrase with words after it.

    An "Answer:" that opens the response is left to ``_opening``; an empty
    phrase ("Therefore, the final answer is:" at the very end) is skipped.
    """
    answers = []
    for m in _FINAL.finditer(text):
        if not text[: m.start()].strip():
            continue
        segments = [seg for seg in re.split(r"\n|(?<=[a-z]{2}[.!?])\s", text[m.end() :]) if re.search(r"\w", seg)]
        if not segments:
            continue
        lead = re.match(r"\W*(?:option|choice)?\s*" + _LETTER, segments[0], re.IGNORECASE)
        if lead and _letters_in(lead.group(0), options, leading=True):
            answers.append((lead.group(1).upper(), text[: m.start()], segments[0][lead.end() :]))
        else:
            answers.append((None, text[: m.start()], segments[0]))
    return answers


def _is_conditional(before: str) -> bool:
    """Whether the text leading to a final-answer phrase puts it under an 'if': in its own sentence or in a line ending in ':' that introduces it."""
    lines = before.split("\n")
    sentence = re.split(r"[.!?]\s", lines[-1])[-1]
    earlier = [line for line in lines[:-1] if line.strip()]
    intro = earlier[-1] if earlier and earlier[-1].rstrip().endswith(":") else ""
    return any(re.search(r"\bif\b", part, re.IGNORECASE) for part in (sentence, intro))


def _conclusion(text: str, options: dict[str, str]) -> str | None:
    """The single option named by the concluding sentences.

    The last few sentences conclude (an empty "the final answer is:" at the end
    defers to what precedes it), and so does any sentence opened by a
    conclusion word. A response cut off mid-sentence (a truncated or degenerate
    generation) has no last sentence to read.
    """
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]
    while sentences and _FINAL.search(sentences[-1]) and not _FINAL.split(sentences[-1])[-1].strip(" .:"):
        sentences.pop()
    if not sentences:
        return None
    tail = sentences[-_LAST_SENTENCES:]
    if not (len(sentences) == 1 or re.search(r"[.!?')\]]$", tail[-1]) or len(tail[-1]) < 60):
        tail = []
    marked = [s for s in sentences[: -_LAST_SENTENCES or None] if _CONCLUSION_START.match(s)]
    for sentence in reversed(marked + tail):
        chosen = _letters_in(sentence, options) or _options_in(normalise(sentence), options)
        if len(chosen) == 1:
            return chosen.pop()
        if not chosen and _REFUSAL.search(sentence):
            return NO_ANSWER
    return None


def _letters_in(sentence: str, options: dict[str, str], leading: bool = False) -> set[str]:
    """Letters a sentence picks ('option B', '(C)', 'is D'), skipping negated ones ('not A').

    A bare capital 'A' is only a letter when no word follows it; with
    ``leading`` (text right after a final-answer phrase) a lower-case letter
    followed by punctuation ('the answer is b.') counts as well.
    """
    flags = re.IGNORECASE if leading else 0
    found = set()
    for m in re.finditer(_LETTER, sentence, flags):
        letter = m.group(1).upper()
        before = sentence[: m.start()].lower()
        after = sentence[m.end() :]
        if letter not in options or _NEGATORS.search(normalise(before) + " "):
            continue
        if m.group(1) in "aA" and _is_article(after, options["A"]):
            continue
        if m.group(1).islower() and not re.match(r"\s*(?:[.,;:)]|$)", after):
            continue
        found.add(letter)
    return found


def _options_in(sentence: str, options: dict[str, str]) -> set[str]:
    """Options whose (normalised) text a sentence states, not negated, not inside a longer match.

    A shorter option inside a longer matched one ('clockwise' in
    'anticlockwise', 'left' in 'left then right') does not count on its own.
    When the thing is said to be absent, a 'not moving' mention only follows
    from that and does not compete with it.
    """
    spans: dict[str, list[tuple[int, int]]] = {}
    for letter, option in options.items():
        if option:
            spans[letter] = [m.span() for m in re.finditer(_option_pattern(option), sentence)]
    found = set()
    for letter, hits in spans.items():
        for start, end in hits:
            covered = any(
                s <= start and end <= e and (e - s) > (end - start) for other, others in spans.items() for s, e in others
            )
            if not covered and not _NEGATORS.search(sentence[:start]):
                found.add(letter)
    absent = {k for k in found if re.fullmatch(r"no .+ there", options[k])}
    if absent:  # a thing that is not there does not move either: "there is no robot, so it is not moving"
        found -= {k for k in found if options[k] in _STILL}
    return found


def _option_pattern(option: str) -> str:
    """Regex for an option's text as whole words, with paraphrases for two kinds of option.

    'no robot dog there' also matches 'there is no dog', 'I don't see a robot
    dog' (keyed on the thing's last word). A compound 'X and Y' matches both
    parts in either order, each by its content words with small gaps, so
    'towards the camera and to the right' matches 'right and towards the camera'.
    """
    absent = re.fullmatch(r"no (.+) there", option)
    if absent:
        thing = re.escape(absent.group(1).split()[-1])
        return (
            rf"(?:\bno (?:\S+ ){{0,4}}{thing}s?|(?:\bnot|n t|\bcannot) (?:see|find|visible|present|any) (?:\S+ ){{0,4}}{thing}s?"
            rf"|\b{thing}s? (?:is|are|was|were) (?:not|n t) (?:present|visible|there|seen|in))\b"
        )
    parts = option.split(" and ")
    if len(parts) == 2:
        first, second = (_loose(part) for part in parts)
        return rf"\b(?:{first}\b.*\b{second}|{second}\b.*\b{first})\b"
    return rf"(?<![a-z0-9]){re.escape(option)}(?![a-z0-9])"


def _loose(part: str) -> str:
    """A phrase's content words in order, allowing up to two other words between them."""
    words = [re.escape(w) for w in part.split() if w not in {"the", "to", "from", "of", "a"}]
    return r"(?: \S+){0,2} ".join(words)

"""The VLM4D loop: every question x modality x prompt mode through one adapter, logged as it goes.

Problems with one question (malformed entry, no scene folder, video too short,
scene not fitted for a modality) are reported with the question id and the run
goes on; the JSONL gets a line only for answered items, so a rerun retries the
rest and skips what is done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from recon4d.scene_folder import MissingStageError
from vqa_bridge.adapters.base import Generation, VisionLanguageAdapter, VisionTokens
from vqa_bridge.extract import extract_answer
from vqa_bridge.modalities import SceneInputs, ShortVideoError, sample_indices
from vqa_bridge.prompts import build_prompt, with_cues
from vqa_bridge.report import ResultLog, write_summary
from vqa_bridge.vlm4d import Question, load_questions


@dataclass
class RunOutcome:
    answered: int = 0
    skipped_done: int = 0
    problems: list[str] = field(default_factory=list)
    summary: str = ""


def _answer(adapter: VisionLanguageAdapter, inputs, prompt: str, max_new_tokens: int) -> str:
    if isinstance(inputs, VisionTokens):
        return adapter.answer_from_tokens(inputs, prompt, max_new_tokens)
    return adapter.answer_from_frames(inputs, prompt, max_new_tokens)


def run_vlm4d(qa_file: Path, scenes: Path, out: Path, adapter: VisionLanguageAdapter, model_name: str,
              modalities: Sequence[str], modes: Sequence[str], n_frames: int = 8,
              generation: Generation = Generation(), log: Callable[[str], None] = print,
              render_device: str = "auto") -> RunOutcome:
    """``render_device``: where the fitted scenes render the global view and the feature field
    (the commands pass the model's device, so a ``--device cpu`` run stays on the CPU)."""
    outcome = RunOutcome()
    questions, problems = load_questions(qa_file)
    for message in problems:
        log(message)
    outcome.problems += problems
    results = ResultLog(out)
    settings = {"model": model_name, "n_frames": n_frames, "modalities": list(modalities),
                "prompt_modes": list(modes), **generation.as_dict(), "model_settings": adapter.run_settings(),
                "placement": adapter.placement()}
    cache: dict[str, SceneInputs] = {}
    for q in questions:
        todo = [(m, p) for m in modalities for p in modes if not results.done(q.id, m, p)]
        outcome.skipped_done += len(modalities) * len(modes) - len(todo)
        if not todo:
            continue
        folder = Path(scenes) / q.scene
        if not folder.is_dir():
            outcome.problems.append(f"question {q.id}: scene folder {folder} not found, skipped")
            log(outcome.problems[-1])
            continue
        scene = cache.setdefault(q.scene, SceneInputs(folder, adapter.teacher_name, render_device))
        try:
            times = sample_indices(scene.frame_count(), n_frames)
        except (ShortVideoError, FileNotFoundError) as err:
            outcome.problems.append(f"question {q.id}: {err}, skipped")
            log(outcome.problems[-1])
            continue
        for modality in dict.fromkeys(m for m, _ in todo):
            try:
                if modality == "geometric":
                    geo = scene.geometric(q.question, q.choices)
                else:
                    inputs = scene.build(modality, times)
                    cues = scene.cues() if modality == "raw+cues" else None
            except (MissingStageError, ValueError, OSError) as err:
                outcome.problems.append(f"question {q.id} ({modality}): {err}, skipped")
                log(outcome.problems[-1])
                continue
            for mode in (p for m, p in todo if m == modality):
                if modality == "geometric":  # the same reply under every prompt mode: a baseline in each group
                    record = _record(q, modality, mode, times, "geometric answerer", settings,
                                     f"{geo.answer} ({geo.why})", letter=geo.letter)
                else:
                    prompt = build_prompt(q.question, q.choices, mode)
                    prompt = with_cues(cues, prompt) if cues is not None else prompt
                    response = _answer(adapter, inputs, prompt, generation.max_new_tokens(mode))
                    record = _record(q, modality, mode, times, model_name, settings, response,
                                     extract_answer(response, q.choices))
                results.append(record)
                outcome.answered += 1
    outcome.summary = write_summary(out, results.records, settings)
    return outcome


def _record(q: Question, modality: str, mode: str, times: list[int], model: str, settings: dict,
            response: str, letter: str | None) -> dict:
    """One JSONL line; ``letter`` is the chosen option: the extractor's for a VLM, the geometric answerer's
    (None for "cannot tell") for ``geometric``."""
    return {"id": q.id, "scene": q.scene, "question_type": q.question_type, "modality": modality,
            "prompt_mode": mode, "model": model, "frames": times, "response": response,
            "extracted": letter, "answer": q.answer, "correct": letter == q.answer,
            "generation": {k: settings[k] for k in ("decoding", "max_new_tokens_cot", "max_new_tokens_do",
                                                    "model_settings", "placement")}}

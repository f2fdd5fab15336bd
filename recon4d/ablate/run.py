"""The ablation's steps, each skipped when its outputs exist: fit, render, evaluate, summarise.

What runs where: fits (priors, VLM teacher extraction, optimisation) are Ray tasks
through ``recon4d batch`` into ``<out>/scenes/`` (``batch.json`` beside them);
the global-view render (seconds per scene) and the VLM evaluation run in this
process, the evaluation appending to ``<out>/vqa/results.jsonl``, which is its own
resume point; the summary is rebuilt from that file every time (cheap, deterministic).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from recon4d.batch.inputs import VIDEO_SUFFIXES, SceneSpec
from recon4d.batch.runner import BatchOptions, run_batch
from recon4d.io.atomic import write_json
from vqa_bridge.adapters import ModelName
from vqa_bridge.modalities import MODALITIES


@dataclass
class AblationPlan:
    """What to evaluate and with what; the fit and Ray settings are those of ``recon4d batch``."""

    qa: Path
    videos: Path
    out: Path
    batch: BatchOptions
    model: ModelName = "tiny"
    model_path: str | None = None
    device: str = "auto"
    """Where the VLM runs and the scenes render (auto, cpu, cuda, cuda:N); the fits' workers pick their own."""
    dtype: str = "auto"
    """The VLM's weights: auto (bfloat16 on CUDA, float32 on the CPU), float32, bfloat16, float16."""
    modalities: tuple[str, ...] = MODALITIES
    prompt_modes: tuple[str, ...] = ("cot", "do")
    n_frames: int = 8
    max_new_tokens: tuple[int, int] = (512, 16)
    """(chain of thought, direct output)."""
    log: Callable[[str], None] = field(default=print)


def find_source(videos: Path, scene: str) -> Path | None:
    """The input of a question's scene under ``videos``: a folder (DAVIS sequence, frames, synth scene) or a video."""
    for candidate in (videos / scene, videos / "JPEGImages" / "480p" / scene):
        if candidate.is_dir():
            return candidate
    return next((videos / f"{scene}{s}" for s in sorted(VIDEO_SUFFIXES) if (videos / f"{scene}{s}").is_file()), None)


def scene_specs(plan: AblationPlan) -> list[SceneSpec]:
    """Every scene the question file refers to that has an input; the others are reported and left out."""
    from vqa_bridge.vlm4d import load_questions

    questions, problems = load_questions(plan.qa)
    for message in problems:
        plan.log(f"ablate: {message}")
    specs = []
    for name in dict.fromkeys(q.scene for q in questions):
        source = find_source(Path(plan.videos), name)
        if source is None:
            plan.log(f"ablate: no input for scene {name!r} under {plan.videos}; its questions will be skipped")
        else:
            specs.append(SceneSpec(name, source.resolve()))
    return specs


def render_global(scene_dirs: list[Path], log, device: str = "auto") -> dict[str, dict]:
    """The global-view video of every fitted scene (``run_render`` itself skips up-to-date outputs);
    returns each scene's render summary (its FoV and the share of the frame its content covers)."""
    from recon4d.render.video import RenderJob, run_render

    views = {}
    for scene in scene_dirs:
        views[scene.name] = run_render(RenderJob(scene=scene, path="global", device=device),
                                       log=lambda m, name=scene.name: log(f"{name}: {m}"))
    return views


def questions_on(plan: AblationPlan, fitted: list[str]) -> Path:
    """The question file to evaluate: all of ``plan.qa``, or (when some scenes did not fit) only the
    questions on fitted scenes, so that every modality is scored on the same questions."""
    from vqa_bridge.vlm4d import scene_name

    entries = json.loads(Path(plan.qa).read_text(encoding="utf-8"))
    fitted_set = set(fitted)  # malformed entries stay, for run_vlm4d to report by id
    keep = [e for e in entries if not isinstance(e, dict) or scene_name(str(e.get("video", ""))) in fitted_set]
    if len(keep) == len(entries):
        return plan.qa
    plan.log(f"ablate: evaluating the {len(keep)} of {len(entries)} questions whose scene is fitted")
    return write_json(plan.out / "vqa" / "questions_fitted.json", keep)


def unanswered(plan: AblationPlan, qa: Path) -> int:
    """(question, modality, prompt mode) items not yet in results.jsonl."""
    from vqa_bridge.report import ResultLog
    from vqa_bridge.vlm4d import load_questions

    results = ResultLog(plan.out / "vqa")
    questions, _ = load_questions(qa)
    return sum(not results.done(q.id, m, p) for q in questions for m in plan.modalities for p in plan.prompt_modes)


def evaluate(plan: AblationPlan, qa: Path) -> None:
    """VLM4D over every modality x prompt mode; loads the VLM only when something is left to answer."""
    from vqa_bridge.adapters import Generation, load_adapter, resolve_placement
    from vqa_bridge.evaluate import run_vlm4d

    left = unanswered(plan, qa)
    if left == 0:
        plan.log("ablate: evaluation complete in results.jsonl, skipped")
        return
    plan.log(f"ablate: {left} answers to compute with {plan.model}")
    device, dtype = resolve_placement(plan.device, plan.dtype)
    adapter = load_adapter(plan.model, plan.model_path, device=device, dtype=dtype)
    where = adapter.placement()
    plan.log(f"ablate: {plan.model} on {where['device']} in {where['dtype']}")
    outcome = run_vlm4d(qa, plan.out / "scenes", plan.out / "vqa", adapter, plan.model, plan.modalities,
                        plan.prompt_modes, plan.n_frames, Generation(*plan.max_new_tokens), log=plan.log,
                        render_device=str(device))
    plan.log(f"ablate: answered {outcome.answered}, problems {len(outcome.problems)}")


def run_ablation(plan: AblationPlan) -> dict[str, Path]:
    """Fit, render, evaluate, summarise; returns the summary files (ablation.md/.csv/.png in <out>/vqa)."""
    from recon4d.ablate.chart import write_ablation
    from vqa_bridge.report import ResultLog

    plan.out = Path(plan.out).resolve()
    specs = scene_specs(plan)
    plan.batch.out, plan.batch.vlm, plan.batch.vlm_path = plan.out / "scenes", plan.model, plan.model_path
    manifest = run_batch(specs, plan.batch)
    fitted = [plan.out / "scenes" / s.name for s in specs if manifest.scenes[s.name].status == "done"]
    failed = sorted(s.name for s in specs if manifest.scenes[s.name].status != "done")
    if failed:
        plan.log(f"ablate: not fitted (see {manifest.path}): {', '.join(failed)}; their questions are skipped")
    views = render_global(fitted, plan.log, plan.device)
    evaluate(plan, questions_on(plan, [p.name for p in fitted]))
    records = ResultLog(plan.out / "vqa").records
    if not records:
        raise RuntimeError(f"no question was answered; see the messages above and {plan.out / 'vqa'}")
    where = sorted({f"{p['device']}, {p['dtype']}" for r in records if (p := r["generation"].get("placement"))})
    header = (f"# VLM4D ablation: {plan.model}" + (f" ({'; '.join(where)})" if where else "")
              + f", {len(fitted)} scenes fitted"
              + (f", {len(failed)} not fitted" if failed else "") + f" ({plan.qa.name})")
    return write_ablation(plan.out / "vqa", records, header, views)

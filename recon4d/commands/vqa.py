"""`recon4d vqa <step>`: the VLM bridge.

Steps are dispatched by name so each one builds only its own typed config with
tyro: ``extract`` (teacher features into a scene folder), ``run`` (the VLM4D
evaluation over the three modalities) and ``extract-eval`` (the answer extractor
against VLM4D's judged outputs).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

from recon4d.errors import UserError, expected_errors, log_tracebacks_to
from vqa_bridge.adapters import DtypeName, ModelName
from vqa_bridge.modalities import MODALITIES, Modality

STEPS = {
    "extract-eval": "score the answer extractor against VLM4D's judge-graded outputs",
    "run": "answer VLM4D questions from raw video, global-view video or the feature field",
    "extract": "extract teacher features from a VLM's vision encoder into a scene folder",
}


@dataclass
class ExtractEvalConfig:
    """Run the answer extractor on every `response` in judged VLM4D files and compare with `extracted_answer`."""

    judged: tuple[Path, ...]
    """Folders of judged files, one `<model>_<frames>.json` per model (e.g. ../shared/data/vlm4d/judged_synthetic_cot)."""
    show: int = 0
    """Also print up to this many disagreeing responses per file."""


@expected_errors("vqa extract-eval")
def extract_eval(config: ExtractEvalConfig) -> int:
    """One row per model file (model, mode, n, agreement), then `agreement=<fraction>` over all entries."""
    from vqa_bridge.extract import explain_answer, extract_answer
    from vqa_bridge.judged import judged_files, score_file

    try:
        files = judged_files(list(config.judged))
    except FileNotFoundError as err:  # no judged folder, or none with files
        raise UserError(str(err)) from err
    scores = [score_file(path, extract_answer) for path in files]
    width = max(len(s.model) for s in scores)
    print(f"{'model':<{width}}  mode  {'n':>5}  agreement")
    for s in scores:
        print(f"{s.model:<{width}}  {s.mode:<4}  {s.n:>5}  {s.fraction:.4f}")
        for miss in s.disagreements[: config.show]:
            rule = explain_answer(miss["response"], miss["choices"])[1]
            tail = " ".join(miss["response"].split())[-160:]
            print(f"    {miss['id']}: judge {miss['want']}, extractor {miss['got']} (rule {rule}): ...{tail}")
    total = sum(s.n for s in scores)
    agree = sum(s.agree for s in scores)
    print(f"agreement={agree / total if total else 1.0:.6f}")
    return 0


@dataclass
class ExtractConfig:
    """Write <scene>/priors/teachers/<teacher>.safetensors (key `features`, float32 [T,h,w,C]) for `recon4d fit`."""

    scene: Path
    """Scene folder with frames/ (made by `recon4d fit --stop-after priors`)."""
    model: ModelName = "tiny"
    """VLM whose vision encoder is the teacher; `tiny` is a seeded random model that runs offline."""
    model_path: str | None = None
    """Local checkpoint directory (or hub id, if online) for the real models."""
    device: str = "auto"
    """Where the model runs: auto (the GPU when there is one), cpu, cuda, cuda:N."""
    dtype: DtypeName = "auto"
    """Weights' dtype: auto = bfloat16 on CUDA, float32 on the CPU."""


@expected_errors("vqa extract")
def extract(config: ExtractConfig) -> int:
    from recon4d.scene.teachers import write_teacher
    from vqa_bridge.adapters import load_adapter, resolve_placement
    from vqa_bridge.modalities import read_frames
    from vqa_bridge.teacher import extract_teacher

    log_tracebacks_to(config.scene / "log.txt")
    device, dtype = resolve_placement(config.device, config.dtype)
    try:
        frames = read_frames(config.scene)
        adapter = load_adapter(config.model, config.model_path, vision_only=True, device=device, dtype=dtype)
    except (FileNotFoundError, ValueError) as err:  # no frames yet, an unknown model, no --model-path
        raise UserError(str(err)) from err
    features, cls = extract_teacher(adapter, frames)
    path = write_teacher(config.scene, adapter.teacher_name, features, cls)
    where = adapter.placement()
    print(f"{path}: features {list(features.shape)}" + (f", cls {list(cls.shape)}" if cls is not None else "")
          + f" ({where['device']}, {where['dtype']})")
    return 0


@dataclass
class RunConfig:
    """Answer VLM4D questions from raw video, global-view video and/or the feature field; JSONL + summary tables."""

    qa: Path
    """VLM4D-format question file (e.g. ../shared/data/vlm4d/vlm4d_real_mc_davis.json or a synth qa.json)."""
    scenes: Path
    """Folder of fitted scene folders, one per video (DAVIS sequence name or synth scene id)."""
    out: Path
    """Output folder: results.jsonl (resumable), summary.md, summary.csv."""
    modalities: tuple[Modality, ...] = MODALITIES
    """`raw+cues`: raw frames with the fitted trajectories described in the prompt; `geometric`: the geometric
    answerer's reply (no VLM), scored beside the others."""
    prompt: tuple[Literal["cot", "do"], ...] = ("cot", "do")
    """Prompt modes: chain of thought and direct output, verbatim as VLM4D."""
    model: ModelName = "tiny"
    """VLM to ask; `tiny` is a seeded random model that runs offline (its answers are noise)."""
    model_path: str | None = None
    """Local checkpoint directory (or hub id, if online) for the real models."""
    device: str = "auto"
    """Where the model runs, and the fitted scenes render: auto (the GPU when there is one), cpu, cuda, cuda:N.
    Recorded in every result (`generation.placement`)."""
    dtype: DtypeName = "auto"
    """Weights' dtype: auto = bfloat16 on CUDA, float32 on the CPU."""
    n_frames: int = 8
    """Frames sampled per video, np.linspace(0, N-1, n) rounded, as VLM4D."""
    max_new_tokens_cot: int = 512
    """Token budget of a chain-of-thought answer (decoding is greedy)."""
    max_new_tokens_do: int = 16
    """Token budget of a direct-output answer."""


@expected_errors("vqa run")
def run(config: RunConfig) -> int:
    from vqa_bridge.adapters import Generation, load_adapter, resolve_placement
    from vqa_bridge.evaluate import run_vlm4d

    device, dtype = resolve_placement(config.device, config.dtype)
    try:
        adapter = load_adapter(config.model, config.model_path, device=device, dtype=dtype)
        outcome = run_vlm4d(config.qa, config.scenes, config.out, adapter, config.model, config.modalities,
                            config.prompt, config.n_frames,
                            Generation(config.max_new_tokens_cot, config.max_new_tokens_do),
                            log=lambda m: print(m, file=sys.stderr), render_device=str(device))
    except (FileNotFoundError, ValueError) as err:  # a missing or malformed question file, a model that cannot load
        raise UserError(str(err)) from err
    print(outcome.summary)
    print(f"answered {outcome.answered}, already done {outcome.skipped_done}, problems {len(outcome.problems)}; "
          f"results in {config.out}")
    return 0


def usage() -> str:
    rows = "\n".join(f"  {name:<13} {summary}" for name, summary in STEPS.items())
    return f"usage: recon4d vqa <step> [options]\n\nsteps:\n{rows}\n\n`recon4d vqa <step> --help` for options."


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(usage())
        return 0
    step, rest = argv[0], argv[1:]
    if step == "extract-eval":
        return extract_eval(tyro.cli(ExtractEvalConfig, args=rest, prog="recon4d vqa extract-eval"))
    if step == "extract":
        return extract(tyro.cli(ExtractConfig, args=rest, prog="recon4d vqa extract"))
    if step == "run":
        return run(tyro.cli(RunConfig, args=rest, prog="recon4d vqa run"))
    print(f"recon4d vqa: unknown step {step!r}\n\n{usage()}", file=sys.stderr)
    return 2

"""`recon4d vqa <step>`: the VLM bridge (issue 8).

Steps are dispatched by name so each one builds only its own typed config with
tyro. ``extract-eval`` is built; ``run`` and ``extract`` answer that they are not
built yet instead of pretending.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from recon4d.commands._pending import not_built

STEPS = {
    "extract-eval": "score the answer extractor against VLM4D's judge-graded outputs",
    "run": "answer VLM4D questions from raw video, global-view video or the feature field (not built yet)",
    "extract": "extract teacher features from a VLM's vision encoder into a scene folder (not built yet)",
}


@dataclass
class ExtractEvalConfig:
    """Run the answer extractor on every `response` in judged VLM4D files and compare with `extracted_answer`."""

    judged: tuple[Path, ...]
    """Folders of judged files, one `<model>_<frames>.json` per model (e.g. ../shared/data/vlm4d/judged_synthetic_cot)."""
    show: int = 0
    """Also print up to this many disagreeing responses per file."""


def extract_eval(config: ExtractEvalConfig) -> int:
    """One row per model file (model, mode, n, agreement), then `agreement=<fraction>` over all entries."""
    from vqa_bridge.extract import explain_answer, extract_answer
    from vqa_bridge.judged import JudgedFileError, judged_files, score_file

    try:
        files = judged_files(list(config.judged))
        scores = [score_file(path, extract_answer) for path in files]
    except (FileNotFoundError, JudgedFileError) as err:
        print(f"recon4d vqa extract-eval: {err}", file=sys.stderr)
        return 2
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
    if step in STEPS:
        return not_built(f"vqa {step}", 8)
    print(f"recon4d vqa: unknown step {step!r}\n\n{usage()}", file=sys.stderr)
    return 2

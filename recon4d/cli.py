"""The ``recon4d`` command: one entry point, one module per subcommand.

Each subcommand lives in ``recon4d/commands/<name>.py`` and exposes ``main(argv)``,
which builds its typed dataclass config with tyro. Dispatch is by name and imports
lazily, so ``recon4d --help`` answers instantly without importing torch.
"""

from __future__ import annotations

import importlib
import sys

# name -> (module under recon4d.commands, one-line summary)
COMMANDS: dict[str, tuple[str, str]] = {
    "fit": ("fit", "reconstruct a 4D feature field from a video (preprocess + optimise)"),
    "render": ("render", "render a fitted scene from input/global/orbit cameras"),
    "export": ("export", "write PLY splats and nerfstudio transforms.json"),
    "view": ("view", "interactive browser viewer for a fitted scene"),
    "synth": ("synth", "generate synthetic dynamic scenes with ground truth and questions"),
    "eval": ("evaluate", "compare a fitted scene with its ground truth"),
    "batch": ("batch", "reconstruct many videos with Ray"),
    "ablate": ("ablate", "the full feature-field VQA ablation in one command"),
    "answer": ("answer", "answer VLM4D-style questions geometrically from a fitted scene"),
    "vqa": ("vqa", "VLM bridge: teacher extraction, VLM4D evaluation, answer extraction"),
    "bench": ("bench", "benchmarks: render, skin (ratios against the PyTorch twins)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {summary}" for name, (_, summary) in COMMANDS.items())
    return f"usage: recon4d <command> [options]\n\ncommands:\n{rows}\n\n`recon4d <command> --help` for options."


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0
    if argv[0] in {"-V", "--version"}:
        from recon4d import __version__

        print(f"recon4d {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"recon4d: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"recon4d.commands.{COMMANDS[name][0]}")
    try:
        return int(module.main(rest) or 0)
    except KeyboardInterrupt:
        print("\nrecon4d: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

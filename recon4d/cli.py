"""The ``recon4d`` command: one entry point, one module per subcommand.

Each subcommand lives in ``recon4d/commands/<name>.py`` and exposes ``main(argv)``,
which builds its typed dataclass config with tyro. Dispatch is by name and imports
lazily, so ``recon4d --help`` answers instantly without importing torch.

This is the CLI's error boundary (policy in recon4d/errors.py): a UserError is one line and
exit 2, Ctrl-C exit 130, any other exception one line naming the file that holds its traceback
and exit 1. tyro's argument errors exit 2 on their own (SystemExit passes through).
"""

from __future__ import annotations

import importlib
import sys

from recon4d import errors

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
    "build": ("build", "compile every kernel now (recon4d's and, on a GPU, gsplat's), not mid-fit"),
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
    errors.log_tracebacks_to(None)  # each run declares its own scene log
    try:
        module = importlib.import_module(f"recon4d.commands.{COMMANDS[name][0]}")
        return int(module.main(rest) or 0)
    except errors.UserError as err:  # from a command whose main has no guard of its own (bench)
        return errors.user_error(name, err)
    except KeyboardInterrupt:
        print("\nrecon4d: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        return errors.internal_error(name, exc)


if __name__ == "__main__":
    sys.exit(main())

"""The direction of imports between recon4d's parts: each layer imports only the layers below it.

Layers, bottom to top:

1. ``cuda_ext``: the kernels, usable without recon4d.
2. recon4d's core below the fit: ``errors``, ``device``, ``kernels``, ``io``, ``scene_folder``,
   ``priors``, ``scene``, ``render``, ``synth`` (and the package itself, for ``__version__``).
   ``synth`` is here, not above the fit: it makes input videos and their ground truth, and the
   fit reads its ground-truth priors (``recon4d fit --priors gt``), never the other way round.
3. ``fit``: the optimiser.
4. The readers of a fit, which must not import ``recon4d.fit``: ``render``, ``export``, ``viewer``,
   ``scene``, ``grounding``, ``eval`` and ``vqa_bridge``. ``render`` and ``scene`` are in layers 2
   and 4 both: the fit renders and saves through them, and they read what it wrote. ``eval`` is
   a reader like the others (it scores a finished fit against a synth scene's ground truth), not
   a command: ``recon4d evaluate`` is :mod:`recon4d.commands.evaluate`.
5. Orchestration: ``batch``, ``bench``, ``ablate``, ``commands``, ``cli``, which may import anything.

The rules checked: (a) nothing in layers 2 and 4 imports ``recon4d.fit``; (b) nothing of recon4d but
orchestration imports ``vqa_bridge``, and nothing but orchestration imports orchestration; (c) ``cuda_ext``
imports nothing of recon4d or vqa_bridge; and, what layering implies beyond those, (d) neither the
fit nor the core below it imports a part that is only a reader of a fit (export, viewer,
grounding, eval).

The scene folder (:mod:`recon4d.scene_folder`, read through :mod:`recon4d.scene.data`) is the
seam between the fit and its readers: a reader takes the fit's output from the folder, never
from the fit's modules, so the optimiser can change without touching them.

Every import counts, the function-local ones included (they are how a module defers a heavy
import, not a licence to import upwards). Imports by name at run time (``importlib``) are not
seen; only the CLI and ``recon4d bench`` use them, to find their subcommands.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("recon4d", "vqa_bridge", "cuda_ext")

ORCHESTRATION = ("batch", "bench", "ablate", "commands", "cli")
"""recon4d's top layer: what may import every other part."""
READERS_OF_A_FIT = ("render", "export", "viewer", "scene", "grounding", "eval")
"""recon4d's parts downstream of the fit that must not import it (vqa_bridge, outside recon4d, neither)."""
BELOW_THE_FIT = ("errors", "device", "kernels", "io", "scene_folder", "priors", "scene", "render", "synth")
"""recon4d's core below the fit."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports (of this repository's packages or not), wherever in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, up level - 1
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if _is_module(f"{module}.{alias.name}"))
    return found


def _part(module: str) -> str:
    """``recon4d.<part>`` for recon4d's modules (``recon4d`` for the package itself), else the top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "recon4d" else parts[0]


def _in(module: str, *parts: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in parts)


def _imports() -> dict[str, set[str]]:
    """Module name -> the modules of this repository's packages it imports."""
    graph = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if ".build" in path.parts:
                continue
            graph[_module_name(path)] = {m for m in _imported(path) if m.split(".")[0] in PACKAGES}
    return graph


def _backward(rule) -> list[str]:
    """``importer -> imported`` for every import the rule forbids."""
    return sorted(f"{importer} -> {imported}" for importer, imported_set in _imports().items()
                  for imported in imported_set if rule(importer, imported))


def _recon4d(*parts: str) -> tuple[str, ...]:
    return tuple(f"recon4d.{p}" for p in parts)


def test_readers_of_a_fit_and_the_core_below_it_do_not_import_the_fit():
    lower = _recon4d(*READERS_OF_A_FIT, *BELOW_THE_FIT) + ("vqa_bridge",)
    assert _backward(lambda a, b: (_in(a, *lower) or a == "recon4d") and _in(b, "recon4d.fit")) == []


def test_only_orchestration_imports_vqa_bridge():
    top = _recon4d(*ORCHESTRATION)
    assert _backward(lambda a, b: _in(a, "recon4d") and not _in(a, *top) and _in(b, "vqa_bridge")) == []


def test_nothing_below_orchestration_imports_it():
    top = _recon4d(*ORCHESTRATION)
    assert _backward(lambda a, b: _in(a, "recon4d", "vqa_bridge") and not _in(a, *top) and _in(b, *top)) == []


def test_the_fit_and_the_core_below_it_do_not_import_the_readers_of_a_fit():
    readers_only = _recon4d(*(p for p in READERS_OF_A_FIT if p not in BELOW_THE_FIT))
    lower = _recon4d("fit", *BELOW_THE_FIT)
    assert _backward(lambda a, b: (_in(a, *lower) or a == "recon4d") and _in(b, *readers_only)) == []


def test_cuda_ext_imports_nothing_of_recon4d_or_vqa_bridge():
    assert _backward(lambda a, b: _in(a, "cuda_ext") and _in(b, "recon4d", "vqa_bridge")) == []


def test_the_walk_sees_every_part_and_function_local_imports():
    graph = _imports()
    assert {_part(m) for m in graph} >= {"cuda_ext", "vqa_bridge", "recon4d", *_recon4d(*ORCHESTRATION, "fit",
                                         *READERS_OF_A_FIT, *BELOW_THE_FIT)}
    assert "recon4d.scene.teachers" in graph["recon4d.batch.worker"]  # imported inside ensure_vlm_teacher
    assert "recon4d.errors" in graph["recon4d.cli"]  # ``from recon4d import errors``: the module, not the package

"""Save and restore a DynamicScene (plus decoder heads) as safetensors + a JSON sidecar.

Shapes change during a fit (densification, pruning), so loading builds an empty
skeleton and swaps every parameter and buffer in at the stored shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from recon4d.io.atomic import atomic_group, write_json
from recon4d.scene.gaussians import GaussianSet
from recon4d.scene.heads import FeatureHead
from recon4d.scene.model import DynamicScene
from recon4d.scene.scaffold import MotionScaffold, SkinBinding
from recon4d.scene_folder import SCENE_META, SCENE_TENSORS


def _skeleton() -> DynamicScene:
    empty = torch.zeros(0, 3)
    gs = lambda: GaussianSet(empty, empty, empty, torch.zeros(0))  # noqa: E731
    scaffold = MotionScaffold(torch.zeros(1, 3), torch.tensor([[[1.0, 0, 0, 0]]]), torch.zeros(1, 1, 3))
    return DynamicScene(gs(), gs(), scaffold, SkinBinding(torch.zeros(0, 1, dtype=torch.int32), torch.zeros(0, 1)))


def load_resized(module: nn.Module, state: dict[str, Tensor]) -> None:
    """Replace each named parameter/buffer of ``module`` by the stored tensor, whatever its shape."""
    params = dict(module.named_parameters())
    for name, value in state.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        if name in params:
            setattr(owner, leaf, nn.Parameter(value.clone()))
        else:
            owner.register_buffer(leaf, value.clone())


def save_scene(folder: Path, scene: DynamicScene, heads: nn.ModuleDict, meta: dict[str, Any]) -> None:
    """Write ``scene.safetensors`` and ``scene.json`` into ``folder``, together (see ``atomic_group``)."""
    folder = Path(folder)
    with atomic_group([folder / SCENE_TENSORS, folder / SCENE_META]) as (tensors_path, meta_path):
        write_scene(tensors_path, meta_path, scene, heads, meta)


def write_scene(tensors_path: Path, meta_path: Path, scene: DynamicScene, heads: nn.ModuleDict,
                meta: dict[str, Any]) -> None:
    """Write a scene's two files to the paths given (the caller's ``atomic_group`` renames them into place).

    A ``checkpoint`` id in ``meta`` goes into the tensors' header as well, so that a
    reader can tell whether the two files come from the same save (``tensors_checkpoint``).
    """
    tensors = {f"scene.{k}": v.detach().cpu().contiguous() for k, v in scene.state_dict().items()}
    tensors.update({f"heads.{k}": v.detach().cpu().contiguous() for k, v in heads.state_dict().items()})
    header = {"checkpoint": meta["checkpoint"]} if "checkpoint" in meta else None
    save_file(tensors, str(tensors_path), metadata=header)
    head_dims = {name: [h.net[0].in_features, h.net[2].out_features, h.net[0].out_features]
                 for name, h in heads.items()}
    write_json(meta_path, {**meta, "skin_mode": scene.skin_mode, "reference_frame": scene.reference_frame,
                            "heads": head_dims})


def tensors_checkpoint(path: Path) -> str | None:
    """The checkpoint id in a ``scene.safetensors`` header (None for a scene saved without one)."""
    with safe_open(str(path), "pt") as f:
        return (f.metadata() or {}).get("checkpoint")


def load_scene(folder: Path) -> tuple[DynamicScene, nn.ModuleDict, dict[str, Any]]:
    folder = Path(folder)
    meta = json.loads((folder / SCENE_META).read_text())
    tensors = _upgrade(load_file(str(folder / SCENE_TENSORS)))
    scene = _skeleton()
    load_resized(scene, {k[6:]: v for k, v in tensors.items() if k.startswith("scene.")})
    scene.skin_mode = meta.get("skin_mode", "dqb")
    scene.reference_frame = meta.get("reference_frame", 0)
    heads = nn.ModuleDict({name: FeatureHead(l, c, h) for name, (l, c, h) in meta.get("heads", {}).items()})
    heads.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("heads.")})
    return scene, heads, meta


def _upgrade(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Scenes saved before the scaffold stored node offsets about each node's centre kept world-origin
    translations (``scaffold.node_trans``): convert them, so older fits still load."""
    old = tensors.pop("scene.scaffold.node_trans", None)
    if old is not None:
        legacy = MotionScaffold(tensors["scene.scaffold.node_pos"], tensors["scene.scaffold.node_quats"], old)
        tensors["scene.scaffold.node_offsets"] = legacy.node_offsets.detach()
    return tensors

"""Densification and pruning with gsplat's default-strategy rules, on any backend.

gsplat's ``DefaultStrategy`` needs CUDA-side bookkeeping and one flat parameter dict;
our scene has two Gaussian sets (static, and dynamic with skinning bindings), so the
same rules are applied here to both: accumulate the screen-space gradient of each
Gaussian's 2D mean (scaled to NDC as gsplat does), and every ``refine_every`` steps
duplicate small high-gradient Gaussians, split large ones in two (scales / 1.6, new
centres sampled from the Gaussian), and prune the nearly transparent or huge ones (huge for
its distance from the cameras: see ``Densifier``).
Under ``max_gaussians`` (per set) growth takes the room left after pruning, highest
gradients first, so a capped budget still goes where the image is least explained.
The optimiser is rebuilt afterwards, which the trainer does: its moments restart, or with
``keep_optimizer_state`` the survivors keep theirs (:func:`carry_adam_state`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from recon4d.geometry import quat_to_rotmat
from recon4d.scene import DynamicScene, GaussianSet


@dataclass
class DensifyConfig:
    enabled: bool = True
    refine_every: int = 100
    start_fraction: float = 0.1
    """Refinement runs between these fractions of the joint stage."""
    stop_fraction: float = 0.6
    grow_grad2d: float = 0.0002
    grow_scale3d: float = 0.01
    """Relative to the scene extent: below it a Gaussian is duplicated, above it split."""
    prune_opacity: float = 0.005
    prune_scale3d: float = 0.1
    """Relative to the scene extent, or to a farther Gaussian's distance from the cameras: above it the
    Gaussian is pruned as huge."""
    max_gaussians: int = 300_000
    keep_optimizer_state: bool = False
    """After a refinement, survivors keep their Adam moments and new Gaussians start from zero ones (gsplat's
    strategy); off: the stage's optimiser starts afresh (the CPU presets, measured that way)."""


class Densifier:
    def __init__(self, cfg: DensifyConfig, extent: float, eye: Tensor | None = None):
        """``extent``: the scene's scale (the median prior depth); ``eye``: the cameras' mean centre.

        Why "huge" grows with the distance from ``eye`` beyond the extent: a Gaussian
        lifted from a far pixel (sky, a distant hillside, often tens of extents away)
        is as large as its pixel footprint there, many times ``prune_scale3d`` of the
        extent, and pruning it left that part of every frame black. gsplat applies its
        3D bound only after its first opacity reset (3000 steps, more than a CPU
        preset's whole joint stage); the bound here holds from the first refinement,
        so it is an angle: as before at the median depth and nearer, looser beyond.
        """
        self.cfg, self.extent, self.eye = cfg, extent, eye
        self.grad_sum: Tensor | None = None
        self.count: Tensor | None = None
        self.rows: dict[int, tuple[Tensor, int]] = {}
        """After a refinement: id of each replaced parameter -> (the old rows it was gathered from, how many of
        them are survivors; the rest are new Gaussians), for carrying optimiser state over."""

    def state_dict(self) -> dict[str, Tensor]:
        """The gradient statistics gathered since the last refinement, for a checkpoint.

        Why: when a checkpoint between two refinements dropped them, the resumed run
        refined on the statistics of the steps since the checkpoint only, and grew
        another scene than the uninterrupted run (docs/decisions.md).
        """
        return {} if self.grad_sum is None else {"grad_sum": self.grad_sum, "count": self.count}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.grad_sum, self.count = state.get("grad_sum"), state.get("count")

    def observe_and_refine(self, scene: DynamicScene, render, step: int, stage_steps: int) -> bool:
        """Accumulate statistics from the last backward; refine when due. True if shapes changed."""
        cfg = self.cfg
        if not cfg.enabled:
            return False
        means2d = render.meta["means2d"]
        if means2d.grad is None:
            return False
        grad = means2d.grad[0].clone()
        grad[:, 0] *= render.meta["width"] / 2
        grad[:, 1] *= render.meta["height"] / 2
        visible = (render.meta["radii"][0] > 0).all(-1)
        n = grad.shape[0]
        if self.grad_sum is None or self.grad_sum.shape[0] != n:
            self.grad_sum, self.count = grad.new_zeros(n), grad.new_zeros(n)
        # Masked adds, not boolean-indexed ones: those make a GPU wait for the host every step.
        self.grad_sum += torch.where(visible, grad.norm(dim=-1), 0.0)
        self.count += visible.to(self.count.dtype)
        start, stop = int(cfg.start_fraction * stage_steps), int(cfg.stop_fraction * stage_steps)
        if not (start <= step < stop and step > 0 and step % cfg.refine_every == 0):
            return False
        avg = self.grad_sum / self.count.clamp(min=1)
        self.rows = {}
        n_static = len(scene.static)
        self._refine_set(scene.static, avg[:n_static], None)
        self._refine_set(scene.dynamic, avg[n_static:], scene)
        self.grad_sum = self.count = None
        return True

    def _refine_set(self, gs: GaussianSet, avg_grad: Tensor, scene: DynamicScene | None) -> None:
        cfg = self.cfg
        if len(gs) == 0:
            return
        with torch.no_grad():
            max_scale = gs.scales.max(dim=-1).values
            high = avg_grad > cfg.grow_grad2d
            small = max_scale <= cfg.grow_scale3d * self.extent
            reach = self.extent if self.eye is None else (gs.means - self.eye).norm(dim=-1).clamp(min=self.extent)
            prune = (gs.opacities < cfg.prune_opacity) | (max_scale > cfg.prune_scale3d * reach)
            # at the cap, growth takes the room pruning frees, steepest gradients first (a split adds one)
            room = max(cfg.max_gaussians - len(gs) + int(prune.sum()), 0)
            grow = torch.nonzero(high & ~prune).squeeze(1)
            grow = grow[avg_grad[grow].argsort(descending=True)[:room]]
            dup, split = grow[small[grow]].sort().values, grow[~small[grow]].sort().values
            prune[split] = True  # a split Gaussian is replaced by its two children
            keep = torch.nonzero(~prune).squeeze(1)
            index = torch.cat([keep, dup, split, split])
            offsets = self._split_offsets(gs, split)
        gs.select(index)
        replaced = list(gs.parameters(recurse=False))
        if scene is not None:
            scene.binding.select(index)
            replaced.append(scene.binding.correction)
        self.rows.update({id(p): (index, len(keep)) for p in replaced})
        with torch.no_grad():
            if len(split):
                n_new = 2 * len(split)
                gs.means[-n_new:] += offsets
                gs.log_scales[-n_new:] -= math.log(1.6)

    @staticmethod
    def _split_offsets(gs: GaussianSet, split: Tensor) -> Tensor:
        """Two samples per split Gaussian from N(0, its covariance), in world coordinates."""
        if len(split) == 0:
            return gs.means.new_zeros(0, 3)
        rot = quat_to_rotmat(gs.quats[split])
        noise = torch.randn(2, len(split), 3, device=gs.means.device) * gs.scales[split][None]
        return torch.einsum("nij,bnj->bni", rot, noise).reshape(-1, 3)


def carry_adam_state(old: torch.optim.Optimizer, new: torch.optim.Optimizer,
                     rows: dict[int, tuple[Tensor, int]]) -> None:
    """Give ``new`` (an optimiser over the refined parameters) ``old``'s moments: a replaced parameter's surviving
    rows keep theirs, its new rows (split and duplicated Gaussians) start at zero. ``rows`` is
    :attr:`Densifier.rows`. When a set appeared or emptied the groups differ, and ``new`` starts afresh."""
    if len(old.param_groups) != len(new.param_groups):
        return
    for g_old, g_new in zip(old.param_groups, new.param_groups, strict=True):
        for p_old, p_new in zip(g_old["params"], g_new["params"], strict=True):
            state = old.state.get(p_old)
            if not state or (p_new is not p_old and id(p_new) not in rows):
                continue
            if p_new is not p_old:
                index, kept = rows[id(p_new)]
                state = {k: _carried_rows(v, index, kept) if v.dim() else v for k, v in state.items()}
            new.state[p_new] = state


def _carried_rows(moment: Tensor, index: Tensor, kept: int) -> Tensor:
    """An Adam moment for parameters gathered by ``index``: the first ``kept`` rows are survivors' (theirs),
    the rest are new (zero)."""
    out = moment.new_zeros((len(index), *moment.shape[1:]))
    out[:kept] = moment[index[:kept]]
    return out

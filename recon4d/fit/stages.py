"""The optimiser's stages as data: what each one moves, at what rate, against which losses, on which frames.

The stages, in order:
  static    background Gaussians alone, on pixels outside the dynamic masks
  scaffold  node transforms from track reprojection + ARAP/velocity/acceleration + RGB
  motion    each frame's node transforms alone, in turn, against its dynamic mask (silhouette, colour)
  joint     everything geometric and photometric, with densification and pruning
  cameras   each frame's pose correction alone, in turn, against the fitted scene (static pixels)
  settle    the joint losses again on the aligned cameras (no densification, cameras fixed)
  nodes     each frame's node transforms alone, in turn, against its image around the moving objects:
            a whole-scene step reaches a frame's transforms once in T steps, too seldom to resolve
            the moving objects' detail (last: the whole-scene steps of settle would undo it)
  features  latents and decoder heads distilled from the teachers (geometry frozen)

``Trainer`` reads a stage's :class:`StageSpec` from ``STAGE_SPECS`` and runs the same generic step for
all of them; :func:`param_groups` turns a spec's parameter families into Adam's groups, in the spec's
order (that order decides the optimiser's state layout and the float results).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from recon4d.fit.cameras import PoseRefinement
from recon4d.scene import DynamicScene
from recon4d.scene_folder import FIT_STAGES

FINAL_LR = 0.01  # the rate of positions and node transforms at the end of a stage, relative to its start


@dataclass
class LearningRates:
    """Adam's rates (gsplat-like; the position-like ones are per unit of scene extent, the median prior
    depth), all multiplied by ``FitConfig.lr_scale``. The pose corrections' rates are
    ``FitConfig.camera_lr`` and ``camera_stage_lr``."""

    scales: float = 5e-3
    """Gaussians' log scales."""
    rotations: float = 1e-3
    """Gaussians' quaternions."""
    opacities: float = 5e-2
    """Gaussians' opacity logits."""
    colors: float = 1e-2
    """Gaussians' colour logits."""
    means: float = 1.6e-4
    """Gaussians' positions, times the extent; decayed over a stage to ``FINAL_LR`` of it."""
    node_rotations: float = 2e-3
    """Scaffold nodes' rotations (scaffold, joint, settle); decayed."""
    node_offsets: float = 1e-3
    """Scaffold nodes' offsets, times the extent (scaffold, joint, settle); decayed."""
    skin_correction: float = 1e-2
    """The skinning binding's per-Gaussian correction."""
    motion_node_rotations: float = 5e-3
    """Node rotations in the ``motion`` stage (one frame's at a time, not decayed)."""
    motion_node_offsets: float = 5e-3
    """Node offsets in the ``motion`` stage, times the extent."""
    frame_node_rotations: float = 1e-3
    """Node rotations in the ``nodes`` stage (one frame's at a time, not decayed): half the scene's, since
    Adam's first steps move every node by about the rate whatever its gradient, and on a large moving
    object (DAVIS bus) the scene's rates blurred it more than they aligned it (docs/decisions.md)."""
    frame_node_offsets: float = 5e-4
    """Node offsets in the ``nodes`` stage, times the extent."""
    latents: float = 2e-2
    """Feature-field latents of the static Gaussians and the scaffold (``features`` stage)."""
    feature_heads: float = 2e-3
    """The teachers' decoder heads (``features`` stage)."""


@dataclass(frozen=True)
class StageSpec:
    """One stage of the fit."""

    groups: tuple[str, ...]
    """Parameter families it optimises, in Adam's group order (see :func:`param_groups`)."""
    objective: str = "photometric"
    """``photometric`` (rgb, mask, depth), ``motion`` (one frame's nodes against its mask) or ``features``."""
    static_only: bool = False
    """Render the static Gaussians alone."""
    masked: bool = False
    """Photometric terms on the pixels outside the dynamic masks only (and no mask term)."""
    scaffold_terms: bool = False
    """Add the track, ARAP and smoothness terms of the scaffold (when there are dynamic Gaussians)."""
    per_frame: bool = False
    """Frames in turn, ``StageSteps`` steps each from a fresh optimiser state; else a shuffled deck."""
    skips_reference: bool = False
    """A per-frame stage that leaves out the reference frame (the canonical space)."""
    densifies: bool = False
    """Densify and prune the Gaussians from the render's screen-space gradients."""
    starts_coarse: bool = False
    """Its first ``FitConfig.coarse_fraction`` of steps render and compare at half resolution."""
    crops_to_motion: bool = False
    """Render and compare only the box around the frame's dynamic mask (a stage that moves nodes alone)."""
    releases_first_camera: bool = False
    """Frame 0's pose may move too from this stage on: the fitted Gaussians hold the world frame."""
    aligns_cameras: bool = False
    """A per-frame stage that ends each frame with direct alignment steps of its camera
    (``FitConfig.camera_align_steps``)."""
    needs_dynamic: bool = False
    """Skipped without dynamic Gaussians."""
    needs_dynamic_mask: bool = False
    """Skipped when no frame has a dynamic pixel."""
    needs_teachers: bool = False
    """Skipped without teacher features."""
    needs_camera_lr: bool = False
    """Skipped when ``camera_lr`` is 0 (the priors' cameras are kept)."""


_SCENE = ("static_gaussians", "dynamic_gaussians", "nodes")
STAGE_SPECS = {
    "static": StageSpec(("static_gaussians", "camera_corrections"), static_only=True, masked=True),
    "scaffold": StageSpec(("nodes",), scaffold_terms=True, needs_dynamic=True),
    "motion": StageSpec(("motion_nodes",), objective="motion", per_frame=True, skips_reference=True,
                        needs_dynamic=True, needs_dynamic_mask=True),
    "joint": StageSpec((*_SCENE, "camera_corrections"), scaffold_terms=True, densifies=True,
                       starts_coarse=True),
    "cameras": StageSpec(("camera_poses",), masked=True, per_frame=True, releases_first_camera=True,
                         aligns_cameras=True, needs_camera_lr=True),
    "settle": StageSpec(_SCENE, scaffold_terms=True, needs_camera_lr=True),
    "nodes": StageSpec(("frame_nodes",), per_frame=True, skips_reference=True, crops_to_motion=True,
                       needs_dynamic=True, needs_dynamic_mask=True),
    "features": StageSpec(("feature_field",), objective="features", needs_teachers=True),
}
assert tuple(STAGE_SPECS) == FIT_STAGES, "one spec per stage of the scene folder, in its order"


def _gaussians(gs, rates: LearningRates, extent: float) -> list[dict]:
    return [dict(params=[gs.log_scales], lr=rates.scales), dict(params=[gs.quats], lr=rates.rotations),
            dict(params=[gs.opacity_logits], lr=rates.opacities), dict(params=[gs.color_logits], lr=rates.colors),
            # decayed over the stage (FINAL_LR), as gsplat decays it over its run
            dict(params=[gs.means], lr=rates.means * extent, decays=True)]


def param_groups(spec: StageSpec, scene: DynamicScene, heads: nn.ModuleDict, poses: PoseRefinement,
                 rates: LearningRates, extent: float, lr: float, camera_lr: float,
                 camera_stage_lr: float) -> list[dict]:
    """Adam parameter groups of a stage: its families' groups in order (params, base rate, ``decays`` for
    the groups ``Trainer`` decays), every rate times ``lr`` (the run's scale, halved by a rollback), empty
    groups left out. ``Trainer`` passes ``camera_lr`` already times ``lr``, so the pose corrections get the
    scale twice (a rollback that halves ``lr`` quarters theirs); kept as it is, since it decides the results."""
    scaffold = scene.scaffold
    families = {
        "static_gaussians": lambda: _gaussians(scene.static, rates, extent),
        "dynamic_gaussians": lambda: _gaussians(scene.dynamic, rates, extent),
        "nodes": lambda: [dict(params=[scaffold.node_quats], lr=rates.node_rotations, decays=True),
                          dict(params=[scaffold.node_offsets], lr=rates.node_offsets * extent, decays=True),
                          dict(params=[scene.binding.correction], lr=rates.skin_correction)],
        # not decayed: a per-frame stage starts each frame afresh, and a decay over the stage would leave
        # its last frames a hundredth of the first frames' rate
        "frame_nodes": lambda: [dict(params=[scaffold.node_quats], lr=rates.frame_node_rotations),
                                dict(params=[scaffold.node_offsets], lr=rates.frame_node_offsets * extent)],
        "motion_nodes": lambda: [dict(params=[scaffold.node_quats], lr=rates.motion_node_rotations),
                                 dict(params=[scaffold.node_offsets], lr=rates.motion_node_offsets * extent)],
        "camera_corrections": lambda: [dict(params=[poses.delta], lr=camera_lr)] if camera_lr > 0 else [],
        "camera_poses": lambda: [dict(params=[poses.delta], lr=camera_stage_lr)],
        "feature_field": lambda: [dict(params=[scene.static.latents, scaffold.latents], lr=rates.latents),
                                  dict(params=list(heads.parameters()), lr=rates.feature_heads)],
    }
    groups = [g for family in spec.groups for g in families[family]()]
    for g in groups:
        g["lr"] *= lr
        g["initial_lr"] = g["lr"]
    return [g for g in groups if any(p.numel() for p in g["params"])]

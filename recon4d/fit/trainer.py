"""The optimisation loop of ``recon4d fit``: staged, checkpointed, resumable, NaN-safe.

The stages, each a number of steps (0 skips it), are data: :mod:`recon4d.fit.stages`.

A checkpoint (scene + cameras + optimiser + densification statistics + RNG + stage/step)
is written every ``checkpoint_every`` steps, at every stage end and on Ctrl-C, its files
together (``Trainer.save``); ``resume`` continues from it exactly, even after a kill -9.
A non-finite loss or parameter rolls the run back to the last checkpoint with the
learning rate halved, and says so.
"""

from __future__ import annotations

import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn
from tqdm import tqdm

from cuda_ext.checks import trusted_inputs
from recon4d.device import check_gpu_path, resolve_device
from recon4d.fit import losses, motion
from recon4d.fit.cameras import PoseRefinement, align_camera
from recon4d.fit.checkpoint import read_checkpoint, restore_rng, rng_states, write_checkpoint
from recon4d.fit.coarse import halved
from recon4d.fit.crop import cropped, motion_box
from recon4d.fit.densify import DensifyConfig, Densifier, carry_adam_state
from recon4d.fit.init import InitConfig, initial_scene
from recon4d.fit.schedule import deck_frame, ends_frame, frame_in_turn, frames_in_turn, held_out_frames, starts_frame
from recon4d.fit.stages import FINAL_LR, STAGE_SPECS, LearningRates, StageSpec, param_groups
from recon4d.fit.topology import arap_edges
from recon4d.fit.track_loss import AnchoredTracks, track_loss
from recon4d.geometry import camera_centres
from recon4d.render import RenderOutput, rasterize
from recon4d.render.metrics import psnr
from recon4d.scene.data import SceneData
from recon4d.scene.heads import FeatureHead, to_grid
from recon4d.scene.model import DYN, LATENT_START, RGB
from recon4d.scene_folder import FIT_STAGES as STAGES


@dataclass
class StageSteps:
    static: int = 150
    scaffold: int = 150
    motion: int = 10
    """Steps per frame (the reference frame excluded) fitting its node transforms to its mask; 0 skips."""
    joint: int = 900
    cameras: int = 15
    """Steps per frame (frame 0 included: the fitted Gaussians hold the world frame now); 0 skips the stage."""
    nodes: int = 0
    """Steps per frame (the reference frame excluded) fitting its node transforms to its image; 0 skips."""
    settle: int = 150
    """Joint steps after the cameras stage, so that the Gaussians sharpen on the aligned cameras."""
    features: int = 400


@dataclass
class LossWeights:
    rgb: float = 1.0
    depth: float = 0.05
    mask: float = 0.1
    track: float = 0.05
    # Scaffold terms are measured in units of the scene extent (median prior depth), so that
    # the same weights hold whatever scale the camera solve gave the scene. The rigidity terms are light:
    # a real body bends at its joints, and a node pair across a knee holds the leg back (docs/decisions.md).
    arap: float = 2.0
    velocity: float = 0.0
    acceleration: float = 1.0
    silhouette: float = 1.0
    motion_depth: float = 1.0
    """Depth term of the ``motion`` stage (relative L1 on the mask): its other terms are all image-plane, and
    without it each frame's nodes slide along the line of sight (docs/decisions.md)."""
    feature: float = 1.0


@dataclass
class FitConfig:
    steps: StageSteps = field(default_factory=StageSteps)
    weights: LossWeights = field(default_factory=LossWeights)
    init: InitConfig = field(default_factory=InitConfig)
    densify: DensifyConfig = field(default_factory=DensifyConfig)
    latent_dim: int = 32
    """Channels of the feature-field latent (used only when the scene has teachers)."""
    learning_rates: LearningRates = field(default_factory=LearningRates)
    lr_scale: float = 1.0
    checkpoint_every: int = 200
    check_every: int = 10
    """Steps between finiteness checks of the loss and parameters (also made before every checkpoint and at a
    stage's end), which are also the steps the history logs. Each check reads the device once; a check every
    step made a GPU wait for the host a dozen times a step."""
    skin_mode: str = "dqb"
    seed: int = 0
    backend: str = "auto"
    """Rasterizer backend: auto (gsplat on CUDA, C++ kernel on CPU), cpu, torch, gsplat."""
    device: str = "auto"
    """Where to optimise: auto (cuda when available), cpu, cuda, cuda:N."""
    camera_lr: float = 1e-4
    """Learning rate of the per-frame pose corrections (static and joint stages); 0 keeps the priors' cameras
    (and skips the ``cameras`` stage). Kept small: larger rates fit pose jitter (docs/decisions.md)."""
    camera_stage_lr: float = 6e-4
    """Learning rate of the ``cameras`` stage, where one frame's pose moves at a time against fixed Gaussians."""
    ssim_downsample: int = 1
    """The photometric SSIM term is computed on renders and frames averaged over this many pixels a side (the
    L1 term stays at full resolution); 1: full."""
    holdout_every: int = 0
    """Hold out every k-th frame (frames k//2, k//2 + k, ...): no step of the fit reads its pixels, its camera
    correction and its scaffold nodes' transforms are interpolated from its neighbours' when the fit ends, and its
    PSNR measures the 4D model, not memorising."""
    coarse_fraction: float = 0.0
    """The first fraction of the joint stage's steps render and compare at half resolution
    (:mod:`recon4d.fit.coarse`): a quarter of the pixels a step; 0: none."""
    camera_align_steps: int = 2
    """Direct alignment steps (Gauss-Newton on the background's photometric error, with the rendered depth)
    that end each frame of the ``cameras`` stage, each kept only when it lowers that error; 0: none."""


class NonFiniteError(RuntimeError):
    pass


class Trainer:
    def __init__(self, data: SceneData, cfg: FitConfig, model_dir: Path, log: Callable[[str], None] = print):
        self.device = resolve_device(cfg.device)
        check_gpu_path(self.device, cfg.backend)
        self.cfg, self.model_dir, self.log = cfg, Path(model_dir), log
        self.data = data.to(self.device)
        self.extent = float(data.depth[data.depth > 0].median()) if (data.depth > 0).any() else 1.0
        eye = camera_centres(data.viewmats.detach().cpu().numpy()).mean(0)  # densification's "huge" grows beyond it
        self.eye = torch.as_tensor(eye, dtype=torch.float32, device=self.device)
        self.stage, self.step, self.lr = STAGES[0], 0, cfg.lr_scale
        self.held_out = held_out_frames(data.frames, cfg.holdout_every)
        self.train_frames = [t for t in range(data.frames) if t not in self.held_out]
        self.history: list[dict] = []
        self.stage_seconds: dict[str, float] = {}
        torch.manual_seed(cfg.seed)
        self._mask_distance: Tensor | None = None  # the masks' distance maps, made once when the motion stage needs them
        self._losses_finite = torch.ones((), dtype=torch.bool, device=self.device)  # since the last check
        self._half_resolution: SceneData | None = None  # made once, when a stage first starts coarse

    # ---- set-up -------------------------------------------------------------------------
    def initialise(self) -> None:
        cfg = self.cfg
        latent = cfg.latent_dim if self.data.teachers else 0
        self.scene = initial_scene(self.data, InitConfig(**{**asdict(cfg.init), "latent_dim": latent}),
                                   self.held_out, cfg.skin_mode)
        self.heads = nn.ModuleDict({name: FeatureHead(latent, feats.shape[-1])
                                    for name, feats in self.data.teachers.items()} if latent else {})
        self.poses = PoseRefinement(self.data.frames)
        self._to_device()
        self._setup_stage()

    def _to_device(self) -> None:
        """The scene is initialised and loaded on the CPU; optimisation runs on ``self.device``."""
        self.scene.to(self.device)
        self.heads.to(self.device)
        self.poses.to(self.device)

    def _setup_stage(self) -> None:
        if STAGE_SPECS[self.stage].releases_first_camera:
            self.poses.release_first()
        self._new_optimizer()
        self.densifier = Densifier(self.cfg.densify, self.extent, self.eye)
        self._anchored_tracks = None

    def _new_optimizer(self) -> None:
        groups = param_groups(STAGE_SPECS[self.stage], self.scene, self.heads, self.poses, self.cfg.learning_rates,
                              self.extent, self.lr, self.cfg.camera_lr * self.lr, self.cfg.camera_stage_lr)
        # fused: one kernel for all of a group's tensors instead of a dozen ops per tensor (3 -> 0.8 ms a step
        # for a DAVIS-sized scene on 2 cores); torch has it for CPU and CUDA tensors alike
        self.optimizer = torch.optim.Adam(groups, eps=1e-15, fused=True)

    # ---- checkpoints --------------------------------------------------------------------
    def save(self, note: str = "") -> None:
        """Write a checkpoint: everything a step reads that the steps before it changed (see
        :func:`~recon4d.fit.checkpoint.write_checkpoint`), tagged with one checkpoint id: stage, step and a
        random part that tells apart two saves at the same step (a fit started afresh in the same folder)."""
        checkpoint = f"{self.stage}/{self.step}/{secrets.token_hex(4)}"
        meta = {"stage": self.stage, "step": self.step, "lr_scale": self.lr, "config": asdict(self.cfg),
                "extent": self.extent, "history": self.history[-50:], "stage_seconds": self.stage_seconds,
                "versions": {"torch": torch.__version__},
                "complete": self.stage == "done", "note": note, "checkpoint": checkpoint}
        state = {"optimizer": self.optimizer.state_dict(), "densifier": self.densifier.state_dict(),
                 **rng_states(self.device)}
        write_checkpoint(self.model_dir, checkpoint, state, self.poses, self.data.K, self.data.viewmats,
                         self.scene, self.heads, meta)

    def load(self) -> None:
        """Continue from the checkpoint in ``model_dir`` (:func:`~recon4d.fit.checkpoint.read_checkpoint`)."""
        state, self.scene, self.heads, self.poses, meta = read_checkpoint(self.model_dir, self.data.frames)
        self._to_device()
        self.stage, self.step, self.lr = meta["stage"], meta["step"], meta["lr_scale"]
        self.history = meta.get("history", [])
        self.stage_seconds = meta.get("stage_seconds", {})
        if self.stage == "done":
            return
        self._setup_stage()
        self.optimizer.load_state_dict(state["optimizer"])
        self.densifier.load_state_dict({k: v.to(self.device) for k, v in state.get("densifier", {}).items()})
        restore_rng(state, self.device)

    # ---- one step -----------------------------------------------------------------------
    def viewmat(self, t: int) -> Tensor:
        """Camera ``t`` with its learned correction, ``[1, 4, 4]``."""
        return self.poses.apply_to(self.data.viewmats[t:t + 1], torch.tensor([t], device=self.device))

    def render(self, t: int, with_latent: bool = False, static_only: bool = False, dynamic_only: bool = False,
               frames: SceneData | None = None):
        """Frame t's render at the intrinsics and size of ``frames`` (default: the scene's own)."""
        g = self.scene.at(t, include_static=not dynamic_only, include_dynamic=not static_only,
                          with_latents=with_latent)
        geometry = (g.means, g.quats, g.scales, g.opacities, self.viewmat(t))
        if with_latent:  # feature distillation: geometry and cameras are frozen, so keep them out of the graph
            geometry = tuple(x.detach() for x in geometry)
        means, quats, scales, opacities, view = geometry
        d = frames or self.data
        return rasterize(means, quats, scales, opacities, g.features, view, d.K[None], d.width, d.height,
                         backend=self.cfg.backend)

    def _track_loss(self, t: int) -> Tensor:
        if self._anchored_tracks is None:
            self._anchored_tracks = AnchoredTracks.from_data(self.data, self.scene.reference_frame, self.train_frames,
                                                             self.scene.scaffold.node_pos)
        return track_loss(self._anchored_tracks, self.data, self.scene.scaffold, t, self.viewmat(t)[0], self.extent,
                          self.cfg.init.skin_k)

    def losses(self, t: int) -> tuple[Tensor, dict[str, Tensor], RenderOutput]:
        """The step's total loss, its terms (0-d tensors, read on the host only when logged) and the render
        they were computed from, by the stage's ``objective``."""
        spec = STAGE_SPECS[self.stage]
        if spec.objective == "motion":
            return self._motion_losses(t)
        if spec.objective == "features":
            return self._feature_losses(t)
        return self._photometric_losses(t, spec)

    def _photometric_losses(self, t: int, spec: StageSpec) -> tuple[Tensor, dict[str, Tensor], RenderOutput]:
        """Colour, mask and depth against frame t (outside the dynamic masks for a ``masked`` stage), and the
        scaffold's terms when the spec adds them; also the PSNR (a term not in the total)."""
        d, w = self._frames_for(spec, t), self.cfg.weights
        image, mask = d.images[t], d.dynamic_mask[t]
        terms: dict[str, Tensor] = {}
        out = self.render(t, static_only=spec.static_only, frames=d)
        rgb = out.features[0, ..., RGB]
        pooled = self.cfg.ssim_downsample
        if spec.masked:
            keep = (~mask)[..., None].float()
            terms["rgb"] = w.rgb * losses.l1_ssim(rgb * keep, image * keep, ssim_downsample=pooled)
        else:
            terms["rgb"] = w.rgb * losses.l1_ssim(rgb, image, ssim_downsample=pooled)
            terms["mask"] = w.mask * losses.mask_loss(out.features[0, ..., DYN][..., 0], mask)
        prior = d.depth[t] * (~mask if spec.masked else torch.ones_like(mask))
        terms["depth"] = w.depth * losses.depth_loss(out.depth[0, ..., 0], prior, out.alpha[0, ..., 0])
        if spec.scaffold_terms and len(self.scene.dynamic):
            positions = self.scene.scaffold.node_positions() / self.extent  # scale-free scaffold terms
            terms["track"] = w.track * self._track_loss(t)
            terms["arap"] = w.arap * losses.arap_loss(positions, self._arap_edges(), self.scene.reference_frame)
            vel, acc = losses.smoothness_loss(positions)
            terms["acc"] = w.acceleration * acc + w.velocity * vel
        total = sum(terms.values())
        terms["psnr"] = psnr(out.features[0, ..., RGB].detach(), image)
        return total, terms, out

    def _frames_for(self, spec: StageSpec, t: int) -> SceneData:
        """The frames a photometric step on frame t renders and compares at: cut to the box around frame t's
        moving objects in a stage that crops to them (:mod:`recon4d.fit.crop`), half resolution for the first
        ``coarse_fraction`` of a stage that starts coarse, else the scene's own."""
        if spec.crops_to_motion:
            return cropped(self.data, motion_box(self.data.dynamic_mask[t]))
        if not (spec.starts_coarse and self.step < self.cfg.coarse_fraction * self._stage_steps(self.stage)):
            return self.data
        if self._half_resolution is None:
            self._half_resolution = halved(self.data)
        return self._half_resolution

    def _feature_losses(self, t: int) -> tuple[Tensor, dict[str, Tensor], RenderOutput]:
        """Each teacher's features at frame t against its head's decoding of the rendered latent."""
        d, w = self.data, self.cfg.weights
        out = self.render(t, with_latent=True)
        latent = out.features[0, ..., LATENT_START:]
        terms: dict[str, Tensor] = {}
        for name, teacher in d.teachers.items():
            target = teacher[t]
            pred = self.heads[name](to_grid(latent, target.shape[0], target.shape[1]))
            terms[f"feat_{name}"] = w.feature * losses.l1_ssim(pred, target)
        return sum(terms.values()), terms, out

    def _arap_edges(self) -> Tensor:
        """The scaffold's ARAP pairs; a scene saved before they were stored gets them from its trajectories."""
        scaffold = self.scene.scaffold
        if len(scaffold.arap_edges) == 0 and len(scaffold) > 1:
            scaffold.arap_edges = arap_edges(scaffold.node_positions().detach(), self.cfg.init.arap_k,
                                             self.cfg.init.arap_levels)
        return scaffold.arap_edges

    def _motion_losses(self, t: int) -> tuple[Tensor, dict[str, Tensor], RenderOutput]:
        """The ``motion`` stage's terms for frame t (see :mod:`recon4d.fit.motion`); all depend on frame t's
        node transforms only."""
        d, w, ref = self.data, self.cfg.weights, self.scene.reference_frame
        if self._mask_distance is None:
            self._mask_distance = motion.outside_distance(d.dynamic_mask)
        out = self.render(t, dynamic_only=True)
        mask, alpha = d.dynamic_mask[t], out.alpha[0, ..., 0]
        positions = torch.stack([self.scene.scaffold.node_positions(f) for f in (ref, t)]) / self.extent
        terms = {"silhouette": w.silhouette * motion.silhouette_loss(alpha, mask, self._mask_distance[t]),
                 "rgb": w.rgb * motion.masked_rgb_loss(out.features[0, ..., RGB], d.images[t], mask),
                 "track": w.track * self._track_loss(t),
                 "arap": w.arap * losses.arap_loss(positions, self._arap_edges(), 0),
                 "depth": w.motion_depth * losses.depth_loss(out.depth[0, ..., 0], d.depth[t] * mask, alpha)}
        return sum(terms.values()), terms, out

    def _checked_record(self, loss: Tensor, terms: dict[str, Tensor]) -> dict[str, float]:
        """The loss and its terms as floats, after checking that every loss since the last check and every
        parameter now is finite; one read of the device. Raises NonFiniteError naming the culprit.

        A parameter is tested through its sum, which a NaN or inf anywhere makes non-finite.
        """
        params = dict(self.scene.named_parameters())
        finite = torch.stack([p.detach().sum() for p in params.values()]).isfinite().all() & self._losses_finite
        values = torch.stack([finite.to(loss.dtype), loss.detach(), *(v.detach() for v in terms.values())]).tolist()
        self._losses_finite = torch.ones_like(self._losses_finite)
        if not values[0]:
            raise NonFiniteError(self._nonfinite_parameter() or "a loss was NaN/inf")
        return {"loss": values[1], **dict(zip(terms, values[2:]))}

    def _nonfinite_parameter(self) -> str | None:
        bad = next((name for name, p in self.scene.named_parameters() if not torch.isfinite(p.detach().sum())), None)
        return None if bad is None else f"parameter {bad} has NaN/inf"

    # ---- the loop -----------------------------------------------------------------------
    def total_steps(self) -> int:
        return sum(self._stage_steps(s) for s in STAGES)

    def _stage_steps(self, stage: str) -> int:
        """The steps ``stage`` runs: its ``StageSteps`` (per frame for a per-frame stage), 0 when it is skipped."""
        spec, n = STAGE_SPECS[stage], getattr(self.cfg.steps, stage)
        if (spec.needs_teachers and not self.data.teachers) or (spec.needs_camera_lr and self.cfg.camera_lr == 0) \
                or (spec.needs_dynamic and len(self.scene.dynamic) == 0) \
                or (spec.needs_dynamic_mask and not self.data.dynamic_mask.any()):
            return 0
        if spec.per_frame:
            return n * len(frames_in_turn(self.train_frames, self._skipped_frame(spec)))
        return n

    def _skipped_frame(self, spec: StageSpec) -> int | None:
        """The frame a per-frame stage leaves out (the reference frame, when the spec says so)."""
        return self.scene.reference_frame if spec.skips_reference else None

    def run(self, stop_after: str | None = None) -> None:
        """Optimise until done, or until the stage ``stop_after`` has finished (resumable later)."""
        if self.stage != "done" and self._stage_steps(self.stage) == 0:
            self._next_stage()
        done_before = sum(self._stage_steps(s) for s in STAGES[:STAGES.index(self.stage)]) + self.step \
            if self.stage != "done" else self.total_steps()
        bar = tqdm(total=self.total_steps(), initial=done_before, unit="step", dynamic_ncols=True,
                   mininterval=0.5 if sys.stderr.isatty() else 30.0)
        try:
            while self.stage != "done":
                n = self._stage_steps(self.stage)
                while self.step < n:
                    self._one_step(n)
                    bar.update(1)
                    bar.set_postfix_str(self._postfix(), refresh=False)
                finished = self.stage
                self._next_stage()
                if finished == stop_after:
                    break
        except KeyboardInterrupt:
            if bad := self._nonfinite_parameter():  # unchecked since the last check: never save it
                self.log(f"interrupted: nothing saved ({bad}); --resume continues from the last checkpoint")
                raise
            self.save(note="interrupted")
            self.log(f"interrupted: checkpoint saved at stage {self.stage}, step {self.step}; "
                     f"re-run with --resume to continue")
            raise
        finally:
            bar.close()

    def _postfix(self) -> str:
        last = self.history[-1] if self.history else {}
        psnr = f" psnr={last['psnr']:.2f}" if "psnr" in last else ""
        return f"{self.stage} {self.step} loss={last.get('loss', float('nan')):.4f}{psnr} N={self.n_gaussians()}"

    def n_gaussians(self) -> int:
        return len(self.scene.static) + len(self.scene.dynamic)

    def _one_step(self, n: int) -> None:
        started = time.perf_counter()
        self._step(n)
        self.stage_seconds[self.stage] = self.stage_seconds.get(self.stage, 0.0) + time.perf_counter() - started

    def _step(self, n: int) -> None:
        spec = STAGE_SPECS[self.stage]
        t = self._frame(spec)
        self.optimizer.zero_grad(set_to_none=True)
        with trusted_inputs():  # the kernels' value checks would read the device; _checked_record covers them
            loss, terms, out = self.losses(t)
            if spec.densifies:  # the densifier reads the render's screen-space gradients
                out.meta["means2d"].retain_grad()
            loss.backward()
            self._decay_lr(n)
            self.optimizer.step()
        if spec.aligns_cameras and ends_frame(getattr(self.cfg.steps, self.stage), self.step):
            align_camera(self.poses, t, self.data, lambda: self.render(t), self.cfg.camera_align_steps)
        self._losses_finite &= torch.isfinite(loss.detach())
        done = self.step + 1
        # A non-finite value found late is rolled back all the same: no checkpoint is written unchecked.
        record = None
        if done % self.cfg.check_every == 0 or done == n or done % self.cfg.checkpoint_every == 0:
            try:
                record = self._checked_record(loss, terms)
            except NonFiniteError as exc:
                self._rollback(str(exc))
                return
        if spec.densifies:
            changed = self.densifier.observe_and_refine(self.scene, out, self.step, n)
            if changed and self.cfg.densify.keep_optimizer_state:
                old = self.optimizer
                self._new_optimizer()
                carry_adam_state(old, self.optimizer, self.densifier.rows)
            elif changed:
                self._setup_stage()
        self.step = done
        if record is not None:
            self.history.append({"stage": self.stage, "step": self.step, **record})
        if self.step % self.cfg.checkpoint_every == 0:
            self.save()

    def _decay_lr(self, n: int) -> None:
        """Exponential decay of the groups flagged ``decays`` (Gaussian positions, node transforms) over a stage,
        to ``FINAL_LR`` of their start: at a constant rate they jitter around their optimum from one frame's
        gradient to the next and the last steps leave that jitter in the model (docs/decisions.md)."""
        for g in self.optimizer.param_groups:
            if g.get("decays"):
                g["lr"] = g["initial_lr"] * FINAL_LR ** (self.step / max(n, 1))

    def _frame(self, spec: StageSpec) -> int:
        """The frame this step works on (see :mod:`recon4d.fit.schedule`); a per-frame stage starts each of its
        frames from a fresh optimiser state, so that the other frames' rows stand still."""
        if not spec.per_frame:
            return deck_frame(self.train_frames, self.cfg.seed, self.stage, self.step)
        per_frame = getattr(self.cfg.steps, self.stage)
        if starts_frame(per_frame, self.step):
            self.optimizer.state.clear()
        return frame_in_turn(self.train_frames, self._skipped_frame(spec), per_frame, self.step)

    def _rollback(self, reason: str) -> None:
        lr = self.lr * 0.5
        if not (self.model_dir / "scene.json").exists():
            raise NonFiniteError(f"{reason} at stage {self.stage} step {self.step}, before any checkpoint")
        self.log(f"warning: {reason} at stage {self.stage} step {self.step}; rolled back to the last "
                 f"checkpoint and halved the learning rate (scale {lr:g})")
        self.load()
        self.lr = lr
        self._losses_finite = torch.ones_like(self._losses_finite)
        self._new_optimizer()  # fresh moments at the lower rate; the restored densification statistics stay

    def _next_stage(self) -> None:
        """Advance to the next stage that has steps (skipped stages leave no trace)."""
        i = STAGES.index(self.stage) + 1
        while i < len(STAGES) and self._stage_steps(STAGES[i]) == 0:
            i += 1
        self.stage = STAGES[i] if i < len(STAGES) else "done"
        self.step = 0
        if self.stage == "done":
            self.poses.interpolate(self.held_out)
            self.scene.scaffold.interpolate(self.held_out)
        else:
            self._setup_stage()
        self.save()


def fit_scene(data: SceneData, cfg: FitConfig, model_dir: Path, resume: bool = False,
              log: Callable[[str], None] = print, stop_after: str | None = None) -> Trainer:
    """Run (or resume) the optimisation; returns the trainer with the fitted scene."""
    trainer = Trainer(data, cfg, model_dir, log)
    if resume and (Path(model_dir) / "scene.json").exists():
        trainer.load()
        log(f"resuming at stage {trainer.stage}, step {trainer.step}")
    else:
        trainer.initialise()
    start = time.perf_counter()
    trainer.run(stop_after)
    log(f"fit finished in {time.perf_counter() - start:.1f}s with {trainer.n_gaussians()} Gaussians")
    return trainer

"""Camera intrinsics and per-frame poses from bundle adjustment on static tracks.

Why this shape (MoSca-style, without its learned parts): a monocular video gives
2D tracks; the static ones constrain the camera. Steps:

1. Static camera test: when the static tracks barely move (``static_px``), no
   pose or focal can be observed; poses are identity and the focal comes from
   ``fov_deg`` (or ``DEFAULT_FOV_DEG``, flagged as a guess). Where moving objects
   hold most of the tracks their motion passes this test, so a solved camera that
   moves its own static points less than ``static_px`` in the image is taken as
   static as well (:func:`~recon4d.priors.camera_choice.image_motion_px`).
2. Motion model and initialisation (:mod:`recon4d.priors.camera_init`): a GRIC
   test on key-frame pairs picks rotation-only (pan) or translating; a pan
   starts from homography rotations and keeps every camera at the origin, a
   translating camera starts from an essential matrix chained by PnP resection
   against triangulated tracks (one scale for the whole video).
3. Field-of-view search: initialisation and a short bundle adjustment per
   candidate FoV (``fov_range``), keep the lowest cost: the median reprojection
   error, plus the median depth-prior residual when there is a prior. When that
   cost is flat around its minimum (``focal_contrast``) the tracks cannot tell
   focal lengths apart: a camera moving straight ahead (the focal
   cancels out of pure translation), or one fixating a point filmed at very
   low resolution (a synth orbit at 128x96; at 320x240 its minimum is clear).
   The result then says ``focal_observed = False`` and a warning asks for
   ``--fov-deg``; where the cost at ``DEFAULT_FOV_DEG`` is within
   ``DEFAULT_FOV_RISE`` of the lowest, the focal is held at that default as
   for a still camera (a flat cost's lowest point is noise: the synth dolly
   pairs, shot at 60 degrees, chose 16 to 72), while a cost that rules the
   default out keeps its lowest point (DAVIS dog: 0.33 at 40 degrees, 1.15
   at 50-60; held at 55 it lost 3 dB). Where the default is held and a judge is given, the camera refined
   with the focal free from the search's lowest point is solved too, and kept where the judge scores it
   ``FREE_FOCAL_MARGIN`` times lower: the short search can be flat where the full adjustment and the
   dense flow are not (DAVIS libby: 0.56 held, 0.11 freed at 58 degrees, +3.4 dB).
4. Joint refinement of poses, focal and points (inverse depth along the ray of
   each track's first frame, so points at infinity are representable), with a
   Cauchy loss and a weak smoothness term on the camera path (second
   differences of the translations; per-frame track noise otherwise jolts the
   translation of single frames); tracks whose residual stays high are marked
   dynamic and the adjustment is rerun without them.
   A translating camera goes through 3-4 once per essential-matrix estimator
   (their starts can differ, and the adjustment does not always leave a wrong
   one), and a judge picks among the results: by default the lower median
   reprojection error; in ``recon4d fit``, the disagreement with the dense
   flow times the reprojection error of every static track
   (:mod:`recon4d.priors.camera_check`). Where the vote said translation only
   because the homographies left points unexplained, the rotation-only camera
   is solved too and kept when that judge scores it within
   ``ROTATION_TOLERANCE`` (:mod:`recon4d.priors.camera_choice`: a pan whose objects
   cross the view). The same judgement runs where the vote said rotation:
   the translating camera is solved too, and the rotation kept where the
   judge scores it within that factor. Homographies pass for rotations when
   the camera travels a little, or only in part of the video (a pan that
   turns into a tracking shot), and a rotation-only camera cannot show the
   parallax of those frames (docs/decisions.md, session 39).
5. Optional depth term (when a depth prior exists before the camera, e.g. a
   learned model or user depth): each track's inverse depth is pulled towards
   the prior's, with one scale per frame. It constrains the relief of the scene,
   and through it the focal of an orbiting camera (which tracks observe only
   weakly), not the focal of a camera that only translates.

Why scipy's ``least_squares`` instead of a torch optimiser: bundle adjustment
is a sparse nonlinear least-squares problem; a trust-region solver with a
sparse Jacobian (each residual touches two poses, one point and the focal)
converges in tens of iterations where first-order torch optimisers need
thousands, and the Jacobian by grouped finite differences costs ~15 residual
evaluations.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from scipy.optimize import least_squares
from scipy.sparse import coo_matrix, csr_matrix

from recon4d.errors import UserError
from recon4d.geometry import log_rotation, rodrigues
from recon4d.priors.camera_init import ESSENTIAL_ESTIMATORS, essential_chain, rotation_chain, select_model
from recon4d.priors.camera_problem import BundleProblem, build_problem, subsample_tracks, track_motion
from recon4d.priors.camera_choice import (DEFAULT_FOV_DEG, default_fov_fits, first_plausible, image_motion_px,
                                         judged_order, rotation_if_as_good, sharp_minimum)
from recon4d.priors.camera_sanity import gap_note
from recon4d.priors.parallel import map_single_threaded
from recon4d.priors.reprojection import reproject, reprojection_derivatives

GAUGE_WEIGHT = 0.01  # pixels of residual per unit of inverse-depth deviation: fixes scale, barely biases
WHAT_TO_TRY = ("pass --fov-deg if the field of view is known, --masks with the moving objects' masks, "
               "or a shorter part of the video (--start/--end)")


class CameraSolveError(UserError, RuntimeError):
    """No believable camera could be solved from the video's tracks."""


@dataclass
class CameraResult:
    K: np.ndarray  # [3, 3]
    viewmats: np.ndarray  # [T, 4, 4] world-to-camera, frame 0 = identity
    motion_type: str  # static | rotation | translation | general
    static: np.ndarray  # [P] bool: tracks used as static (inliers of the final adjustment)
    points: np.ndarray  # [P, 3] world points of static tracks (NaN elsewhere)
    focal_observed: bool
    info: dict = field(default_factory=dict)


def intrinsics(focal: float, W: int, H: int) -> np.ndarray:
    return np.array([[focal, 0, W / 2], [0, focal, H / 2], [0, 0, 1.0]])


def fov_to_focal(fov_deg: float, W: int) -> float:
    return 0.5 * W / math.tan(math.radians(fov_deg) / 2)


class CameraSolver:
    """See the module docstring; the knobs are the fields of :class:`CameraOptions`."""

    def __init__(self, opt: "CameraOptions"):
        self.opt = opt

    def solve(self, xy: np.ndarray, vis: np.ndarray, candidate: np.ndarray, W: int, H: int,
              prior_depth: np.ndarray | None = None,
              judge: Callable[[CameraResult], float] | None = None) -> CameraResult:
        """Camera from tracks ``xy [T,P,2]``, ``vis [T,P]``; ``candidate [P]`` marks tracks that may be static.

        A translating camera is solved once per essential-matrix estimator (:data:`ESSENTIAL_ESTIMATORS`)
        and the camera ``judge`` scores lowest is kept (default: the median reprojection error; the
        preprocessing stage passes :func:`recon4d.priors.camera_check.camera_score`)."""
        opt = self.opt
        T, P = vis.shape
        usable = candidate & (vis.sum(0) >= 3)
        motion = track_motion(xy, vis)
        if usable.sum() < 8:
            raise CameraSolveError(f"camera: only {usable.sum()} usable static tracks (the video is too short or "
                                   f"textureless); {WHAT_TO_TRY}")
        if np.median(motion[usable]) < opt.static_px:
            return self._static(T, W, H, usable, motion)
        sel = subsample_tracks(np.flatnonzero(usable), xy, vis, opt.max_ba_tracks, W, H)
        problem = lambda tracks: build_problem(xy, vis, tracks, W, H, prior_depth)  # noqa: E731
        prob = problem(sel)
        choice = select_model(xy, vis, usable, W)
        rotation = choice.kind == "rotation"
        info = {"model": choice.kind, "model_votes_rotation": f"{choice.votes_rotation}/{choice.pairs}",
                "gric_h_minus_f": choice.gric_h_minus_f}

        def start(f: float, estimator: int | None) -> np.ndarray:
            K = intrinsics(f, W, H)
            chained = None if estimator is None else essential_chain(xy, vis, usable, K, estimator=estimator)
            if chained is None:  # a pan, or no frame pair gave an essential matrix at this focal
                view = np.tile(np.eye(4), (T, 1, 1))
                view[:, :3, :3] = rotation_chain(xy, vis, usable, K)
                return self._init(prob, f, view, None)
            return self._init(prob, f, *chained)

        def candidates(as_rotation: bool) -> list[CameraResult]:
            """The solves of one motion model, the judge's choice first."""
            starts = {"rotation": None} if as_rotation else ESSENTIAL_ESTIMATORS
            solved = self._solve_from({name: partial(start, estimator=e) for name, e in starts.items()}, problem,
                                      prob, P, usable, motion, info, as_rotation, judge is not None)
            if len(solved) == 1:
                return list(solved.values())
            return judged_order(solved, judge or (lambda cam: cam.info["reproj_px_median"]))

        # the chosen model's solves first; the other model when none of them is believable (and below, for the judge)
        rejected: list[str] = []
        best = first_plausible(candidates(rotation), xy, vis, rejected) \
            or first_plausible(candidates(not rotation), xy, vis, rejected)
        if best is None:
            advice = gap_note(vis, usable) or WHAT_TO_TRY
            raise CameraSolveError(f"camera: no believable camera from the tracks ({'; '.join(rejected)}); {advice}")
        short_path = best.info.get("baseline_over_depth", np.inf) < opt.weigh_rotation_baseline
        if judge is not None and not rotation and (choice.homographies_rotate or short_path) \
                and best.motion_type != "rotation":
            best = rotation_if_as_good(best, first_plausible(candidates(True), xy, vis, rejected), judge)
        elif judge is not None and rotation and best.motion_type == "rotation":
            moving = first_plausible(candidates(False), xy, vis, rejected)
            if moving is not None and moving.motion_type != "rotation":
                best = rotation_if_as_good(moving, best, judge)
        if (moved := image_motion_px(best)) < opt.static_px:  # the background it kept stands still
            still = self._static(T, W, H, usable, motion)
            still.info.update(solved_as=best.motion_type, solved_image_motion_px=moved)
            return still
        best.info["rejected_solves"] = rejected
        if not best.focal_observed:
            warnings.warn("camera: the reprojection cost barely changes with the field of view (forward or "
                          "fixating motion); the focal length is a guess, pass --fov-deg if known", stacklevel=2)
        return best

    def _solve_from(self, starts: dict[str, Callable[[float], np.ndarray]], problem, prob: BundleProblem, P,
                    usable, motion, info, rotation: bool, free_alternative: bool) -> dict[str, CameraResult]:
        """For each start (name -> the parameters ``start(focal)`` gives for the tracks of ``prob``): FoV search
        (unless the FoV is given), then :meth:`_refine`; ``problem(tracks)`` builds the problem again for the
        tracks kept. The adjustments of a step are independent and run side by side
        (:func:`~recon4d.priors.parallel.map_single_threaded`): the same cameras, in less time.

        Returns ``{name: camera}``; where the focal is held at the default and ``free_alternative`` is set, also
        ``{name + " free focal": camera}``, refined from the search's lowest point with the focal free, for a
        judge to weigh: a flat search cannot rule the default out, but the dense flow can (DAVIS libby: held at
        55 degrees the judge scores 0.56, freed at 58 degrees 0.11 and the fit gains 3.4 dB; docs/decisions.md,
        session 44)."""
        opt = self.opt
        W = prob.W
        fovs = [] if opt.fov_deg is not None else list(np.arange(opt.fov_range[0], opt.fov_range[1] + 1e-6,
                                                                 opt.fov_step))
        costs = iter(map_single_threaded(
            lambda job: self._search_cost(self._adjust(prob, job[0](fov_to_focal(job[1], W)), True, rotation,
                                                       nfev=opt.search_nfev), prob),
            [(start, fov) for start in starts.values() for fov in fovs]))
        refines = {}  # name -> (start, info, focal, fix_focal, observed)
        for name, start in starts.items():
            search = {float(fov): next(costs) for fov in fovs}
            searched = {**info, "fov_search": search}
            if opt.fov_deg is not None:  # given: held, and counted as observed
                refines[name] = (start, searched, fov_to_focal(opt.fov_deg, W), True, True)
                continue
            focal = fov_to_focal(min(search, key=search.get), W)
            observed = sharp_minimum(search, opt.focal_contrast)
            if observed or not default_fov_fits(search):
                refines[name] = (start, searched, focal, False, observed)
                continue
            refines[name] = (start, {**searched, "focal_held_at_default": True}, fov_to_focal(DEFAULT_FOV_DEG, W),
                             True, False)
            if free_alternative:
                refines[f"{name} free focal"] = (start, {**searched, "focal_freed": True}, focal, False, False)
        cams = map_single_threaded(lambda job: self._refine(job[0], problem, prob, P, usable, motion, rotation,
                                                            *job[1:]), list(refines.values()))
        return dict(zip(refines, cams))

    def _refine(self, start, problem, prob: BundleProblem, P, usable, motion, rotation: bool, info, focal: float,
                fix_focal: bool, observed: bool) -> CameraResult:
        """Adjustment from ``start(focal)``, outlier removal and a second adjustment."""
        opt = self.opt
        sel = prob.sel
        x = self._adjust(prob, start(focal), fix_focal, rotation, nfev=opt.final_nfev)
        # tracks the static model cannot explain are dynamic: drop them and adjust again
        res = np.linalg.norm(self._residual(x, prob)[: 2 * len(prob.obs_t)].reshape(-1, 2), axis=1)
        per_track = np.zeros(len(sel))
        np.maximum.at(per_track, prob.obs_p, res)
        sigma = 1.4826 * np.median(res)
        inlier = per_track < max(opt.outlier_px, 4 * sigma)
        keep = sel[inlier]
        prob2 = problem(keep)
        x = self._adjust(prob2, self._reindex(x, inlier, prob), fix_focal, rotation, nfev=opt.final_nfev)
        res = self._result(x, prob2, keep, P, usable, motion, info, rotation)
        res.focal_observed = observed
        return res

    def _search_cost(self, x: np.ndarray, prob: BundleProblem) -> float:
        """Median reprojection error, plus the median depth-prior residual when there is a prior: an orbit
        fixating a point reprojects only somewhat worse at FoVs 10 degrees off (synth orbit, 320x240: 0.24 px
        at the true 60, 0.39 and 0.37 at 50 and 70), while the relief implied by a wrong focal disagrees
        with the prior's (128x96, its true depth as the prior: 0.06 at the true FoV, 0.38 and 1.08 at 10
        degrees either side)."""
        res = np.abs(self._residual(x, prob))
        M2 = 2 * len(prob.obs_t)
        cost = float(np.median(res[:M2]))
        if prob.prior_inv is not None:
            cost += float(np.median(res[M2:M2 + len(prob.ref)]))
        return cost

    # --- parameters: see ParamLayout ---
    def _unpack(self, x: np.ndarray, prob: BundleProblem):
        """Focal, rotation vectors ``[T, 3]`` and translations ``[T, 3]`` (frame 0's zero), inverse depths."""
        lay = prob.layout
        f = x[lay.focal]
        r = np.concatenate([np.zeros((1, 3)), x[lay.rotations].reshape(-1, 3)])
        t = np.concatenate([np.zeros((1, 3)), x[lay.translations].reshape(-1, 3)])
        rho = x[lay.points]
        return f, r, t, rho

    def _init(self, prob: BundleProblem, focal: float, view: np.ndarray, points: np.ndarray | None) -> np.ndarray:
        """Parameter vector from poses ``[T, 4, 4]`` and world points ``[P_all, 3]``, rescaled so the
        inverse depths sit where the gauge term pulls them. A track without a point (NaN: too little
        parallax to triangulate, most tracks of a nearly panning camera) takes the inverse depth that
        reprojects it best along its ray."""
        r = log_rotation(view[1:, :3, :3])
        t = view[1:, :3, 3]
        rho = np.full(len(prob.ref), np.nan)
        if points is not None:
            X = points[prob.sel]
            z = np.einsum("pij,pj->pi", view[prob.ref, :3, :3], X)[:, 2] + view[prob.ref, 2, 3]
            rho = np.where(np.isfinite(z) & (z > 1e-9), 1 / np.maximum(z, 1e-9), np.nan)
        known = np.isfinite(rho)
        target = np.ones(len(rho)) if prob.prior_inv is None else prob.prior_inv
        scale = float(np.median(rho[known] / target[known])) if known.sum() >= 3 else 1.0
        tail = [] if prob.prior_inv is None else [np.zeros(prob.T - 1)]
        x = np.concatenate([[focal], r.ravel(), scale * t.ravel(), np.where(known, rho / scale, target), *tail])
        if known.sum() >= 3 and not known.all():
            x = self._fill_inverse_depth(x, prob, ~known, 4 * float(np.percentile(rho[known] / scale, 95)))
        return x

    def _fill_inverse_depth(self, x: np.ndarray, prob: BundleProblem, todo: np.ndarray, rho_max: float,
                            steps: int = 33) -> np.ndarray:
        """Inverse depths of tracks ``todo`` by a grid search over ``[0, rho_max]`` (poses fixed)."""
        obs = todo[prob.obs_p]
        if not obs.any():
            return x
        f, r, t, _ = self._unpack(x, prob)
        R = rodrigues(r)
        ref, frame = prob.ref[prob.obs_p[obs]], prob.obs_t[obs]
        uv = prob.ref_xy[prob.obs_p[obs]]
        ray = np.concatenate([(uv - [prob.W / 2, prob.H / 2]) / f, np.ones((len(uv), 1))], 1)
        Rrel = R[frame] @ R[ref].transpose(0, 2, 1)
        A = np.einsum("nij,nj->ni", Rrel, ray)  # the terms of reproject(): X = A + rho * B
        B = t[frame] - np.einsum("nij,nj->ni", Rrel, t[ref])
        grid = np.linspace(0.0, rho_max, steps)
        X = A[None] + grid[:, None, None] * B[None]
        proj = f * X[..., :2] / np.maximum(X[..., 2:], 1e-6) + [prob.W / 2, prob.H / 2]
        err = np.minimum(np.linalg.norm(proj - prob.obs_xy[obs][None], axis=-1), 10.0)
        cost = np.stack([np.bincount(prob.obs_p[obs], e, minlength=len(prob.ref)) for e in err])
        x = x.copy()
        idx = np.flatnonzero(todo)
        x[prob.layout.point_column(idx)] = grid[cost[:, idx].argmin(0)]
        return x

    def _residual(self, x: np.ndarray, prob: BundleProblem) -> np.ndarray:
        f, r, t, rho = self._unpack(x, prob)
        proj = reproject(f, r, t, rho[prob.obs_p], prob.observations)
        return np.concatenate([(proj - prob.obs_xy).ravel(), self._point_residual(x, rho, prob),
                               self._path_residual(f, t)])

    def _path_residual(self, f: float, t: np.ndarray) -> np.ndarray:
        """Second differences of the camera translations, in pixels at unit depth (the gauge's depth):
        a camera on a tripod, a dolly or a hand moves smoothly, while per-frame noise in the tracks
        (re-seeded tracks, flow errors) jolts each frame's translation on its own."""
        return (self.opt.smooth_weight * f * (t[:-2] - 2 * t[1:-1] + t[2:])).ravel()

    def _point_residual(self, x: np.ndarray, rho: np.ndarray, prob: BundleProblem) -> np.ndarray:
        if prob.prior_inv is None:
            # gauge: a weak pull of every inverse depth towards 1 fixes the scale and lets pure rotation
            # keep t = 0 (one residual per point keeps the Jacobian sparse; a mean would couple all points)
            return GAUGE_WEIGHT * (rho - 1.0)
        # log(rho) = log(prior) + per-frame log scale; frame 0's scale is fixed to 0, which sets the gauge
        logs = np.concatenate([[0.0], x[prob.layout.log_scales]])
        return self.opt.depth_weight * (np.log(np.maximum(rho, 1e-6)) - np.log(prob.prior_inv) - logs[prob.ref])

    def _jacobian(self, x: np.ndarray, prob: BundleProblem) -> csr_matrix:
        """Exact sparse Jacobian: each observation's row pair from :func:`reprojection_derivatives`."""
        T, P, M, lay = prob.T, len(prob.ref), len(prob.obs_t), prob.layout
        f, r, t, rho = self._unpack(x, prob)
        obs = prob.observations
        d = reprojection_derivatives(f, r, t, rho[prob.obs_p], obs)
        rows, cols, vals = [], [], []
        for k in (0, 1):
            row = 2 * np.arange(M) + k
            rows.append(row), cols.append(np.zeros(M, int)), vals.append(d.focal[:, k])
            for frames, gr, gt in ((obs.frame, d.rotation_t, d.translation_t),
                                   (obs.ref, d.rotation_r, d.translation_r)):
                ok = frames > 0
                for j in range(3):
                    rows += [row[ok], row[ok]]
                    cols += [lay.rotation_column(frames[ok], j), lay.translation_column(frames[ok], j)]
                    vals += [gr[ok, k, j], gt[ok, k, j]]
            rows.append(row), cols.append(lay.point_column(prob.obs_p)), vals.append(d.inverse_depth[:, k])
        p = np.arange(P)
        if prob.prior_inv is None:
            rows.append(2 * M + p), cols.append(lay.point_column(p)), vals.append(np.full(P, GAUGE_WEIGHT))
        else:
            w = self.opt.depth_weight
            rows.append(2 * M + p), cols.append(lay.point_column(p)), vals.append(w / np.maximum(rho, 1e-6))
            ok = prob.ref > 0
            rows.append(2 * M + p[ok]), cols.append(lay.log_scale_column(prob.ref[ok]))
            vals.append(np.full(ok.sum(), -w))
        path_rows, path_cols, path_vals = self._path_jacobian(x, prob, base=2 * M + P)
        rows.append(path_rows), cols.append(path_cols), vals.append(path_vals)
        return coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(2 * M + P + 3 * max(T - 2, 0), len(x))).tocsr()

    def _path_jacobian(self, x: np.ndarray, prob: BundleProblem, base: int) -> tuple[np.ndarray, ...]:
        """COO rows (from ``base``), columns and values of the path term's derivatives, d/dt_k and d/df of
        w f (t_{j-1} - 2 t_j + t_{j+1}), for every inner frame j, neighbour k and axis d in that order: the
        order sets how the focal's entries of a row sum in the CSR matrix. Frame 0's translation is fixed."""
        lay, w, f = prob.layout, self.opt.smooth_weight, x[prob.layout.focal]
        t = np.concatenate([np.zeros((1, 3)), x[lay.translations].reshape(-1, 3)])
        j = np.arange(1, prob.T - 1)[:, None, None]
        k, c, d = j + np.array([-1, 0, 1])[:, None], np.array([1.0, -2.0, 1.0])[:, None], np.arange(3)
        shape = (len(j), 3, 3)
        row = np.broadcast_to(base + 3 * (j - 1) + d, shape)
        # each (j, k, d) gives the translation's entry (where k > 0), then the focal's
        kept = np.stack([np.broadcast_to(k > 0, shape), np.ones(shape, bool)], -1)
        cols = np.stack([np.broadcast_to(lay.translation_column(k, d), shape), np.zeros(shape, int)], -1)
        vals = np.stack([np.broadcast_to(w * f * c, shape), np.broadcast_to((w * c) * t[k, d], shape)], -1)
        return np.stack([row, row], -1)[kept], cols[kept], vals[kept]

    def _adjust(self, prob: BundleProblem, x0: np.ndarray, fix_focal: bool, fix_translation: bool,
                nfev: int) -> np.ndarray:
        """Robust least squares from ``x0``; fixed parameters are pinned by bounds a hair apart."""
        x0 = x0.copy()
        lb = np.full_like(x0, -np.inf)
        ub = np.full_like(x0, np.inf)
        lay = prob.layout
        if fix_translation:  # the rotation model: every camera stays at the origin
            n = lay.translations
            x0[n], lb[n], ub[n] = 0.0, -1e-12, 1e-12
        lb[lay.points] = 0.0  # points in front of their reference camera (or at infinity)
        f = lay.focal
        lb[f], ub[f] = 0.2 * prob.W / 2, 5.0 * prob.W  # FoV between ~11 and ~157 degrees
        if fix_focal:
            lb[f], ub[f] = x0[f] * (1 - 1e-9), x0[f] * (1 + 1e-9)
        x0 = np.clip(x0, lb, ub)
        # one torch thread and warnings off: set by map_single_threaded, which runs every adjustment
        sol = least_squares(self._residual, x0, jac=self._jacobian, bounds=(lb, ub),
                            loss="cauchy", f_scale=self.opt.loss_px, x_scale="jac", max_nfev=nfev,
                            method="trf", args=(prob,), tr_solver="lsmr")
        return sol.x

    def _reindex(self, x: np.ndarray, keep: np.ndarray, prob: BundleProblem) -> np.ndarray:
        points = prob.layout.points
        return np.concatenate([x[:points.start], x[points][keep], x[points.stop:]])

    def _result(self, x, prob, keep, P, usable, motion, info, rotation: bool) -> CameraResult:
        f, r, t, rho = self._unpack(x, prob)
        R = rodrigues(r)
        view = np.tile(np.eye(4), (prob.T, 1, 1))
        view[:, :3, :3], view[:, :3, 3] = R, t
        K = intrinsics(f, prob.W, prob.H)
        ray = np.concatenate([prob.ref_xy, np.ones((len(keep), 1))], 1) @ np.linalg.inv(K).T
        cam = ray / np.maximum(rho, 1e-9)[:, None]
        world = np.einsum("pji,pj->pi", R[prob.ref], cam - t[prob.ref])  # R^T (X - t)
        points = np.full((P, 3), np.nan)
        finite = rho > 1e-4
        points[keep[finite]] = world[finite]
        static = np.zeros(P, bool)
        static[keep] = True
        res = np.abs(self._residual(x, prob)[: 2 * len(prob.obs_t)])
        centres = -np.einsum("tji,tj->ti", R, t)
        depth = np.median(1 / rho[finite]) if finite.any() else np.inf
        baseline = np.linalg.norm(centres - centres[0], axis=1).max() / depth
        angle = np.degrees(np.linalg.norm(r, axis=1).max())
        kind = "rotation" if rotation or baseline < self.opt.rotation_baseline else (
            "translation" if angle < 1.0 else "general")
        info = {**info, "fov_deg": float(np.degrees(2 * np.arctan(prob.W / 2 / f))),
                "reproj_px_median": float(np.median(res)), "ba_tracks": int(len(keep)),
                "ba_observations": int(len(prob.obs_t)), "baseline_over_depth": float(baseline),
                "max_rotation_deg": float(angle), "usable_tracks": int(usable.sum()),
                "median_track_motion_px": float(np.median(motion[usable]))}
        return CameraResult(K, view, kind, static, points, True, info)

    def _static(self, T, W, H, usable, motion) -> CameraResult:
        fov = self.opt.fov_deg or DEFAULT_FOV_DEG
        if self.opt.fov_deg is None:
            warnings.warn(f"static camera: the focal length cannot be observed; assuming a {fov:.0f} degree "
                          "horizontal FoV (pass --fov-deg if known)", stacklevel=3)
        info = {"fov_deg": fov, "median_track_motion_px": float(np.median(motion[usable])),
                "usable_tracks": int(usable.sum())}
        return CameraResult(intrinsics(fov_to_focal(fov, W), W, H), np.tile(np.eye(4), (T, 1, 1)), "static",
                            usable.copy(), np.full((len(usable), 3), np.nan), self.opt.fov_deg is not None, info)


@dataclass(frozen=True)
class CameraOptions:
    fov_deg: float | None = None  # known horizontal FoV; None: search
    fov_range: tuple[float, float] = (20.0, 90.0)
    fov_step: float = 10.0
    static_px: float = 0.5  # median track motion below which the camera counts as static
    max_ba_tracks: int = 400
    search_nfev: int = 10
    final_nfev: int = 100
    loss_px: float = 1.0  # Cauchy scale of the reprojection loss
    outlier_px: float = 2.0  # tracks with a larger max residual are dynamic
    rotation_baseline: float = 0.01  # camera path / scene depth below which motion is "rotation"
    # a translating solve whose camera path is under this share of the scene depth is weighed against the
    # rotation-only camera even where the homographies did not vote rotation (``rotation_if_as_good``)
    weigh_rotation_baseline: float = 0.1
    depth_weight: float = 2.0  # weight of the log-inverse-depth prior term (when a prior exists)
    focal_contrast: float = 0.25  # FoV-search cost rise next to the best FoV below which the focal is unobserved
    smooth_weight: float = 10.0  # weight of the camera-path smoothness term (second differences of translation)

"""Which camera the solver keeps: the judge's two measures (dense-flow disagreement, every static track's
reprojection) and the rules that choose between solves (:mod:`recon4d.priors.camera_choice`), on cameras and
tracks whose truth is known."""

from __future__ import annotations

import numpy as np

from recon4d.geometry import pixels_np, rodrigues
from recon4d.priors.camera import CameraOptions, CameraResult, CameraSolver
from recon4d.priors.camera_check import flow_disagreement, track_reprojection
from recon4d.priors.camera_choice import FREE_FOCAL_MARGIN, default_fov_fits, image_motion_px, judged_order
from recon4d.priors.masks import rigid_flow
from recon4d.priors.report import camera_errors


def test_an_unobserved_focal_takes_the_default_only_where_the_search_cannot_rule_it_out():
    # FoV search costs of two DAVIS clips, neither with a sharp minimum: lucia's is flat (its lowest point, 20
    # degrees, is noise), dog's rises 3.5 times from 40 to 55 degrees. Refitted at the default, lucia gained
    # 0.4 dB and dog lost 3 dB (docs/decisions.md, session 38).
    lucia = {20.0: 0.177, 30.0: 0.197, 40.0: 0.245, 50.0: 0.215, 60.0: 0.237, 70.0: 0.224, 80.0: 0.226, 90.0: 0.223}
    dog = {20.0: 0.582, 30.0: 0.366, 40.0: 0.33, 50.0: 1.167, 60.0: 1.141, 70.0: 1.579, 80.0: 2.519, 90.0: 3.963}
    assert default_fov_fits(lucia) and not default_fov_fits(dog)


def test_a_freed_focal_is_preferred_to_the_held_default_only_by_a_clear_margin():
    """Judge scores of DAVIS libby's four solves (docs/decisions.md, session 44): freed at 58 degrees the ransac
    start scores 0.11, held at the default 0.56, so the freed camera is kept; a freed camera that only ties the
    held one, or wins by less than the margin, leaves the default standing."""
    def judged(scores: dict[str, float]) -> list[str]:
        solved = {name: CameraResult(np.eye(3), np.eye(4)[None], "general", np.ones(1, bool), np.zeros((1, 3)),
                                     False, {"score": score, **({"focal_freed": True} if "free" in name else {})})
                  for name, score in scores.items()}
        order = judged_order(solved, lambda cam: cam.info["score"])
        assert all(cam.info["start_scores"] == scores and cam.info["judge_score"] == cam.info["score"] for cam in order)
        return [next(name for name, cam in solved.items() if cam is kept) for kept in order]

    libby = {"magsac++": 8.84, "magsac++ free focal": 0.124, "ransac": 0.557, "ransac free focal": 0.113}
    assert judged(libby) == ["ransac free focal", "magsac++ free focal", "ransac", "magsac++"]
    assert judged({"ransac": 0.2, "ransac free focal": 0.2 / (0.9 * FREE_FOCAL_MARGIN)})[0] == "ransac"
    assert judged({"ransac": 0.2, "ransac free focal": 0.2 / (1.1 * FREE_FOCAL_MARGIN)})[0] == "ransac free focal"


def _pan_then_travel(T: int = 24, turn_frames: int = 16, W: int = 128, H: int = 96):
    """Exact tracks of a scene 3 to 15 units deep, filmed by a camera that pans on the spot for
    ``turn_frames`` frames and then travels sideways while it keeps panning (a camera that follows its
    subject): the true views, the tracks ``xy``/``vis`` and the intrinsics."""
    K = np.array([[100.0, 0.0, W / 2], [0.0, 100.0, H / 2], [0.0, 0.0, 1.0]])
    views = np.tile(np.eye(4), (T, 1, 1))
    views[:, :3, :3] = rodrigues(np.radians([[0.0, 1.0 * t, 0.0] for t in range(T)]))
    centres = np.zeros((T, 3))
    centres[turn_frames:, 0] = 0.05 * np.arange(1, T - turn_frames + 1)
    views[:, :3, 3] = -np.einsum("tij,tj->ti", views[:, :3, :3], centres)
    rng = np.random.default_rng(3)
    depth = rng.uniform(3.0, 15.0, (900, 1))
    X = np.concatenate([rng.uniform(-1.4, 1.9, (900, 1)), rng.uniform(-0.5, 0.5, (900, 1)), np.ones((900, 1))], 1)
    X = X * depth
    cam = np.einsum("tij,pj->tpi", views[:, :3, :3], X) + views[:, None, :3, 3]
    xy = pixels_np(cam, K)
    vis = (cam[..., 2] > 0.1) & (xy[..., 0] >= 0) & (xy[..., 0] < W) & (xy[..., 1] >= 0) & (xy[..., 1] < H)
    return views, xy.astype(np.float32), vis, K


def test_a_rotation_that_wins_a_split_vote_is_judged_against_a_translating_camera():
    """Key-frame pairs of the panning part vote rotation, those of the travelling part translation; the
    rotation-only camera, the vote's majority, cannot show that part's parallax, and the judge (here every
    static track's reprojection, one factor of the fit's judge) keeps the translating camera. Without the
    judge the vote's model stands (DAVIS scooter-black and breakdance-flare: docs/decisions.md, session 39)."""
    views, xy, vis, K = _pan_then_travel()
    static = np.ones(xy.shape[1], bool)
    solver = CameraSolver(CameraOptions(fov_deg=float(np.degrees(2 * np.arctan(64 / 100)))))
    unjudged = solver.solve(xy, vis, static, 128, 96)
    assert unjudged.info["model"] == "rotation" and unjudged.motion_type == "rotation"
    votes, pairs = map(int, unjudged.info["model_votes_rotation"].split("/"))
    assert pairs / 2 < votes < pairs
    judged = solver.solve(xy, vis, static, 128, 96, judge=lambda cam: track_reprojection(cam, xy, vis, static))
    assert judged.motion_type in ("translation", "general")
    rotating, moving = judged.info["rotation_against_translation"]
    assert rotating > 2 * moving
    err = camera_errors(judged.viewmats, views)
    assert err["rot_err_deg"]["max"] < 0.5 and err["trans_dir_err_deg"]["max"] < 10.0


def _wall_filmed_stepping_sideways(T: int = 4, H: int = 96, W: int = 128):
    """A wall at depth 4 filmed by a camera stepping sideways: the true camera, its exact tracks
    ``xy``/``vis``, the forward flow, and a camera that steps the other way."""
    K = np.array([[100.0, 0, 64], [0, 100, 48], [0, 0, 1]])
    views = np.tile(np.eye(4), (T, 1, 1))
    views[:, 0, 3] = -0.1 * np.arange(T)
    g = np.stack(np.meshgrid(np.linspace(-1.2, 1.2, 12), np.linspace(-0.9, 0.9, 9)), -1).reshape(-1, 2)
    X = np.concatenate([g, np.full((len(g), 1), 4.0)], 1)
    cam_pts = np.einsum("tij,pj->tpi", views[:, :3, :3], X) + views[:, None, :3, 3]
    xy = (cam_pts[..., :2] / cam_pts[..., 2:]) * 100 + [64, 48]
    vis = np.ones((T, len(X)), bool)
    fwd = np.stack([rigid_flow(np.full((H, W), 4.0), K, views[t], views[t + 1]) for t in range(T - 1)])
    static = np.ones(len(X), bool)
    truth = CameraResult(K, views, "translation", static, X, True, {})
    flipped = views.copy()
    flipped[:, 0, 3] *= -1
    return truth, xy, vis, fwd, CameraResult(K, flipped, "translation", static, X, True, {})


def test_flow_disagreement_scores_the_true_camera_lowest_and_ignores_objects():
    """The true camera, with the depth of its own points, predicts the flow exactly; one that steps the
    other way does not; a moving patch inside the ignored mask does not count."""
    truth, xy, vis, fwd, wrong = _wall_filmed_stepping_sideways()
    static = truth.static
    assert flow_disagreement(truth, xy, vis, static, fwd) < 1e-3
    assert flow_disagreement(wrong, xy, vis, static, fwd) > 4.0  # 2.5 px of flow, reversed
    moved = fwd.copy()
    moved[:, 8:88, 14:114] += 3.0  # an object covering 65% of each frame (the median shrugs off less)
    mask = np.zeros((len(xy), *fwd.shape[1:3]), bool)
    mask[:, 8:88, 14:114] = True
    assert flow_disagreement(truth, xy, vis, static, moved) > 1.0
    assert flow_disagreement(truth, xy, vis, static, moved, ignore=mask) < 1e-3


def test_track_reprojection_tells_a_slightly_turned_camera_from_the_true_one():
    """Every static track triangulated under the camera judged: the true one reprojects them exactly, one
    whose third frame is turned by half a degree (a shift of 0.9 px there) does not, and one that steps the
    wrong way puts every point behind its cameras, which counts as ``behind_px``."""
    truth, xy, vis, _, wrong = _wall_filmed_stepping_sideways()
    turned = truth.viewmats.copy()
    turned[2, :3, :3] = rodrigues(np.array([[0.0, np.radians(0.5), 0.0]]))[0]
    turned_cam = CameraResult(truth.K, turned, "translation", truth.static, truth.points, True, {})
    assert track_reprojection(truth, xy, vis, truth.static) < 1e-6
    assert 0.1 < track_reprojection(turned_cam, xy, vis, truth.static) < 0.9
    assert track_reprojection(wrong, xy, vis, truth.static, behind_px=7.0) == 7.0


def test_track_reprojection_of_a_camera_that_only_rotates_is_the_spread_of_each_tracks_rays():
    """Without a baseline a track's depth is not observable, so triangulating it is no test: a pan's tracks,
    exact, reproject exactly along their mean rays whatever their depths; a pan whose third frame is turned
    by half a degree more does not."""
    K = np.array([[100.0, 0.0, 64.0], [0.0, 100.0, 48.0], [0.0, 0.0, 1.0]])
    views = np.tile(np.eye(4), (4, 1, 1))
    views[:, :3, :3] = rodrigues(np.radians([[0.0, 2.0 * t, 0.0] for t in range(4)]))
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.uniform(-1.5, 1.5, (60, 2)), np.ones((60, 1))], 1) * rng.uniform(2.0, 20.0, (60, 1))
    xy = np.stack([pixels_np(X @ v[:3, :3].T, K) for v in views])
    vis, static = np.ones(xy.shape[:2], bool), np.ones(len(X), bool)
    truth = CameraResult(K, views, "rotation", static, np.full_like(X, np.nan), True, {})
    assert track_reprojection(truth, xy, vis, static) < 1e-6
    turned = views.copy()
    turned[2, :3, :3] = rodrigues(np.radians([[0.0, 4.5, 0.0]]))[0]
    turned_cam = CameraResult(K, turned, "rotation", static, truth.points, True, {})
    assert 0.1 < track_reprojection(turned_cam, xy, vis, static) < 0.9


def _two_movers_before_a_wall(pan_deg: float, T: int = 24, W: int = 128, H: int = 96):
    """Tracks ``xy``/``vis`` of a textured wall 6 units away (a third of the tracks) with two objects 3 units
    away crossing it in opposite directions (the rest), filmed by a camera that pans ``pan_deg`` over the clip;
    every track jitters by 0.03 px. Moving objects hold most of the tracks, as in the synth follow pairs."""
    K = np.array([[100.0, 0, W / 2], [0, 100, H / 2], [0, 0, 1]])
    views = np.tile(np.eye(4), (T, 1, 1))
    views[:, :3, :3] = rodrigues(np.radians([[0.0, pan_deg * t / (T - 1), 0.0] for t in range(T)]))
    rng = np.random.default_rng(5)
    wall = np.concatenate([rng.uniform([-3.6, -2.6], [3.6, 2.6], (300, 2)), np.full((300, 1), 6.0)], 1)
    bodies = [np.concatenate([rng.uniform([x - 0.4, -0.6], [x + 0.4, 0.6], (300, 2)), np.full((300, 1), 3.0)], 1)
              for x in (-0.6, 0.6)]
    steps = np.arange(T)[:, None, None] * np.array([0.025, 0.0, 0.0])
    world = np.concatenate([np.broadcast_to(wall, (T, *wall.shape)), bodies[0] + steps, bodies[1] - steps], 1)
    cam = np.einsum("tij,tpj->tpi", views[:, :3, :3], world) + views[:, None, :3, 3]
    xy = pixels_np(cam, K) + rng.normal(0.0, 0.03, (T, world.shape[1], 2))
    vis = (xy[..., 0] >= 0) & (xy[..., 0] < W) & (xy[..., 1] >= 0) & (xy[..., 1] < H)
    return xy.astype(np.float32), vis


def test_a_still_camera_whose_tracks_are_mostly_on_moving_objects_is_solved_as_static():
    """The median track moves about 19 px (the objects' motion), so the quick still test passes it on; the solve
    keeps the wall and finds a camera that moves it by hundredths of a pixel, which is a still camera (the synth
    follow pairs were solved as rotations with a 19-degree FoV). A camera that pans 2 degrees (about 4 px)
    still moves."""
    xy, vis = _two_movers_before_a_wall(pan_deg=0.0)
    candidate = np.ones(xy.shape[1], bool)
    cam = CameraSolver(CameraOptions()).solve(xy, vis, candidate, 128, 96)
    assert cam.motion_type == "static" and np.allclose(cam.viewmats, np.eye(4))
    assert cam.info["median_track_motion_px"] > 5 and cam.info["solved_image_motion_px"] < 0.1
    assert cam.focal_observed is False
    xy, vis = _two_movers_before_a_wall(pan_deg=2.0)
    panned = CameraSolver(CameraOptions()).solve(xy, vis, candidate, 128, 96)
    assert panned.motion_type != "static" and image_motion_px(panned) > 2.0

"""What the answerer reads from id masks, checked against the truth of drawn masks and synth scenes: an
object's shape from its silhouettes (and where they cannot tell), whether motion masks outline objects at
all (a camera whose centre stays put), and centres lifted from the masks and a depth (a spinning object
held still, a moving one followed, an approach seen through the apparent size under a flat depth).
"""

from __future__ import annotations

import json

import numpy as np

from recon4d.geometry import rodrigues
from recon4d.grounding.objects import camera_still, read_id_masks
from recon4d.grounding.shape import estimate_shape
from tests.test_grounding import UP, VIEW

# Square pixels, the image centre looking down at 22.6 degrees (VIEW): where the drawn masks sit.
K_DRAWN = np.array([[110.0, 0.0, 64.0], [0.0, 110.0, 48.0], [0.0, 0.0, 1.0]])


def _drawn(*draws, frames: int = 6) -> tuple[str | None, str]:
    """Shape estimate for id 1 in id masks ``[frames, 96, 128]``; each frame is drawn by ``draws[t % len]``."""
    masks = np.zeros((frames, 96, 128), np.uint8)
    for t in range(frames):
        draws[t % len(draws)](masks[t])
    depths = {1: np.full(frames, 6.0), 2: np.full(frames, 5.0)}  # object 2, when drawn, is nearer
    return estimate_shape(masks, 1, K_DRAWN, np.repeat(VIEW[None], frames, 0), UP, depths)


def test_shape_of_drawn_silhouettes_and_refusals():
    import cv2

    def disc(m):
        cv2.circle(m, (64, 48), 12, 1, -1)

    def square(m):
        cv2.rectangle(m, (52, 36), (75, 59), 1, -1)

    def tall(m):  # 20 wide, 27 high: taller than the top face makes a cube look
        cv2.rectangle(m, (54, 35), (73, 61), 1, -1)

    assert [_drawn(d)[0] for d in (disc, square, tall)] == ["ball", "cube", "cylinder"]

    def dumbbell(m):  # not a convex body
        cv2.circle(m, (54, 48), 9, 1, -1)
        cv2.circle(m, (74, 48), 9, 1, -1)
        cv2.rectangle(m, (54, 46), (74, 50), 1, -1)

    def behind(m):  # a disc touching a nearer object: part of it may be hidden
        disc(m)
        cv2.rectangle(m, (77, 30), (100, 66), 2, -1)

    assert _drawn(dumbbell)[0] is None
    shape, why = _drawn(behind)
    assert shape is None and "no frame" in why, why
    shape, why = _drawn(disc, square)  # half the frames say ball, half cube: no two-thirds majority
    assert shape is None and "two thirds" in why, why


def _synth_truth(synth) -> tuple[list[dict], dict, np.ndarray, np.ndarray, dict[int, np.ndarray]]:
    """A synth scene's objects, cameras, world-to-camera matrices, id masks and each object's true camera depth."""
    objects = json.loads((synth / "gt" / "objects.json").read_text())["objects"]
    cams = np.load(synth / "gt" / "cameras.npz")
    viewmats = cams["viewmats"]
    masks = read_id_masks(synth / "Annotations", list(range(len(viewmats))))
    depths = {o["id"]: np.einsum("tj,tj->t", viewmats[:, 2, :3], np.array(o["centre"])) + viewmats[:, 2, 3]
              for o in objects}
    return objects, cams, viewmats, masks, depths


def test_shapes_of_synth_objects_from_their_masks(tmp_path):
    """A scene with a ball, a cube and a cylinder: each gets its true shape (gt/objects.json) from the id masks.

    With up taken from the first camera instead (no ground plane, pitch unknown) the ball keeps its
    name; the cube and the cylinder, which the silhouette test tells apart only by elevation, get none.
    """
    from tests.fitted import synth_scene

    objects, cams, viewmats, masks, depths = _synth_truth(synth_scene(tmp_path, "--seed", "102", "--objects", "3",
                                                                      "--no-novel"))
    truth = {o["id"]: o["shape"] for o in objects}
    found = {i: estimate_shape(masks, i, cams["K"], viewmats, UP, depths)[0] for i in truth}
    assert sorted(truth.values()) == ["ball", "cube", "cylinder"] and found == truth
    camera_up = -viewmats[0, 1, :3]
    guessed = {o["shape"]: estimate_shape(masks, o["id"], cams["K"], viewmats, camera_up, depths, pitch_known=False)
               for o in objects}
    assert guessed["ball"][0] == "ball"
    for shape in ("cube", "cylinder"):
        assert guessed[shape][0] is None and "pitch" in guessed[shape][1], guessed[shape]


def test_motion_masks_outline_objects_only_for_a_camera_whose_centre_stays_put():
    # Shapes are read from motion masks only where they outline the moving objects: a still camera's, or
    # one that only turns (a pan); a camera that travels a tenth of its distance to them does not qualify.
    T = 10
    depths = {0: np.full(T, 1.0), 1: np.full(T, 6.0), 2: np.full(T, 7.0)}
    still = np.repeat(VIEW[None], T, 0)
    assert camera_still(still, depths)
    pan = still.copy()
    for t in range(T):  # turning about the camera's own centre
        turn = rodrigues(np.array([[0.0, 0.0, 0.05 * t]]))[0]
        pan[t, :3, :3] = VIEW[:3, :3] @ turn
        pan[t, :3, 3] = -pan[t, :3, :3] @ (-VIEW[:3, :3].T @ VIEW[:3, 3])
    assert camera_still(pan, depths)
    dolly = still.copy()
    dolly[:, 2, 3] -= np.linspace(0.0, 0.65, T)  # 0.65 along its view: a tenth of the objects' distance
    assert not camera_still(dolly, depths)
    assert not camera_still(still, {0: np.full(T, 1.0)})  # no object: no distance to weigh it against


def test_seen_centres_take_the_distance_from_the_apparent_size_when_the_depth_is_flat(tmp_path):
    """An approach pair scene lifted with a constant depth (a static camera without a depth model): the
    approaching object's seen travel points the true way only when its distance follows its apparent size.

    Under the offline sparse depth each moving region has the depth of the static surface around it
    (``objects_at_contact_depth``), and the answerer lifts every object by its outline's size there too;
    built from the exact depth around the object, that contact depth follows the approach as well, and the
    size's lifting loses nothing against it (on real clips the surroundings are a few triangulated points, and
    the size is the better of the two: docs/decisions.md)."""
    from recon4d.commands import synth as synth_command
    from recon4d.grounding.seen import seen_centres
    from recon4d.priors.depth import objects_at_contact_depth

    args = ["--preset", "tiny", "--out", str(tmp_path), "--seed", "11", "--objects", "2", "--pairs", "approach",
            "--no-novel"]
    assert synth_command.main(args) == 0
    synth = sorted(tmp_path.glob("synth_s11_approach_*"))[0]
    objects, cams, viewmats, masks, depths = _synth_truth(synth)
    flat = np.full(np.load(synth / "gt" / "depth.npz")["depth"].shape, 6.0)
    mover = next(o for o in objects if o["motion"] in ("toward", "away"))
    travel = np.array(mover["centre"])[-1] - np.array(mover["centre"])[0]

    def cosine(seen: np.ndarray) -> float:
        d = seen[-1] - seen[0]
        return float(d @ travel / (np.linalg.norm(d) * np.linalg.norm(travel)))

    sized = seen_centres(masks, mover["id"], cams["K"], viewmats, flat, depths, depth_from_size=True)
    flat_only = seen_centres(masks, mover["id"], cams["K"], viewmats, flat, depths)
    assert cosine(sized) > 0.9 and cosine(flat_only) < 0.5, (cosine(sized), cosine(flat_only))
    true_depth = np.load(synth / "gt" / "depth.npz")["depth"].astype(np.float64)
    surroundings = objects_at_contact_depth(true_depth, masks > 0)
    sized = seen_centres(masks, mover["id"], cams["K"], viewmats, surroundings, depths, depth_from_size=True)
    contact_only = seen_centres(masks, mover["id"], cams["K"], viewmats, surroundings, depths)
    assert cosine(sized) > 0.9 and cosine(contact_only) > 0.9, (cosine(sized), cosine(contact_only))


def test_seen_centres_hold_a_spinning_object_still_and_follow_a_moving_one(tmp_path):
    """A spin pair scene (one object spins in place, one moves): centres from the id masks and depth track the truth.

    The depth is the synth's own, exact, so that this tests the lifting and the smoothing alone;
    the answerer passes the fitted scene's rendered depth (``seen.rendered_depth``).
    """
    from recon4d.commands import synth as synth_command
    from recon4d.grounding.seen import seen_centres

    args = ["--preset", "tiny", "--out", str(tmp_path), "--seed", "11", "--objects", "2", "--pairs", "spin", "--no-novel"]
    assert synth_command.main(args) == 0
    synth = sorted(tmp_path.glob("synth_s11_spin_*"))[0]
    objects, cams, viewmats, masks, depths = _synth_truth(synth)
    depth = np.load(synth / "gt" / "depth.npz")["depth"].astype(np.float64)
    truth = {o["id"]: np.array(o["centre"]) for o in objects}
    assert sorted(o["motion"].startswith("spin") for o in objects) == [False, True]
    for o in objects:
        seen = seen_centres(masks, o["id"], cams["K"], viewmats, depth, depths)
        assert seen is not None
        reach = np.linalg.norm(seen[:, None] - seen[None], axis=-1).max()
        if o["motion"].startswith("spin"):  # still: the seen centre stays within a fifth of the object's radius
            assert reach < 0.2 * o["bounding_radius"], reach
        else:  # moving: it travels as far and the same way as the true centre, up to a fifth of the radius
            travel = truth[o["id"]][-1] - truth[o["id"]][0]
            assert np.linalg.norm((seen[-1] - seen[0]) - travel) < 0.2 * o["bounding_radius"], (seen[-1] - seen[0], travel)

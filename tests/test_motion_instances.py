"""Instance ids from dynamic masks: regions chained over frames where they overlap, noise dropped."""

from __future__ import annotations

import cv2
import numpy as np

from recon4d.grounding.motion_instances import motion_instances
from recon4d.grounding.objects import MIN_GAUSSIANS, assign_annotated, assign_by_masks


def _boxes(T: int = 8, H: int = 60, W: int = 100) -> np.ndarray:
    dyn = np.zeros((T, H, W), bool)
    for t in range(T):
        dyn[t, 10:30, 5 + 3 * t:25 + 3 * t] = True  # big square moving right, overlapping itself frame to frame
        dyn[t, 40:50, 80 - 2 * t:88 - 2 * t] = True  # smaller one moving left
    return dyn


def test_regions_keep_one_id_each_over_the_clip_largest_first():
    ids = motion_instances(_boxes())
    assert ids.max() == 2
    assert (ids[:, 20, :][_boxes()[:, 20, :]] == 1).all()  # the big square is id 1 in every frame
    assert (ids[:, 45, :][_boxes()[:, 45, :]] == 2).all()
    assert ((ids > 0) == _boxes()).all()


def test_specks_and_rare_regions_are_noise_and_a_split_region_that_rejoins_is_one():
    dyn = _boxes()
    dyn[3, 2, 2] = True  # a one-pixel speck
    dyn[5, 15, :] = False  # the big square cut in two for one frame: both halves overlap it before and after
    dyn[5, 10:30, 30] = False
    ids = motion_instances(dyn)
    assert ids[3, 2, 2] == 0
    assert set(np.unique(ids[5][dyn[5] & (np.arange(60)[:, None] < 35)])) == {1}
    # A region present in one frame only, tiny against the clip's largest: dropped.
    dyn[7, 52:56, 2:6] = True
    assert motion_instances(dyn)[7, 53, 3] == 0


def test_gaussians_that_land_on_a_motion_mask_now_and_then_still_belong_to_it():
    T = 10
    masks = np.zeros((T, 20, 20), np.int64)
    masks[:3, 5:15, 5:15] = 1  # the mask covers the object in 3 of 10 frames only (low recall)
    K = np.array([[10.0, 0, 10], [0, 10.0, 10], [0, 0, 1]])
    viewmats = np.repeat(np.eye(4)[None], T, 0)
    tracks = np.zeros((T, 2, 3))
    tracks[:, 0] = [0.0, 0.0, 1.0]  # projects to the mask's centre
    tracks[:, 1] = [0.8, 0.8, 1.0]  # projects to the corner: never on the mask
    assert assign_by_masks(tracks, K, viewmats, masks, (20, 20)).tolist() == [0, 0]  # majority: background
    assert assign_by_masks(tracks, K, viewmats, masks, (20, 20), inside=0.2).tolist() == [1, 0]


def test_an_annotated_object_that_wins_no_majority_still_gets_the_gaussians_that_follow_it_part_time():
    T, K = 10, np.array([[10.0, 0, 10], [0, 10.0, 10], [0, 0, 1]])
    viewmats = np.repeat(np.eye(4)[None], T, 0)
    masks = np.zeros((T, 20, 20), np.int64)
    masks[:, 0:8, 0:8] = 2  # object 2, top left, in every frame
    masks[:3, 12:20, 12:20] = 1  # object 1, bottom right, where its Gaussians are in 3 of 10 frames only
    n = MIN_GAUSSIANS
    tracks = np.zeros((T, 3 * n, 3))
    tracks[:, :n] = [0.6, 0.6, 1.0]  # follow object 1 part-time: background by majority
    tracks[:, n:2 * n] = [-0.6, -0.6, 1.0]  # on object 2 always: its majority
    tracks[:3, 2 * n:] = [-0.6, -0.6, 1.0]  # on object 2 part-time only, then background
    tracks[3:, 2 * n:] = [0.0, 0.0, 1.0]
    ids = assign_annotated(tracks, K, viewmats, masks, (20, 20))
    assert (ids[:n] == 1).all()  # object 1 exists: no Gaussian won it a majority
    assert (ids[n:2 * n] == 2).all()
    assert (ids[2 * n:] == 0).all()  # object 2 won its majority: its part-time followers stay background


def test_a_region_the_mask_loses_for_a_few_frames_keeps_its_id_and_one_elsewhere_does_not():
    from recon4d.grounding.motion_instances import GAP_FRAMES

    T, H, W = 20, 60, 100
    dyn = np.zeros((T, H, W), bool)
    for t in range(T):
        dyn[t, 10:30, 20 + t:40 + t] = True  # a slow subject, 1 px a frame
    dyn[8:13] = False  # no motion mask at all in frames 8-12 (as on DAVIS bear)
    dyn[15:, 40:55, 70:90] = True  # a second subject that appears later, away from the first's last region
    ids = motion_instances(dyn)
    assert set(np.unique(ids[:8][dyn[:8]])) == set(np.unique(ids[13:15][dyn[13:15]])) == {1}
    assert ids[16, 45, 80] not in (0, 1)
    # A gap longer than GAP_FRAMES: the subject after it is a new id.
    long = dyn.copy()
    long[:, 40:55, 70:90] = False
    long[2:3 + GAP_FRAMES] = False
    ids = motion_instances(long)
    assert ids[1, 20, 30] != ids[T - 1, 20, 50]


def test_two_subjects_that_touch_for_a_few_frames_keep_their_own_ids():
    # A square moving right reaches one moving left, turns down along it and leaves: their masks are one
    # region in frames 10-15. Each was apart for 10 frames before, so that region is split between them,
    # each pixel to the nearer one, and neither takes the other's id for the clip (one id was one object
    # for the answerer: a ball and the cylinder following it were "the green object").
    T, H, W = 24, 80, 120
    dyn = np.zeros((T, H, W), bool)
    for t in range(T):
        right, down = 10 + 3 * min(t, 10), 10 + 4 * max(t - 10, 0)
        dyn[t, down:down + 20, right:right + 20] = True
        dyn[t, 10:30, 70 - t:86 - t] = True
    ids = motion_instances(dyn)
    first, second = ids[0, 20, 20], ids[0, 20, 75]
    assert ids.max() == 2 and first != second
    assert ids[T - 1, 70, 50] == first and ids[T - 1, 20, 55] == second
    merged = 12
    _, regions = cv2.connectedComponents(dyn[merged].astype(np.uint8))
    assert regions.max() == 1  # one region in the mask ...
    assert set(np.unique(ids[merged][dyn[merged]])) == {first, second}  # ... two ids
    assert ids[merged, 25, 50] == first and ids[merged, 15, 70] == second

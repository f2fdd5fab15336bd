"""The motion scaffold's transforms: stored about each node's centre, read in the world-origin form."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from recon4d.geometry import quat_to_rotmat
from recon4d.scene import DynamicScene, GaussianSet, MotionScaffold
from recon4d.scene.scaffold import SkinBinding
from recon4d.scene.state import load_scene, save_scene


def _world_form(T: int = 3, M: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(M, 3, generator=g) * 4 + torch.tensor([0.0, 0.0, 10.0])  # far from the origin
    quats = F.normalize(torch.randn(T, M, 4, generator=g), dim=-1)
    trans = torch.randn(T, M, 3, generator=g)
    return pos, quats, trans


def test_world_translations_round_trip_and_positions():
    pos, quats, trans = _world_form()
    scaffold = MotionScaffold(pos, quats, trans)
    rot = quat_to_rotmat(quats.reshape(-1, 4)).reshape(*quats.shape[:2], 3, 3)
    expected = torch.einsum("tmij,mj->tmi", rot, pos) + trans
    torch.testing.assert_close(scaffold.node_positions(), expected, atol=1e-5, rtol=1e-5)
    for t in range(quats.shape[0]):
        torch.testing.assert_close(scaffold.translations(t), trans[t], atol=1e-5, rtol=1e-5)


def test_turning_a_node_does_not_move_it():
    """The point of the centred form: a rotation update leaves the node where it is (in the world-origin
    form the same update would swing it by angle x distance from the origin, ~10 units here)."""
    pos, quats, trans = _world_form()
    scaffold = MotionScaffold(pos, quats, trans)
    before = scaffold.node_positions(1).detach().clone()
    with torch.no_grad():
        scaffold.node_quats[1] = F.normalize(scaffold.node_quats[1] + 0.3, dim=-1)
    torch.testing.assert_close(scaffold.node_positions(1), before)
    assert (scaffold.translations(1) - trans[1]).norm(dim=-1).min() > 0.1  # the world translation did change


def test_scene_saved_with_world_translations_still_loads(tmp_path):
    pos, quats, trans = _world_form()
    empty = torch.zeros(0, 3)
    gs = lambda: GaussianSet(empty, empty, empty, torch.zeros(0))  # noqa: E731
    scaffold = MotionScaffold(pos, quats, trans)
    binding = SkinBinding(torch.zeros(0, 1, dtype=torch.int32), torch.zeros(0, 1))
    save_scene(tmp_path, DynamicScene(gs(), gs(), scaffold, binding), nn.ModuleDict(), {})
    # rewrite the file the way older versions stored the scaffold
    tensors = load_file(str(tmp_path / "scene.safetensors"))
    del tensors["scene.scaffold.node_offsets"]
    tensors["scene.scaffold.node_trans"] = trans
    save_file(tensors, str(tmp_path / "scene.safetensors"))
    loaded, _, _ = load_scene(tmp_path)
    torch.testing.assert_close(loaded.scaffold.node_positions(), scaffold.node_positions().detach())
    torch.testing.assert_close(loaded.scaffold.translations(2), trans[2], atol=1e-5, rtol=1e-5)


def test_the_moving_part_of_a_scene_where_nothing_moves_is_empty_not_an_error():
    """A static video has static Gaussians and no dynamic ones (DAVIS bus without masks): asking a frame
    for its dynamic Gaussians alone, as the answerer does, gives none, with the full feature width."""
    pos, quats, trans = _world_form()
    static = GaussianSet(torch.randn(7, 3), torch.full((7, 3), 0.1), torch.rand(7, 3), torch.full((7,), 0.5),
                         latent_dim=4)
    empty = torch.zeros(0, 3)
    dynamic = GaussianSet(empty, empty, empty, torch.zeros(0))
    binding = SkinBinding(torch.zeros(0, 1, dtype=torch.int32), torch.zeros(0, 1))
    scene = DynamicScene(static, dynamic, MotionScaffold(pos, quats, trans), binding)
    moving = scene.at(1, include_static=False)
    whole = scene.at(1)
    assert moving.means.shape == (0, 3) and moving.features.shape == (0, whole.features.shape[1])
    assert whole.features.shape == (7, 3 + 1 + 4)


def test_the_node_latents_gradient_is_the_same_on_every_run():
    """The features stage trains the node latents through the dynamic Gaussians' blend, thousands of
    Gaussians per node: its gradient must be summed in one order, or two fits of one video differ."""
    pos, quats, trans = _world_form(M=5)
    g = torch.Generator().manual_seed(1)
    n = 3000
    dynamic = GaussianSet(torch.randn(n, 3, generator=g), torch.full((n, 3), 0.1), torch.rand(n, 3, generator=g),
                          torch.full((n,), 0.5))
    binding = SkinBinding(torch.randint(0, 5, (n, 4), generator=g), -torch.rand(n, 4, generator=g))
    empty = torch.zeros(0, 3)
    static = GaussianSet(empty, empty, empty, torch.zeros(0), latent_dim=8)
    scene = DynamicScene(static, dynamic, MotionScaffold(pos, quats, trans, latent_dim=8), binding)
    with torch.no_grad():
        scene.scaffold.latents.copy_(torch.randn(5, 8, generator=g))
    weights = torch.randn(n, 8, generator=g)

    def node_gradient() -> torch.Tensor:
        scene.scaffold.latents.grad = None
        (scene.dynamic_latents() * weights).sum().backward()
        return scene.scaffold.latents.grad.clone()

    first = node_gradient()
    assert all(torch.equal(first, node_gradient()) for _ in range(10))
    expected = torch.zeros(5, 8).index_add_(0, binding.node_ids.long().reshape(-1),
                                            (binding.weights().detach()[..., None] * weights[:, None]).reshape(-1, 8))
    torch.testing.assert_close(first, expected)


def test_frames_never_fitted_take_the_motion_between_their_neighbours():
    """Nodes that move at a constant velocity and turn at a constant rate: a held-out frame's transforms,
    scrambled (as a fit leaves a frame it never renders), come back to the truth between fitted frames, and
    to the nearest fitted frame's beyond the last one."""
    T, M = 9, 4
    g = torch.Generator().manual_seed(1)
    pos = torch.randn(M, 3, generator=g)
    velocity, axis = torch.randn(M, 3, generator=g), F.normalize(torch.randn(M, 3, generator=g), dim=-1)
    angle = 0.15 * torch.arange(T, dtype=torch.float32)[:, None, None]  # radians, per frame
    quats = torch.cat([torch.cos(angle / 2).expand(T, M, 1), torch.sin(angle / 2) * axis], -1)
    quats[1::2] *= -1  # the same rotations on the other hemisphere: blending must not cancel them
    rot = quat_to_rotmat(quats.reshape(-1, 4)).reshape(T, M, 3, 3)
    centres = pos + torch.arange(T, dtype=torch.float32)[:, None, None] * velocity  # the nodes' centres move straight
    trans = centres - torch.einsum("tmij,mj->tmi", rot, pos)
    truth = MotionScaffold(pos, quats, trans)
    scaffold = MotionScaffold(pos, quats, trans)
    held = frozenset({3, 4, 8})
    with torch.no_grad():
        for t in held:
            scaffold.node_quats[t] = F.normalize(torch.randn(M, 4, generator=g), dim=-1)
            scaffold.node_offsets[t] += torch.randn(M, 3, generator=g)
    scaffold.interpolate(held)
    for t in (3, 4):
        torch.testing.assert_close(scaffold.node_positions(t), truth.node_positions(t), atol=1e-5, rtol=1e-5)
        rot, true_rot = (quat_to_rotmat(F.normalize(s.node_quats[t], dim=-1)) for s in (scaffold, truth))
        torch.testing.assert_close(rot, true_rot, atol=2e-3, rtol=0)  # nlerp at 1/3 and 2/3 of a 0.45 rad turn
    torch.testing.assert_close(scaffold.node_offsets[8], scaffold.node_offsets[7])
    torch.testing.assert_close(scaffold.node_quats[8], F.normalize(quats[7], dim=-1))
    for t in set(range(T)) - held:  # fitted frames are untouched
        torch.testing.assert_close(scaffold.node_quats[t], truth.node_quats[t], atol=0, rtol=0)

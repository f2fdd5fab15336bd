"""Fused skinning: CPU/CUDA kernels against the PyTorch twin, degenerate inputs, gradcheck, bad input."""

from __future__ import annotations

import pytest
import torch

from cuda_ext.reference import skin as twin
from cuda_ext.skin import skin
from tests.conftest import requires_compiler, requires_gpu

DEVICES = [
    pytest.param("cpu", marks=requires_compiler),
    pytest.param("cuda", marks=[requires_gpu, requires_compiler]),
]
MODES = ["dqb", "lbs"]


def random_scene(n=1500, k=8, m=64, frames=None, dtype=torch.float32, device="cpu", seed=0, unused_nodes=8):
    """Random Gaussians and nodes; node quats are random in both hemispheres; the last nodes are unused."""
    g = torch.Generator().manual_seed(seed)
    lead = () if frames is None else (frames,)
    make = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    tensors = {
        "canon_means": make(n, 3),
        "canon_quats": make(n, 4),
        "node_ids": torch.randint(0, m - unused_nodes, (n, k), generator=g, dtype=torch.int32),
        "weights": torch.rand(n, k, generator=g, dtype=torch.float64) + 0.05,
        "node_quats": make(*lead, m, 4),
        "node_trans": make(*lead, m, 3),
    }
    return {
        name: t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype).requires_grad_(t.is_floating_point())
        for name, t in tensors.items()
    }


FLOAT_INPUTS = ["canon_means", "canon_quats", "weights", "node_quats", "node_trans"]


def forward_backward(inputs, mode, backend, seed=1):
    means, quats = skin(**inputs, mode=mode, backend=backend)
    g = torch.Generator().manual_seed(seed)
    upstream = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o) for o in (means, quats)]
    grads = torch.autograd.grad((means, quats), [inputs[k] for k in FLOAT_INPUTS], upstream)
    return (means, quats), dict(zip(FLOAT_INPUTS, grads))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("frames", [None, 3])
@pytest.mark.parametrize("mode", MODES)
def test_kernel_matches_twin(device, frames, mode):
    inputs = random_scene(frames=frames, device=device)
    (km, kq), kgrad = forward_backward(inputs, mode, "kernel")
    (tm, tq), tgrad = forward_backward(inputs, mode, "reference")
    assert km.shape == tm.shape and kq.shape == tq.shape
    torch.testing.assert_close(km, tm, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(kq, tq, atol=1e-5, rtol=1e-5)
    for name in FLOAT_INPUTS:
        scale = tgrad[name].abs().max()
        assert (kgrad[name] - tgrad[name]).abs().max() <= 1e-4 * scale, name
    # Nodes that no Gaussian references get exactly zero gradient.
    assert torch.all(kgrad["node_quats"][..., -8:, :] == 0) and torch.all(kgrad["node_trans"][..., -8:, :] == 0)


@pytest.mark.parametrize("device", DEVICES)
def test_auto_backend_uses_the_kernel(device):
    inputs = random_scene(n=10, device=device)
    means, _ = skin(**inputs)
    assert "SkinFunctionBackward" in autograd_node_names(means)
    means, _ = skin(**inputs, backend="reference")
    assert "SkinFunctionBackward" not in autograd_node_names(means)


def autograd_node_names(tensor):
    names, todo = set(), [tensor.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and type(node).__name__ not in names:
            names.add(type(node).__name__)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return names


@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
@pytest.mark.parametrize("mode", MODES)
def test_antipodal_node_quaternions_give_the_same_blend(backend, mode):
    inputs = random_scene(n=300, m=16, unused_nodes=0)
    means, quats = skin(**inputs, mode=mode, backend=backend)
    flip = torch.ones(16, 1)
    flip[::3] = -1
    flipped = dict(inputs, node_quats=inputs["node_quats"] * flip)
    means_f, quats_f = skin(**flipped, mode=mode, backend=backend)
    torch.testing.assert_close(means_f, means, atol=1e-5, rtol=1e-5)
    # The output quaternion follows the pivot's sign: the same rotation, possibly negated.
    same_sign = (quats_f * quats).sum(-1, keepdim=True).sign()
    assert (same_sign < 0).any() and (same_sign > 0).any()
    torch.testing.assert_close(quats_f * same_sign, quats, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
@pytest.mark.parametrize("mode", MODES)
def test_same_rotation_with_opposite_signs_is_that_rotation(backend, mode):
    """Without the hemisphere flip, q and -q with equal weights would blend to zero."""
    q = torch.nn.functional.normalize(torch.tensor([[0.3, -0.5, 0.2, 0.7]]), dim=-1)
    t = torch.tensor([[0.5, -1.0, 2.0]])
    x = torch.tensor([[1.0, 2.0, 3.0]])
    means, quats = skin(x, torch.tensor([[1.0, 0.0, 0.0, 0.0]]), torch.tensor([[0, 1]], dtype=torch.int32),
                        torch.tensor([[0.5, 0.5]]), torch.cat([q, -q]), torch.cat([t, t]), mode=mode, backend=backend)
    torch.testing.assert_close(quats, q)
    torch.testing.assert_close(means, twin.quat_rotate(q, x) + t)


@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
@pytest.mark.parametrize("mode", MODES)
def test_k1_applies_the_node_transform(backend, mode):
    inputs = {k: v.detach() for k, v in random_scene(n=200, k=1, m=10, unused_nodes=0).items()}
    means, quats = skin(**inputs, mode=mode, backend=backend)
    ids = inputs["node_ids"][:, 0].long()
    q = torch.nn.functional.normalize(inputs["node_quats"], dim=-1)[ids]
    expected_means = twin.quat_rotate(q, inputs["canon_means"]) + inputs["node_trans"][ids]
    torch.testing.assert_close(means, expected_means, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(quats, twin.quat_mul(q, inputs["canon_quats"]), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
@pytest.mark.parametrize("mode", MODES)
def test_weights_are_scale_invariant_and_zero_sum_rows_raise(backend, mode):
    inputs = {k: v.detach() for k, v in random_scene(n=100).items()}
    means, quats = skin(**inputs, mode=mode, backend=backend)
    scaled = skin(**dict(inputs, weights=inputs["weights"] * 7.5), mode=mode, backend=backend)
    torch.testing.assert_close(scaled[0], means, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scaled[1], quats, atol=1e-5, rtol=1e-5)
    weights = inputs["weights"].clone()
    weights[17] = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0, 0.0, 2.0, -2.0])
    with pytest.raises(ValueError, match="weights.*sum to zero"):
        skin(**dict(inputs, weights=weights), mode=mode, backend=backend)


@requires_compiler
@pytest.mark.parametrize("mode", MODES)
def test_batched_time_equals_per_frame_calls(mode):
    inputs = {k: v.detach() for k, v in random_scene(n=300, frames=4).items()}
    means, quats = skin(**inputs, mode=mode, backend="kernel")
    for t in range(4):
        frame = dict(inputs, node_quats=inputs["node_quats"][t], node_trans=inputs["node_trans"][t])
        m_t, q_t = skin(**frame, mode=mode, backend="kernel")
        torch.testing.assert_close(means[t], m_t, atol=0, rtol=0)
        torch.testing.assert_close(quats[t], q_t, atol=0, rtol=0)


@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
@pytest.mark.parametrize("frames", [None, 2])
@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_float64(backend, frames, mode):
    inputs = random_scene(n=5, k=3, m=6, frames=frames, dtype=torch.float64, unused_nodes=1)
    ids = inputs.pop("node_ids")
    names = list(inputs)

    def fn(*args):
        return skin(**dict(zip(names, args)), node_ids=ids, mode=mode, backend=backend)

    assert torch.autograd.gradcheck(fn, tuple(inputs.values()), eps=1e-6, atol=1e-6)


def bad(name, value):
    def make():
        inputs = {k: v.detach() for k, v in random_scene(n=20, m=10).items()}
        inputs[name] = value(inputs[name]) if callable(value) else value
        return inputs

    return make


def with_nan(t):
    t = t.clone()
    t.view(-1)[3] = float("nan")
    return t


def set_first(value):
    def edit(t):
        t = t.clone()
        t.view(-1)[0] = value
        return t

    return edit


@pytest.mark.parametrize(
    "make, argument",
    [
        (bad("canon_quats", lambda t: t[:-1]), "canon_quats"),
        (bad("canon_means", lambda t: t[:, :2]), "canon_means"),
        (bad("weights", lambda t: t[:, :-1]), "weights"),
        (bad("node_trans", lambda t: t[:-1]), "node_trans"),
        (bad("node_ids", set_first(10)), "node_ids"),
        (bad("node_ids", set_first(-1)), "node_ids"),
        (bad("node_ids", lambda t: t.float()), "node_ids"),
        (bad("node_trans", with_nan), "node_trans"),
        (bad("weights", with_nan), "weights"),
        (bad("canon_means", lambda t: t.double()), "canon_means"),
        (bad("node_quats", lambda t: t * torch.arange(10.0)[:, None].ne(4)), "node_quats"),
    ],
)
@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
def test_bad_input_raises_value_error_naming_the_argument(make, argument, backend):
    with pytest.raises(ValueError, match=argument):
        skin(**make(), backend=backend)


def test_unknown_mode_and_backend_raise():
    inputs = random_scene(n=4, m=10)
    with pytest.raises(ValueError, match="mode"):
        skin(**inputs, mode="slerp")
    with pytest.raises(ValueError, match="backend"):
        skin(**inputs, backend="fast")


def test_int64_node_ids_are_accepted():
    inputs = {k: v.detach() for k, v in random_scene(n=50).items()}
    expected = skin(**inputs, backend="reference")
    got = skin(**dict(inputs, node_ids=inputs["node_ids"].long()))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)

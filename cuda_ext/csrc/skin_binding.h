// Torch-side helpers shared by the CPU (cpu/scaffold.cpp) and CUDA (cuda/scaffold_bindings.cpp) skinning
// bindings. Unlike scaffold_math.h this includes torch, so nvcc's .cu never includes it.
#pragma once

#include <torch/extension.h>

#include <array>

namespace r4d {

// skin_backward's outputs, each shaped like the input it differentiates: means, quats, weights, node quats,
// node translations. zero_nodes: the node gradients start at zero, for a kernel that accumulates into them
// (CUDA's atomics) rather than writing each element once (the CPU kernel).
inline std::array<at::Tensor, 5> skin_grads_like(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                                  const at::Tensor& weights, const at::Tensor& node_quats,
                                                  const at::Tensor& node_trans, bool zero_nodes) {
  auto node_grad = [&](const at::Tensor& t) { return zero_nodes ? at::zeros_like(t) : at::empty_like(t); };
  return {at::empty_like(canon_means), at::empty_like(canon_quats), at::empty_like(weights), node_grad(node_quats),
          node_grad(node_trans)};
}

}  // namespace r4d

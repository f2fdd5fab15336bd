// Torch-facing side of the scaffold CUDA kernels: checks, allocation, stream/device, dispatch,
// and the node-quaternion normalisation (the kernels see unit quaternions).
// Inputs are validated in Python (cuda_ext/skin.py, cuda_ext/knn.py); the TORCH_CHECKs here only
// guard the binding against misuse. The kernels themselves are in scaffold.cu.
#include <torch/extension.h>

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

#include <vector>

#include "../skin_binding.h"
#include "scaffold_launch.h"

namespace {

void check_cuda(const std::vector<const at::Tensor*>& tensors) {
  for (const auto* t : tensors) {
    TORCH_CHECK(t->is_cuda() && t->is_contiguous(), "scaffold_cuda: inputs must be contiguous CUDA tensors");
  }
}

void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, "scaffold_cuda.", what, ": ", cudaGetErrorString(err));
}

// The kernels take unit node quaternions; |q| is kept to project the gradient in the backward pass.
std::pair<at::Tensor, at::Tensor> normalise_nodes(const at::Tensor& node_quats) {
  auto norm = node_quats.norm(2, {-1}, true).clamp_min(1e-12);
  return {(node_quats / norm).contiguous(), norm};
}

std::vector<at::Tensor> skin_forward(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                     const at::Tensor& node_ids, const at::Tensor& weights,
                                     const at::Tensor& node_quats, const at::Tensor& node_trans, bool dqb) {
  check_cuda({&canon_means, &canon_quats, &node_ids, &weights, &node_quats, &node_trans});
  TORCH_CHECK(node_ids.scalar_type() == at::kInt, "scaffold_cuda: node_ids must be int32");
  const c10::cuda::CUDAGuard guard(canon_means.device());
  const int64_t N = canon_means.size(0), K = node_ids.size(1), T = node_quats.size(0), M = node_quats.size(1);
  auto means = at::empty({T, N, 3}, canon_means.options());
  auto quats = at::empty({T, N, 4}, canon_means.options());
  const auto unit = normalise_nodes(node_quats).first;
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "skin_forward_cuda", [&] {
    check_launch(r4d::launch_skin_forward<scalar_t>(
                     canon_means.data_ptr<scalar_t>(), canon_quats.data_ptr<scalar_t>(), node_ids.data_ptr<int32_t>(),
                     weights.data_ptr<scalar_t>(), unit.data_ptr<scalar_t>(), node_trans.data_ptr<scalar_t>(),
                     N, int(K), T, M, dqb, means.data_ptr<scalar_t>(), quats.data_ptr<scalar_t>(),
                     c10::cuda::getCurrentCUDAStream()),
                 "skin_forward");
  });
  return {means, quats};
}

std::vector<at::Tensor> skin_backward(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                      const at::Tensor& node_ids, const at::Tensor& weights,
                                      const at::Tensor& node_quats, const at::Tensor& node_trans,
                                      const at::Tensor& grad_means, const at::Tensor& grad_quats, bool dqb) {
  check_cuda({&canon_means, &canon_quats, &node_ids, &weights, &node_quats, &node_trans, &grad_means, &grad_quats});
  const c10::cuda::CUDAGuard guard(canon_means.device());
  const int64_t N = canon_means.size(0), K = node_ids.size(1), T = node_quats.size(0), M = node_quats.size(1);
  auto [g_means, g_quats, g_weights, g_node_quats, g_node_trans] =
      r4d::skin_grads_like(canon_means, canon_quats, weights, node_quats, node_trans, /*zero_nodes=*/true);
  const auto [unit, norm] = normalise_nodes(node_quats);
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "skin_backward_cuda", [&] {
    check_launch(r4d::launch_skin_backward<scalar_t>(
                     canon_means.data_ptr<scalar_t>(), canon_quats.data_ptr<scalar_t>(), node_ids.data_ptr<int32_t>(),
                     weights.data_ptr<scalar_t>(), unit.data_ptr<scalar_t>(), node_trans.data_ptr<scalar_t>(),
                     grad_means.data_ptr<scalar_t>(), grad_quats.data_ptr<scalar_t>(), N, int(K), T, M, dqb,
                     g_means.data_ptr<scalar_t>(), g_quats.data_ptr<scalar_t>(), g_weights.data_ptr<scalar_t>(),
                     g_node_quats.data_ptr<scalar_t>(), g_node_trans.data_ptr<scalar_t>(),
                     c10::cuda::getCurrentCUDAStream()),
                 "skin_backward");
  });
  // Through q -> q / |q|:  g_q = (g_u - u (u . g_u)) / |q|.
  g_node_quats = (g_node_quats - unit * (unit * g_node_quats).sum(-1, true)) / norm;
  return {g_means, g_quats, g_weights, g_node_quats, g_node_trans};
}

std::vector<at::Tensor> knn(const at::Tensor& query, const at::Tensor& ref, int64_t k) {
  check_cuda({&query, &ref});
  TORCH_CHECK(k >= 1 && k <= ref.size(0) && k <= r4d::kKnnMaxK, "scaffold_cuda.knn: need 1 <= k <= min(M, ",
              r4d::kKnnMaxK, ")");
  const c10::cuda::CUDAGuard guard(query.device());
  const int64_t P = query.size(0), M = ref.size(0);
  auto idx = at::empty({P, k}, query.options().dtype(at::kInt));
  auto dist2 = at::empty({P, k}, query.options());
  AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "knn_cuda", [&] {
    check_launch(r4d::launch_knn<scalar_t>(query.data_ptr<scalar_t>(), ref.data_ptr<scalar_t>(), P, M, int(k),
                                           idx.data_ptr<int32_t>(), dist2.data_ptr<scalar_t>(),
                                           c10::cuda::getCurrentCUDAStream()),
                 "knn");
  });
  return {idx, dist2};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "recon4d motion-scaffold kernels (CUDA): fused DQB/LBS skinning and exact k-NN";
  m.attr("KNN_MAX_K") = r4d::kKnnMaxK;
  m.def("skin_forward", &skin_forward, "skinning forward: (means[T,N,3], quats[T,N,4])");
  m.def("skin_backward", &skin_backward, "skinning backward: grads for means, quats, weights, node quats, node trans");
  m.def("knn", &knn, "exact k nearest neighbours: (idx[P,k] int32, dist2[P,k])");
}

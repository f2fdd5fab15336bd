// CPU kernels for the motion scaffold: fused skinning (DQB / LBS) forward + backward, and exact k-NN.
//
// Why fused: the PyTorch twin gathers every Gaussian's K node transforms into N x K x 4/3/8
// tensors and autograd keeps them alive for the backward pass; here each Gaussian's blend
// is computed in registers and recomputed in the backward pass, so memory is just inputs,
// outputs and gradients. Inputs are validated in Python (cuda_ext/skin.py, cuda_ext/knn.py);
// the TORCH_CHECKs below only guard the binding against misuse.
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "../scaffold_math.h"

namespace {

void check_skin_args(const at::Tensor& canon_means, const at::Tensor& canon_quats, const at::Tensor& node_ids,
                     const at::Tensor& weights, const at::Tensor& node_quats, const at::Tensor& node_trans) {
  for (const auto* t : {&canon_means, &canon_quats, &node_ids, &weights, &node_quats, &node_trans}) {
    TORCH_CHECK(t->is_contiguous() && t->device().is_cpu(), "scaffold_cpu: inputs must be contiguous CPU tensors");
  }
  TORCH_CHECK(node_ids.scalar_type() == at::kInt, "scaffold_cpu: node_ids must be int32");
  TORCH_CHECK(node_quats.dim() == 3 && node_trans.dim() == 3, "scaffold_cpu: node tensors must be [T, M, C]");
}

std::vector<at::Tensor> skin_forward(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                     const at::Tensor& node_ids, const at::Tensor& weights,
                                     const at::Tensor& node_quats, const at::Tensor& node_trans, bool dqb) {
  check_skin_args(canon_means, canon_quats, node_ids, weights, node_quats, node_trans);
  const int64_t N = canon_means.size(0), K = node_ids.size(1), T = node_quats.size(0), M = node_quats.size(1);
  auto means = at::empty({T, N, 3}, canon_means.options());
  auto quats = at::empty({T, N, 4}, canon_means.options());
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "skin_forward_cpu", [&] {
    const scalar_t *x = canon_means.data_ptr<scalar_t>(), *qc = canon_quats.data_ptr<scalar_t>(),
                   *w = weights.data_ptr<scalar_t>(), *nq = node_quats.data_ptr<scalar_t>(),
                   *nt = node_trans.data_ptr<scalar_t>();
    const int32_t* ids = node_ids.data_ptr<int32_t>();
    scalar_t *om = means.data_ptr<scalar_t>(), *oq = quats.data_ptr<scalar_t>();
    at::parallel_for(0, N, 1024, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t t = 0; t < T; ++t) {
          const int64_t o = t * N + i;
          if (dqb) {
            r4d::skin_forward_one<scalar_t, true>(x + 3 * i, qc + 4 * i, ids + K * i, w + K * i, int(K),
                                                  nq + 4 * M * t, nt + 3 * M * t, om + 3 * o, oq + 4 * o);
          } else {
            r4d::skin_forward_one<scalar_t, false>(x + 3 * i, qc + 4 * i, ids + K * i, w + K * i, int(K),
                                                   nq + 4 * M * t, nt + 3 * M * t, om + 3 * o, oq + 4 * o);
          }
        }
      }
    });
  });
  return {means, quats};
}

// Node gradients of one thread's slice of Gaussians, added into that thread's private buffer
// (no atomics, and a fixed reduction order, so the CPU backward is deterministic).
template <typename T>
struct BufferSink {
  T* gq;  // [M, 4]
  T* gt;  // [M, 3]
  void operator()(int64_t j, const r4d::Q<T>& q, const r4d::V<T>& t) {
    T* a = gq + 4 * j;
    a[0] += q.w; a[1] += q.x; a[2] += q.y; a[3] += q.z;
    T* b = gt + 3 * j;
    b[0] += t.x; b[1] += t.y; b[2] += t.z;
  }
};

std::vector<at::Tensor> skin_backward(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                      const at::Tensor& node_ids, const at::Tensor& weights,
                                      const at::Tensor& node_quats, const at::Tensor& node_trans,
                                      const at::Tensor& grad_means, const at::Tensor& grad_quats, bool dqb) {
  check_skin_args(canon_means, canon_quats, node_ids, weights, node_quats, node_trans);
  TORCH_CHECK(grad_means.is_contiguous() && grad_quats.is_contiguous(), "scaffold_cpu: grads must be contiguous");
  const int64_t N = canon_means.size(0), K = node_ids.size(1), T = node_quats.size(0), M = node_quats.size(1);
  auto g_means = at::zeros_like(canon_means);
  auto g_quats = at::zeros_like(canon_quats);
  auto g_weights = at::zeros_like(weights);
  auto g_node_quats = at::zeros_like(node_quats);
  auto g_node_trans = at::zeros_like(node_trans);
  // One contiguous slice of Gaussians per thread, each with its own [M, 7] node-gradient buffer.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), (N + 1023) / 1024));
  auto buf_q = at::empty({chunks, M, 4}, canon_means.options());
  auto buf_t = at::empty({chunks, M, 3}, canon_means.options());
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "skin_backward_cpu", [&] {
    const scalar_t *x = canon_means.data_ptr<scalar_t>(), *qc = canon_quats.data_ptr<scalar_t>(),
                   *w = weights.data_ptr<scalar_t>(), *nq = node_quats.data_ptr<scalar_t>(),
                   *nt = node_trans.data_ptr<scalar_t>(), *gm = grad_means.data_ptr<scalar_t>(),
                   *gq = grad_quats.data_ptr<scalar_t>();
    const int32_t* ids = node_ids.data_ptr<int32_t>();
    scalar_t *gx = g_means.data_ptr<scalar_t>(), *gqc = g_quats.data_ptr<scalar_t>(),
             *gw = g_weights.data_ptr<scalar_t>();
    scalar_t *bq = buf_q.data_ptr<scalar_t>(), *bt = buf_t.data_ptr<scalar_t>();
    for (int64_t t = 0; t < T; ++t) {
      buf_q.zero_();
      buf_t.zero_();
      at::parallel_for(0, chunks, 1, [&](int64_t cbegin, int64_t cend) {
        for (int64_t c = cbegin; c < cend; ++c) {
          BufferSink<scalar_t> sink{bq + 4 * M * c, bt + 3 * M * c};
          const int64_t begin = N * c / chunks, end = N * (c + 1) / chunks;
          for (int64_t i = begin; i < end; ++i) {
            const int64_t o = t * N + i;
            if (dqb) {
              r4d::skin_backward_one<scalar_t, true>(x + 3 * i, qc + 4 * i, ids + K * i, w + K * i, int(K),
                                                     nq + 4 * M * t, nt + 3 * M * t, gm + 3 * o, gq + 4 * o,
                                                     gx + 3 * i, gqc + 4 * i, gw + K * i, sink);
            } else {
              r4d::skin_backward_one<scalar_t, false>(x + 3 * i, qc + 4 * i, ids + K * i, w + K * i, int(K),
                                                      nq + 4 * M * t, nt + 3 * M * t, gm + 3 * o, gq + 4 * o,
                                                      gx + 3 * i, gqc + 4 * i, gw + K * i, sink);
            }
          }
        }
      });
      g_node_quats[t].copy_(buf_q.sum(0));
      g_node_trans[t].copy_(buf_t.sum(0));
    }
  });
  return {g_means, g_quats, g_weights, g_node_quats, g_node_trans};
}

// Exact k-NN by blocked brute force: a tile of reference points stays in L1 while a block of
// queries scans it, and each query keeps its k best in a sorted array (insertion is rare once
// the array is full, so the scan is a vectorisable distance loop plus one compare). Memory is
// O(P k) for the outputs plus O(M) for a transposed copy of the references: never P x M.
// Ties are broken towards the smaller reference index.
template <typename T>
void knn_block(const T* query, const T* rx, const T* ry, const T* rz, int64_t M, int64_t k, int64_t qbegin,
               int64_t qend, int32_t* out_i, T* out_d) {
  constexpr int64_t kRefTile = 512;
  T dist[kRefTile];
  for (int64_t p = qbegin; p < qend; ++p) {
    T* bd = out_d + p * k;
    int32_t* bi = out_i + p * k;
    std::fill(bd, bd + k, std::numeric_limits<T>::infinity());
    std::fill(bi, bi + k, int32_t(-1));
  }
  for (int64_t r0 = 0; r0 < M; r0 += kRefTile) {
    const int64_t rn = std::min(kRefTile, M - r0);
    for (int64_t p = qbegin; p < qend; ++p) {
      const T qx = query[3 * p], qy = query[3 * p + 1], qz = query[3 * p + 2];
      for (int64_t r = 0; r < rn; ++r) {
        const T dx = qx - rx[r0 + r], dy = qy - ry[r0 + r], dz = qz - rz[r0 + r];
        dist[r] = dx * dx + dy * dy + dz * dz;
      }
      T* bd = out_d + p * k;
      int32_t* bi = out_i + p * k;
      T worst = bd[k - 1];
      for (int64_t r = 0; r < rn; ++r) {
        const T d = dist[r];
        if (d < worst) {
          int64_t pos = k - 1;
          while (pos > 0 && bd[pos - 1] > d) {
            bd[pos] = bd[pos - 1];
            bi[pos] = bi[pos - 1];
            --pos;
          }
          bd[pos] = d;
          bi[pos] = int32_t(r0 + r);
          worst = bd[k - 1];
        }
      }
    }
  }
}

std::vector<at::Tensor> knn(const at::Tensor& query, const at::Tensor& ref, int64_t k) {
  TORCH_CHECK(query.is_contiguous() && ref.is_contiguous() && query.device().is_cpu() && ref.device().is_cpu(),
              "scaffold_cpu.knn: inputs must be contiguous CPU tensors");
  TORCH_CHECK(k >= 1 && k <= ref.size(0), "scaffold_cpu.knn: need 1 <= k <= number of reference points");
  const int64_t P = query.size(0), M = ref.size(0);
  auto idx = at::empty({P, k}, query.options().dtype(at::kInt));
  auto dist2 = at::empty({P, k}, query.options());
  const auto ref_t = ref.t().contiguous();  // [3, M]: unit-stride loads in the distance loop
  AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "knn_cpu", [&] {
    const scalar_t* q = query.data_ptr<scalar_t>();
    const scalar_t* r = ref_t.data_ptr<scalar_t>();
    int32_t* oi = idx.data_ptr<int32_t>();
    scalar_t* od = dist2.data_ptr<scalar_t>();
    at::parallel_for(0, P, 64, [&](int64_t begin, int64_t end) {
      constexpr int64_t kQueryBlock = 64;
      for (int64_t b = begin; b < end; b += kQueryBlock) {
        knn_block<scalar_t>(q, r, r + M, r + 2 * M, M, k, b, std::min(end, b + kQueryBlock), oi, od);
      }
    });
  });
  return {idx, dist2};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "recon4d motion-scaffold kernels (CPU): fused DQB/LBS skinning and exact k-NN";
  m.def("skin_forward", &skin_forward, "skinning forward: (means[T,N,3], quats[T,N,4])");
  m.def("skin_backward", &skin_backward, "skinning backward: grads for means, quats, weights, node quats, node trans");
  m.def("knn", &knn, "exact k nearest neighbours: (idx[P,k] int32, dist2[P,k])");
}

// CPU kernels for the motion scaffold: fused skinning (DQB / LBS) forward + backward, and exact k-NN.
//
// Why fused: the PyTorch twin gathers every Gaussian's K node transforms into N x K x 4/3/8
// tensors and autograd keeps them alive for the backward pass; here each Gaussian's blend
// is computed in registers and recomputed in the backward pass, so memory is just inputs,
// outputs and gradients. Node quaternions arrive raw and are normalised here.
// Shapes are validated in Python (cuda_ext/skin.py, cuda_ext/knn.py), data by
// check_skin_inputs; the TORCH_CHECKs only guard the binding against misuse.
#include <torch/extension.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "../scaffold_math.h"
#include "../skin_binding.h"

namespace {

void check_skin_args(const at::Tensor& canon_means, const at::Tensor& canon_quats, const at::Tensor& node_ids,
                     const at::Tensor& weights, const at::Tensor& node_quats, const at::Tensor& node_trans) {
  for (const auto* t : {&canon_means, &canon_quats, &node_ids, &weights, &node_quats, &node_trans}) {
    TORCH_CHECK(t->is_contiguous() && t->device().is_cpu(), "scaffold_cpu: inputs must be contiguous CPU tensors");
  }
  TORCH_CHECK(node_ids.scalar_type() == at::kInt, "scaffold_cpu: node_ids must be int32");
  TORCH_CHECK(node_quats.dim() == 3 && node_trans.dim() == 3, "scaffold_cpu: node tensors must be [T, M, C]");
}

// Failure codes of check_skin_inputs, in the order cuda_ext/skin.py lists their messages.
enum SkinInputFailure : int {
  kMeansNotFinite = 1, kQuatsNotFinite, kWeightsNotFinite, kNodeQuatsNotFinite, kNodeTransNotFinite,
  kNodeIdOutOfRange, kWeightsSumToZero, kNodeQuatZeroNorm
};

// Every data check skin() needs, in one parallel pass over the Gaussians and one serial pass
// over the nodes: on a busy 2-core machine each extra torch op is another OpenMP barrier, and a
// dozen of them cost more than the kernel. Returns 0 or the smallest failing SkinInputFailure.
int64_t check_skin_inputs(const at::Tensor& canon_means, const at::Tensor& canon_quats, const at::Tensor& node_ids,
                          const at::Tensor& weights, const at::Tensor& node_quats, const at::Tensor& node_trans) {
  for (const auto* t : {&canon_means, &canon_quats, &node_ids, &weights, &node_quats, &node_trans}) {
    TORCH_CHECK(t->is_contiguous() && t->device().is_cpu(), "scaffold_cpu: inputs must be contiguous CPU tensors");
  }
  const int64_t N = canon_means.size(0), K = weights.size(1), M = node_quats.size(-2);
  const int64_t nodes = node_quats.numel() / 4;
  std::atomic<int> failed{0};
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "check_skin_inputs", [&] {
    AT_DISPATCH_INDEX_TYPES(node_ids.scalar_type(), "check_skin_inputs_ids", [&] {
      const scalar_t *x = canon_means.data_ptr<scalar_t>(), *qc = canon_quats.data_ptr<scalar_t>(),
                     *w = weights.data_ptr<scalar_t>(), *nq = node_quats.data_ptr<scalar_t>(),
                     *nt = node_trans.data_ptr<scalar_t>();
      const index_t* ids = node_ids.data_ptr<index_t>();
      const auto bit = [](int code) { return 1 << code; };
      at::parallel_for(0, N, 4096, [&](int64_t begin, int64_t end) {
        int f = 0;
        for (int64_t i = begin; i < end; ++i) {
          for (int c = 0; c < 3; ++c) f |= std::isfinite(x[3 * i + c]) ? 0 : bit(kMeansNotFinite);
          for (int c = 0; c < 4; ++c) f |= std::isfinite(qc[4 * i + c]) ? 0 : bit(kQuatsNotFinite);
          scalar_t sum = 0, abs_sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            const scalar_t wk = w[K * i + k];
            f |= std::isfinite(wk) ? 0 : bit(kWeightsNotFinite);
            sum += wk;
            abs_sum += std::abs(wk);
            const index_t j = ids[K * i + k];
            f |= (j >= 0 && j < M) ? 0 : bit(kNodeIdOutOfRange);
          }
          f |= std::abs(sum) > abs_sum * std::numeric_limits<scalar_t>::epsilon() ? 0 : bit(kWeightsSumToZero);
        }
        failed.fetch_or(f);
      });
      int f = 0;
      for (int64_t j = 0; j < nodes; ++j) {
        scalar_t norm2 = 0;
        for (int c = 0; c < 4; ++c) {
          f |= std::isfinite(nq[4 * j + c]) ? 0 : bit(kNodeQuatsNotFinite);
          norm2 += nq[4 * j + c] * nq[4 * j + c];
        }
        for (int c = 0; c < 3; ++c) f |= std::isfinite(nt[3 * j + c]) ? 0 : bit(kNodeTransNotFinite);
        f |= std::sqrt(norm2) > r4d::norm_floor<scalar_t>() ? 0 : bit(kNodeQuatZeroNorm);
      }
      failed.fetch_or(f);
    });
  });
  const int f = failed.load();
  for (int code = kMeansNotFinite; code <= kNodeQuatZeroNorm; ++code)
    if (f & (1 << code)) return code;
  return 0;
}

// Node quaternions are normalised here rather than in Python (one serial pass over T x M nodes
// instead of several torch ops); norms are kept to project the gradient in the backward pass.
template <typename T>
void normalise_nodes(const T* q, int64_t nodes, T* unit, T* norm) {
  for (int64_t j = 0; j < nodes; ++j) {
    const T n = std::max(std::sqrt(q[4 * j] * q[4 * j] + q[4 * j + 1] * q[4 * j + 1] + q[4 * j + 2] * q[4 * j + 2] +
                                   q[4 * j + 3] * q[4 * j + 3]),
                         r4d::norm_floor<T>());
    for (int c = 0; c < 4; ++c) unit[4 * j + c] = q[4 * j + c] / n;
    norm[j] = n;
  }
}

std::vector<at::Tensor> skin_forward(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                     const at::Tensor& node_ids, const at::Tensor& weights,
                                     const at::Tensor& node_quats, const at::Tensor& node_trans, bool dqb) {
  check_skin_args(canon_means, canon_quats, node_ids, weights, node_quats, node_trans);
  const int64_t N = canon_means.size(0), K = node_ids.size(1), T = node_quats.size(0), M = node_quats.size(1);
  auto means = at::empty({T, N, 3}, canon_means.options());
  auto quats = at::empty({T, N, 4}, canon_means.options());
  auto unit = at::empty_like(node_quats);
  auto norm = at::empty({T, M}, node_quats.options());
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "skin_forward_cpu", [&] {
    normalise_nodes(node_quats.data_ptr<scalar_t>(), T * M, unit.data_ptr<scalar_t>(), norm.data_ptr<scalar_t>());
    const scalar_t *x = canon_means.data_ptr<scalar_t>(), *qc = canon_quats.data_ptr<scalar_t>(),
                   *w = weights.data_ptr<scalar_t>(), *nq = unit.data_ptr<scalar_t>(),
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

// Node gradients of one thread's slice of Gaussians, added into that thread's private [M, 7]
// buffer (no atomics, and a fixed reduction order, so the CPU backward is deterministic).
template <typename T>
struct BufferSink {
  T* g;  // [M, 7]: quaternion (4) then translation (3)
  void operator()(int64_t j, const r4d::Q<T>& q, const r4d::V<T>& t) {
    T* a = g + 7 * j;
    a[0] += q.w; a[1] += q.x; a[2] += q.y; a[3] += q.z;
    a[4] += t.x; a[5] += t.y; a[6] += t.z;
  }
};

std::vector<at::Tensor> skin_backward(const at::Tensor& canon_means, const at::Tensor& canon_quats,
                                      const at::Tensor& node_ids, const at::Tensor& weights,
                                      const at::Tensor& node_quats, const at::Tensor& node_trans,
                                      const at::Tensor& grad_means, const at::Tensor& grad_quats, bool dqb) {
  check_skin_args(canon_means, canon_quats, node_ids, weights, node_quats, node_trans);
  TORCH_CHECK(grad_means.is_contiguous() && grad_quats.is_contiguous(), "scaffold_cpu: grads must be contiguous");
  const int64_t N = canon_means.size(0), K = node_ids.size(1), T = node_quats.size(0), M = node_quats.size(1);
  auto [g_means, g_quats, g_weights, g_node_quats, g_node_trans] =
      r4d::skin_grads_like(canon_means, canon_quats, weights, node_quats, node_trans, /*zero_nodes=*/false);
  auto unit = at::empty_like(node_quats);
  auto norm = at::empty({T, M}, node_quats.options());
  // One contiguous slice of Gaussians per thread, each with its own [M, 7] node-gradient buffer.
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), (N + 1023) / 1024));
  auto buffers = at::empty({chunks, M, 7}, canon_means.options());
  AT_DISPATCH_FLOATING_TYPES(canon_means.scalar_type(), "skin_backward_cpu", [&] {
    normalise_nodes(node_quats.data_ptr<scalar_t>(), T * M, unit.data_ptr<scalar_t>(), norm.data_ptr<scalar_t>());
    const scalar_t *x = canon_means.data_ptr<scalar_t>(), *qc = canon_quats.data_ptr<scalar_t>(),
                   *w = weights.data_ptr<scalar_t>(), *nq = unit.data_ptr<scalar_t>(),
                   *nt = node_trans.data_ptr<scalar_t>(), *gm = grad_means.data_ptr<scalar_t>(),
                   *gq = grad_quats.data_ptr<scalar_t>(), *nn = norm.data_ptr<scalar_t>();
    const int32_t* ids = node_ids.data_ptr<int32_t>();
    scalar_t *gx = g_means.data_ptr<scalar_t>(), *gqc = g_quats.data_ptr<scalar_t>(),
             *gw = g_weights.data_ptr<scalar_t>(), *buf = buffers.data_ptr<scalar_t>(),
             *gnq = g_node_quats.data_ptr<scalar_t>(), *gnt = g_node_trans.data_ptr<scalar_t>();
    for (int64_t t = 0; t < T; ++t) {
      at::parallel_for(0, chunks, 1, [&](int64_t cbegin, int64_t cend) {
        for (int64_t c = cbegin; c < cend; ++c) {
          BufferSink<scalar_t> sink{buf + 7 * M * c};
          std::fill(sink.g, sink.g + 7 * M, scalar_t(0));
          const int64_t begin = N * c / chunks, end = N * (c + 1) / chunks;
          if (t == 0) {  // zeroed by the thread that owns the slice: no separate fill pass
            std::fill(gx + 3 * begin, gx + 3 * end, scalar_t(0));
            std::fill(gqc + 4 * begin, gqc + 4 * end, scalar_t(0));
            std::fill(gw + K * begin, gw + K * end, scalar_t(0));
          }
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
      // Sum the thread buffers in a fixed order; project the quaternion gradient through the
      // normalisation q -> q / |q|:  g_q = (g_u - u (u . g_u)) / |q|.
      for (int64_t j = 0; j < M; ++j) {
        scalar_t g[7] = {0, 0, 0, 0, 0, 0, 0};
        for (int64_t c = 0; c < chunks; ++c)
          for (int e = 0; e < 7; ++e) g[e] += buf[7 * (M * c + j) + e];
        const scalar_t* u = nq + 4 * (M * t + j);
        const scalar_t ug = u[0] * g[0] + u[1] * g[1] + u[2] * g[2] + u[3] * g[3];
        const scalar_t inv = scalar_t(1) / nn[M * t + j];
        for (int c = 0; c < 4; ++c) gnq[4 * (M * t + j) + c] = (g[c] - u[c] * ug) * inv;
        for (int c = 0; c < 3; ++c) gnt[3 * (M * t + j) + c] = g[4 + c];
      }
    }
  });
  return {g_means, g_quats, g_weights, g_node_quats, g_node_trans};
}

// Exact k-NN on a uniform grid over the reference points (about two per cell). Each query
// visits cells in shells of growing Chebyshev radius around its own (clamped) cell and stops
// once its k-th best distance is below the distance to everything not yet visited, so a
// typical query looks at tens of points instead of all M. Memory is O(M) for the grid plus
// the O(P k) outputs, never P x M. Candidates are ordered by (distance, index), so the result
// is the same as a brute-force scan that prefers the smaller index on ties.
template <typename T>
struct RefGrid {
  double lo[3];
  double h;
  int64_t dims[3];
  std::vector<int64_t> start;  // cell -> first point in the sorted arrays; size cells + 1
  std::vector<T> xyz;          // points sorted by cell, [M, 3]
  std::vector<int32_t> id;     // their original indices

  int64_t axis_cell(int a, double v) const {
    const double c = std::floor((v - lo[a]) / h);
    return static_cast<int64_t>(std::min<double>(std::max<double>(c, 0.0), double(dims[a] - 1)));
  }

  RefGrid(const T* ref, int64_t M) {
    double hi[3];
    for (int a = 0; a < 3; ++a) lo[a] = hi[a] = double(ref[a]);
    for (int64_t j = 1; j < M; ++j)
      for (int a = 0; a < 3; ++a) {
        lo[a] = std::min(lo[a], double(ref[3 * j + a]));
        hi[a] = std::max(hi[a], double(ref[3 * j + a]));
      }
    const double extent = std::max({hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]});
    const double per_axis = std::max(1.0, std::cbrt(double(M) / 2.0));
    h = extent > 0 ? extent / per_axis : 1.0;
    for (int a = 0; a < 3; ++a) dims[a] = static_cast<int64_t>((hi[a] - lo[a]) / h) + 1;
    const int64_t cells = dims[0] * dims[1] * dims[2];
    std::vector<int64_t> cell_of(M);
    start.assign(cells + 1, 0);
    for (int64_t j = 0; j < M; ++j) {
      cell_of[j] = (axis_cell(0, ref[3 * j]) * dims[1] + axis_cell(1, ref[3 * j + 1])) * dims[2] +
                   axis_cell(2, ref[3 * j + 2]);
      ++start[cell_of[j] + 1];
    }
    for (int64_t c = 0; c < cells; ++c) start[c + 1] += start[c];
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    xyz.resize(3 * M);
    id.resize(M);
    for (int64_t j = 0; j < M; ++j) {  // increasing j: indices ascend within each cell
      const int64_t at = fill[cell_of[j]]++;
      for (int a = 0; a < 3; ++a) xyz[3 * at + a] = ref[3 * j + a];
      id[at] = int32_t(j);
    }
  }
};

template <typename T>
struct Best {  // the k best (distance, index) pairs of one query, sorted ascending
  T* d;
  int32_t* i;
  int64_t k;
  void offer(T dist, int32_t idx) {
    if (dist > d[k - 1] || (dist == d[k - 1] && idx >= i[k - 1])) return;
    int64_t pos = k - 1;
    while (pos > 0 && (d[pos - 1] > dist || (d[pos - 1] == dist && i[pos - 1] > idx))) {
      d[pos] = d[pos - 1];
      i[pos] = i[pos - 1];
      --pos;
    }
    d[pos] = dist;
    i[pos] = idx;
  }
};

template <typename T>
void knn_query(const RefGrid<T>& g, const T* q, Best<T>& best) {
  std::fill(best.d, best.d + best.k, std::numeric_limits<T>::infinity());
  std::fill(best.i, best.i + best.k, std::numeric_limits<int32_t>::max());
  int64_t c[3];
  for (int a = 0; a < 3; ++a) c[a] = g.axis_cell(a, double(q[a]));
  const auto scan = [&](int64_t x, int64_t y, int64_t z) {
    const int64_t cell = (x * g.dims[1] + y) * g.dims[2] + z;
    for (int64_t p = g.start[cell]; p < g.start[cell + 1]; ++p) {
      const T dx = q[0] - g.xyz[3 * p], dy = q[1] - g.xyz[3 * p + 1], dz = q[2] - g.xyz[3 * p + 2];
      best.offer(dx * dx + dy * dy + dz * dz, g.id[p]);
    }
  };
  for (int64_t r = 0;; ++r) {
    // Cells at Chebyshev distance exactly r: full z-rows on the x/y rim, two z-caps inside it.
    const int64_t x0 = std::max<int64_t>(c[0] - r, 0), x1 = std::min(c[0] + r, g.dims[0] - 1);
    const int64_t y0 = std::max<int64_t>(c[1] - r, 0), y1 = std::min(c[1] + r, g.dims[1] - 1);
    const int64_t z0 = std::max<int64_t>(c[2] - r, 0), z1 = std::min(c[2] + r, g.dims[2] - 1);
    for (int64_t x = x0; x <= x1; ++x)
      for (int64_t y = y0; y <= y1; ++y) {
        if (std::abs(x - c[0]) == r || std::abs(y - c[1]) == r) {
          for (int64_t z = z0; z <= z1; ++z) scan(x, y, z);
        } else {
          if (c[2] - r >= 0) scan(x, y, c[2] - r);
          if (r > 0 && c[2] + r < g.dims[2]) scan(x, y, c[2] + r);
        }
      }
    // Lower bound on the distance to any unvisited cell: the nearest face of the visited box
    // that still has grid cells beyond it.
    double bound = std::numeric_limits<double>::infinity();
    for (int a = 0; a < 3; ++a) {
      if (c[a] - r > 0) bound = std::min(bound, double(q[a]) - (g.lo[a] + double(c[a] - r) * g.h));
      if (c[a] + r < g.dims[a] - 1) bound = std::min(bound, g.lo[a] + double(c[a] + r + 1) * g.h - double(q[a]));
    }
    if (bound == std::numeric_limits<double>::infinity()) return;  // the whole grid is visited
    bound = std::max(bound, 0.0);
    // The margin covers rounding in the float distances and in the cell assignment.
    if (double(best.d[best.k - 1]) < bound * bound * (1.0 - 1e-5)) return;
  }
}

std::vector<at::Tensor> knn(const at::Tensor& query, const at::Tensor& ref, int64_t k) {
  TORCH_CHECK(query.is_contiguous() && ref.is_contiguous() && query.device().is_cpu() && ref.device().is_cpu(),
              "scaffold_cpu.knn: inputs must be contiguous CPU tensors");
  TORCH_CHECK(k >= 1 && k <= ref.size(0), "scaffold_cpu.knn: need 1 <= k <= number of reference points");
  const int64_t P = query.size(0), M = ref.size(0);
  auto idx = at::empty({P, k}, query.options().dtype(at::kInt));
  auto dist2 = at::empty({P, k}, query.options());
  AT_DISPATCH_FLOATING_TYPES(query.scalar_type(), "knn_cpu", [&] {
    const RefGrid<scalar_t> grid(ref.data_ptr<scalar_t>(), M);
    const scalar_t* q = query.data_ptr<scalar_t>();
    int32_t* oi = idx.data_ptr<int32_t>();
    scalar_t* od = dist2.data_ptr<scalar_t>();
    at::parallel_for(0, P, 256, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        Best<scalar_t> best{od + p * k, oi + p * k, k};
        knn_query(grid, q + 3 * p, best);
      }
    });
  });
  return {idx, dist2};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "recon4d motion-scaffold kernels (CPU): fused DQB/LBS skinning and exact k-NN";
  m.def("check_skin_inputs", &check_skin_inputs, "0, or the first failing data check of skin()'s inputs");
  m.def("skin_forward", &skin_forward, "skinning forward: (means[T,N,3], quats[T,N,4])");
  m.def("skin_backward", &skin_backward, "skinning backward: grads for means, quats, weights, node quats, node trans");
  m.def("knn", &knn, "exact k nearest neighbours: (idx[P,k] int32, dist2[P,k])");
}

// CUDA kernels for the motion scaffold: fused skinning forward/backward and exact k-NN.
//
// Skinning: one thread per Gaussian, looping over frames, so per-Gaussian gradients stay in
// registers and are written once; node gradients (many Gaussians per node) use atomicAdd.
// The per-Gaussian math is shared with the CPU kernel through scaffold_math.h.
// k-NN: one thread per query, reference points streamed through shared memory in tiles, each
// thread keeping its k best in a sorted local array (ties go to the smaller index).
#include <cuda_runtime.h>

#include "../scaffold_math.h"
#include "scaffold_launch.h"

namespace r4d {
namespace {

constexpr int kThreads = 256;

inline unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <typename T, bool DQB>
__global__ void skin_forward_kernel(const T* x, const T* qc, const int32_t* ids, const T* w, int64_t N, int K,
                                    int64_t T_frames, int64_t M, const T* nq, const T* nt, T* om, T* oq) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N) return;
  for (int64_t t = 0; t < T_frames; ++t) {
    const int64_t o = t * N + i;
    skin_forward_one<T, DQB>(x + 3 * i, qc + 4 * i, ids + K * i, w + K * i, K, nq + 4 * M * t, nt + 3 * M * t,
                             om + 3 * o, oq + 4 * o);
  }
}

template <typename T>
struct AtomicSink {
  T* gq;
  T* gt;
  __device__ void operator()(int64_t j, const Q<T>& q, const V<T>& t) {
    atomicAdd(gq + 4 * j, q.w);
    atomicAdd(gq + 4 * j + 1, q.x);
    atomicAdd(gq + 4 * j + 2, q.y);
    atomicAdd(gq + 4 * j + 3, q.z);
    atomicAdd(gt + 3 * j, t.x);
    atomicAdd(gt + 3 * j + 1, t.y);
    atomicAdd(gt + 3 * j + 2, t.z);
  }
};

template <typename T, bool DQB>
__global__ void skin_backward_kernel(const T* x, const T* qc, const int32_t* ids, const T* w, int64_t N, int K,
                                     int64_t T_frames, int64_t M, const T* nq, const T* nt, const T* gm,
                                     const T* gq, T* gx, T* gqc, T* gw, T* gnq, T* gnt) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N) return;
  T gx_i[3] = {T(0), T(0), T(0)};
  T gqc_i[4] = {T(0), T(0), T(0), T(0)};
  for (int k = 0; k < K; ++k) gw[K * i + k] = T(0);
  for (int64_t t = 0; t < T_frames; ++t) {
    const int64_t o = t * N + i;
    AtomicSink<T> sink{gnq + 4 * M * t, gnt + 3 * M * t};
    skin_backward_one<T, DQB>(x + 3 * i, qc + 4 * i, ids + K * i, w + K * i, K, nq + 4 * M * t, nt + 3 * M * t,
                              gm + 3 * o, gq + 4 * o, gx_i, gqc_i, gw + K * i, sink);
  }
  for (int c = 0; c < 3; ++c) gx[3 * i + c] = gx_i[c];
  for (int c = 0; c < 4; ++c) gqc[4 * i + c] = gqc_i[c];
}

template <typename T>
__global__ void knn_kernel(const T* query, const T* ref, int64_t P, int64_t M, int k, int32_t* oi, T* od) {
  __shared__ T tile[kThreads * 3];
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const bool active = p < P;
  T qx = T(0), qy = T(0), qz = T(0);
  if (active) {
    qx = query[3 * p];
    qy = query[3 * p + 1];
    qz = query[3 * p + 2];
  }
  T bd[kKnnMaxK];
  int32_t bi[kKnnMaxK];
  for (int c = 0; c < k; ++c) {
    bd[c] = INFINITY;
    bi[c] = -1;
  }
  for (int64_t r0 = 0; r0 < M; r0 += kThreads) {
    const int rn = static_cast<int>(M - r0 < kThreads ? M - r0 : kThreads);
    __syncthreads();
    for (int c = threadIdx.x; c < 3 * rn; c += blockDim.x) tile[c] = ref[3 * r0 + c];
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < rn; ++r) {
      const T dx = qx - tile[3 * r], dy = qy - tile[3 * r + 1], dz = qz - tile[3 * r + 2];
      const T d = dx * dx + dy * dy + dz * dz;
      if (d < bd[k - 1]) {
        int pos = k - 1;
        while (pos > 0 && bd[pos - 1] > d) {
          bd[pos] = bd[pos - 1];
          bi[pos] = bi[pos - 1];
          --pos;
        }
        bd[pos] = d;
        bi[pos] = static_cast<int32_t>(r0 + r);
      }
    }
  }
  if (!active) return;
  for (int c = 0; c < k; ++c) {
    oi[p * k + c] = bi[c];
    od[p * k + c] = bd[c];
  }
}

}  // namespace

template <typename T>
cudaError_t launch_skin_forward(const T* canon_means, const T* canon_quats, const int32_t* node_ids,
                                const T* weights, const T* node_quats, const T* node_trans, int64_t N, int K,
                                int64_t T_frames, int64_t M, bool dqb, T* out_means, T* out_quats,
                                cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  if (dqb) {
    skin_forward_kernel<T, true><<<blocks_for(N), kThreads, 0, stream>>>(
        canon_means, canon_quats, node_ids, weights, N, K, T_frames, M, node_quats, node_trans, out_means, out_quats);
  } else {
    skin_forward_kernel<T, false><<<blocks_for(N), kThreads, 0, stream>>>(
        canon_means, canon_quats, node_ids, weights, N, K, T_frames, M, node_quats, node_trans, out_means, out_quats);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_skin_backward(const T* canon_means, const T* canon_quats, const int32_t* node_ids,
                                 const T* weights, const T* node_quats, const T* node_trans, const T* grad_means,
                                 const T* grad_quats, int64_t N, int K, int64_t T_frames, int64_t M, bool dqb,
                                 T* g_means, T* g_quats, T* g_weights, T* g_node_quats, T* g_node_trans,
                                 cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  if (dqb) {
    skin_backward_kernel<T, true><<<blocks_for(N), kThreads, 0, stream>>>(
        canon_means, canon_quats, node_ids, weights, N, K, T_frames, M, node_quats, node_trans, grad_means,
        grad_quats, g_means, g_quats, g_weights, g_node_quats, g_node_trans);
  } else {
    skin_backward_kernel<T, false><<<blocks_for(N), kThreads, 0, stream>>>(
        canon_means, canon_quats, node_ids, weights, N, K, T_frames, M, node_quats, node_trans, grad_means,
        grad_quats, g_means, g_quats, g_weights, g_node_quats, g_node_trans);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_knn(const T* query, const T* ref, int64_t P, int64_t M, int k, int32_t* out_idx, T* out_dist2,
                       cudaStream_t stream) {
  if (P == 0) return cudaSuccess;
  if (k < 1 || k > kKnnMaxK) return cudaErrorInvalidValue;
  knn_kernel<T><<<blocks_for(P), kThreads, 0, stream>>>(query, ref, P, M, k, out_idx, out_dist2);
  return cudaGetLastError();
}

#define R4D_INSTANTIATE(T)                                                                                      \
  template cudaError_t launch_skin_forward<T>(const T*, const T*, const int32_t*, const T*, const T*, const T*, \
                                              int64_t, int, int64_t, int64_t, bool, T*, T*, cudaStream_t);      \
  template cudaError_t launch_skin_backward<T>(const T*, const T*, const int32_t*, const T*, const T*,          \
                                               const T*, const T*, const T*, int64_t, int, int64_t, int64_t,    \
                                               bool, T*, T*, T*, T*, T*, cudaStream_t);                         \
  template cudaError_t launch_knn<T>(const T*, const T*, int64_t, int64_t, int, int32_t*, T*, cudaStream_t);

R4D_INSTANTIATE(float)
R4D_INSTANTIATE(double)

}  // namespace r4d

// Host-side launchers for the scaffold CUDA kernels (defined in scaffold.cu).
//
// Why plain pointers: this header is the only thing scaffold.cu and the bindings share, so
// nvcc compiles the kernels without parsing torch's headers (the slow part of a build),
// and the torch-facing code lives in one g++ translation unit (scaffold_bindings.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace r4d {

// Largest k the CUDA k-NN keeps in per-thread arrays; larger k falls back to the PyTorch twin.
constexpr int kKnnMaxK = 64;

template <typename T>
cudaError_t launch_skin_forward(const T* canon_means, const T* canon_quats, const int32_t* node_ids,
                                const T* weights, const T* node_quats, const T* node_trans, int64_t N, int K,
                                int64_t T_frames, int64_t M, bool dqb, T* out_means, T* out_quats,
                                cudaStream_t stream);

// Gradient outputs g_means/g_quats/g_weights are overwritten; g_node_quats/g_node_trans must be
// zero on entry (they are accumulated with atomics).
template <typename T>
cudaError_t launch_skin_backward(const T* canon_means, const T* canon_quats, const int32_t* node_ids,
                                 const T* weights, const T* node_quats, const T* node_trans, const T* grad_means,
                                 const T* grad_quats, int64_t N, int K, int64_t T_frames, int64_t M, bool dqb,
                                 T* g_means, T* g_quats, T* g_weights, T* g_node_quats, T* g_node_trans,
                                 cudaStream_t stream);

template <typename T>
cudaError_t launch_knn(const T* query, const T* ref, int64_t P, int64_t M, int k, int32_t* out_idx, T* out_dist2,
                       cudaStream_t stream);

}  // namespace r4d

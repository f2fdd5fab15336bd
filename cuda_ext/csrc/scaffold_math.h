// Per-Gaussian skinning math shared by the CPU (g++/OpenMP) and CUDA (nvcc) kernels.
//
// Why a header without torch includes: the same forward/backward formulas run on both
// devices, so they are written once here, and nvcc never has to parse torch's headers
// (that parse is what makes CUDA extension builds slow).
//
// Conventions (see cuda_ext/skin.py for the user-facing description):
//   quaternions are (w, x, y, z); node quaternions arrive already normalised;
//   a Gaussian i has K node ids j_k and weights w_k;
//   pivot p = argmax_k w_k (first on ties); s_k = +1 if <q_p, q_k> >= 0 else -1;
//   b0 = sum_k w_k s_k q_k,  n = max(|b0|, 1e-12),  c0 = b0 / n;
//   out quat = c0 (x) canon_quat;
//   DQB: be = sum_k w_k s_k e_k with e_k = 0.5 (0, t_k) (x) q_k,  ce = be / n,
//        out mean = R(c0) x + 2 vec(ce (x) conj(c0));
//   LBS: out mean = sum_k w_k (R(q_k) x + t_k) / sum_k w_k.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define R4D_HD __host__ __device__ __forceinline__
#else
#define R4D_HD inline
#endif

namespace r4d {

template <typename T>
struct Q {
  T w, x, y, z;
};

template <typename T>
struct V {
  T x, y, z;
};

template <typename T>
R4D_HD Q<T> qload(const T* p) { return {p[0], p[1], p[2], p[3]}; }
template <typename T>
R4D_HD V<T> vload(const T* p) { return {p[0], p[1], p[2]}; }

template <typename T>
R4D_HD Q<T> qmul(const Q<T>& a, const Q<T>& b) {
  return {a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z,
          a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
          a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
          a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w};
}
template <typename T>
R4D_HD Q<T> qconj(const Q<T>& a) { return {a.w, -a.x, -a.y, -a.z}; }
template <typename T>
R4D_HD T qdot(const Q<T>& a, const Q<T>& b) { return a.w * b.w + a.x * b.x + a.y * b.y + a.z * b.z; }
template <typename T>
R4D_HD Q<T> qscale(const Q<T>& a, T s) { return {a.w * s, a.x * s, a.y * s, a.z * s}; }
template <typename T>
R4D_HD void qaxpy(Q<T>& acc, T s, const Q<T>& a) {
  acc.w += s * a.w; acc.x += s * a.x; acc.y += s * a.y; acc.z += s * a.z;
}
template <typename T>
R4D_HD T vdot(const V<T>& a, const V<T>& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
template <typename T>
R4D_HD V<T> vcross(const V<T>& a, const V<T>& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}
template <typename T>
R4D_HD void vaxpy(V<T>& acc, T s, const V<T>& a) { acc.x += s * a.x; acc.y += s * a.y; acc.z += s * a.z; }
template <typename T>
R4D_HD V<T> vec(const Q<T>& q) { return {q.x, q.y, q.z}; }

// Rotation of x by q with the homogeneous formula (w^2 - |v|^2) x + 2 (v.x) v + 2 w (v x x).
// It equals R(q) x for unit q; only its derivative along the unit sphere is ever used
// (normalisation sits in front of every quaternion), so the choice of formula is free.
template <typename T>
R4D_HD V<T> rotate(const Q<T>& q, const V<T>& x) {
  const V<T> v{q.x, q.y, q.z};
  const V<T> c = vcross(v, x);
  const T a = q.w * q.w - vdot(v, v), b = T(2) * vdot(v, x), d = T(2) * q.w;
  return {a * x.x + b * v.x + d * c.x, a * x.y + b * v.y + d * c.y, a * x.z + b * v.z + d * c.z};
}

// Vector-Jacobian product of rotate(q, x) with respect to q, for upstream gradient g.
template <typename T>
R4D_HD Q<T> rotate_vjp_q(const Q<T>& q, const V<T>& x, const V<T>& g) {
  const V<T> v{q.x, q.y, q.z};
  const T gx = vdot(g, x), gv = vdot(g, v), vx = vdot(v, x);
  const V<T> xg = vcross(x, g);
  const T two = T(2);
  return {two * q.w * gx + two * vdot(g, vcross(v, x)),
          two * (-gx * v.x + gv * x.x + vx * g.x + q.w * xg.x),
          two * (-gx * v.y + gv * x.y + vx * g.y + q.w * xg.y),
          two * (-gx * v.z + gv * x.z + vx * g.z + q.w * xg.z)};
}

template <typename T>
R4D_HD T norm_floor() { return T(1e-12); }

template <typename T>
R4D_HD T root(T v) {
#ifdef __CUDA_ARCH__
  return sqrt(v);
#else
  return std::sqrt(v);
#endif
}

// Everything a Gaussian's blend needs, recomputed in the backward pass instead of saved:
// keeping N x 8 blend state alive between passes is exactly the memory the twin wastes.
template <typename T>
struct Blend {
  Q<T> qp;      // pivot quaternion (hemisphere reference)
  Q<T> b0, be;  // blended real / dual parts (be only for DQB)
  V<T> m;       // LBS: sum_k w_k y_k (unnormalised)
  T wsum;       // LBS: sum_k w_k
  T n;          // max(|b0|, floor)
};

template <typename T>
R4D_HD int pivot_of(const T* w, int K) {
  int p = 0;
  for (int k = 1; k < K; ++k)
    if (w[k] > w[p]) p = k;
  return p;
}

template <typename T>
R4D_HD T sign_to(const Q<T>& qp, const Q<T>& q) { return qdot(qp, q) >= T(0) ? T(1) : T(-1); }

template <typename T, bool DQB>
R4D_HD Blend<T> blend(const V<T>& x, const int32_t* ids, const T* w, int K, const T* nq, const T* nt) {
  Blend<T> b{};
  b.qp = qload(nq + 4 * static_cast<int64_t>(ids[pivot_of(w, K)]));
  for (int k = 0; k < K; ++k) {
    const int64_t j = ids[k];
    const Q<T> q = qload(nq + 4 * j);
    const V<T> t = vload(nt + 3 * j);
    const T ws = w[k] * sign_to(b.qp, q);
    qaxpy(b.b0, ws, q);
    if (DQB) {
      qaxpy(b.be, ws * T(0.5), qmul(Q<T>{T(0), t.x, t.y, t.z}, q));
    } else {
      V<T> y = rotate(q, x);
      y.x += t.x; y.y += t.y; y.z += t.z;
      vaxpy(b.m, w[k], y);
      b.wsum += w[k];
    }
  }
  const T n = root(qdot(b.b0, b.b0));
  b.n = n > norm_floor<T>() ? n : norm_floor<T>();
  return b;
}

// Forward for one Gaussian at one frame. nq/nt point at that frame's node arrays.
template <typename T, bool DQB>
R4D_HD void skin_forward_one(const T* xp, const T* qcp, const int32_t* ids, const T* w, int K,
                             const T* nq, const T* nt, T* out_m, T* out_q) {
  const V<T> x = vload(xp);
  const Blend<T> b = blend<T, DQB>(x, ids, w, K, nq, nt);
  const Q<T> c0 = qscale(b.b0, T(1) / b.n);
  const Q<T> oq = qmul(c0, qload(qcp));
  out_q[0] = oq.w; out_q[1] = oq.x; out_q[2] = oq.y; out_q[3] = oq.z;
  V<T> m;
  if (DQB) {
    const Q<T> ce = qscale(b.be, T(1) / b.n);
    m = rotate(c0, x);
    vaxpy(m, T(2), vec(qmul(ce, qconj(c0))));
  } else {
    m = {b.m.x / b.wsum, b.m.y / b.wsum, b.m.z / b.wsum};
  }
  out_m[0] = m.x; out_m[1] = m.y; out_m[2] = m.z;
}

// Backward for one Gaussian at one frame. Per-Gaussian gradients are accumulated (+=) into
// gx/gqc/gw (several frames add into them); node gradients go through sink(j, gq, gt), which
// the CPU kernel points at a per-thread buffer and the CUDA kernel at atomicAdd.
template <typename T, bool DQB, typename Sink>
R4D_HD void skin_backward_one(const T* xp, const T* qcp, const int32_t* ids, const T* w, int K,
                              const T* nq, const T* nt, const T* gmp, const T* gqp,
                              T* gx, T* gqc, T* gw, Sink& sink) {
  const V<T> x = vload(xp);
  const Q<T> qc = qload(qcp);
  const V<T> gm = vload(gmp);
  const Q<T> gq = qload(gqp);
  const Blend<T> b = blend<T, DQB>(x, ids, w, K, nq, nt);
  const T inv_n = T(1) / b.n;
  const Q<T> c0 = qscale(b.b0, inv_n);

  // out quat = c0 (x) qc  ->  d/dqc = conj(c0) (x) g,  d/dc0 = g (x) conj(qc)
  const Q<T> gqc_i = qmul(qconj(c0), gq);
  gqc[0] += gqc_i.w; gqc[1] += gqc_i.x; gqc[2] += gqc_i.y; gqc[3] += gqc_i.z;
  Q<T> gc0 = qmul(gq, qconj(qc));

  V<T> gx_i{};
  Q<T> gb0, gbe{};
  T lbs_inv_sum = T(0);
  V<T> lbs_mean{};
  if (DQB) {
    const Q<T> ce = qscale(b.be, inv_n);
    const V<T> v0{c0.x, c0.y, c0.z}, ve{ce.x, ce.y, ce.z};
    // mean = R(c0) x + 2 (w0 ve - we v0 + v0 x ve)
    gx_i = rotate(qconj(c0), gm);
    const Q<T> gr = rotate_vjp_q(c0, x, gm);
    qaxpy(gc0, T(1), gr);
    const V<T> vexg = vcross(ve, gm), gxv0 = vcross(gm, v0);
    gc0.w += T(2) * vdot(gm, ve);
    gc0.x += T(2) * (-ce.w * gm.x + vexg.x);
    gc0.y += T(2) * (-ce.w * gm.y + vexg.y);
    gc0.z += T(2) * (-ce.w * gm.z + vexg.z);
    const Q<T> gce{T(-2) * vdot(gm, v0), T(2) * (c0.w * gm.x + gxv0.x), T(2) * (c0.w * gm.y + gxv0.y),
                   T(2) * (c0.w * gm.z + gxv0.z)};
    gbe = qscale(gce, inv_n);
    // c0 = b0/n and ce = be/n both depend on n = |b0|.
    gb0 = qscale(gc0, inv_n);
    qaxpy(gb0, -(qdot(c0, gc0) + qdot(gce, ce)) * inv_n, c0);
  } else {
    gb0 = qscale(gc0, inv_n);
    qaxpy(gb0, -qdot(c0, gc0) * inv_n, c0);
    lbs_inv_sum = T(1) / b.wsum;
    lbs_mean = {b.m.x * lbs_inv_sum, b.m.y * lbs_inv_sum, b.m.z * lbs_inv_sum};
  }

  for (int k = 0; k < K; ++k) {
    const int64_t j = ids[k];
    const Q<T> q = qload(nq + 4 * j);
    const V<T> t = vload(nt + 3 * j);
    const T s = sign_to(b.qp, q);
    const T ws = w[k] * s;
    Q<T> gq_node = qscale(gb0, ws);
    V<T> gt_node;
    T gw_k = s * qdot(q, gb0);
    if (DQB) {
      // e_k = 0.5 (0,t) (x) q:  d/dq = 0.5 (0,-t) (x) ge,  d/d(0,t) = 0.5 ge (x) conj(q)
      const Q<T> pt{T(0), t.x, t.y, t.z};
      const Q<T> e = qscale(qmul(pt, q), T(0.5));
      gw_k += s * qdot(e, gbe);
      const Q<T> ge = qscale(gbe, ws * T(0.5));
      qaxpy(gq_node, T(1), qmul(qconj(pt), ge));
      gt_node = vec(qmul(ge, qconj(q)));
    } else {
      V<T> y = rotate(q, x);
      y.x += t.x; y.y += t.y; y.z += t.z;
      const V<T> d{y.x - lbs_mean.x, y.y - lbs_mean.y, y.z - lbs_mean.z};
      gw_k += vdot(d, gm) * lbs_inv_sum;
      const T a = w[k] * lbs_inv_sum;
      gt_node = {a * gm.x, a * gm.y, a * gm.z};
      qaxpy(gq_node, T(1), rotate_vjp_q(q, x, gt_node));
      vaxpy(gx_i, T(1), rotate(qconj(q), gt_node));
    }
    gw[k] += gw_k;
    sink(j, gq_node, gt_node);
  }
  gx[0] += gx_i.x; gx[1] += gx_i.y; gx[2] += gx_i.z;
}

}  // namespace r4d

// The EWA projection of 3D Gaussians into pinhole cameras on the CPU, forward and backward
// (recon4d.render.projection: project_gaussians of covariance_3d(quats, scales) is the twin).
//
// Forward: per Gaussian and camera, the same IEEE operations in the same order as the twin, so the
// two project bit for bit alike (a last-bit difference in a conic can flip a pixel across the
// rasterizer's 1/255 alpha cut). That is why the forward is taken from a build without FMA contraction
// (project_cpu): the compiler would fuse a * b + c into one rounding where the twin rounds twice.
// The backward is taken from a -march=native build (project_cpu_native), twice as fast.
// Backward: recomputes the forward's intermediates per Gaussian and camera and applies the chain
// rule by hand: a few hundred flops where autograd makes a hundred passes through [C, N] tensors.
#include <torch/extension.h>

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

template <typename T>
using Vec3 = std::array<T, 3>;
template <typename T>
using Mat3 = std::array<Vec3<T>, 3>;

struct ProjectSettings {
  int64_t width, height;
  double eps2d;
  bool antialiased;
};

template <typename T>
struct Camera {
  Mat3<T> R;
  Vec3<T> t;
  T fx, fy, cx, cy;
  T tan_x, tan_y;
  T lim_xp, lim_xn, lim_yp, lim_yn;  // x/z is clamped to [-lim_xn, lim_xp] for the Jacobian
};

template <typename T>
Camera<T> load_camera(const T* viewmat, const T* K, const ProjectSettings& ps) {
  Camera<T> c;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) c.R[i][j] = viewmat[4 * i + j];
    c.t[i] = viewmat[4 * i + 3];
  }
  c.fx = K[0];
  c.fy = K[4];
  c.cx = K[2];
  c.cy = K[5];
  const T W = static_cast<T>(ps.width), H = static_cast<T>(ps.height), margin = static_cast<T>(0.3);
  // (1 / f) * (size / 2): the twin's `size / 2 / f` with f a tensor, which torch computes as a reciprocal
  c.tan_x = (T(1) / c.fx) * static_cast<T>(0.5 * ps.width);
  c.tan_y = (T(1) / c.fy) * static_cast<T>(0.5 * ps.height);
  c.lim_xp = (W - c.cx) / c.fx + margin * c.tan_x;
  c.lim_xn = c.cx / c.fx + margin * c.tan_x;
  c.lim_yp = (H - c.cy) / c.fy + margin * c.tan_y;
  c.lim_yn = c.cy / c.fy + margin * c.tan_y;
  return c;
}

// A world-space Gaussian: normalised quaternion (w, x, y, z), its rotation R, M = R diag(s) and
// the covariance M M^T.
template <typename T>
struct WorldGaussian {
  Vec3<T> mean, scale;
  std::array<T, 4> q;
  T q_norm;
  Mat3<T> R, M, cov;
};

template <typename T>
T squared_norm(const T* quat) {
  return quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3];
}

// q_norm: |quat|; the forward passes torch's square root of squared_norm (see project_forward_impl).
template <typename T>
WorldGaussian<T> world_gaussian(const T* mean, const T* quat, const T* scale, T q_norm) {
  WorldGaussian<T> g;
  g.q_norm = q_norm;
  const T denom = std::max(g.q_norm, static_cast<T>(1e-12));  // F.normalize's eps
  for (int i = 0; i < 4; ++i) g.q[i] = quat[i] / denom;
  for (int i = 0; i < 3; ++i) g.mean[i] = mean[i], g.scale[i] = scale[i];
  const T w = g.q[0], x = g.q[1], y = g.q[2], z = g.q[3];
  g.R = {{{1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
          {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
          {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g.M[i][j] = g.R[i][j] * g.scale[j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) g.cov[i][j] = g.M[i][0] * g.M[j][0] + g.M[i][1] * g.M[j][1] + g.M[i][2] * g.M[j][2];
  return g;
}

// One Gaussian seen by one camera: camera-space mean and covariance, the perspective Jacobian
// J = [[J00, 0, J02], [0, J11, J12]] and the 2D covariance G = J cov_c J^T (+ eps2d I).
template <typename T>
struct ScreenGaussian {
  Vec3<T> p;
  Mat3<T> cov_c;
  T u, v;    // x/z and y/z before clamping
  T tx, ty;  // the clamped point's x and y
  T J00, J02, J11, J12;
  std::array<Vec3<T>, 2> JS;  // J cov_c
  T g00, g01, g10, g11;       // G with the blur
  T o00, o11;                 // G's diagonal before the blur
  T det_raw, det, det_orig;   // det is det_raw clamped to >= 1e-10
};

template <typename T>
ScreenGaussian<T> screen_gaussian(const Camera<T>& c, const WorldGaussian<T>& g, T eps2d) {
  ScreenGaussian<T> s;
  for (int i = 0; i < 3; ++i) s.p[i] = c.R[i][0] * g.mean[0] + c.R[i][1] * g.mean[1] + c.R[i][2] * g.mean[2] + c.t[i];
  Mat3<T> RC;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k) RC[i][k] = c.R[i][0] * g.cov[0][k] + c.R[i][1] * g.cov[1][k] + c.R[i][2] * g.cov[2][k];
  for (int i = 0; i < 3; ++i)
    for (int l = 0; l < 3; ++l) s.cov_c[i][l] = RC[i][0] * c.R[l][0] + RC[i][1] * c.R[l][1] + RC[i][2] * c.R[l][2];
  const T x = s.p[0], y = s.p[1], z = s.p[2];
  s.u = x / z;
  s.v = y / z;
  s.tx = z * std::min(std::max(s.u, -c.lim_xn), c.lim_xp);
  s.ty = z * std::min(std::max(s.v, -c.lim_yn), c.lim_yp);
  s.J00 = c.fx / z;
  s.J02 = -c.fx * s.tx / (z * z);
  s.J11 = c.fy / z;
  s.J12 = -c.fy * s.ty / (z * z);
  for (int k = 0; k < 3; ++k) {
    s.JS[0][k] = s.J00 * s.cov_c[0][k] + s.J02 * s.cov_c[2][k];
    s.JS[1][k] = s.J11 * s.cov_c[1][k] + s.J12 * s.cov_c[2][k];
  }
  s.o00 = s.JS[0][0] * s.J00 + s.JS[0][2] * s.J02;
  s.g01 = s.JS[0][1] * s.J11 + s.JS[0][2] * s.J12;
  s.g10 = s.JS[1][0] * s.J00 + s.JS[1][2] * s.J02;
  s.o11 = s.JS[1][1] * s.J11 + s.JS[1][2] * s.J12;
  s.det_orig = s.o00 * s.o11 - s.g01 * s.g10;
  s.g00 = s.o00 + eps2d;
  s.g11 = s.o11 + eps2d;
  s.det_raw = s.g00 * s.g11 - s.g01 * s.g10;
  s.det = std::max(s.det_raw, static_cast<T>(1e-10));
  return s;
}

// dL/d(camera) summed over Gaussians, in double (sums over up to millions of terms).
struct CameraGrad {
  double R[3][3] = {}, t[3] = {}, fx = 0, fy = 0, cx = 0, cy = 0;
};

template <typename T>
struct ScreenGrads {  // dL/d(outputs) of one (camera, Gaussian)
  T means2d[2], conics[3], depth, compensation;
  bool any() const {
    return means2d[0] != 0 || means2d[1] != 0 || conics[0] != 0 || conics[1] != 0 || conics[2] != 0 || depth != 0 ||
           compensation != 0;
  }
};

// dL/dG (the blurred 2D covariance, entries 00, 01, 10, 11) from the conic and compensation grads.
template <typename T>
std::array<T, 4> covariance_2d_vjp(const ScreenGaussian<T>& s, const ScreenGrads<T>& v, bool antialiased) {
  const T det = s.det;
  const T c0 = s.g11 / det, c1 = -(s.g01 + s.g10) / 2 / det, c2 = s.g00 / det;
  std::array<T, 4> vg = {v.conics[2] / det, -v.conics[1] / 2 / det, -v.conics[1] / 2 / det, v.conics[0] / det};
  T v_det = -(v.conics[0] * c0 + v.conics[1] * c1 + v.conics[2] * c2) / det;
  const T ratio = s.det_orig / det;
  if (antialiased && ratio > 0) {  // compensation = sqrt(det_orig / det)
    const T v_ratio = v.compensation / (2 * std::sqrt(ratio));
    const T v_det_orig = v_ratio / det;
    v_det -= v_ratio * ratio / det;
    vg[0] += v_det_orig * s.o11;
    vg[1] -= v_det_orig * s.g10;
    vg[2] -= v_det_orig * s.g01;
    vg[3] += v_det_orig * s.o00;
  }
  if (s.det_raw >= static_cast<T>(1e-10)) {  // the clamp passes no gradient below its floor
    vg[0] += v_det * s.g11;
    vg[1] -= v_det * s.g10;
    vg[2] -= v_det * s.g01;
    vg[3] += v_det * s.g00;
  }
  return vg;
}

// Accumulates dL/d(world mean), dL/d(world covariance) and the camera's grads of one pair.
template <typename T>
void screen_gaussian_vjp(const Camera<T>& c, const WorldGaussian<T>& g, const ScreenGaussian<T>& s,
                         const ScreenGrads<T>& v, const ProjectSettings& ps, Vec3<T>& v_mean, Mat3<T>& v_cov,
                         CameraGrad& vc) {
  const std::array<T, 4> vg = covariance_2d_vjp(s, v, ps.antialiased);
  const T x = s.p[0], y = s.p[1], z = s.p[2], z2 = z * z;
  // G = J cov_c J^T: dcov_c = J^T dG J, dJ = (dG + dG^T) J cov_c.
  const T j[2][3] = {{s.J00, 0, s.J02}, {0, s.J11, s.J12}};
  Mat3<T> v_cov_c;
  for (int k = 0; k < 3; ++k)
    for (int l = 0; l < 3; ++l)
      v_cov_c[k][l] = vg[0] * j[0][k] * j[0][l] + vg[1] * j[0][k] * j[1][l] + vg[2] * j[1][k] * j[0][l] +
                      vg[3] * j[1][k] * j[1][l];
  const T h00 = 2 * vg[0], h01 = vg[1] + vg[2], h11 = 2 * vg[3];
  const T vJ00 = h00 * s.JS[0][0] + h01 * s.JS[1][0], vJ02 = h00 * s.JS[0][2] + h01 * s.JS[1][2];
  const T vJ11 = h01 * s.JS[0][1] + h11 * s.JS[1][1], vJ12 = h01 * s.JS[0][2] + h11 * s.JS[1][2];

  Vec3<T> vp = {0, 0, v.depth};
  T v_fx = 0, v_fy = 0, v_cx = 0, v_cy = 0;
  // means2d = (fx x / z + cx, fy y / z + cy)
  v_fx += v.means2d[0] * x / z;
  vp[0] += v.means2d[0] * c.fx / z;
  vp[2] -= v.means2d[0] * c.fx * x / z2;
  v_cx += v.means2d[0];
  v_fy += v.means2d[1] * y / z;
  vp[1] += v.means2d[1] * c.fy / z;
  vp[2] -= v.means2d[1] * c.fy * y / z2;
  v_cy += v.means2d[1];
  // J00 = fx / z, J02 = -fx tx / z^2 (and J11, J12 with fy, ty)
  v_fx += vJ00 / z - vJ02 * s.tx / z2;
  v_fy += vJ11 / z - vJ12 * s.ty / z2;
  vp[2] += -vJ00 * c.fx / z2 + 2 * vJ02 * c.fx * s.tx / (z2 * z) - vJ11 * c.fy / z2 + 2 * vJ12 * c.fy * s.ty / (z2 * z);
  const T v_tx = -vJ02 * c.fx / z2, v_ty = -vJ12 * c.fy / z2;
  // t = z clamp(x / z, -lim_n, lim_p): inside the range t = x; clamped, t follows z and the limit,
  // and the limits depend on the intrinsics: lim_p = (W - c) / f + 0.3 tan, lim_n = c / f + 0.3 tan
  // with tan = W / (2 f).
  auto clamp_vjp = [&](T u, T lim_p, T lim_n, T v_t, T f, T cc, T size, T tan, T& v_pos, T& v_f, T& v_c) {
    if (u > lim_p) {
      vp[2] += v_t * lim_p;
      const T v_lim = v_t * z;
      v_c -= v_lim / f;
      v_f -= v_lim * ((size - cc) / (f * f) + static_cast<T>(0.3) * tan / f);
    } else if (u < -lim_n) {
      vp[2] -= v_t * lim_n;
      const T v_lim = -v_t * z;
      v_c += v_lim / f;
      v_f -= v_lim * (cc / (f * f) + static_cast<T>(0.3) * tan / f);
    } else {
      v_pos += v_t;
    }
  };
  clamp_vjp(s.u, c.lim_xp, c.lim_xn, v_tx, c.fx, c.cx, static_cast<T>(ps.width), c.tan_x, vp[0], v_fx, v_cx);
  clamp_vjp(s.v, c.lim_yp, c.lim_yn, v_ty, c.fy, c.cy, static_cast<T>(ps.height), c.tan_y, vp[1], v_fy, v_cy);

  // p = R mean + t, cov_c = R cov R^T: dcov = R^T dcov_c R, dR += (dcov_c + dcov_c^T) R cov + dp mean^T.
  Mat3<T> RC;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k) RC[i][k] = c.R[i][0] * g.cov[0][k] + c.R[i][1] * g.cov[1][k] + c.R[i][2] * g.cov[2][k];
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      T acc = 0;
      for (int i = 0; i < 3; ++i) acc += (v_cov_c[a][i] + v_cov_c[i][a]) * RC[i][b];
      vc.R[a][b] += acc + vp[a] * g.mean[b];
      T w = 0;
      for (int i = 0; i < 3; ++i)
        for (int l = 0; l < 3; ++l) w += c.R[i][a] * v_cov_c[i][l] * c.R[l][b];
      v_cov[a][b] += w;
    }
    v_mean[a] += c.R[0][a] * vp[0] + c.R[1][a] * vp[1] + c.R[2][a] * vp[2];
    vc.t[a] += vp[a];
  }
  vc.fx += v_fx;
  vc.fy += v_fy;
  vc.cx += v_cx;
  vc.cy += v_cy;
}

// cov = M M^T with M = R(q / |q|) diag(s): grads of the quaternion and the scales.
template <typename T>
void world_gaussian_vjp(const WorldGaussian<T>& g, const Mat3<T>& v_cov, T* v_quat, T* v_scale) {
  Mat3<T> vR;
  for (int j = 0; j < 3; ++j) v_scale[j] = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      T vM = 0;  // ((dcov + dcov^T) M)_ij
      for (int k = 0; k < 3; ++k) vM += (v_cov[i][k] + v_cov[k][i]) * g.M[k][j];
      vR[i][j] = vM * g.scale[j];
      v_scale[j] += vM * g.R[i][j];
    }
  const T w = g.q[0], x = g.q[1], y = g.q[2], z = g.q[3];
  const std::array<T, 4> vq = {
      2 * (-z * vR[0][1] + y * vR[0][2] + z * vR[1][0] - x * vR[1][2] - y * vR[2][0] + x * vR[2][1]),
      2 * (y * vR[0][1] + z * vR[0][2] + y * vR[1][0] - 2 * x * vR[1][1] - w * vR[1][2] + z * vR[2][0] +
           w * vR[2][1] - 2 * x * vR[2][2]),
      2 * (-2 * y * vR[0][0] + x * vR[0][1] + w * vR[0][2] + x * vR[1][0] + z * vR[1][2] - w * vR[2][0] +
           z * vR[2][1] - 2 * y * vR[2][2]),
      2 * (-2 * z * vR[0][0] - w * vR[0][1] + x * vR[0][2] + w * vR[1][0] - 2 * z * vR[1][1] + y * vR[1][2] +
           x * vR[2][0] + y * vR[2][1])};
  // q / |q|: remove the radial part (F.normalize below its eps divides by the eps instead).
  if (g.q_norm > static_cast<T>(1e-12)) {
    const T radial = w * vq[0] + x * vq[1] + y * vq[2] + z * vq[3];
    for (int i = 0; i < 4; ++i) v_quat[i] = (vq[i] - g.q[i] * radial) / g.q_norm;
  } else {
    for (int i = 0; i < 4; ++i) v_quat[i] = vq[i] / static_cast<T>(1e-12);
  }
}

template <typename T>
struct ProjectGrads {
  T *means, *quats, *scales, *viewmats, *Ks;
};

template <typename T>
void project_backward_impl(const T* means, const T* quats, const T* scales, const T* viewmats, const T* Ks, int64_t C,
                           int64_t N, const ProjectSettings& ps, const T* v_means2d, const T* v_conics,
                           const T* v_depths, const T* v_comps, const ProjectGrads<T>& out) {
  std::vector<Camera<T>> cams(C);
  for (int64_t c = 0; c < C; ++c) cams[c] = load_camera(viewmats + 16 * c, Ks + 9 * c, ps);
  std::vector<CameraGrad> cam_grads(C);
#pragma omp parallel
  {
    std::vector<CameraGrad> mine(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const WorldGaussian<T> g =
          world_gaussian(means + 3 * n, quats + 4 * n, scales + 3 * n, std::sqrt(squared_norm(quats + 4 * n)));
      Vec3<T> v_mean = {0, 0, 0};
      Mat3<T> v_cov = {};
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = c * N + n;
        const ScreenGrads<T> v = {{v_means2d[2 * i], v_means2d[2 * i + 1]},
                                  {v_conics[3 * i], v_conics[3 * i + 1], v_conics[3 * i + 2]},
                                  v_depths[i],
                                  ps.antialiased ? v_comps[i] : static_cast<T>(0)};
        if (!v.any()) continue;  // culled or unseen: nothing flows back (and no 0 * inf from z ~ 0)
        const ScreenGaussian<T> s = screen_gaussian(cams[c], g, static_cast<T>(ps.eps2d));
        screen_gaussian_vjp(cams[c], g, s, v, ps, v_mean, v_cov, mine[c]);
      }
      for (int i = 0; i < 3; ++i) out.means[3 * n + i] = v_mean[i];
      world_gaussian_vjp(g, v_cov, out.quats + 4 * n, out.scales + 3 * n);
    }
#pragma omp critical
    for (int64_t c = 0; c < C; ++c) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) cam_grads[c].R[i][j] += mine[c].R[i][j];
        cam_grads[c].t[i] += mine[c].t[i];
      }
      cam_grads[c].fx += mine[c].fx;
      cam_grads[c].fy += mine[c].fy;
      cam_grads[c].cx += mine[c].cx;
      cam_grads[c].cy += mine[c].cy;
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    T* vm = out.viewmats + 16 * c;
    T* vk = out.Ks + 9 * c;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) vm[4 * i + j] = static_cast<T>(cam_grads[c].R[i][j]);
      vm[4 * i + 3] = static_cast<T>(cam_grads[c].t[i]);
    }
    vk[0] = static_cast<T>(cam_grads[c].fx);
    vk[4] = static_cast<T>(cam_grads[c].fy);
    vk[2] = static_cast<T>(cam_grads[c].cx);
    vk[5] = static_cast<T>(cam_grads[c].cy);
  }
}


// The forward's outputs: means2d [C,N,2], conics [C,N,3], depths [C,N], radii [C,N,2], compensations [C,N].
template <typename T>
struct Projected {
  T *means2d, *conics, *depths, *comps;
  int32_t* radii;
};

// A radius as the twin casts it: torch's float -> int32 gives INT32_MIN for what int32 cannot hold.
template <typename T>
int32_t to_radius(T r) {
  const T top = static_cast<T>(2147483648.0);
  return (r < top && r > -top) ? static_cast<int32_t>(r) : std::numeric_limits<int32_t>::min();
}

// Square roots are taken by torch (at::sqrt) on planes shaped as the twin's: its CPU sqrt is not always the
// correctly rounded one (MKL's vector math), so std::sqrt would differ from it in the last bit now and then.
// The per-element work runs in three parallel passes around them.
template <typename T>
void project_forward_impl(const torch::Tensor& means, const torch::Tensor& quats, const torch::Tensor& scales,
                          const torch::Tensor& viewmats, const torch::Tensor& Ks, const ProjectSettings& ps,
                          double near_plane, double far_plane, const Projected<T>& out) {
  const int64_t N = means.size(0), C = viewmats.size(0);
  const T *mp = means.data_ptr<T>(), *qp = quats.data_ptr<T>(), *sp = scales.data_ptr<T>();
  std::vector<Camera<T>> cams(C);
  for (int64_t c = 0; c < C; ++c) cams[c] = load_camera(viewmats.data_ptr<T>() + 16 * c, Ks.data_ptr<T>() + 9 * c, ps);
  const T eps2d = static_cast<T>(ps.eps2d), near = static_cast<T>(near_plane), far = static_cast<T>(far_plane);
  const T W = static_cast<T>(ps.width), H = static_cast<T>(ps.height), extent = static_cast<T>(3.33);

  auto squared = torch::empty({N}, means.options());
  T* sq = squared.data_ptr<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) sq[n] = squared_norm(qp + 4 * n);
  const torch::Tensor q_norms = torch::sqrt(squared);
  const T* qn = q_norms.data_ptr<T>();

  // the blurred 2D covariance's diagonal and det_orig / det, each a [C, N] plane as in the twin
  auto diag_x = torch::empty({C, N}, means.options()), diag_y = torch::empty({C, N}, means.options());
  auto ratio = torch::empty({ps.antialiased ? C : 0, N}, means.options());
  T *g00 = diag_x.data_ptr<T>(), *g11 = diag_y.data_ptr<T>(), *rt = ratio.data_ptr<T>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const WorldGaussian<T> g = world_gaussian(mp + 3 * n, qp + 4 * n, sp + 3 * n, qn[n]);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = c * N + n;
      const Camera<T>& cam = cams[c];
      const ScreenGaussian<T> s = screen_gaussian(cam, g, eps2d);
      const T z = s.p[2];
      out.means2d[2 * i] = cam.fx * s.p[0] / z + cam.cx;
      out.means2d[2 * i + 1] = cam.fy * s.p[1] / z + cam.cy;
      out.conics[3 * i] = s.g11 / s.det;
      out.conics[3 * i + 1] = -(s.g01 + s.g10) / 2 / s.det;
      out.conics[3 * i + 2] = s.g00 / s.det;
      out.depths[i] = z;
      g00[i] = s.g00;
      g11[i] = s.g11;
      if (ps.antialiased) rt[i] = std::max(s.det_orig / s.det, T(0));
      out.radii[2 * i] = s.det > 0 && z > near && z < far;  // the test that needs s; the rest below
    }
  }
  const torch::Tensor sqrt_x = torch::sqrt(diag_x), sqrt_y = torch::sqrt(diag_y);
  const T *sa = sqrt_x.data_ptr<T>(), *sc = sqrt_y.data_ptr<T>();
  if (ps.antialiased) {
    const torch::Tensor comps = torch::sqrt(ratio);
    std::copy(comps.data_ptr<T>(), comps.data_ptr<T>() + C * N, out.comps);
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < C * N; ++i) {
    const T rx = std::ceil(extent * sa[i]), ry = std::ceil(extent * sc[i]);
    const T u = out.means2d[2 * i], v = out.means2d[2 * i + 1];
    const bool kept = out.radii[2 * i] && u + rx > 0 && u - rx < W && v + ry > 0 && v - ry < H;
    out.radii[2 * i] = kept ? to_radius(rx) : 0;
    out.radii[2 * i + 1] = kept ? to_radius(ry) : 0;
  }
}

void check_project_inputs(const torch::Tensor& means, const torch::Tensor& quats, const torch::Tensor& scales,
                          const torch::Tensor& viewmats, const torch::Tensor& Ks) {
  const int64_t N = means.size(0), C = viewmats.size(0);
  TORCH_CHECK(means.sizes() == torch::IntArrayRef({N, 3}), "means must be [N, 3]");
  TORCH_CHECK(quats.sizes() == torch::IntArrayRef({N, 4}), "quats must be [N, 4]");
  TORCH_CHECK(scales.sizes() == torch::IntArrayRef({N, 3}), "scales must be [N, 3]");
  TORCH_CHECK(viewmats.sizes() == torch::IntArrayRef({C, 4, 4}), "viewmats must be [C, 4, 4]");
  TORCH_CHECK(Ks.sizes() == torch::IntArrayRef({C, 3, 3}), "Ks must be [C, 3, 3]");
  for (const auto* t : {&means, &quats, &scales, &viewmats, &Ks}) {
    TORCH_CHECK(t->device().is_cpu(), "project_cpu takes CPU tensors");
    TORCH_CHECK(t->is_contiguous(), "project_cpu takes contiguous tensors");
    TORCH_CHECK(t->scalar_type() == means.scalar_type(), "project_cpu takes tensors of one dtype");
  }
}

}  // namespace

// Returns means2d [C,N,2], conics [C,N,3], depths [C,N], radii [C,N,2] int32 and compensations [C,N]
// (empty unless antialiased), as recon4d.render.projection.project_gaussians does.
std::vector<torch::Tensor> project_forward(const torch::Tensor& means, const torch::Tensor& quats,
                                           const torch::Tensor& scales, const torch::Tensor& viewmats,
                                           const torch::Tensor& Ks, int64_t width, int64_t height, double eps2d,
                                           double near_plane, double far_plane, bool antialiased) {
  check_project_inputs(means, quats, scales, viewmats, Ks);
  const int64_t N = means.size(0), C = viewmats.size(0);
  const ProjectSettings ps{width, height, eps2d, antialiased};
  auto means2d = torch::empty({C, N, 2}, means.options());
  auto conics = torch::empty({C, N, 3}, means.options());
  auto depths = torch::empty({C, N}, means.options());
  auto radii = torch::empty({C, N, 2}, means.options().dtype(torch::kInt32));
  auto comps = torch::empty({antialiased ? C : 0, antialiased ? N : 0}, means.options());
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_forward", [&] {
    const Projected<scalar_t> out{means2d.data_ptr<scalar_t>(), conics.data_ptr<scalar_t>(),
                                  depths.data_ptr<scalar_t>(), comps.data_ptr<scalar_t>(), radii.data_ptr<int32_t>()};
    project_forward_impl<scalar_t>(means, quats, scales, viewmats, Ks, ps, near_plane, far_plane, out);
  });
  return {means2d, conics, depths, radii, comps};
}

// Returns gradients for means [N,3], quats [N,4], scales [N,3], viewmats [C,4,4], Ks [C,3,3].
std::vector<torch::Tensor> project_backward(const torch::Tensor& means, const torch::Tensor& quats,
                                            const torch::Tensor& scales, const torch::Tensor& viewmats,
                                            const torch::Tensor& Ks, int64_t width, int64_t height, double eps2d,
                                            bool antialiased, const torch::Tensor& v_means2d, const torch::Tensor& v_conics,
                                            const torch::Tensor& v_depths, const torch::Tensor& v_comps) {
  check_project_inputs(means, quats, scales, viewmats, Ks);
  const int64_t N = means.size(0), C = viewmats.size(0);
  const std::pair<const torch::Tensor*, int64_t> grads[] = {{&v_means2d, 2}, {&v_conics, 3}, {&v_depths, 1}, {&v_comps, 1}};
  for (const auto& [t, per_gaussian] : grads)
    TORCH_CHECK(t->is_contiguous() && t->scalar_type() == means.scalar_type() && t->numel() == C * N * per_gaussian,
                "project_backward: gradients must be contiguous, of the inputs' dtype and shaped like the outputs");
  const ProjectSettings ps{width, height, eps2d, antialiased};
  auto v_means = torch::empty_like(means);
  auto v_quats = torch::empty_like(quats);
  auto v_scales = torch::empty_like(scales);
  auto v_viewmats = torch::zeros_like(viewmats);
  auto v_Ks = torch::zeros_like(Ks);
  AT_DISPATCH_FLOATING_TYPES(means.scalar_type(), "project_backward", [&] {
    const ProjectGrads<scalar_t> out{v_means.data_ptr<scalar_t>(), v_quats.data_ptr<scalar_t>(),
                                     v_scales.data_ptr<scalar_t>(), v_viewmats.data_ptr<scalar_t>(),
                                     v_Ks.data_ptr<scalar_t>()};
    project_backward_impl<scalar_t>(means.data_ptr<scalar_t>(), quats.data_ptr<scalar_t>(),
                                    scales.data_ptr<scalar_t>(), viewmats.data_ptr<scalar_t>(),
                                    Ks.data_ptr<scalar_t>(), C, N, ps, v_means2d.data_ptr<scalar_t>(),
                                    v_conics.data_ptr<scalar_t>(), v_depths.data_ptr<scalar_t>(),
                                    v_comps.data_ptr<scalar_t>(), out);
  });
  return {v_means, v_quats, v_scales, v_viewmats, v_Ks};
}


PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("project_forward", &project_forward, "recon4d's EWA projection, forward (CPU, bit for bit the twin's)");
  m.def("project_backward", &project_backward, "backward of recon4d's EWA projection (CPU)");
}

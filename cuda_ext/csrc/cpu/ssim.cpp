// Mean SSIM of two [H, W, C] maps on the CPU, forward and backward (OpenMP over planes).
//
// The same quantity as the PyTorch twin (cuda_ext/reference/ssim.py): the maps averaged over
// `pool` x `pool` blocks (avg_pool2d, floor mode), five local moments (x, y, x^2, y^2, xy) filtered
// by a normalised Gaussian window with reflect padding, kornia's SSIM map, its mean. The twin
// filters with one 2D convolution and needs a dozen autograd nodes around it; here the window is
// applied as two 1D passes and the backward is written out, so a training step's SSIM costs a
// fraction of the twin's. Float sums run in another order than the twin's, so the two agree to
// rounding, not bit for bit.
//
// Backward: with S = A1 A2 / (B1 B2 + eps), A1 = 2 mx my + c1, A2 = 2 (xy - mx my) + c2,
// B1 = mx^2 + my^2 + c1, B2 = xx - mx^2 + yy - my^2 + c2, the loss reaches x only through the
// filtered moments mx, xx, xy; their gradients are filtered back by the window's adjoint (a
// full convolution, then the padding folded back onto the pixels it copied).
#include <torch/extension.h>

#include <omp.h>

#include <vector>

namespace {

// Source index of position v of a line of n padded by reflection (torch's "reflect": no edge repeat).
inline int64_t reflect(int64_t v, int64_t n) {
  if (v < 0) return -v;
  if (v >= n) return 2 * (n - 1) - v;
  return v;
}

struct Geometry {
  int64_t H, W, C, pool, h, w, r;  // input size and channels, pool, pooled size, window radius
  int64_t plane() const { return h * w; }
  int64_t padded_w() const { return w + 2 * r; }
};

// One plane [h, w] filtered by the window g (2r + 1 taps) with reflect padding: along rows, then columns.
template <typename scalar_t>
void filter_plane(const scalar_t* in, const scalar_t* g, const Geometry& s, scalar_t* out) {
  const int64_t h = s.h, w = s.w, r = s.r, K = 2 * r + 1, pw = s.padded_w();
  std::vector<scalar_t> row(pw), across(h * w);
  for (int64_t i = 0; i < h; ++i) {  // along rows
    for (int64_t j = 0; j < pw; ++j) row[j] = in[i * w + reflect(j - r, w)];
    scalar_t* o = across.data() + i * w;
    for (int64_t j = 0; j < w; ++j) o[j] = 0;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < w; ++j) o[j] += g[k] * row[j + k];
  }
  for (int64_t i = 0; i < h; ++i) {  // along columns
    scalar_t* o = out + i * w;
    for (int64_t j = 0; j < w; ++j) o[j] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const scalar_t* src = across.data() + reflect(i + k - r, h) * w;
      for (int64_t j = 0; j < w; ++j) o[j] += g[k] * src[j];
    }
  }
}

// The adjoint of filter_plane: what each input pixel gets from the gradients of the outputs it fed.
template <typename scalar_t>
void filter_plane_adjoint(const scalar_t* grad_out, const scalar_t* g, const Geometry& s, scalar_t* grad_in) {
  const int64_t h = s.h, w = s.w, r = s.r, K = 2 * r + 1, pw = s.padded_w();
  std::vector<scalar_t> across(h * w, scalar_t(0)), row(pw);
  for (int64_t i = 0; i < h; ++i)  // columns: output row i took rows reflect(i + k - r)
    for (int64_t k = 0; k < K; ++k) {
      scalar_t* dst = across.data() + reflect(i + k - r, h) * w;
      const scalar_t* src = grad_out + i * w;
      for (int64_t j = 0; j < w; ++j) dst[j] += g[k] * src[j];
    }
  for (int64_t i = 0; i < h; ++i) {  // rows: a full convolution into the padded row, then folded back
    std::fill(row.begin(), row.end(), scalar_t(0));
    const scalar_t* src = across.data() + i * w;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < w; ++j) row[j + k] += g[k] * src[j];
    scalar_t* o = grad_in + i * w;
    for (int64_t j = 0; j < w; ++j) o[j] = 0;
    for (int64_t j = 0; j < pw; ++j) o[reflect(j - r, w)] += row[j];
  }
}

inline Geometry geometry(const torch::Tensor& pred, int64_t window, int64_t pool) {
  const int64_t H = pred.size(0), W = pred.size(1), C = pred.size(2);
  const int64_t h = H / pool, w = W / pool, r = window / 2;
  TORCH_CHECK(r < h && r < w, "ssim: a window of ", window, " needs maps larger than ", r, " pixels a side after pooling");
  return {H, W, C, pool, h, w, r};
}

// The pooled maps of pred and target, planar: [2, C, h, w].
template <typename scalar_t>
void pool_maps(const torch::Tensor& pred, const torch::Tensor& target, const Geometry& s, scalar_t* out) {
  const auto p = pred.accessor<scalar_t, 3>();
  const auto t = target.accessor<scalar_t, 3>();
  const scalar_t scale = scalar_t(1) / static_cast<scalar_t>(s.pool * s.pool);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.h; ++i)
    for (int64_t j = 0; j < s.w; ++j)
      for (int64_t c = 0; c < s.C; ++c) {
        scalar_t sp = 0, st = 0;
        for (int64_t a = 0; a < s.pool; ++a)
          for (int64_t b = 0; b < s.pool; ++b) {
            sp += p[i * s.pool + a][j * s.pool + b][c];
            st += t[i * s.pool + a][j * s.pool + b][c];
          }
        out[(c * s.h + i) * s.w + j] = sp * scale;
        out[((s.C + c) * s.h + i) * s.w + j] = st * scale;
      }
}

// kornia's SSIM at one pixel of one channel from its filtered moments (planes CP apart): A1 A2 / (B1 B2).
template <typename scalar_t>
struct Terms {
  scalar_t mx, my, a1, a2, b1, b2;
  Terms(const scalar_t* m, int64_t CP, int64_t q, double c1, double c2) {
    mx = m[q];
    my = m[CP + q];
    const scalar_t xx = m[2 * CP + q], yy = m[3 * CP + q], xy = m[4 * CP + q];
    a1 = 2 * mx * my + static_cast<scalar_t>(c1);
    a2 = 2 * (xy - mx * my) + static_cast<scalar_t>(c2);
    b1 = mx * mx + my * my + static_cast<scalar_t>(c1);
    b2 = (xx - mx * mx) + (yy - my * my) + static_cast<scalar_t>(c2);
  }
  scalar_t denominator() const { return b1 * b2 + static_cast<scalar_t>(1e-12); }
  scalar_t ssim() const { return a1 * a2 / denominator(); }
};

// The five filtered moments [5, C, h, w] of the pooled maps [2, C, h, w]; returns the SSIM map's sum.
template <typename scalar_t>
double forward_impl(const scalar_t* pooled, const scalar_t* g, const Geometry& s, double c1, double c2, scalar_t* m) {
  const scalar_t* xs = pooled;
  const scalar_t* ys = pooled + s.C * s.plane();
  const int64_t P = s.plane(), CP = s.C * P;
#pragma omp parallel
  {
    std::vector<scalar_t> product(P);
#pragma omp for schedule(dynamic, 1)
    for (int64_t job = 0; job < 5 * s.C; ++job) {
      const int64_t kind = job / s.C, c = job % s.C;  // x, y, x x, y y, x y
      const scalar_t *x = xs + c * P, *y = ys + c * P;
      const scalar_t* src = kind == 0 ? x : kind == 1 ? y : product.data();
      if (kind >= 2) {
        const scalar_t *a = kind == 3 ? y : x, *b = kind == 2 ? x : y;
        for (int64_t q = 0; q < P; ++q) product[q] = a[q] * b[q];
      }
      filter_plane<scalar_t>(src, g, s, m + kind * CP + c * P);
    }
  }
  double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (int64_t q = 0; q < CP; ++q) total += Terms<scalar_t>(m, CP, q, c1, c2).ssim();
  return total;
}

// d(SSIM map sum)/d(pred) times per_pixel into grad_pred [H, W, C] (contiguous, zeros outside the pooled area).
template <typename scalar_t>
void backward_impl(const scalar_t* pooled, const scalar_t* m, const scalar_t* g, const Geometry& s, double c1,
                   double c2, scalar_t per_pixel, scalar_t* grad_pred) {
  const int64_t P = s.plane(), CP = s.C * P;
  const scalar_t* xs = pooled;
  const scalar_t* ys = pooled + CP;
  std::vector<scalar_t> dm(3 * CP), dx(3 * CP);  // the gradients of the filtered mx, xx, xy, then of x, x^2, xy
#pragma omp parallel for schedule(static)
  for (int64_t q = 0; q < CP; ++q) {
    const Terms<scalar_t> t(m, CP, q, c1, c2);
    const scalar_t inv = 1 / t.denominator(), ssim = t.a1 * t.a2 * inv;
    const scalar_t d_a1 = t.a2 * inv, d_a2 = t.a1 * inv, d_b1 = -ssim * t.b2 * inv, d_b2 = -ssim * t.b1 * inv;
    dm[q] = per_pixel * (2 * t.my * (d_a1 - d_a2) + 2 * t.mx * (d_b1 - d_b2));
    dm[CP + q] = per_pixel * d_b2;
    dm[2 * CP + q] = per_pixel * 2 * d_a2;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t job = 0; job < 3 * s.C; ++job) filter_plane_adjoint<scalar_t>(dm.data() + job * P, g, s, dx.data() + job * P);
  // mx = G x, xx = G x^2, xy = G (x y): d/dx = G'(d mx) + 2 x G'(d xx) + y G'(d xy); then spread over the pool.
  const scalar_t scale = scalar_t(1) / static_cast<scalar_t>(s.pool * s.pool);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.h; ++i)
    for (int64_t j = 0; j < s.w; ++j)
      for (int64_t c = 0; c < s.C; ++c) {
        const int64_t q = (c * s.h + i) * s.w + j;
        const scalar_t v = (dx[q] + 2 * xs[q] * dx[CP + q] + ys[q] * dx[2 * CP + q]) * scale;
        for (int64_t a = 0; a < s.pool; ++a)
          for (int64_t b = 0; b < s.pool; ++b) grad_pred[((i * s.pool + a) * s.W + j * s.pool + b) * s.C + c] = v;
      }
}

}  // namespace

// Returns (mean SSIM as a 0-d tensor, pooled maps [2, C, h, w], filtered moments [5, C, h, w]); the last
// two are what ssim_backward needs.
std::vector<torch::Tensor> ssim_forward(const torch::Tensor& pred, const torch::Tensor& target,
                                        const torch::Tensor& gauss, int64_t pool, double c1, double c2) {
  TORCH_CHECK(pred.dim() == 3 && pred.sizes() == target.sizes(), "ssim: pred and target must be [H, W, C] alike");
  TORCH_CHECK(pred.device().is_cpu() && target.device().is_cpu(), "ssim_cpu takes CPU tensors");
  TORCH_CHECK(pred.scalar_type() == target.scalar_type() && gauss.scalar_type() == pred.scalar_type(),
              "ssim: one dtype for pred, target and the window");
  TORCH_CHECK(pool >= 1 && gauss.dim() == 1 && gauss.size(0) % 2 == 1, "ssim: odd window, pool >= 1");
  const auto s = geometry(pred, gauss.size(0), pool);
  const auto g = gauss.contiguous();
  auto pooled = torch::empty({2, s.C, s.h, s.w}, pred.options());
  auto moments = torch::empty({5, s.C, s.h, s.w}, pred.options());
  double total = 0;
  AT_DISPATCH_FLOATING_TYPES(pred.scalar_type(), "ssim_forward", [&] {
    pool_maps<scalar_t>(pred, target, s, pooled.data_ptr<scalar_t>());
    total = forward_impl<scalar_t>(pooled.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), s, c1, c2,
                                   moments.data_ptr<scalar_t>());
  });
  return {torch::full({}, total / static_cast<double>(s.C * s.plane()), pred.options()), pooled, moments};
}

// d(mean SSIM)/d(pred) times grad, as a contiguous [H, W, C] tensor.
torch::Tensor ssim_backward(const torch::Tensor& grad, const torch::Tensor& pooled, const torch::Tensor& moments,
                            const torch::Tensor& gauss, int64_t height, int64_t width, int64_t pool, double c1,
                            double c2) {
  const int64_t C = pooled.size(1);
  const Geometry s{height, width, C, pool, pooled.size(2), pooled.size(3), gauss.size(0) / 2};
  const auto g = gauss.contiguous();
  auto grad_pred = torch::zeros({height, width, C}, pooled.options());
  const double per_pixel = grad.item<double>() / static_cast<double>(C * s.plane());
  AT_DISPATCH_FLOATING_TYPES(pooled.scalar_type(), "ssim_backward", [&] {
    backward_impl<scalar_t>(pooled.data_ptr<scalar_t>(), moments.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(), s, c1,
                            c2, static_cast<scalar_t>(per_pixel), grad_pred.data_ptr<scalar_t>());
  });
  return grad_pred;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("ssim_forward", &ssim_forward, "mean SSIM of two [H, W, C] maps, forward (CPU)");
  m.def("ssim_backward", &ssim_backward, "mean SSIM of two [H, W, C] maps, backward (CPU)");
}

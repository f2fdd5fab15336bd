// Tile-based Gaussian rasterization on the CPU (forward and backward), OpenMP over tiles.
//
// Semantics are gsplat's so that CPU and GPU renders agree: pixel centres at +0.5,
// sigma = 0.5 (a dx^2 + c dy^2) + b dx dy, alpha = min(0.999, o exp(-sigma)), skip
// alpha < 1/255, stop before the Gaussian that would bring transmittance to <= 1e-4.
//
// Layout of the work: Gaussians are binned into tiles (front to back), then each
// tile runs "Gaussian outer, pixel inner": one Gaussian's parameters stay in
// registers while the tile's pixels are swept, and the tile stops as soon as every
// pixel is opaque. The backward pass walks each tile's list back to front and
// accumulates a Gaussian's gradient over the whole tile before one atomic add, so
// atomics are per (Gaussian, tile) pair rather than per pixel and memory stays O(N).
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace {

constexpr double kAlphaMin = 1.0 / 255.0;
constexpr double kAlphaMax = 0.999;
constexpr double kTransMin = 1e-4;

struct TileGrid {
  int64_t tile_size, tiles_x, tiles_y;
  int64_t count() const { return tiles_x * tiles_y; }
};

// Front-to-back tile lists for every camera: offsets [C * n_tiles + 1], ids [n_isect].
template <typename scalar_t>
void bin_gaussians(const scalar_t* means2d, const int32_t* radii, const scalar_t* depths, int64_t C,
                   int64_t N, const TileGrid& grid, std::vector<int64_t>& offsets,
                   std::vector<int32_t>& ids) {
  const int64_t n_tiles = grid.count();
  const double ts = static_cast<double>(grid.tile_size);
  std::vector<int32_t> lo(C * N * 2), hi(C * N * 2);
  offsets.assign(C * n_tiles + 1, 0);
  for (int64_t i = 0; i < C * N; ++i) {
    const int32_t rx = radii[2 * i], ry = radii[2 * i + 1];
    if (rx <= 0 || ry <= 0) {
      lo[2 * i] = hi[2 * i] = 0;
      lo[2 * i + 1] = hi[2 * i + 1] = 0;
      continue;
    }
    // Same arithmetic as the PyTorch twin: (mean -/+ radius) / tile_size, floor/ceil, clamp.
    const scalar_t mx = means2d[2 * i], my = means2d[2 * i + 1];
    auto clampi = [](double v, int64_t top) { return static_cast<int32_t>(std::min<double>(std::max(v, 0.0), top)); };
    lo[2 * i] = clampi(std::floor((mx - static_cast<scalar_t>(rx)) / static_cast<scalar_t>(ts)), grid.tiles_x);
    hi[2 * i] = clampi(std::ceil((mx + static_cast<scalar_t>(rx)) / static_cast<scalar_t>(ts)), grid.tiles_x);
    lo[2 * i + 1] = clampi(std::floor((my - static_cast<scalar_t>(ry)) / static_cast<scalar_t>(ts)), grid.tiles_y);
    hi[2 * i + 1] = clampi(std::ceil((my + static_cast<scalar_t>(ry)) / static_cast<scalar_t>(ts)), grid.tiles_y);
    const int64_t cam = i / N;
    for (int32_t ty = lo[2 * i + 1]; ty < hi[2 * i + 1]; ++ty)
      for (int32_t tx = lo[2 * i]; tx < hi[2 * i]; ++tx) offsets[cam * n_tiles + ty * grid.tiles_x + tx + 1] += 1;
  }
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  ids.resize(offsets.back());
  std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
  std::vector<int32_t> order(N);
  for (int64_t cam = 0; cam < C; ++cam) {
    const scalar_t* d = depths + cam * N;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [d](int32_t a, int32_t b) { return d[a] < d[b]; });
    for (int32_t g : order) {
      const int64_t i = cam * N + g;
      for (int32_t ty = lo[2 * i + 1]; ty < hi[2 * i + 1]; ++ty)
        for (int32_t tx = lo[2 * i]; tx < hi[2 * i]; ++tx) ids[cursor[cam * n_tiles + ty * grid.tiles_x + tx]++] = g;
    }
  }
}

template <typename scalar_t>
struct Splat {
  scalar_t mx, my, ca, cb, cc, opac, sigma_cut;
  const scalar_t* color;
};

// sigma beyond which alpha < 1/255 for sure: lets most pixels skip exp().
template <typename scalar_t>
inline scalar_t sigma_cutoff(scalar_t opac) {
  return opac * 255.0 >= 1.0 ? static_cast<scalar_t>(std::log(opac * 255.0) + 1e-3) : static_cast<scalar_t>(-1);
}

template <typename scalar_t>
inline Splat<scalar_t> load_splat(int64_t i, const scalar_t* means2d, const scalar_t* conics,
                                  const scalar_t* opacities, const scalar_t* colors, int64_t D) {
  const scalar_t o = opacities[i];
  return {means2d[2 * i], means2d[2 * i + 1], conics[3 * i], conics[3 * i + 1], conics[3 * i + 2],
          o, sigma_cutoff(o), colors + i * D};
}

// alpha of splat s at pixel (px, py), or 0 when it is skipped; also returns vis = exp(-sigma).
template <typename scalar_t>
inline scalar_t splat_alpha(const Splat<scalar_t>& s, scalar_t px, scalar_t py, scalar_t& dx, scalar_t& dy,
                            scalar_t& vis) {
  dx = s.mx - px;
  dy = s.my - py;
  const scalar_t sigma = static_cast<scalar_t>(0.5) * (s.ca * dx * dx + s.cc * dy * dy) + s.cb * dx * dy;
  if (sigma < 0 || sigma > s.sigma_cut) return 0;
  vis = std::exp(-sigma);
  const scalar_t alpha = std::min(static_cast<scalar_t>(kAlphaMax), s.opac * vis);
  return alpha < static_cast<scalar_t>(kAlphaMin) ? 0 : alpha;
}

// Tile-local pixel rectangle [x_lo, x_hi) x [y_lo, y_hi) outside which splat s has
// sigma > sigma_cut (so alpha < 1/255): the ellipse 0.5 d^T Q d <= cut has half-extents
// sqrt(2 cut (Q^-1)_xx) and sqrt(2 cut (Q^-1)_yy); pixel x is inside when its centre x + 0.5
// is. The cut already sits 1e-3 above the alpha threshold, so float rounding cannot drop a
// contributing pixel; the small extra margin covers the double-vs-float extent.
struct Window {
  int64_t x_lo, x_hi, y_lo, y_hi;
};

template <typename scalar_t>
inline Window splat_window(const Splat<scalar_t>& s, int64_t x0, int64_t y0, int64_t ts) {
  const double det = static_cast<double>(s.ca) * s.cc - static_cast<double>(s.cb) * s.cb;
  if (!(det > 0)) return {0, ts, 0, ts};
  const double ex = std::sqrt(2.0 * s.sigma_cut * s.cc / det) + 1e-3;
  const double ey = std::sqrt(2.0 * s.sigma_cut * s.ca / det) + 1e-3;
  auto lo = [ts](double v, int64_t origin) {
    return std::min<int64_t>(ts, std::max<int64_t>(0, static_cast<int64_t>(std::ceil(v - 0.5)) - origin));
  };
  auto hi = [ts](double v, int64_t origin) {
    return std::min<int64_t>(ts, std::max<int64_t>(0, static_cast<int64_t>(std::floor(v - 0.5)) + 1 - origin));
  };
  return {lo(s.mx - ex, x0), hi(s.mx + ex, x0), lo(s.my - ey, y0), hi(s.my + ey, y0)};
}

template <typename scalar_t>
void forward_impl(const torch::Tensor& means2d, const torch::Tensor& conics, const torch::Tensor& colors,
                  const torch::Tensor& opacities, const std::vector<int64_t>& offsets,
                  const std::vector<int32_t>& ids, const TileGrid& grid, int64_t W, int64_t H, torch::Tensor& render,
                  torch::Tensor& alpha_out, torch::Tensor& last_out) {
  const int64_t C = colors.size(0), N = colors.size(1), D = colors.size(2);
  const int64_t n_tiles = grid.count(), ts = grid.tile_size;
  const scalar_t* m2 = means2d.data_ptr<scalar_t>();
  const scalar_t* con = conics.data_ptr<scalar_t>();
  const scalar_t* col = colors.data_ptr<scalar_t>();
  const scalar_t* op = opacities.data_ptr<scalar_t>();
  scalar_t* out = render.data_ptr<scalar_t>();
  scalar_t* aout = alpha_out.data_ptr<scalar_t>();
  int32_t* lout = last_out.data_ptr<int32_t>();

#pragma omp parallel
  {
    const int64_t P = ts * ts;
    std::vector<scalar_t> T(P), acc(P * D);
    std::vector<int32_t> last(P);
    std::vector<char> done(P);
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < C * n_tiles; ++tile) {
      const int64_t cam = tile / n_tiles, t = tile % n_tiles;
      const int64_t x0 = (t % grid.tiles_x) * ts, y0 = (t / grid.tiles_x) * ts;
      const int64_t begin = offsets[tile], end = offsets[tile + 1];
      std::fill(T.begin(), T.end(), static_cast<scalar_t>(1));
      std::fill(acc.begin(), acc.end(), static_cast<scalar_t>(0));
      std::fill(last.begin(), last.end(), 0);
      int64_t active = 0;
      for (int64_t p = 0; p < P; ++p) {
        done[p] = (x0 + p % ts >= W || y0 + p / ts >= H);
        active += !done[p];
      }
      for (int64_t k = begin; k < end && active > 0; ++k) {
        const Splat<scalar_t> s = load_splat(cam * N + ids[k], m2, con, op, col, D);
        if (s.sigma_cut < 0) continue;
        const Window win = splat_window(s, x0, y0, ts);
        for (int64_t ly = win.y_lo; ly < win.y_hi; ++ly)
        for (int64_t lx = win.x_lo; lx < win.x_hi; ++lx) {
          const int64_t p = ly * ts + lx;
          if (done[p]) continue;
          scalar_t dx, dy, vis;
          const scalar_t a = splat_alpha(s, static_cast<scalar_t>(x0 + lx) + static_cast<scalar_t>(0.5),
                                         static_cast<scalar_t>(y0 + ly) + static_cast<scalar_t>(0.5), dx, dy, vis);
          if (a == 0) continue;
          const scalar_t next_T = T[p] * (1 - a);
          if (next_T <= static_cast<scalar_t>(kTransMin)) {
            done[p] = 1;
            --active;
            continue;
          }
          const scalar_t w = a * T[p];
          scalar_t* dst = acc.data() + p * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) dst[d] += w * s.color[d];
          T[p] = next_T;
          last[p] = static_cast<int32_t>(k - begin + 1);
        }
      }
      for (int64_t p = 0; p < P; ++p) {
        const int64_t x = x0 + p % ts, y = y0 + p / ts;
        if (x >= W || y >= H) continue;
        const int64_t pix = (cam * H + y) * W + x;
        std::copy(acc.begin() + p * D, acc.begin() + (p + 1) * D, out + pix * D);
        aout[pix] = 1 - T[p];
        lout[pix] = last[p];
      }
    }
  }
}

template <typename scalar_t>
inline void atomic_add(scalar_t* dst, scalar_t v) {
#pragma omp atomic
  *dst += v;
}

template <typename scalar_t>
void backward_impl(const torch::Tensor& means2d, const torch::Tensor& conics, const torch::Tensor& colors,
                   const torch::Tensor& opacities, const torch::Tensor& tile_offsets, const torch::Tensor& flat_ids,
                   const torch::Tensor& alpha_img, const torch::Tensor& last_ids, const torch::Tensor& v_render,
                   const torch::Tensor& v_alpha, const TileGrid& grid, int64_t W, int64_t H, torch::Tensor& g_means2d,
                   torch::Tensor& g_conics, torch::Tensor& g_colors, torch::Tensor& g_opac) {
  const int64_t C = colors.size(0), N = colors.size(1), D = colors.size(2);
  const int64_t n_tiles = grid.count(), ts = grid.tile_size;
  const scalar_t* m2 = means2d.data_ptr<scalar_t>();
  const scalar_t* con = conics.data_ptr<scalar_t>();
  const scalar_t* col = colors.data_ptr<scalar_t>();
  const scalar_t* op = opacities.data_ptr<scalar_t>();
  const int64_t* offsets = tile_offsets.data_ptr<int64_t>();
  const int32_t* ids = flat_ids.data_ptr<int32_t>();
  const scalar_t* a_img = alpha_img.data_ptr<scalar_t>();
  const int32_t* last_img = last_ids.data_ptr<int32_t>();
  const scalar_t* vr = v_render.data_ptr<scalar_t>();
  const scalar_t* va = v_alpha.data_ptr<scalar_t>();
  scalar_t* gm = g_means2d.data_ptr<scalar_t>();
  scalar_t* gc = g_conics.data_ptr<scalar_t>();
  scalar_t* gcol = g_colors.data_ptr<scalar_t>();
  scalar_t* go = g_opac.data_ptr<scalar_t>();

#pragma omp parallel
  {
    const int64_t P = ts * ts;
    std::vector<scalar_t> T(P), T_final(P), buffer(P * D), vpix(P * D), vpa(P), g_col(D);
    std::vector<int32_t> last(P);
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < C * n_tiles; ++tile) {
      const int64_t cam = tile / n_tiles, t = tile % n_tiles;
      const int64_t x0 = (t % grid.tiles_x) * ts, y0 = (t / grid.tiles_x) * ts;
      const int64_t begin = offsets[tile];
      int32_t max_last = 0;
      for (int64_t p = 0; p < P; ++p) {
        const int64_t x = x0 + p % ts, y = y0 + p / ts;
        if (x >= W || y >= H) {
          last[p] = 0;
          continue;
        }
        const int64_t pix = (cam * H + y) * W + x;
        last[p] = last_img[pix];
        max_last = std::max(max_last, last[p]);
        T_final[p] = T[p] = 1 - a_img[pix];
        vpa[p] = va[pix];
        std::copy(vr + pix * D, vr + (pix + 1) * D, vpix.begin() + p * D);
      }
      std::fill(buffer.begin(), buffer.end(), static_cast<scalar_t>(0));
      for (int64_t k = begin + max_last - 1; k >= begin; --k) {
        const int64_t rel = k - begin;
        const int64_t gi = cam * N + ids[k];
        const Splat<scalar_t> s = load_splat(gi, m2, con, op, col, D);
        if (s.sigma_cut < 0) continue;
        scalar_t g_mx = 0, g_my = 0, g_a = 0, g_b = 0, g_c = 0, g_o = 0;
        std::fill(g_col.begin(), g_col.end(), static_cast<scalar_t>(0));
        bool touched = false;
        const Window win = splat_window(s, x0, y0, ts);
        for (int64_t ly = win.y_lo; ly < win.y_hi; ++ly)
        for (int64_t lx = win.x_lo; lx < win.x_hi; ++lx) {
          const int64_t p = ly * ts + lx;
          if (rel >= last[p]) continue;
          scalar_t dx, dy, vis;
          const scalar_t a = splat_alpha(s, static_cast<scalar_t>(x0 + lx) + static_cast<scalar_t>(0.5),
                                         static_cast<scalar_t>(y0 + ly) + static_cast<scalar_t>(0.5), dx, dy, vis);
          if (a == 0) continue;
          touched = true;
          const scalar_t ra = 1 / (1 - a);
          T[p] *= ra;  // transmittance in front of this Gaussian
          const scalar_t fac = a * T[p];
          const scalar_t* vp = vpix.data() + p * D;
          scalar_t* buf = buffer.data() + p * D;
          scalar_t v_a = 0;
#pragma omp simd reduction(+ : v_a)
          for (int64_t d = 0; d < D; ++d) {
            g_col[d] += fac * vp[d];
            v_a += (s.color[d] * T[p] - buf[d] * ra) * vp[d];
            buf[d] += s.color[d] * fac;
          }
          v_a += T_final[p] * ra * vpa[p];
          if (s.opac * vis <= static_cast<scalar_t>(kAlphaMax)) {
            const scalar_t v_sigma = -s.opac * vis * v_a;
            g_a += static_cast<scalar_t>(0.5) * v_sigma * dx * dx;
            g_b += v_sigma * dx * dy;
            g_c += static_cast<scalar_t>(0.5) * v_sigma * dy * dy;
            g_mx += v_sigma * (s.ca * dx + s.cb * dy);
            g_my += v_sigma * (s.cb * dx + s.cc * dy);
            g_o += vis * v_a;
          }
        }
        if (!touched) continue;
        atomic_add(gm + 2 * gi, g_mx);
        atomic_add(gm + 2 * gi + 1, g_my);
        atomic_add(gc + 3 * gi, g_a);
        atomic_add(gc + 3 * gi + 1, g_b);
        atomic_add(gc + 3 * gi + 2, g_c);
        atomic_add(go + gi, g_o);
        for (int64_t d = 0; d < D; ++d) atomic_add(gcol + gi * D + d, g_col[d]);
      }
    }
  }
}

void check_inputs(const torch::Tensor& means2d, const torch::Tensor& conics, const torch::Tensor& colors,
                  const torch::Tensor& opacities, const torch::Tensor& radii, const torch::Tensor& depths) {
  TORCH_CHECK(colors.dim() == 3, "colors must be [C, N, D]");
  const int64_t C = colors.size(0), N = colors.size(1);
  TORCH_CHECK(means2d.sizes() == torch::IntArrayRef({C, N, 2}), "means2d must be [C, N, 2]");
  TORCH_CHECK(conics.sizes() == torch::IntArrayRef({C, N, 3}), "conics must be [C, N, 3]");
  TORCH_CHECK(opacities.sizes() == torch::IntArrayRef({C, N}), "opacities must be [C, N]");
  TORCH_CHECK(radii.sizes() == torch::IntArrayRef({C, N, 2}), "radii must be [C, N, 2]");
  TORCH_CHECK(depths.sizes() == torch::IntArrayRef({C, N}), "depths must be [C, N]");
  TORCH_CHECK(radii.scalar_type() == torch::kInt32, "radii must be int32");
  for (const auto* t : {&means2d, &conics, &colors, &opacities, &radii, &depths}) {
    TORCH_CHECK(t->device().is_cpu(), "rasterize_cpu takes CPU tensors");
    TORCH_CHECK(t->is_contiguous(), "rasterize_cpu takes contiguous tensors");
  }
  TORCH_CHECK(N < (int64_t(1) << 31), "too many Gaussians for int32 ids");
}

}  // namespace

// Returns render [C,H,W,D], alpha [C,H,W,1], tile_offsets [C*n_tiles+1] int64, flat_ids int32, last_ids [C,H,W] int32.
std::vector<torch::Tensor> rasterize_forward(const torch::Tensor& means2d, const torch::Tensor& conics,
                                             const torch::Tensor& colors, const torch::Tensor& opacities,
                                             const torch::Tensor& radii, const torch::Tensor& depths, int64_t width,
                                             int64_t height, int64_t tile_size) {
  check_inputs(means2d, conics, colors, opacities, radii, depths);
  const int64_t C = colors.size(0), N = colors.size(1), D = colors.size(2);
  const TileGrid grid{tile_size, (width + tile_size - 1) / tile_size, (height + tile_size - 1) / tile_size};
  auto render = torch::zeros({C, height, width, D}, colors.options());
  auto alpha = torch::zeros({C, height, width, 1}, colors.options());
  auto last = torch::zeros({C, height, width}, colors.options().dtype(torch::kInt32));
  std::vector<int64_t> offsets;
  std::vector<int32_t> ids;
  AT_DISPATCH_FLOATING_TYPES(colors.scalar_type(), "rasterize_forward", [&] {
    bin_gaussians<scalar_t>(means2d.data_ptr<scalar_t>(), radii.data_ptr<int32_t>(), depths.data_ptr<scalar_t>(), C, N,
                            grid, offsets, ids);
    forward_impl<scalar_t>(means2d, conics, colors, opacities, offsets, ids, grid, width, height, render, alpha, last);
  });
  auto offsets_t = torch::from_blob(offsets.data(), {static_cast<int64_t>(offsets.size())}, torch::kInt64).clone();
  auto ids_t = torch::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, torch::kInt32).clone();
  return {render, alpha, offsets_t, ids_t, last};
}

// Returns gradients for means2d [C,N,2], conics [C,N,3], colors [C,N,D], opacities [C,N].
std::vector<torch::Tensor> rasterize_backward(const torch::Tensor& means2d, const torch::Tensor& conics,
                                              const torch::Tensor& colors, const torch::Tensor& opacities,
                                              const torch::Tensor& tile_offsets, const torch::Tensor& flat_ids,
                                              const torch::Tensor& alpha, const torch::Tensor& last_ids,
                                              const torch::Tensor& v_render, const torch::Tensor& v_alpha,
                                              int64_t width, int64_t height, int64_t tile_size) {
  TORCH_CHECK(v_render.is_contiguous() && v_alpha.is_contiguous(), "gradients must be contiguous");
  const TileGrid grid{tile_size, (width + tile_size - 1) / tile_size, (height + tile_size - 1) / tile_size};
  auto g_means2d = torch::zeros_like(means2d);
  auto g_conics = torch::zeros_like(conics);
  auto g_colors = torch::zeros_like(colors);
  auto g_opac = torch::zeros_like(opacities);
  AT_DISPATCH_FLOATING_TYPES(colors.scalar_type(), "rasterize_backward", [&] {
    backward_impl<scalar_t>(means2d, conics, colors, opacities, tile_offsets, flat_ids, alpha, last_ids, v_render,
                            v_alpha, grid, width, height, g_means2d, g_conics, g_colors, g_opac);
  });
  return {g_means2d, g_conics, g_colors, g_opac};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rasterize_forward", &rasterize_forward, "tile-based Gaussian rasterization, forward (CPU)");
  m.def("rasterize_backward", &rasterize_backward, "tile-based Gaussian rasterization, backward (CPU)");
}

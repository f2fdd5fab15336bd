// Tile-based Gaussian rasterization on the CPU (forward and backward), OpenMP over tiles.
//
// Semantics are gsplat's so that CPU and GPU renders agree: pixel centres at +0.5,
// sigma = 0.5 (a dx^2 + c dy^2) + b dx dy, alpha = min(0.999, o exp(-sigma)), skip
// alpha < 1/255, stop before the Gaussian that would bring transmittance to <= 1e-4.
//
// Layout of the work: Gaussians are binned into tiles (front to back), then each
// tile runs "Gaussian outer, pixel inner": one Gaussian's parameters stay in
// registers while the pixels of its window in the tile are swept a SIMD register at a
// time along a row (lanes are pixels; tile buffers hold a chunk's channels side by side
// so that every channel update is one vector multiply-add on consecutive memory), and
// the tile stops as soon as every pixel is opaque. The backward pass walks each tile's
// list back to front and accumulates a Gaussian's gradient over the whole tile into
// that (Gaussian, tile) pair's own row; a second pass adds each Gaussian's rows in list
// order, so gradients are the same bit for bit whatever order the threads finish in.
#include <torch/extension.h>

#include <omp.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

constexpr double kAlphaMin = 1.0 / 255.0;
constexpr double kAlphaMax = 0.999;
constexpr double kTransMin = 1e-4;

// ---------------------------------------------------------------------------------------------
// Pixel vectors: as many pixels of a tile row as fill one SIMD register of the target (16
// floats with AVX-512, 8 with AVX2, 4 with SSE or NEON), as GCC/Clang vector extensions so that
// one source builds everywhere. Wider vectors than the registers would be split by the compiler,
// often element by element. V holds a value per pixel, M the matching lane mask (all ones =
// true) or integer per pixel.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

// exp_lanes' per-type constants: its Taylor degree, and ln 2 split into a high part exact in a few bits
// and the low remainder (Cody-Waite reduction).
template <typename T>
struct ExpConstants;
template <>
struct ExpConstants<float> {
  static constexpr int kExpDegree = 7;
  static constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187045e-06f;
};
template <>
struct ExpConstants<double> {
  static constexpr int kExpDegree = 13;
  static constexpr double kLn2Hi = 6.93147180369123816490e-01, kLn2Lo = 1.90821492927058770002e-10;
};

template <typename T>
struct Lanes : ExpConstants<T> {
  static constexpr int kCount = kVectorBytes / sizeof(T);
  typedef T V __attribute__((vector_size(kVectorBytes)));
  typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;  // the same width as T
  typedef I M __attribute__((vector_size(kVectorBytes)));
  static constexpr int kMantissaBits = std::numeric_limits<T>::digits - 1;  // 23, 52
  static constexpr int kExponentBias = std::numeric_limits<T>::max_exponent - 1;  // 127, 1023
  // 1.5 * 2^kMantissaBits: adding it rounds to an integer
  static constexpr T kRoundMagic = T(3) * T(I(1) << (kMantissaBits - 1));
};

template <typename V, typename S>
inline V broadcast(S x) {
  return V{} + x;
}

template <typename V, size_t... I>
inline auto low_half(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, I...);
}

template <typename V, size_t... I>
inline auto high_half(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (I + sizeof...(I))...);
}

// Folds the lanes with op by halves: log2(lanes) vector steps instead of lanes - 1 scalar ones.
template <typename V, typename Op>
inline auto fold(V v, Op op) {
  constexpr size_t n = sizeof(V) / sizeof(v[0]);
  if constexpr (n == 2) {
    return op(v[0], v[1]);
  } else {
    constexpr auto half = std::make_index_sequence<n / 2>();
    return fold(op(low_half(v, half), high_half(v, half)), op);
  }
}

template <typename V>
inline auto lane_sum(V v) {
  return fold(v, [](auto a, auto b) { return a + b; });
}

template <typename M>
inline bool any(M m) {
  // One test instruction where the ISA has it; a fold of the lanes otherwise.
#if defined(__AVX512F__)
  const __m512i bits = reinterpret_cast<__m512i>(m);
  return _mm512_test_epi32_mask(bits, bits) != 0;
#elif defined(__AVX__)
  const __m256i bits = reinterpret_cast<__m256i>(m);
  return !_mm256_testz_si256(bits, bits);
#else
  return fold(m, [](auto a, auto b) { return a | b; }) != 0;
#endif
}

template <typename M>
inline int64_t count(M m) {
  return -static_cast<int64_t>(lane_sum(m));  // true lanes are -1
}

constexpr double inverse_factorial(int k) {
  double f = 1;
  for (int i = 2; i <= k; ++i) f *= i;
  return 1 / f;
}

// e^x per lane for x in [-100, 0] (callers clamp): 2^n e^r with |r| <= ln2 / 2, e^r from its
// Taylor series up to the degree where the remainder falls below the type's precision.
template <typename T>
inline typename Lanes<T>::V exp_lanes(typename Lanes<T>::V x) {
  using L = Lanes<T>;
  using V = typename L::V;
  using M = typename L::M;
  const V n = (x * static_cast<T>(M_LOG2E) + L::kRoundMagic) - L::kRoundMagic;
  const V r = (x - n * L::kLn2Hi) - n * L::kLn2Lo;
  V p = broadcast<V>(static_cast<T>(inverse_factorial(L::kExpDegree)));
  for (int k = L::kExpDegree - 1; k >= 0; --k) p = p * r + static_cast<T>(inverse_factorial(k));
  const M bits = (__builtin_convertvector(n, M) + L::kExponentBias) << L::kMantissaBits;
  return p * (V)bits;
}

// ---------------------------------------------------------------------------------------------
// Binning.

struct TileGrid {
  int64_t tile_size, tiles_x, tiles_y;
  int64_t count() const { return tiles_x * tiles_y; }
};

// Tiles [x_lo, x_hi) x [y_lo, y_hi) that a Gaussian's box of radii touches; empty when culled.
struct TileRect {
  int32_t x_lo, x_hi, y_lo, y_hi;
};

template <typename scalar_t>
inline TileRect tile_rect(const scalar_t* mean, const int32_t* radius, const TileGrid& grid) {
  if (radius[0] <= 0 || radius[1] <= 0) return {0, 0, 0, 0};
  // Same arithmetic as the PyTorch twin: (mean -/+ radius) / tile_size, floor/ceil, clamp.
  const scalar_t ts = static_cast<scalar_t>(grid.tile_size);
  const scalar_t rx = static_cast<scalar_t>(radius[0]), ry = static_cast<scalar_t>(radius[1]);
  auto clampi = [](double v, int64_t top) { return static_cast<int32_t>(std::min<double>(std::max(v, 0.0), top)); };
  return {clampi(std::floor((mean[0] - rx) / ts), grid.tiles_x), clampi(std::ceil((mean[0] + rx) / ts), grid.tiles_x),
          clampi(std::floor((mean[1] - ry) / ts), grid.tiles_y), clampi(std::ceil((mean[1] + ry) / ts), grid.tiles_y)};
}

template <typename scalar_t>
std::vector<TileRect> tile_rects(const scalar_t* means2d, const int32_t* radii, int64_t count, const TileGrid& grid) {
  std::vector<TileRect> rects(count);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) rects[i] = tile_rect(means2d + 2 * i, radii + 2 * i, grid);
  return rects;
}

inline bool is_empty(const TileRect& r) { return r.x_lo >= r.x_hi || r.y_lo >= r.y_hi; }

// Unsigned integer whose order is the float order of d (-0 and +0 become one key, NaN sorts last).
template <typename scalar_t>
inline auto depth_key(scalar_t d) {
  using U = std::conditional_t<sizeof(scalar_t) == 4, uint32_t, uint64_t>;
  const scalar_t z = d + static_cast<scalar_t>(0);  // -0 + 0 = +0
  U bits;
  std::memcpy(&bits, &z, sizeof bits);
  const U sign = U(1) << (8 * sizeof(U) - 1);
  return (bits & sign) ? static_cast<U>(~bits) : static_cast<U>(bits | sign);
}

// Stable LSD radix sort of ids by key, a byte per pass: equal depths keep index order, as the
// twin's stable argsort does. Linear time, unlike the comparison sort it replaces.
template <typename U>
void radix_sort(std::vector<U>& keys, std::vector<int32_t>& ids) {
  std::vector<U> keys_tmp(keys.size());
  std::vector<int32_t> ids_tmp(ids.size());
  for (unsigned shift = 0; shift < 8 * sizeof(U); shift += 8) {
    std::array<size_t, 257> start{};
    for (U k : keys) ++start[((k >> shift) & 255) + 1];
    if (std::count(start.begin(), start.end(), keys.size()) == 1) continue;  // one bucket: order stays
    std::partial_sum(start.begin(), start.end(), start.begin());
    for (size_t i = 0; i < keys.size(); ++i) {
      const size_t to = start[(keys[i] >> shift) & 255]++;
      keys_tmp[to] = keys[i];
      ids_tmp[to] = ids[i];
    }
    keys.swap(keys_tmp);
    ids.swap(ids_tmp);
  }
}

// Visible Gaussians of one camera front to back, each with its tile rectangle.
template <typename scalar_t>
void depth_order(const scalar_t* depths, const TileRect* rects, int64_t N, std::vector<int32_t>& order,
                 std::vector<TileRect>& sorted_rects) {
  std::vector<decltype(depth_key(scalar_t{}))> keys;
  keys.reserve(N);
  order.clear();
  for (int64_t g = 0; g < N; ++g) {
    if (is_empty(rects[g])) continue;
    order.push_back(static_cast<int32_t>(g));
    keys.push_back(depth_key(depths[g]));
  }
  radix_sort(keys, order);
  sorted_rects.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted_rects[i] = rects[order[i]];
}

// Front-to-back tile lists for every camera: offsets [C * n_tiles + 1], ids [n_isect]. Each
// thread counts and fills the tiles of its own band of tile rows, so no two threads share a tile.
template <typename scalar_t>
void bin_gaussians(const scalar_t* means2d, const int32_t* radii, const scalar_t* depths, int64_t C,
                   int64_t N, const TileGrid& grid, std::vector<int64_t>& offsets,
                   std::vector<int32_t>& ids) {
  const int64_t n_tiles = grid.count();
  const std::vector<TileRect> rects = tile_rects(means2d, radii, C * N, grid);
  std::vector<std::vector<int32_t>> order(C);
  std::vector<std::vector<TileRect>> sorted(C);
  for (int64_t cam = 0; cam < C; ++cam) depth_order(depths + cam * N, rects.data() + cam * N, N, order[cam], sorted[cam]);

  offsets.assign(C * n_tiles + 1, 0);
  std::vector<int64_t> cursor;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int32_t band_lo = static_cast<int32_t>(grid.tiles_y * me / threads);
    const int32_t band_hi = static_cast<int32_t>(grid.tiles_y * (me + 1) / threads);
    // Calls fn(slot of the tile in offsets, Gaussian) for every (tile in the band, Gaussian) pair, front to back.
    auto for_each_pair = [&](auto&& fn) {
      for (int64_t cam = 0; cam < C; ++cam)
        for (size_t i = 0; i < order[cam].size(); ++i) {
          const TileRect& r = sorted[cam][i];
          for (int32_t ty = std::max(r.y_lo, band_lo); ty < std::min(r.y_hi, band_hi); ++ty)
            for (int32_t tx = r.x_lo; tx < r.x_hi; ++tx) fn(cam * n_tiles + ty * grid.tiles_x + tx, order[cam][i]);
        }
    };
    for_each_pair([&](int64_t tile, int32_t) { ++offsets[tile + 1]; });
#pragma omp barrier
#pragma omp single
    {
      std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
      ids.resize(offsets.back());
      cursor.assign(offsets.begin(), offsets.end() - 1);
    }
    for_each_pair([&](int64_t tile, int32_t g) { ids[cursor[tile]++] = g; });
  }
}

// ---------------------------------------------------------------------------------------------
// Splats: one screen-space Gaussian with what every tile needs from it, computed once.

// Image pixels [x_lo, x_hi) x [y_lo, y_hi) outside which the splat has sigma > cut.
struct Window {
  int64_t x_lo, x_hi, y_lo, y_hi;
};

template <typename scalar_t>
struct alignas(64) Splat {  // a cache line (two for double): one miss per visit
  scalar_t mx, my, ca, cb, cc, opac;
  scalar_t cut;  // sigma beyond which alpha < 1/255 for sure: lets pixels skip exp()
  Window window;
};

// Far outside any image but safe to convert to int64 (also where NaN extents end up).
constexpr double kFar = 1 << 30;

inline double clamp_far(double v) {
  return v > -kFar ? (v < kFar ? v : kFar) : -kFar;
}

// The ellipse 0.5 d^T Q d <= cut has half-extents sqrt(2 cut (Q^-1)_xx) and sqrt(2 cut
// (Q^-1)_yy); pixel x is inside when its centre x + 0.5 is. The cut already sits 1e-3 above
// the alpha threshold, so float rounding cannot drop a contributing pixel; the small extra
// margin covers the double-vs-float extent.
template <typename scalar_t>
inline Window ellipse_window(scalar_t mx, scalar_t my, scalar_t ca, scalar_t cb, scalar_t cc, scalar_t cut) {
  if (cut < 0) return {0, 0, 0, 0};
  const double det = static_cast<double>(ca) * cc - static_cast<double>(cb) * cb;
  if (!(det > 0)) return {-int64_t(kFar), int64_t(kFar), -int64_t(kFar), int64_t(kFar)};
  const double ex = std::sqrt(2.0 * cut * cc / det) + 1e-3;
  const double ey = std::sqrt(2.0 * cut * ca / det) + 1e-3;
  auto first = [](double v) { return static_cast<int64_t>(std::ceil(clamp_far(v - 0.5))); };
  auto past_last = [](double v) { return static_cast<int64_t>(std::floor(clamp_far(v - 0.5))) + 1; };
  return {first(mx - ex), past_last(mx + ex), first(my - ey), past_last(my + ey)};
}

template <typename scalar_t>
inline scalar_t sigma_cutoff(scalar_t opac) {
  return opac * 255.0 >= 1.0 ? static_cast<scalar_t>(std::log(opac * 255.0) + 1e-3) : static_cast<scalar_t>(-1);
}

// The splats live in a byte tensor so that the forward can hand them to the backward through autograd.
template <typename scalar_t>
Splat<scalar_t>* splat_data(const torch::Tensor& bytes) {
  uint8_t* data = bytes.data_ptr<uint8_t>();
  TORCH_CHECK(reinterpret_cast<uintptr_t>(data) % alignof(Splat<scalar_t>) == 0, "splats: misaligned buffer");
  return reinterpret_cast<Splat<scalar_t>*>(data);
}

template <typename scalar_t>
torch::Tensor make_splats(const scalar_t* means2d, const scalar_t* conics, const scalar_t* opacities, int64_t count) {
  auto bytes = torch::empty({count * static_cast<int64_t>(sizeof(Splat<scalar_t>))}, torch::kUInt8);
  Splat<scalar_t>* splats = splat_data<scalar_t>(bytes);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) {
    const scalar_t mx = means2d[2 * i], my = means2d[2 * i + 1];
    const scalar_t ca = conics[3 * i], cb = conics[3 * i + 1], cc = conics[3 * i + 2];
    const scalar_t cut = sigma_cutoff(opacities[i]);
    splats[i] = {mx, my, ca, cb, cc, opacities[i], cut, ellipse_window(mx, my, ca, cb, cc, cut)};
  }
  return bytes;
}

// Tile lists visit Gaussians in depth order, i.e. at random places in memory; fetching a
// Gaussian's splat and rows a few list entries ahead hides most of that latency.
constexpr int64_t kPrefetchAhead = 4;

template <typename scalar_t>
inline void prefetch_row(const scalar_t* row, int64_t D, bool for_write) {
  const char* bytes = reinterpret_cast<const char*>(row);
  const int64_t size = D * static_cast<int64_t>(sizeof(scalar_t));
  for (int64_t b = 0; b < size; b += 64) for_write ? __builtin_prefetch(bytes + b, 1) : __builtin_prefetch(bytes + b);
  for_write ? __builtin_prefetch(bytes + size - 1, 1) : __builtin_prefetch(bytes + size - 1);
}

// ---------------------------------------------------------------------------------------------
// Tiles: a tile of ts x ts pixels is stored as rows of chunks of kLanes pixels (the last one
// padded).

template <typename scalar_t>
struct TileFrame {
  using V = typename Lanes<scalar_t>::V;
  using M = typename Lanes<scalar_t>::M;
  using I = typename Lanes<scalar_t>::I;
  static constexpr int kLanes = Lanes<scalar_t>::kCount;
  int64_t ts, row_chunks, chunks;  // chunks = ts * row_chunks
  int64_t x0, y0;                  // image pixel of the tile's corner
  M lane;                          // 0, 1, ..., kLanes - 1
  std::vector<V> px;               // pixel-centre x of every chunk of a row

  TileFrame(int64_t tile_size)
      : ts(tile_size), row_chunks((tile_size + kLanes - 1) / kLanes), chunks(tile_size * row_chunks),
        x0(0), y0(0), px(row_chunks) {
    for (int l = 0; l < kLanes; ++l) lane[l] = l;
  }

  void place(int64_t tile_x0, int64_t tile_y0) {
    x0 = tile_x0;
    y0 = tile_y0;
    for (int64_t c = 0; c < row_chunks; ++c)
      px[c] = __builtin_convertvector(lane + static_cast<I>(x0 + c * kLanes), V) +
              static_cast<scalar_t>(0.5);
  }

  // Calls fn(ly, lx) for every pixel of the tile inside the image (tile-local coordinates).
  template <typename Fn>
  void for_each_pixel(int64_t W, int64_t H, Fn&& fn) const {
    for (int64_t ly = 0; ly < std::min(ts, H - y0); ++ly)
      for (int64_t lx = 0; lx < std::min(ts, W - x0); ++lx) fn(ly, lx);
  }

  int64_t chunk(int64_t ly, int64_t lx) const { return ly * row_chunks + lx / kLanes; }

  // Calls fn(q, dx, dy, in) for every chunk q that meets the splat's window: dx, dy are the
  // splat's mean minus the pixel centres, `in` masks the lanes inside the window. The forward
  // and backward passes share this sweep, so they visit exactly the same pixels.
  template <typename Fn>
  void sweep(const Splat<scalar_t>& s, Fn&& fn) const {
    const int64_t x_lo = std::clamp<int64_t>(s.window.x_lo - x0, 0, ts);
    const int64_t x_hi = std::clamp<int64_t>(s.window.x_hi - x0, 0, ts);
    const int64_t y_lo = std::clamp<int64_t>(s.window.y_lo - y0, 0, ts);
    const int64_t y_hi = std::clamp<int64_t>(s.window.y_hi - y0, 0, ts);
    if (x_lo >= x_hi || y_lo >= y_hi) return;
    for (int64_t c = x_lo / kLanes; c <= (x_hi - 1) / kLanes; ++c) {
      const M lx = lane + static_cast<I>(c * kLanes);
      const M in = (lx >= static_cast<I>(x_lo)) & (lx < static_cast<I>(x_hi));
      const V dx = s.mx - px[c];
      for (int64_t ly = y_lo; ly < y_hi; ++ly) {
        const scalar_t dy = s.my - (static_cast<scalar_t>(y0 + ly) + static_cast<scalar_t>(0.5));
        fn(ly * row_chunks + c, dx, broadcast<V>(dy), in);
      }
    }
  }
};

// alpha per lane and the lanes where the splat counts (in `mask` and alpha >= 1/255).
template <typename scalar_t>
struct Hit {
  typename Lanes<scalar_t>::V alpha, vis;  // vis = exp(-sigma)
  typename Lanes<scalar_t>::M mask;
};

template <typename scalar_t>
inline bool hit(const Splat<scalar_t>& s, typename Lanes<scalar_t>::V dx, typename Lanes<scalar_t>::V dy,
                typename Lanes<scalar_t>::M mask, Hit<scalar_t>& h) {
  using V = typename Lanes<scalar_t>::V;
  const V sigma = static_cast<scalar_t>(0.5) * (s.ca * dx * dx + s.cc * dy * dy) + s.cb * dx * dy;
  mask &= (sigma >= 0) & (sigma <= s.cut);
  if (!any(mask)) return false;
  // Lanes outside the mask are clamped into exp's range; their alpha is never used.
  const V clamped = sigma >= 0 ? (sigma <= s.cut ? sigma : s.cut) : broadcast<V>(scalar_t(0));
  h.vis = exp_lanes<scalar_t>(-clamped);
  const V oa = s.opac * h.vis;
  h.alpha = oa < static_cast<scalar_t>(kAlphaMax) ? oa : broadcast<V>(static_cast<scalar_t>(kAlphaMax));
  h.mask = mask & (h.alpha >= static_cast<scalar_t>(kAlphaMin));
  return any(h.mask);
}

// ---------------------------------------------------------------------------------------------
// Forward.

template <typename scalar_t>
void forward_impl(const Splat<scalar_t>* splats, const scalar_t* colors, int64_t C, int64_t N,
                  int64_t D, const std::vector<int64_t>& offsets, const std::vector<int32_t>& ids,
                  const TileGrid& grid, int64_t W, int64_t H, scalar_t* out, scalar_t* alpha_out,
                  int32_t* last_out) {
  using V = typename Lanes<scalar_t>::V;
  using M = typename Lanes<scalar_t>::M;
  using I = typename Lanes<scalar_t>::I;
  const int64_t n_tiles = grid.count();

#pragma omp parallel
  {
    TileFrame<scalar_t> f(grid.tile_size);
    const int64_t Q = f.chunks;
    std::vector<V> T(Q), acc(Q * D);  // acc[q * D + d]: the chunk's channels side by side
    std::vector<M> live(Q), last(Q);
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < C * n_tiles; ++tile) {
      const int64_t cam = tile / n_tiles, t = tile % n_tiles;
      f.place((t % grid.tiles_x) * f.ts, (t / grid.tiles_x) * f.ts);
      std::fill(T.begin(), T.end(), broadcast<V>(scalar_t(1)));
      std::fill(acc.begin(), acc.end(), V{});
      std::fill(last.begin(), last.end(), M{});
      std::fill(live.begin(), live.end(), M{});
      int64_t active = 0;
      f.for_each_pixel(W, H, [&](int64_t ly, int64_t lx) {
        live[f.chunk(ly, lx)][lx % f.kLanes] = -1;
        ++active;
      });
      const int64_t begin = offsets[tile], end = offsets[tile + 1];
      for (int64_t k = begin; k < end && active > 0; ++k) {
        if (k + kPrefetchAhead < end) {
          const int64_t ahead = cam * N + ids[k + kPrefetchAhead];
          __builtin_prefetch(&splats[ahead]);
          prefetch_row(colors + ahead * D, D, false);
        }
        const int64_t gi = cam * N + ids[k];
        const Splat<scalar_t>& s = splats[gi];
        const scalar_t* color = colors + gi * D;
        const M rank = broadcast<M>(static_cast<I>(k - begin + 1));
        f.sweep(s, [&](int64_t q, V dx, V dy, M in) {
          Hit<scalar_t> h;
          if (!hit(s, dx, dy, in & live[q], h)) return;
          const V next_T = T[q] * (1 - h.alpha);
          const M stop = h.mask & (next_T <= static_cast<scalar_t>(kTransMin));
          if (any(stop)) {
            live[q] &= ~stop;
            active -= count(stop);
          }
          const M take = h.mask & ~stop;
          const V w = take ? h.alpha * T[q] : V{};
          T[q] = take ? next_T : T[q];
          last[q] = take ? rank : last[q];
          V* a = acc.data() + q * D;
          for (int64_t d = 0; d < D; ++d) a[d] += w * color[d];
        });
      }
      f.for_each_pixel(W, H, [&](int64_t ly, int64_t lx) {
        const int64_t q = f.chunk(ly, lx), l = lx % f.kLanes;
        const int64_t pix = (cam * H + f.y0 + ly) * W + f.x0 + lx;
        for (int64_t d = 0; d < D; ++d) out[pix * D + d] = acc[q * D + d][l];
        alpha_out[pix] = 1 - T[q][l];
        last_out[pix] = static_cast<int32_t>(last[q][l]);
      });
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Backward.

template <typename scalar_t>
struct Grads {
  scalar_t *means2d, *conics, *colors, *opac;
};

template <typename scalar_t>
void backward_impl(const Splat<scalar_t>* splats, const std::vector<TileRect>& rects, const scalar_t* colors,
                   int64_t C, int64_t N, int64_t D, const int64_t* offsets, const int32_t* ids, const scalar_t* alpha_img,
                   const int32_t* last_img, const scalar_t* v_render, const scalar_t* v_alpha, const TileGrid& grid,
                   int64_t W, int64_t H, const Grads<scalar_t>& g) {
  using V = typename Lanes<scalar_t>::V;
  using M = typename Lanes<scalar_t>::M;
  using I = typename Lanes<scalar_t>::I;
  const int64_t n_tiles = grid.count();
  // One row of gradient sums (means2d 2, conics 3, opacity 1, colours D) per (Gaussian, tile) pair,
  // at the pair's place in the tile lists. Why not add each pair's sums into the Gaussian's gradient
  // as its tile finishes (under a lock, as before): float addition is not associative, so the result
  // depended on the order the threads finished in, and so did every CPU fit; the same test fit read
  // a straight-moving object's path as turning by anything from 9.1 to 11.8 degrees over five runs.
  // The rows are stored by Gaussian, each Gaussian's pairs in tile-list order, so that the closing pass
  // reads every Gaussian's rows as one run of memory. A Gaussian was listed in every tile of its
  // rectangle, so its rows start after all lower-numbered Gaussians' rectangles and its tile's row
  // within its own is the tile's row-major place in the rectangle: no pass over the lists is needed.
  const int64_t R = 6 + D, n_pairs = offsets[C * n_tiles];
  std::vector<int64_t> first(C * N + 1, 0);
  for (int64_t gi = 0; gi < C * N; ++gi) {
    const TileRect& r = rects[gi];
    first[gi + 1] = first[gi] + (is_empty(r) ? 0 : int64_t(r.x_hi - r.x_lo) * (r.y_hi - r.y_lo));
  }
  TORCH_CHECK(first[C * N] == n_pairs, "rasterize_backward: the tile lists do not match the Gaussians' tiles");
  // Not zero-filled here: the tile pass writes every row (zeros for pairs no pixel reaches), and
  // its threads share the first touch of the pages.
  std::unique_ptr<scalar_t[]> rows(new scalar_t[n_pairs * R]);
  const auto row_of = [&](int64_t gi, int64_t tx, int64_t ty) {
    const TileRect& r = rects[gi];
    return rows.get() + (first[gi] + (ty - r.y_lo) * (r.x_hi - r.x_lo) + (tx - r.x_lo)) * R;
  };

#pragma omp parallel
  {
    TileFrame<scalar_t> f(grid.tile_size);
    const int64_t Q = f.chunks;
    // Per chunk: transmittance (walked back up), final transmittance, dL/dalpha of the pixel,
    // dL/drender . (colour composited behind the current Gaussian), the pixel's list length;
    // dL/drender itself (vpix[q * D + d]).
    std::vector<V> T(Q), T_final(Q), vpa(Q), behind(Q), vpix(Q * D), g_col(D);
    std::vector<M> last(Q);
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < C * n_tiles; ++tile) {
      const int64_t cam = tile / n_tiles, t = tile % n_tiles, tx = t % grid.tiles_x, ty = t / grid.tiles_x;
      f.place(tx * f.ts, ty * f.ts);
      const auto zero_row = [&](int64_t k) { std::fill_n(row_of(cam * N + ids[k], tx, ty), R, scalar_t(0)); };
      std::fill(T.begin(), T.end(), broadcast<V>(scalar_t(1)));
      std::fill(T_final.begin(), T_final.end(), broadcast<V>(scalar_t(1)));
      std::fill(vpa.begin(), vpa.end(), V{});
      std::fill(vpix.begin(), vpix.end(), V{});
      std::fill(behind.begin(), behind.end(), V{});
      std::fill(last.begin(), last.end(), M{});
      int32_t max_last = 0;
      f.for_each_pixel(W, H, [&](int64_t ly, int64_t lx) {
        const int64_t q = f.chunk(ly, lx), l = lx % f.kLanes;
        const int64_t pix = (cam * H + f.y0 + ly) * W + f.x0 + lx;
        last[q][l] = last_img[pix];
        max_last = std::max(max_last, last_img[pix]);
        T[q][l] = T_final[q][l] = 1 - alpha_img[pix];
        vpa[q][l] = v_alpha[pix];
        for (int64_t d = 0; d < D; ++d) vpix[q * D + d][l] = v_render[pix * D + d];
      });
      const int64_t begin = offsets[tile];
      for (int64_t k = begin + max_last; k < offsets[tile + 1]; ++k) zero_row(k);
      for (int64_t k = begin + max_last - 1; k >= begin; --k) {
        if (k - kPrefetchAhead >= begin) {
          const int64_t ahead = cam * N + ids[k - kPrefetchAhead];
          __builtin_prefetch(&splats[ahead]);
          prefetch_row(colors + ahead * D, D, false);
          prefetch_row(g.colors + ahead * D, D, true);
          __builtin_prefetch(g.means2d + 2 * ahead, 1);
          __builtin_prefetch(g.conics + 3 * ahead, 1);
          __builtin_prefetch(g.opac + ahead, 1);
        }
        const int64_t gi = cam * N + ids[k];
        const Splat<scalar_t>& s = splats[gi];
        const scalar_t* color = colors + gi * D;
        const M rank = broadcast<M>(static_cast<I>(k - begin));
        V g_mx{}, g_my{}, g_a{}, g_b{}, g_c{}, g_o{};
        M touched{};
        std::fill(g_col.begin(), g_col.end(), V{});
        f.sweep(s, [&](int64_t q, V dx, V dy, M in) {
          Hit<scalar_t> h;
          if (!hit(s, dx, dy, in & (rank < last[q]), h)) return;
          touched |= h.mask;
          const V ra = 1 / (1 - h.alpha);
          T[q] = h.mask ? T[q] * ra : T[q];  // transmittance in front of this Gaussian
          const V fac = h.mask ? h.alpha * T[q] : V{};
          V cv{};  // colour . dL/drender
          const V* vp = vpix.data() + q * D;
          for (int64_t d = 0; d < D; ++d) {
            g_col[d] += fac * vp[d];
            cv += color[d] * vp[d];
          }
          // dL/dalpha: what this Gaussian shows minus what it hides (behind it and the final T).
          // Keeping behind as a dot product, not per channel, halves the channel loop's traffic.
          const V v_a = cv * T[q] - behind[q] * ra + T_final[q] * ra * vpa[q];
          behind[q] += fac * cv;
          // Where alpha is clamped to 0.999 it does not depend on sigma or the opacity.
          const V o_vis = s.opac * h.vis;
          const M free = h.mask & (o_vis <= static_cast<scalar_t>(kAlphaMax));
          const V v_sigma = free ? -o_vis * v_a : V{};
          g_a += static_cast<scalar_t>(0.5) * v_sigma * dx * dx;
          g_b += v_sigma * dx * dy;
          g_c += static_cast<scalar_t>(0.5) * v_sigma * dy * dy;
          g_mx += v_sigma * (s.ca * dx + s.cb * dy);
          g_my += v_sigma * (s.cb * dx + s.cc * dy);
          g_o += free ? h.vis * v_a : V{};
        });
        if (!any(touched)) {
          zero_row(k);
          continue;
        }
        scalar_t* row = row_of(gi, tx, ty);
        row[0] = lane_sum(g_mx);
        row[1] = lane_sum(g_my);
        row[2] = lane_sum(g_a);
        row[3] = lane_sum(g_b);
        row[4] = lane_sum(g_c);
        row[5] = lane_sum(g_o);
        for (int64_t d = 0; d < D; ++d) row[6 + d] = lane_sum(g_col[d]);
      }
    }
  }

#pragma omp parallel for schedule(static)
  for (int64_t gi = 0; gi < C * N; ++gi) {
    for (int64_t p = first[gi]; p < first[gi + 1]; ++p) {
      const scalar_t* row = rows.get() + p * R;
      g.means2d[2 * gi] += row[0];
      g.means2d[2 * gi + 1] += row[1];
      g.conics[3 * gi] += row[2];
      g.conics[3 * gi + 1] += row[3];
      g.conics[3 * gi + 2] += row[4];
      g.opac[gi] += row[5];
      for (int64_t d = 0; d < D; ++d) g.colors[gi * D + d] += row[6 + d];
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
std::vector<torch::Tensor> rasterize_forward(const torch::Tensor& means2d, const torch::Tensor& conics,
                                             const torch::Tensor& colors, const torch::Tensor& opacities,
                                             const torch::Tensor& radii, const torch::Tensor& depths, int64_t width,
                                             int64_t height, int64_t tile_size) {
  check_inputs(means2d, conics, colors, opacities, radii, depths);
  const int64_t C = colors.size(0), N = colors.size(1), D = colors.size(2);
  const TileGrid grid{tile_size, (width + tile_size - 1) / tile_size, (height + tile_size - 1) / tile_size};
  // Every pixel is written by its tile, so the images need no zeroing first.
  auto render = torch::empty({C, height, width, D}, colors.options());
  auto alpha = torch::empty({C, height, width, 1}, colors.options());
  auto last = torch::empty({C, height, width}, colors.options().dtype(torch::kInt32));
  std::vector<int64_t> offsets;
  std::vector<int32_t> ids;
  torch::Tensor splats;
  AT_DISPATCH_FLOATING_TYPES(colors.scalar_type(), "rasterize_forward", [&] {
    bin_gaussians<scalar_t>(means2d.data_ptr<scalar_t>(), radii.data_ptr<int32_t>(), depths.data_ptr<scalar_t>(), C, N,
                            grid, offsets, ids);
    splats = make_splats(means2d.data_ptr<scalar_t>(), conics.data_ptr<scalar_t>(), opacities.data_ptr<scalar_t>(),
                         C * N);
    forward_impl<scalar_t>(splat_data<scalar_t>(splats), colors.data_ptr<scalar_t>(), C, N, D, offsets, ids, grid,
                           width, height, render.data_ptr<scalar_t>(), alpha.data_ptr<scalar_t>(),
                           last.data_ptr<int32_t>());
  });
  auto offsets_t = torch::from_blob(offsets.data(), {static_cast<int64_t>(offsets.size())}, torch::kInt64).clone();
  auto ids_t = torch::from_blob(ids.data(), {static_cast<int64_t>(ids.size())}, torch::kInt32).clone();
  return {render, alpha, offsets_t, ids_t, last, splats};
}

// Returns gradients for means2d [C,N,2], conics [C,N,3], colors [C,N,D], opacities [C,N]. `splats` is
// what the forward returned for the same inputs: its per-Gaussian setup, not computed twice.
std::vector<torch::Tensor> rasterize_backward(const torch::Tensor& means2d, const torch::Tensor& conics,
                                              const torch::Tensor& colors, const torch::Tensor& opacities,
                                              const torch::Tensor& radii, const torch::Tensor& splats,
                                              const torch::Tensor& tile_offsets, const torch::Tensor& flat_ids,
                                              const torch::Tensor& alpha, const torch::Tensor& last_ids,
                                              const torch::Tensor& v_render, const torch::Tensor& v_alpha,
                                              int64_t width, int64_t height, int64_t tile_size) {
  TORCH_CHECK(v_render.is_contiguous() && v_alpha.is_contiguous(), "gradients must be contiguous");
  const int64_t C = colors.size(0), N = colors.size(1), D = colors.size(2);
  const TileGrid grid{tile_size, (width + tile_size - 1) / tile_size, (height + tile_size - 1) / tile_size};
  auto g_means2d = torch::zeros_like(means2d);
  auto g_conics = torch::zeros_like(conics);
  auto g_colors = torch::zeros_like(colors);
  auto g_opac = torch::zeros_like(opacities);
  AT_DISPATCH_FLOATING_TYPES(colors.scalar_type(), "rasterize_backward", [&] {
    TORCH_CHECK(splats.numel() == C * N * static_cast<int64_t>(sizeof(Splat<scalar_t>)),
                "rasterize_backward: splats must be the forward's for the same Gaussians");
    const auto rects = tile_rects(means2d.data_ptr<scalar_t>(), radii.data_ptr<int32_t>(), C * N, grid);
    const Grads<scalar_t> grads{g_means2d.data_ptr<scalar_t>(), g_conics.data_ptr<scalar_t>(),
                                g_colors.data_ptr<scalar_t>(), g_opac.data_ptr<scalar_t>()};
    backward_impl<scalar_t>(splat_data<scalar_t>(splats), rects, colors.data_ptr<scalar_t>(), C, N, D, tile_offsets.data_ptr<int64_t>(),
                            flat_ids.data_ptr<int32_t>(), alpha.data_ptr<scalar_t>(), last_ids.data_ptr<int32_t>(),
                            v_render.data_ptr<scalar_t>(), v_alpha.data_ptr<scalar_t>(), grid, width, height, grads);
  });
  return {g_means2d, g_conics, g_colors, g_opac};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("rasterize_forward", &rasterize_forward, "tile-based Gaussian rasterization, forward (CPU)");
  m.def("rasterize_backward", &rasterize_backward, "tile-based Gaussian rasterization, backward (CPU)");
}

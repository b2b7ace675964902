#include "models/kernels.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// AVX2 code paths compiled for that target only and chosen at run time
// (__builtin_cpu_supports): the build stays x86-64 baseline.
#define WAFERSIM_HAVE_AVX2_PATH 1
#define WAFERSIM_AVX2 __attribute__((target("avx2")))
#endif

#include "models/dtype.hpp"

namespace wafersim::models {

namespace {

void require_size(std::size_t got, std::size_t want, const char* what) {
  if (got != want) {
    throw std::invalid_argument(std::string(what) + ": size " + std::to_string(got) + " where " +
                                std::to_string(want) + " is required");
  }
}

// gemv_tile's lanes (kernels.hpp): column j of a tile goes to lane j % 16.
constexpr std::size_t kGemvLanes = 16;

// The tree that ends every dot product (kernels.hpp), from the sixteen lanes.
float combine_lanes(const float* acc) {
  float u[8], v[4], t[2];
  for (int l = 0; l < 8; ++l) u[l] = acc[2 * l] + acc[2 * l + 1];
  for (int l = 0; l < 4; ++l) v[l] = u[l] + u[l + 4];
  for (int l = 0; l < 2; ++l) t[l] = v[l] + v[l + 2];
  return t[0] + t[1];
}

// The definition of gemv_tile's order: `element(i, j)` is w(i, j) widened
// to fp32.
template <class Element>
void gemv_rows_scalar(std::size_t rows, std::size_t cols, const float* x, float* y,
                      Element element) {
  for (std::size_t i = 0; i < rows; ++i) {
    float acc[kGemvLanes] = {};
    for (std::size_t j = 0; j < cols; ++j) acc[j % kGemvLanes] += element(i, j) * x[j];
    y[i] = combine_lanes(acc);
  }
}

#if defined(WAFERSIM_HAVE_AVX2_PATH)

// Sixteen consecutive 16-bit elements of a row (eight 32-bit words) as two
// registers of eight fp32 lanes, widened exactly: `even` lane l holds element
// 2l (the low half of word l), `odd` lane l element 2l + 1 (the high half).
struct Bf16Split {
  WAFERSIM_AVX2 static void split(__m256i w, __m256& even, __m256& odd) {
    // bf16 bits in the upper half of a 32-bit lane are exactly the fp32 value.
    even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    odd =
        _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
};
struct Fp16Split {
  // fp16_bits_to_float on eight lanes that hold the fp16 bits in their low
  // half (high half zero), without F16C (not in the x86-64 baseline): move
  // exponent and mantissa into place and rebias; infinities and NaNs get the
  // rest of the rebias to 255; zeros and subnormals are
  // (2^-14 + m * 2^-24) - 2^-14, which is exact. The sign goes back last.
  WAFERSIM_AVX2 static __m256 widen(__m256i h) {
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    __m256i o = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7fff)), 13);
    const __m256i exp = _mm256_and_si256(o, _mm256_set1_epi32(0x0f800000));
    const __m256i rebias = _mm256_set1_epi32((127 - 15) << 23);
    o = _mm256_add_epi32(o, rebias);
    const __m256i inf_nan = _mm256_cmpeq_epi32(exp, _mm256_set1_epi32(0x0f800000));
    o = _mm256_add_epi32(o, _mm256_and_si256(inf_nan, rebias));
    const __m256i tiny = _mm256_cmpeq_epi32(exp, _mm256_setzero_si256());
    const __m256i two_m14 = _mm256_set1_epi32((127 - 14) << 23);
    const __m256 sub =
        _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(o, _mm256_set1_epi32(1 << 23))),
                      _mm256_castsi256_ps(two_m14));
    o = _mm256_or_si256(_mm256_and_si256(tiny, _mm256_castps_si256(sub)),
                        _mm256_andnot_si256(tiny, o));
    return _mm256_castsi256_ps(_mm256_or_si256(o, sign));
  }
  WAFERSIM_AVX2 static void split(__m256i w, __m256& even, __m256& odd) {
    even = widen(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)));
    odd = widen(_mm256_srli_epi32(w, 16));
  }
};

// u (u[l] = acc[2l] + acc[2l+1]) down the rest of combine_lanes' tree.
WAFERSIM_AVX2 inline float combine_u(__m256 u) {
  const __m128 v = _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
  const __m128 t = _mm_add_ps(v, _mm_movehl_ps(v, v));  // t[0] = v0 + v2, t[1] = v1 + v3
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// The masks of a partial last block of `elements` (0-15) 16-bit columns:
// the 32-bit words the row holds whole, and, when `elements` is odd, the lane
// whose low half takes the last element (read on its own: the word it starts
// may run past the tile's memory).
struct Tail16 {
  __m256i words, last;
  WAFERSIM_AVX2 explicit Tail16(std::size_t elements) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i half = _mm256_set1_epi32(static_cast<int>(elements / 2));
    words = _mm256_cmpgt_epi32(half, lane);
    last = _mm256_cmpeq_epi32(half, lane);
  }
};

// x as the 16-bit kernel reads one tile's columns: for each block of sixteen
// its even columns, then its odd ones (the lanes of Bf16Split / Fp16Split);
// the last block padded with zeros (0 * 0 adds +0: nothing, the lanes never
// holding -0).
WAFERSIM_AVX2 void stage_x_even_odd(const float* x, std::size_t cols, float* out) {
  std::size_t j = 0;
  for (; j + 16 <= cols; j += 16, out += 16) {
    const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + 8);
    // a0 a2 b0 b2 | a4 a6 b4 b6, then the 64-bit pairs into column order.
    const __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(
        out, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(out + 8, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o),
                                                                     _MM_SHUFFLE(3, 1, 2, 0))));
  }
  if (j == cols) return;
  for (int k = 0; k < 16; ++k) out[k] = 0.0f;
  for (std::size_t k = 0; j + k < cols; ++k) out[(k % 2) * 8 + k / 2] = x[j + k];
}

// R rows of one 16-bit tile (rows r, r + ld, ...) into y[0..R), every lane
// adding its columns in order: the two registers of a row hold its sixteen
// lanes (even and odd columns of each block), R rows share each x load.
template <class S, int R>
WAFERSIM_AVX2 void gemv_rows16_block(const std::uint16_t* r, std::size_t ld, std::size_t cols,
                                     const float* xs, float* y) {
  __m256 ae[R], ao[R];
  for (int k = 0; k < R; ++k) ae[k] = ao[k] = _mm256_setzero_ps();
  const std::size_t blocks = cols / 16, tail = cols % 16;
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m256 xe = _mm256_loadu_ps(xs + 16 * b), xo = _mm256_loadu_ps(xs + 16 * b + 8);
    for (int k = 0; k < R; ++k) {
      __m256 e, o;
      S::split(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + k * ld + 16 * b)), e, o);
      ae[k] = _mm256_add_ps(ae[k], _mm256_mul_ps(e, xe));
      ao[k] = _mm256_add_ps(ao[k], _mm256_mul_ps(o, xo));
    }
  }
  if (tail > 0) {
    const Tail16 masks(tail);
    const __m256 xe = _mm256_loadu_ps(xs + 16 * blocks), xo = _mm256_loadu_ps(xs + 16 * blocks + 8);
    for (int k = 0; k < R; ++k) {
      const std::uint16_t* p = r + k * ld + 16 * blocks;
      __m256i w = _mm256_maskload_epi32(reinterpret_cast<const int*>(p), masks.words);
      if (tail % 2 == 1)
        w = _mm256_or_si256(w, _mm256_and_si256(_mm256_set1_epi32(p[tail - 1]), masks.last));
      __m256 e, o;
      S::split(w, e, o);
      ae[k] = _mm256_add_ps(ae[k], _mm256_mul_ps(e, xe));
      ao[k] = _mm256_add_ps(ao[k], _mm256_mul_ps(o, xo));
    }
  }
  for (int k = 0; k < R; ++k) y[k] = combine_u(_mm256_add_ps(ae[k], ao[k]));
}

// Words [0, n) of a row (n <= 4 whole 32-bit words; more reads four),
// exactly those: no masked loads, which were several times slower here than
// plain loads of the same bytes.
template <int n>
WAFERSIM_AVX2 inline __m128i narrow_words(const std::uint16_t* p) {
  if constexpr (n >= 4) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (n == 3) return _mm_unpacklo_epi64(_mm_loadu_si64(p), _mm_loadu_si32(p + 4));
  if constexpr (n == 2) return _mm_loadu_si64(p);
  if constexpr (n == 1) return _mm_loadu_si32(p);
  return _mm_setzero_si128();
}

// Words [0, min(n, 4)) of eight rows (r, r + ld, ...) transposed 4 x 4 in
// each 128-bit half: w[m] holds word m of rows 0-3 in its low half, of rows
// 4-7 in its high half.
template <int n>
WAFERSIM_AVX2 inline void narrow_words_transposed(const std::uint16_t* r, std::size_t ld,
                                                  __m256i* w) {
  __m256i a[4];
  for (int i = 0; i < 4; ++i)
    a[i] = _mm256_set_m128i(narrow_words<n>(r + static_cast<std::size_t>(i + 4) * ld),
                            narrow_words<n>(r + static_cast<std::size_t>(i) * ld));
  const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
  w[0] = _mm256_unpacklo_epi64(t0, t2);
  w[1] = _mm256_unpackhi_epi64(t0, t2);
  w[2] = _mm256_unpacklo_epi64(t1, t3);
  w[3] = _mm256_unpackhi_epi64(t1, t3);
}

// Eight rows of a 16-bit tile of at most sixteen columns (rows r, r + ld,
// ..., r + 7 ld) into y[0..8), one row per fp32 lane. A tile this narrow is
// one (partial) block: lane j < cols of a row takes one product (0 + w * x)
// and the others stay +0. The rows' 32-bit words (two columns each) are
// transposed, 4 x 4 in each 128-bit half, so that a register holds one word
// of all eight rows; then every step of combine_lanes' tree is one vertical
// add for the eight rows, where the row-by-row kernel shuffles per row
// (Llama-3.2-1B's lm_head tiles on a WSE-3 are ~109 x 11).
template <class S, int C>
WAFERSIM_AVX2 void gemv_rows16_narrow8(const std::uint16_t* r, std::size_t ld, const float* x,
                                       float* y) {
  static_assert(C >= 1 && C <= 16);
  constexpr int kWords = C / 2;  // whole words of a row
  // w[m] (m < kWords): word m of rows 0-3 in the low half, of rows 4-7 in
  // the high half.
  __m256i w[8];
  if constexpr (kWords > 0) narrow_words_transposed<kWords>(r, ld, w);
  if constexpr (kWords > 4) narrow_words_transposed<kWords - 4>(r + 8, ld, w + 4);
  const __m256 zero = _mm256_setzero_ps();
  __m256 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = zero;
  for (int m = 0; m < kWords; ++m) {
    __m256 e, o;
    S::split(w[m], e, o);
    acc[2 * m] = _mm256_add_ps(zero, _mm256_mul_ps(e, _mm256_set1_ps(x[2 * m])));
    acc[2 * m + 1] = _mm256_add_ps(zero, _mm256_mul_ps(o, _mm256_set1_ps(x[2 * m + 1])));
  }
  if constexpr (C % 2 == 1) {
    // The last column on its own (its word may run past the tile's memory):
    // as the high half of the word that starts one column before it, or, in
    // a one-column tile, the low half of eight 16-bit reads.
    constexpr int j = C - 1;
    __m256 e, o;
    if constexpr (C >= 3) {
      __m256i last[4];
      narrow_words_transposed<1>(r + (j - 1), ld, last);
      S::split(last[0], o, e);  // e: the high halves
    } else {
      S::split(_mm256_setr_epi32(r[0], r[ld], r[2 * ld], r[3 * ld], r[4 * ld], r[5 * ld], r[6 * ld],
                                 r[7 * ld]),
               e, o);
    }
    acc[j] = _mm256_add_ps(zero, _mm256_mul_ps(e, _mm256_set1_ps(x[j])));
  }
  __m256 u[8], v[4];
  for (int l = 0; l < 8; ++l) u[l] = _mm256_add_ps(acc[2 * l], acc[2 * l + 1]);
  for (int l = 0; l < 4; ++l) v[l] = _mm256_add_ps(u[l], u[l + 4]);
  const __m256 t0 = _mm256_add_ps(v[0], v[2]), t1 = _mm256_add_ps(v[1], v[3]);
  _mm256_storeu_ps(y, _mm256_add_ps(t0, t1));
}

// The gemv_rows16_narrow8 kernels of one 16-bit format, by column count:
// table[cols - 1] for 1-16 columns.
using Narrow8 = void (*)(const std::uint16_t*, std::size_t, const float*, float*);
using Narrow8Table = std::array<Narrow8, 16>;
template <class S, int... C>
constexpr Narrow8Table narrow8_table(std::integer_sequence<int, C...>) {
  return {&gemv_rows16_narrow8<S, C + 1>...};
}
template <class S>
constexpr Narrow8Table kNarrow8 = narrow8_table<S>(std::make_integer_sequence<int, 16>{});

// R rows of one fp32 tile: lanes 0-7 of each block of sixteen columns in one
// register, lanes 8-15 in the other (column order); the partial last block
// read through masks, with x from `x_tail` there (zero padded).
template <int R>
WAFERSIM_AVX2 void gemv_rows32_block(const float* r, std::size_t ld, std::size_t cols,
                                     const float* x, const float* x_tail, float* y) {
  __m256 aa[R], ab[R];
  for (int k = 0; k < R; ++k) aa[k] = ab[k] = _mm256_setzero_ps();
  const std::size_t blocks = cols / 16, tail = cols % 16;
  for (std::size_t b = 0; b < blocks; ++b) {
    const __m256 xa = _mm256_loadu_ps(x + 16 * b), xb = _mm256_loadu_ps(x + 16 * b + 8);
    for (int k = 0; k < R; ++k) {
      const float* p = r + k * ld + 16 * b;
      aa[k] = _mm256_add_ps(aa[k], _mm256_mul_ps(_mm256_loadu_ps(p), xa));
      ab[k] = _mm256_add_ps(ab[k], _mm256_mul_ps(_mm256_loadu_ps(p + 8), xb));
    }
  }
  if (tail > 0) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(tail)), lane);
    const __m256i hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(tail) - 8), lane);
    const __m256 xa = _mm256_loadu_ps(x_tail), xb = _mm256_loadu_ps(x_tail + 8);
    for (int k = 0; k < R; ++k) {
      const float* p = r + k * ld + 16 * blocks;
      aa[k] = _mm256_add_ps(aa[k], _mm256_mul_ps(_mm256_maskload_ps(p, lo), xa));
      ab[k] = _mm256_add_ps(ab[k], _mm256_mul_ps(_mm256_maskload_ps(p + 8, hi), xb));
    }
  }
  // hadd: u0 u1 u4 u5 | u2 u3 u6 u7 (u[l] = acc[2l] + acc[2l+1]); the 64-bit
  // pairs into order.
  for (int k = 0; k < R; ++k) {
    const __m256 h = _mm256_hadd_ps(aa[k], ab[k]);
    y[k] = combine_u(
        _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(h), _MM_SHUFFLE(3, 1, 2, 0))));
  }
}

// The two kinds of tile kernel gemv_rows_avx2 drives: how many floats of
// staged x a tile of `cols` columns takes, how they are staged, and R rows
// of the tile (x: its columns of x; xs: its staged x).
template <class S>
struct Rows16 {
  using Stored = std::uint16_t;
  static std::size_t staged_floats(std::size_t cols) { return (cols + 15) / 16 * 16; }
  WAFERSIM_AVX2 static void stage(const float* x, std::size_t cols, float* out) {
    stage_x_even_odd(x, cols, out);
  }
  template <int R>
  WAFERSIM_AVX2 static void rows(const Stored* r, std::size_t ld, std::size_t cols, const float*,
                                 const float* xs, float* y) {
    gemv_rows16_block<S, R>(r, ld, cols, xs, y);
  }
};
struct Rows32 {
  using Stored = float;
  // Only the partial last block's x, zero padded (the full blocks read x).
  static std::size_t staged_floats(std::size_t) { return 16; }
  static void stage(const float* x, std::size_t cols, float* out) {
    const std::size_t tail = cols % 16, at = cols - tail;
    for (std::size_t k = 0; k < 16; ++k) out[k] = k < tail ? x[at + k] : 0.0f;
  }
  template <int R>
  WAFERSIM_AVX2 static void rows(const Stored* r, std::size_t ld, std::size_t cols, const float* x,
                                 const float* xs, float* y) {
    gemv_rows32_block<R>(r, ld, cols, x, xs, y);
  }
};

// gemv_tile on AVX2: x staged once, then four rows at a time (a last one to
// three one by one).
template <class K>
WAFERSIM_AVX2 void gemv_rows_avx2(const typename K::Stored* base, std::size_t ld, std::size_t rows,
                                  std::size_t cols, const float* x, float* y) {
  thread_local std::vector<float> staged;
  staged.resize(K::staged_floats(cols));
  K::stage(x, cols, staged.data());
  std::size_t i = 0;
  for (; i + 4 <= rows; i += 4)
    K::template rows<4>(base + i * ld, ld, cols, x, staged.data(), y + i);
  for (; i < rows; ++i) K::template rows<1>(base + i * ld, ld, cols, x, staged.data(), y + i);
}

#endif  // WAFERSIM_HAVE_AVX2_PATH

// The vector kernels take 8-bit tiles widened first, row by row, into fp32
// values in a per-thread buffer (the same decode_8bit(code) * scale each
// element is), then run as on an fp32 tile: a tile is a few KiB, so the
// extra pass stays in the cache while the codes stream from memory at a
// quarter of fp32's bytes.
MatrixView widen_8bit_tile(const MatrixView& w) {
  thread_local std::vector<float> buffer;
  const std::size_t rows = static_cast<std::size_t>(w.rows());
  const std::size_t cols = static_cast<std::size_t>(w.cols());
  buffer.resize(rows * cols);
  const std::uint8_t* codes = w.codes();
  const float* scales = w.row_scales();
  const DType t = w.storage();
  for (std::size_t i = 0; i < rows; ++i) {
    const std::uint8_t* r = codes + i * w.leading_dim();
    float* out = buffer.data() + i * cols;
    for (std::size_t j = 0; j < cols; ++j) out[j] = decode_8bit(t, r[j]) * scales[i];
  }
  return MatrixView(buffer.data(), w.rows(), w.cols(), cols);
}

void check_gemv_sizes(const MatrixView& w, std::span<const float> x, std::span<float> y) {
  require_size(x.size(), static_cast<std::size_t>(w.cols()), "gemv_tile x");
  require_size(y.size(), static_cast<std::size_t>(w.rows()), "gemv_tile y");
}

// gemv_tile_scalar on sizes already checked.
void gemv_scalar_checked(const MatrixView& w, std::span<const float> x, std::span<float> y) {
  const std::size_t rows = static_cast<std::size_t>(w.rows());
  const std::size_t cols = static_cast<std::size_t>(w.cols());
  const std::size_t ld = w.leading_dim();
  auto at = [ld](std::size_t i, std::size_t j) { return i * ld + j; };
  switch (w.storage()) {
    case DType::int8:
    case DType::fp8_e4m3: {
      // Each element widened as decode_8bit(code) * its row's scale (one
      // fp32 multiply, the value quantize_row made).
      const std::uint8_t* codes = w.codes();
      const float* scales = w.row_scales();
      const DType t = w.storage();
      return gemv_rows_scalar(rows, cols, x.data(), y.data(), [&](std::size_t i, std::size_t j) {
        return decode_8bit(t, codes[at(i, j)]) * scales[i];
      });
    }
    case DType::bf16: {
      const std::uint16_t* bits = w.bits();
      return gemv_rows_scalar(rows, cols, x.data(), y.data(), [&](std::size_t i, std::size_t j) {
        return bf16_bits_to_float(bits[at(i, j)]);
      });
    }
    case DType::fp16: {
      const std::uint16_t* bits = w.bits();
      return gemv_rows_scalar(rows, cols, x.data(), y.data(), [&](std::size_t i, std::size_t j) {
        return fp16_bits_to_float(bits[at(i, j)]);
      });
    }
    default: {
      const float* data = w.data();
      return gemv_rows_scalar(rows, cols, x.data(), y.data(),
                              [&](std::size_t i, std::size_t j) { return data[at(i, j)]; });
    }
  }
}

// gemv_tile with kernel `k`, which the host has, on sizes already checked.
void gemv_checked(GemvKernel k, const MatrixView& w, std::span<const float> x, std::span<float> y) {
  if (k == GemvKernel::scalar) return gemv_scalar_checked(w, x, y);
  if (is_8bit(w.storage())) return gemv_checked(k, widen_8bit_tile(w), x, y);
#if defined(WAFERSIM_HAVE_AVX2_PATH)
  const std::size_t rows = static_cast<std::size_t>(w.rows());
  const std::size_t cols = static_cast<std::size_t>(w.cols());
  const std::size_t ld = w.leading_dim();
  switch (w.storage()) {
    case DType::bf16:
      return gemv_rows_avx2<Rows16<Bf16Split>>(w.bits(), ld, rows, cols, x.data(), y.data());
    case DType::fp16:
      return gemv_rows_avx2<Rows16<Fp16Split>>(w.bits(), ld, rows, cols, x.data(), y.data());
    default:
      return gemv_rows_avx2<Rows32>(w.data(), ld, rows, cols, x.data(), y.data());
  }
#endif
  gemv_scalar_checked(w, x, y);
}

}  // namespace

void gemv_tile_scalar(const MatrixView& w, std::span<const float> x, std::span<float> y) {
  check_gemv_sizes(w, x, y);
  gemv_scalar_checked(w, x, y);
}

bool gemv_kernel_available(GemvKernel k) {
  switch (k) {
    case GemvKernel::scalar:
      return true;
    case GemvKernel::avx2:
#if defined(WAFERSIM_HAVE_AVX2_PATH)
      return __builtin_cpu_supports("avx2");
#else
      return false;
#endif
  }
  return false;
}

GemvKernel best_gemv_kernel() {
  static const GemvKernel best =
      gemv_kernel_available(GemvKernel::avx2) ? GemvKernel::avx2 : GemvKernel::scalar;
  return best;
}

const char* gemv_kernel_name(GemvKernel k) {
  switch (k) {
    case GemvKernel::scalar:
      return "scalar";
    case GemvKernel::avx2:
      return "avx2";
  }
  return "?";
}

void gemv_tile_with(GemvKernel k, const MatrixView& w, std::span<const float> x,
                    std::span<float> y) {
  if (!gemv_kernel_available(k))
    throw std::invalid_argument(std::string("gemv_tile_with: the ") + gemv_kernel_name(k) +
                                " kernel is not available on this host");
  check_gemv_sizes(w, x, y);
  gemv_checked(k, w, x, y);
}

void gemv_tile(const MatrixView& w, std::span<const float> x, std::span<float> y) {
  check_gemv_sizes(w, x, y);
  gemv_checked(best_gemv_kernel(), w, x, y);  // the best kernel: available by definition
}

void gemv_tiles(const MatrixView& w, std::span<const int> col_begin, std::span<const float> x,
                std::span<float> y, std::size_t y_stride) {
  const std::size_t tiles = col_begin.empty() ? 0 : col_begin.size() - 1;
  const auto rows = static_cast<std::size_t>(w.rows());
  bool ok = tiles > 0 && col_begin.front() == 0 && col_begin.back() == w.cols() &&
            x.size() == static_cast<std::size_t>(w.cols()) && y_stride >= rows &&
            y.size() >= (tiles - 1) * y_stride + rows;
  int widest = 0;
  for (std::size_t t = 0; ok && t < tiles; ++t) {
    ok = col_begin[t + 1] > col_begin[t];
    widest = std::max(widest, col_begin[t + 1] - col_begin[t]);
  }
  if (!ok)
    throw std::invalid_argument(
        "gemv_tiles: col_begin must rise from 0 to the view's " + std::to_string(w.cols()) +
        " columns, x hold them and y hold every tile's " + std::to_string(rows) + " rows");
  const GemvKernel k = best_gemv_kernel();
  auto tile = [&](std::size_t t, std::size_t row0, std::size_t n) {
    const int c0 = col_begin[t], nc = col_begin[t + 1] - c0;
    gemv_checked(k, w.sub(static_cast<int>(row0), static_cast<int>(n), c0, nc),
                 x.subspan(static_cast<std::size_t>(c0), static_cast<std::size_t>(nc)),
                 y.subspan(t * y_stride + row0, n));
  };
  std::size_t done = 0;  // rows the narrow kernel took
#if defined(WAFERSIM_HAVE_AVX2_PATH)
  const bool bits16 = w.storage() == DType::bf16 || w.storage() == DType::fp16;
  if (k == GemvKernel::avx2 && bits16 && widest <= 16 && rows >= 8) {
    const Narrow8Table& narrow =
        w.storage() == DType::bf16 ? kNarrow8<Bf16Split> : kNarrow8<Fp16Split>;
    const std::uint16_t* base = w.bits();
    const std::size_t ld = w.leading_dim();
    for (; done + 8 <= rows; done += 8)
      for (std::size_t t = 0; t < tiles; ++t) {
        const auto c0 = static_cast<std::size_t>(col_begin[t]);
        const auto nc = static_cast<std::size_t>(col_begin[t + 1]) - c0;
        narrow[nc - 1](base + done * ld + c0, ld, x.data() + c0, y.data() + t * y_stride + done);
      }
  }
#endif
  if (done < rows)
    for (std::size_t t = 0; t < tiles; ++t) tile(t, done, rows - done);
}

float sum_of_squares(std::span<const float> x) {
  float s = 0.0f;
  for (float v : x) s += v * v;
  return s;
}

void rmsnorm_apply(std::span<const float> x, float sum_sq, int n, std::span<const float> gamma,
                   float eps, std::span<float> out) {
  require_size(gamma.size(), x.size(), "rmsnorm_apply gamma");
  require_size(out.size(), x.size(), "rmsnorm_apply out");
  if (n <= 0) throw std::invalid_argument("rmsnorm_apply: n must be > 0");
  const float inv = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = (x[i] * inv) * gamma[i];
}

void rmsnorm(std::span<const float> x, std::span<const float> gamma, float eps,
             std::span<float> out) {
  rmsnorm_apply(x, sum_of_squares(x), static_cast<int>(x.size()), gamma, eps, out);
}

double rope_inverse_frequency(int i, int head_dim, double theta, const RopeScaling& scaling) {
  const double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  if (scaling.type == RopeScalingType::none) return f;
  // llama3: Hugging Face _compute_llama3_parameters, in the same order.
  const double pi = 3.14159265358979323846;
  const double wavelength = 2.0 * pi / f;
  const double old_context = static_cast<double>(scaling.original_max_position);
  const double low = scaling.low_freq_factor;
  const double high = scaling.high_freq_factor;
  if (wavelength > old_context / low) return f / scaling.factor;
  if (wavelength < old_context / high) return f;
  const double smooth = (old_context / wavelength - low) / (high - low);
  return (1.0 - smooth) * f / scaling.factor + smooth * f;
}

void rope_apply(std::span<float> head, int position, double theta, const RopeScaling& scaling) {
  const std::size_t d = head.size();
  if (d % 2 != 0) throw std::invalid_argument("rope_apply: head size must be even");
  const std::size_t half = d / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const double inv_freq =
        rope_inverse_frequency(static_cast<int>(i), static_cast<int>(d), theta, scaling);
    const double angle = static_cast<double>(position) * inv_freq;
    const float c = static_cast<float>(std::cos(angle));
    const float s = static_cast<float>(std::sin(angle));
    const float x0 = head[i];
    const float x1 = head[i + half];
    head[i] = x0 * c - x1 * s;
    head[i + half] = x1 * c + x0 * s;
  }
}

AttentionPartial attention_partial(std::span<const float> q, const float* k_rows,
                                   const float* v_rows, int n_positions, int head_dim,
                                   float scale) {
  if (head_dim <= 0 || n_positions < 0) {
    throw std::invalid_argument("attention_partial: head_dim must be > 0 and n_positions >= 0");
  }
  const std::size_t hd = static_cast<std::size_t>(head_dim);
  require_size(q.size(), hd, "attention_partial q");
  const std::size_t n = static_cast<std::size_t>(n_positions);
  std::vector<float> scores(n);
  for (std::size_t t = 0; t < n; ++t) {
    const float* k = k_rows + t * hd;
    float dot = 0.0f;
    for (std::size_t d = 0; d < hd; ++d) dot += q[d] * k[d];
    scores[t] = scale * dot;
  }
  return attention_partial_from_scores(scores, v_rows, head_dim);
}

AttentionPartial attention_partial_from_scores(std::span<const float> scores, const float* v_rows,
                                               int head_dim) {
  if (head_dim <= 0) throw std::invalid_argument("attention_partial: head_dim must be > 0");
  const std::size_t hd = static_cast<std::size_t>(head_dim);
  AttentionPartial p{-std::numeric_limits<float>::infinity(), 0.0f, std::vector<float>(hd, 0.0f)};
  const std::size_t n = scores.size();
  for (std::size_t t = 0; t < n; ++t)
    if (scores[t] > p.max) p.max = scores[t];
  for (std::size_t t = 0; t < n; ++t) {
    const float w = std::exp(scores[t] - p.max);
    p.sum += w;
    const float* v = v_rows + t * hd;
    for (std::size_t d = 0; d < hd; ++d) p.acc[d] += w * v[d];
  }
  return p;
}

AttentionPartial combine(const AttentionPartial& a, const AttentionPartial& b) {
  constexpr float kEmpty = -std::numeric_limits<float>::infinity();
  if (b.max == kEmpty) return a;
  if (a.max == kEmpty) return b;
  require_size(b.acc.size(), a.acc.size(), "combine b.acc");
  const float m = a.max > b.max ? a.max : b.max;
  const float fa = std::exp(a.max - m);
  const float fb = std::exp(b.max - m);
  AttentionPartial out{m, a.sum * fa + b.sum * fb, std::vector<float>(a.acc.size())};
  for (std::size_t d = 0; d < a.acc.size(); ++d) out.acc[d] = a.acc[d] * fa + b.acc[d] * fb;
  return out;
}

void attention_finalize(const AttentionPartial& p, std::span<float> out) {
  require_size(out.size(), p.acc.size(), "attention_finalize out");
  if (!(p.sum > 0.0f)) {
    throw std::invalid_argument(
        "attention_finalize: partial covers no positions (sum must be > 0)");
  }
  for (std::size_t d = 0; d < out.size(); ++d) out[d] = p.acc[d] / p.sum;
}

void silu_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out) {
  require_size(up.size(), gate.size(), "silu_mul up");
  require_size(out.size(), gate.size(), "silu_mul out");
  for (std::size_t i = 0; i < gate.size(); ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    out[i] = (g * sig) * up[i];
  }
}

void add_inplace(std::span<float> acc, std::span<const float> x) {
  require_size(x.size(), acc.size(), "add_inplace x");
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += x[i];
}

void axpy_inplace(float w, std::span<const float> x, std::span<float> acc) {
  require_size(x.size(), acc.size(), "axpy_inplace x");
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += w * x[i];
}

float sum_of(std::span<const float> x) {
  float s = 0.0f;
  for (float v : x) s += v;
  return s;
}

float sum_of_squared_deviations(std::span<const float> x, float mean) {
  float s = 0.0f;
  for (float v : x) {
    const float d = v - mean;
    s += d * d;
  }
  return s;
}

void layernorm_apply(std::span<const float> x, float mean, float var, std::span<const float> gamma,
                     std::span<const float> beta, float eps, std::span<float> out) {
  require_size(gamma.size(), x.size(), "layernorm_apply gamma");
  require_size(beta.size(), x.size(), "layernorm_apply beta");
  require_size(out.size(), x.size(), "layernorm_apply out");
  const float inv = 1.0f / std::sqrt(var + eps);
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = ((x[i] - mean) * inv) * gamma[i] + beta[i];
}

void layernorm(std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
               float eps, std::span<float> out) {
  if (x.empty()) throw std::invalid_argument("layernorm: the vector must not be empty");
  const float n = static_cast<float>(x.size());
  const float mean = sum_of(x) / n;
  const float var = sum_of_squared_deviations(x, mean) / n;
  layernorm_apply(x, mean, var, gamma, beta, eps, out);
}

void gelu_tanh(std::span<const float> x, std::span<float> out) {
  require_size(out.size(), x.size(), "gelu_tanh out");
  constexpr float kSqrt2OverPi = 0.7978845608f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    const float inner = kSqrt2OverPi * (v + 0.044715f * (v * v * v));
    out[i] = (0.5f * v) * (1.0f + std::tanh(inner));
  }
}

std::vector<ExpertChoice> route_top_k(std::span<const float> router_logits, int k) {
  if (k < 1 || static_cast<std::size_t>(k) > router_logits.size()) {
    throw std::invalid_argument("route_top_k: k must be in [1, " +
                                std::to_string(router_logits.size()) + "], got " +
                                std::to_string(k));
  }
  std::vector<ExpertChoice> chosen;
  std::vector<bool> taken(router_logits.size(), false);
  for (int j = 0; j < k; ++j) {
    std::size_t best = router_logits.size();
    for (std::size_t e = 0; e < router_logits.size(); ++e) {
      if (taken[e]) continue;
      if (best == router_logits.size() || router_logits[e] > router_logits[best]) best = e;
    }
    taken[best] = true;
    chosen.push_back({static_cast<int>(best), router_logits[best]});
  }
  const float m = chosen.front().weight;
  float total = 0.0f;
  for (ExpertChoice& c : chosen) {
    c.weight = std::exp(c.weight - m);
    total += c.weight;
  }
  for (ExpertChoice& c : chosen) c.weight = c.weight / total;
  return chosen;
}

std::int32_t argmax(std::span<const float> x) {
  if (x.empty()) throw std::invalid_argument("argmax: the span must not be empty");
  std::size_t best = 0;
  for (std::size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[best] || (std::isnan(x[best]) && !std::isnan(x[i]))) best = i;
  }
  return static_cast<std::int32_t>(best);
}

}  // namespace wafersim::models

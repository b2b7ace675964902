#include "models/kernels.hpp"

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
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

// The element types a view can hold, each with its exact widening to fp32.
struct Fp32Elements {
  using Stored = float;
  static float widen(float v) { return v; }
};
struct Bf16Elements {
  using Stored = std::uint16_t;
  static float widen(std::uint16_t b) { return bf16_bits_to_float(b); }
};
struct Fp16Elements {
  using Stored = std::uint16_t;
  static float widen(std::uint16_t b) { return fp16_bits_to_float(b); }
};

// The definition of gemv_tile's order, for one storage type.
template <class E>
void gemv_rows_scalar(const typename E::Stored* base, std::size_t ld, std::size_t rows,
                      std::size_t cols, const float* x, float* y) {
  // Four rows at a time: each row keeps its own accumulator and its own
  // increasing-j order (the contract); interleaving rows only gives the CPU
  // independent dependency chains to overlap.
  std::size_t i = 0;
  for (; i + 4 <= rows; i += 4) {
    const typename E::Stored* r0 = base + i * ld;
    const typename E::Stored* r1 = r0 + ld;
    const typename E::Stored* r2 = r1 + ld;
    const typename E::Stored* r3 = r2 + ld;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (std::size_t j = 0; j < cols; ++j) {
      const float xj = x[j];
      a0 += E::widen(r0[j]) * xj;
      a1 += E::widen(r1[j]) * xj;
      a2 += E::widen(r2[j]) * xj;
      a3 += E::widen(r3[j]) * xj;
    }
    y[i] = a0;
    y[i + 1] = a1;
    y[i + 2] = a2;
    y[i + 3] = a3;
  }
  for (; i < rows; ++i) {
    const typename E::Stored* r = base + i * ld;
    float a = 0.0f;
    for (std::size_t j = 0; j < cols; ++j) a += E::widen(r[j]) * x[j];
    y[i] = a;
  }
}

#if defined(__SSE2__)

// Four consecutive elements of one row as fp32 lanes (unaligned loads).
struct Fp32Lanes {
  using Elements = Fp32Elements;
  static __m128 load4(const float* p) { return _mm_loadu_ps(p); }
};
struct Bf16Lanes {
  using Elements = Bf16Elements;
  static __m128 load4(const std::uint16_t* p) {
    // bf16 bits in the upper half of each 32-bit lane: exactly the fp32 value.
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
  }
};
struct Fp16Lanes {
  using Elements = Fp16Elements;
  static __m128 load4(const std::uint16_t* p) {
    // fp16_bits_to_float, four at a time without F16C (not in the x86-64
    // baseline): move exponent and mantissa into place and rebias; infinities
    // and NaNs get the rest of the rebias to 255; zeros and subnormals are
    // (2^-14 + m * 2^-24) - 2^-14, which is exact. The sign goes back last.
    const __m128i h = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                         _mm_setzero_si128());
    const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
    __m128i o = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x7fff)), 13);
    const __m128i exp = _mm_and_si128(o, _mm_set1_epi32(0x0f800000));
    const __m128i rebias = _mm_set1_epi32((127 - 15) << 23);
    o = _mm_add_epi32(o, rebias);
    const __m128i inf_nan = _mm_cmpeq_epi32(exp, _mm_set1_epi32(0x0f800000));
    o = _mm_add_epi32(o, _mm_and_si128(inf_nan, rebias));
    const __m128i tiny = _mm_cmpeq_epi32(exp, _mm_setzero_si128());
    const __m128i two_m14 = _mm_set1_epi32((127 - 14) << 23);
    const __m128 sub = _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(o, _mm_set1_epi32(1 << 23))),
                                  _mm_castsi128_ps(two_m14));
    o = _mm_or_si128(_mm_and_si128(tiny, _mm_castps_si128(sub)), _mm_andnot_si128(tiny, o));
    return _mm_castsi128_ps(_mm_or_si128(o, sign));
  }
};

// Rows [0, n) of r, n <= 4G: one SSE lane per row, G registers of four rows.
// Four columns of each group of four rows are loaded, transposed so that each
// register holds one column, and added column after column, so every lane
// performs exactly its row's scalar sequence a = a + w(i, j) * x[j] for
// j = 0, 1, ... (SSE2 has no fused multiply-add: each product is rounded,
// then added). Lanes past n repeat row n - 1 (valid memory, result
// discarded): the simulated cores' tiles are small and rarely a multiple of
// eight rows (6-13 rows by 12-221 columns for Llama 3.2 1B on WSE-3), so a
// scalar remainder would cost as much as the vector part. The columns left
// over past a multiple of four continue in scalar code from the lanes'
// accumulators, in the same order.
template <class L, int G>
void gemv_row_block(const typename L::Elements::Stored* r, std::size_t ld, std::size_t n,
                    std::size_t cols, const float* x, float* y) {
  using E = typename L::Elements;
  constexpr std::size_t kLanes = 4 * G;
  const typename E::Stored* p[kLanes];
  for (std::size_t k = 0; k < kLanes; ++k) p[k] = r + (k < n ? k : n - 1) * ld;
  __m128 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm_setzero_ps();
  std::size_t j = 0;
  for (; j + 4 <= cols; j += 4) {
    const __m128 xs = _mm_loadu_ps(x + j);
    const __m128 x0 = _mm_shuffle_ps(xs, xs, _MM_SHUFFLE(0, 0, 0, 0));
    const __m128 x1 = _mm_shuffle_ps(xs, xs, _MM_SHUFFLE(1, 1, 1, 1));
    const __m128 x2 = _mm_shuffle_ps(xs, xs, _MM_SHUFFLE(2, 2, 2, 2));
    const __m128 x3 = _mm_shuffle_ps(xs, xs, _MM_SHUFFLE(3, 3, 3, 3));
    for (int g = 0; g < G; ++g) {
      const typename E::Stored* const* q = p + 4 * g;
      __m128 c0 = L::load4(q[0] + j), c1 = L::load4(q[1] + j);
      __m128 c2 = L::load4(q[2] + j), c3 = L::load4(q[3] + j);
      _MM_TRANSPOSE4_PS(c0, c1, c2, c3);  // c0 = column j of the four rows, ...
      acc[g] = _mm_add_ps(acc[g], _mm_mul_ps(c0, x0));
      acc[g] = _mm_add_ps(acc[g], _mm_mul_ps(c1, x1));
      acc[g] = _mm_add_ps(acc[g], _mm_mul_ps(c2, x2));
      acc[g] = _mm_add_ps(acc[g], _mm_mul_ps(c3, x3));
    }
  }
  float a[kLanes];
  for (int g = 0; g < G; ++g) _mm_storeu_ps(a + 4 * g, acc[g]);
  for (; j < cols; ++j) {
    const float xj = x[j];
    for (std::size_t k = 0; k < n; ++k) a[k] += E::widen(p[k][j]) * xj;
  }
  for (std::size_t k = 0; k < n; ++k) y[k] = a[k];
}

// Blocks of eight rows; a last block of one to four rows uses one register.
// (Sixteen rows at a time, four independent chains, measured no faster: the
// loads and the transposes' shuffles bound the loop, not the additions'
// latency.)
template <class L>
void gemv_rows_sse2(const typename L::Elements::Stored* base, std::size_t ld, std::size_t rows,
                    std::size_t cols, const float* x, float* y) {
  for (std::size_t i = 0; i < rows; i += 8) {
    const std::size_t n = rows - i < 8 ? rows - i : 8;
    if (n > 4) {
      gemv_row_block<L, 2>(base + i * ld, ld, n, cols, x, y + i);
    } else {
      gemv_row_block<L, 1>(base + i * ld, ld, n, cols, x, y + i);
    }
  }
}

#endif  // __SSE2__

#if defined(WAFERSIM_HAVE_AVX2_PATH)

// Eight consecutive elements of one row as fp32 lanes (unaligned loads),
// widened exactly as the scalar code widens them. No FMA: the target is avx2
// alone, and -ffp-contract=off keeps every product rounded before its add.
struct Fp32Lanes8 {
  using Elements = Fp32Elements;
  using Sse = Fp32Lanes;
  WAFERSIM_AVX2 static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
};
struct Bf16Lanes8 {
  using Elements = Bf16Elements;
  using Sse = Bf16Lanes;
  WAFERSIM_AVX2 static __m256 load8(const std::uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
};
struct Fp16Lanes8 {
  using Elements = Fp16Elements;
  using Sse = Fp16Lanes;
  // Fp16Lanes::load4 on eight lanes (see there).
  WAFERSIM_AVX2 static __m256 load8(const std::uint16_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
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
};

// Rows c[0..8) of eight columns each become columns: c[k] = column k of the
// eight rows.
WAFERSIM_AVX2 inline void transpose8(__m256 c[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(c[0], c[1]), t1 = _mm256_unpackhi_ps(c[0], c[1]);
  const __m256 t2 = _mm256_unpacklo_ps(c[2], c[3]), t3 = _mm256_unpackhi_ps(c[2], c[3]);
  const __m256 t4 = _mm256_unpacklo_ps(c[4], c[5]), t5 = _mm256_unpackhi_ps(c[4], c[5]);
  const __m256 t6 = _mm256_unpacklo_ps(c[6], c[7]), t7 = _mm256_unpackhi_ps(c[6], c[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  c[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  c[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  c[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  c[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  c[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  c[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  c[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  c[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// gemv_row_block with eight lanes per register: rows [0, n) of r, n <= 8G,
// eight columns at a time, then four (each 128-bit half of a register holds
// four columns of one row: rows k and k + 4 share a register, and one 4x4
// transpose per half gives each column of the eight rows in lane order),
// then the last one to three columns in scalar code from the lanes'
// accumulators. Lanes past n repeat row n - 1 (valid memory, result
// discarded). Every lane performs exactly its row's scalar sequence.
template <class L, int G>
WAFERSIM_AVX2 void gemv_row_block_avx2(const typename L::Elements::Stored* r, std::size_t ld,
                                       std::size_t n, std::size_t cols, const float* x, float* y) {
  using E = typename L::Elements;
  constexpr std::size_t kLanes = 8 * G;
  const typename E::Stored* p[kLanes];
  for (std::size_t k = 0; k < kLanes; ++k) p[k] = r + (k < n ? k : n - 1) * ld;
  __m256 acc[G];
  for (int g = 0; g < G; ++g) acc[g] = _mm256_setzero_ps();
  std::size_t j = 0;
  // x is broadcast from memory at each use: sixteen registers cannot hold
  // eight broadcasts beside eight columns and the accumulators.
  for (; j + 8 <= cols; j += 8) {
    for (int g = 0; g < G; ++g) {
      __m256 c[8];
      for (int k = 0; k < 8; ++k) c[k] = L::load8(p[8 * g + k] + j);
      transpose8(c);  // c[k] = column j + k of the group's eight rows
      for (int k = 0; k < 8; ++k)
        acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(c[k], _mm256_broadcast_ss(x + j + k)));
    }
  }
  if (j + 4 <= cols) {
    for (int g = 0; g < G; ++g) {
      const typename E::Stored* const* q = p + 8 * g;
      __m256 c[4];
      for (int k = 0; k < 4; ++k)
        c[k] = _mm256_set_m128(L::Sse::load4(q[k + 4] + j), L::Sse::load4(q[k] + j));
      // _MM_TRANSPOSE4_PS on both halves at once.
      const __m256 t0 = _mm256_unpacklo_ps(c[0], c[1]), t1 = _mm256_unpackhi_ps(c[0], c[1]);
      const __m256 t2 = _mm256_unpacklo_ps(c[2], c[3]), t3 = _mm256_unpackhi_ps(c[2], c[3]);
      c[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
      c[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
      c[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
      c[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
      for (int k = 0; k < 4; ++k)
        acc[g] = _mm256_add_ps(acc[g], _mm256_mul_ps(c[k], _mm256_broadcast_ss(x + j + k)));
    }
    j += 4;
  }
  if (j == cols) {
    // Straight from the registers: a copy loop through memory becomes a
    // `rep movs` that costs as much as a small tile's arithmetic.
    for (int g = 0; g < G; ++g) {
      const std::size_t first = 8 * static_cast<std::size_t>(g);
      if (first >= n) break;
      if (n - first >= 8) {
        _mm256_storeu_ps(y + first, acc[g]);
      } else {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i mask =
            _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - first)), lane);
        _mm256_maskstore_ps(y + first, mask, acc[g]);
      }
    }
    return;
  }
  float a[kLanes];
  for (int g = 0; g < G; ++g) _mm256_storeu_ps(a + 8 * g, acc[g]);
  for (; j < cols; ++j) {
    const float xj = x[j];
    for (std::size_t k = 0; k < n; ++k) a[k] += E::widen(p[k][j]) * xj;
  }
  for (std::size_t k = 0; k < n; ++k) y[k] = a[k];
}

// Blocks of sixteen rows (two independent chains); a last block of one to
// eight rows uses one register.
template <class L>
WAFERSIM_AVX2 void gemv_rows_avx2(const typename L::Elements::Stored* base, std::size_t ld,
                                  std::size_t rows, std::size_t cols, const float* x, float* y) {
  for (std::size_t i = 0; i < rows; i += 16) {
    const std::size_t n = rows - i < 16 ? rows - i : 16;
    if (n > 8) {
      gemv_row_block_avx2<L, 2>(base + i * ld, ld, n, cols, x, y + i);
    } else {
      gemv_row_block_avx2<L, 1>(base + i * ld, ld, n, cols, x, y + i);
    }
  }
}

#endif  // WAFERSIM_HAVE_AVX2_PATH

// gemv_rows_scalar for 8-bit codes: each element is widened as
// decode_8bit(code) * its row's scale (one fp32 multiply, the value
// quantize_row made), then multiplied by x[j] and added, as for the other
// storages.
void gemv_rows_scalar_8bit(DType t, const std::uint8_t* base, std::size_t ld, const float* scales,
                           std::size_t rows, std::size_t cols, const float* x, float* y) {
  for (std::size_t i = 0; i < rows; ++i) {
    const std::uint8_t* r = base + i * ld;
    const float s = scales[i];
    float a = 0.0f;
    for (std::size_t j = 0; j < cols; ++j) a += (decode_8bit(t, r[j]) * s) * x[j];
    y[i] = a;
  }
}

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

}  // namespace

void gemv_tile_scalar(const MatrixView& w, std::span<const float> x, std::span<float> y) {
  check_gemv_sizes(w, x, y);
  const std::size_t rows = static_cast<std::size_t>(w.rows());
  const std::size_t cols = static_cast<std::size_t>(w.cols());
  const std::size_t ld = w.leading_dim();
  switch (w.storage()) {
    case DType::int8:
    case DType::fp8_e4m3:
      return gemv_rows_scalar_8bit(w.storage(), w.codes(), ld, w.row_scales(), rows, cols, x.data(),
                                   y.data());
    case DType::bf16:
      return gemv_rows_scalar<Bf16Elements>(w.bits(), ld, rows, cols, x.data(), y.data());
    case DType::fp16:
      return gemv_rows_scalar<Fp16Elements>(w.bits(), ld, rows, cols, x.data(), y.data());
    default:
      return gemv_rows_scalar<Fp32Elements>(w.data(), ld, rows, cols, x.data(), y.data());
  }
}

bool gemv_kernel_available(GemvKernel k) {
  switch (k) {
    case GemvKernel::scalar:
      return true;
    case GemvKernel::sse2:
#if defined(__SSE2__)
      return true;
#else
      return false;
#endif
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
  static const GemvKernel best = gemv_kernel_available(GemvKernel::avx2)   ? GemvKernel::avx2
                                 : gemv_kernel_available(GemvKernel::sse2) ? GemvKernel::sse2
                                                                           : GemvKernel::scalar;
  return best;
}

const char* gemv_kernel_name(GemvKernel k) {
  switch (k) {
    case GemvKernel::scalar:
      return "scalar";
    case GemvKernel::sse2:
      return "sse2";
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
  if (is_8bit(w.storage()) && k != GemvKernel::scalar)
    return gemv_tile_with(k, widen_8bit_tile(w), x, y);
  const std::size_t rows = static_cast<std::size_t>(w.rows());
  const std::size_t cols = static_cast<std::size_t>(w.cols());
  const std::size_t ld = w.leading_dim();
  switch (k) {
    case GemvKernel::scalar:
      break;
    case GemvKernel::sse2:
#if defined(__SSE2__)
      switch (w.storage()) {
        case DType::bf16:
          return gemv_rows_sse2<Bf16Lanes>(w.bits(), ld, rows, cols, x.data(), y.data());
        case DType::fp16:
          return gemv_rows_sse2<Fp16Lanes>(w.bits(), ld, rows, cols, x.data(), y.data());
        default:
          return gemv_rows_sse2<Fp32Lanes>(w.data(), ld, rows, cols, x.data(), y.data());
      }
#endif
      break;
    case GemvKernel::avx2:
#if defined(WAFERSIM_HAVE_AVX2_PATH)
      switch (w.storage()) {
        case DType::bf16:
          return gemv_rows_avx2<Bf16Lanes8>(w.bits(), ld, rows, cols, x.data(), y.data());
        case DType::fp16:
          return gemv_rows_avx2<Fp16Lanes8>(w.bits(), ld, rows, cols, x.data(), y.data());
        default:
          return gemv_rows_avx2<Fp32Lanes8>(w.data(), ld, rows, cols, x.data(), y.data());
      }
#endif
      break;
  }
  gemv_tile_scalar(w, x, y);
}

void gemv_tile(const MatrixView& w, std::span<const float> x, std::span<float> y) {
  // AVX2 loses to SSE2 on tiles narrower than three eight-column steps (the
  // lm_head's 109x12 tiles of Llama 3.2 1B on WSE-3: 6.5 vs 8.2 GMAC/s in
  // cache): its per-block cost (sixteen row pointers, 8x8 transposes, the
  // four-column step) is not repaid. Both give the same bits.
  const GemvKernel best = best_gemv_kernel();
  gemv_tile_with(best == GemvKernel::avx2 && w.cols() < 24 ? GemvKernel::sse2 : best, w, x, y);
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

void rope_apply(std::span<float> head, int position, double theta) {
  const std::size_t d = head.size();
  if (d % 2 != 0) throw std::invalid_argument("rope_apply: head size must be even");
  const std::size_t half = d / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
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
  AttentionPartial p{-std::numeric_limits<float>::infinity(), 0.0f, std::vector<float>(hd, 0.0f)};
  if (n_positions == 0) return p;

  const std::size_t n = static_cast<std::size_t>(n_positions);
  std::vector<float> scores(n);
  for (std::size_t t = 0; t < n; ++t) {
    const float* k = k_rows + t * hd;
    float dot = 0.0f;
    for (std::size_t d = 0; d < hd; ++d) dot += q[d] * k[d];
    scores[t] = scale * dot;
    if (scores[t] > p.max) p.max = scores[t];
  }
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

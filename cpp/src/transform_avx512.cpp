// AVX-512 (F, BW) merge of planes into elements, with the inverse bit
// reorder: the decoder's last step, 64 elements a step (the AVX2 kernel does
// 32). Same results as the scalar kernel; chosen at run time.
#include "transform_kernels.h"

#ifdef NNC_HAVE_AVX2_KERNELS

#include <immintrin.h>

// GCC 12 warns about its own shuffle intrinsics (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define NNC_AVX512BW __attribute__((target("avx512f,avx512bw")))

namespace nnc {
namespace detail {
namespace {

// Masks of the inverse reorder of W-byte words: the mantissa stays, the
// exponent moves down one bit, the sign (just above the mantissa) moves to
// the top. For W = 1 the shifts run on 16-bit lanes: the masks drop every
// bit that crosses from one byte into its neighbour.
struct Masks512 {
  __m512i mant, exp_lo, sign;
  unsigned sign_shift;
};

NNC_AVX512BW __m512i set_word(std::size_t w, std::uint64_t v) {
  switch (w) {
    case 1: return _mm512_set1_epi8(static_cast<char>(v));
    case 2: return _mm512_set1_epi16(static_cast<short>(v));
    case 4: return _mm512_set1_epi32(static_cast<int>(v));
    default: return _mm512_set1_epi64(static_cast<long long>(v));
  }
}

NNC_AVX512BW Masks512 make_masks(Layout layout) {
  const std::size_t w = layout_width(layout);
  const unsigned bits = static_cast<unsigned>(w * 8), m = layout_mantissa_bits(layout);
  const std::uint64_t mant = (std::uint64_t(1) << m) - 1;
  Masks512 k;
  k.mant = set_word(w, mant);
  k.exp_lo = set_word(w, ((std::uint64_t(1) << (bits - 1)) - 1) & ~mant);
  k.sign = set_word(w, std::uint64_t(1) << (bits - 1));
  k.sign_shift = bits - 1 - m;
  return k;
}

// (y & mant) | ((y >> 1) & exp_lo) | ((y << sign_shift) & sign); the three
// masks are disjoint. W = 1 and 2 shift 16-bit lanes, W = 4 32-bit ones.
template <int W>
NNC_AVX512BW inline __m512i decode_vec(__m512i y, const Masks512& k) {
  __m512i down, up;
  if constexpr (W <= 2) {
    down = _mm512_srli_epi16(y, 1);
    up = _mm512_sll_epi16(y, _mm_cvtsi32_si128(static_cast<int>(k.sign_shift)));
  } else {
    down = _mm512_srli_epi32(y, 1);
    up = _mm512_sll_epi32(y, _mm_cvtsi32_si128(static_cast<int>(k.sign_shift)));
  }
  __m512i r = _mm512_and_si512(y, k.mant);
  r = _mm512_ternarylogic_epi32(r, down, k.exp_lo, 0xF8);  // r | (down & exp_lo)
  return _mm512_ternarylogic_epi32(r, up, k.sign, 0xF8);
}

template <int W, bool T>
NNC_AVX512BW inline __m512i finish(__m512i v, const Masks512& k) {
  if constexpr (T) return decode_vec<W>(v, k);
  else return v;
}

NNC_AVX512BW inline __m512i load(const std::uint8_t* p) { return _mm512_loadu_si512(p); }
NNC_AVX512BW inline void store(std::uint8_t* p, __m512i v) { _mm512_storeu_si512(p, v); }

// 64 elements of 2 bytes: bytes interleaved within 128-bit lanes, then the
// lanes put in element order.
template <bool T>
NNC_AVX512BW inline void merge2(std::uint8_t* d, const std::uint8_t* s0, const std::uint8_t* s1,
                                const Masks512& k) {
  const __m512i p0 = load(s0), p1 = load(s1);
  const __m512i lo = _mm512_unpacklo_epi8(p0, p1), hi = _mm512_unpackhi_epi8(p0, p1);
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  store(d, finish<2, T>(_mm512_permutex2var_epi64(lo, first, hi), k));
  store(d + 64, finish<2, T>(_mm512_permutex2var_epi64(lo, second, hi), k));
}

// 64 elements of 4 bytes: byte and word interleaves within 128-bit lanes
// (e0..e3 hold elements 0-3, 4-7, 8-11, 12-15 of each lane's 16), then a
// 4 x 4 transpose of the 128-bit lanes.
template <bool T>
NNC_AVX512BW inline void merge4(std::uint8_t* d, const std::uint8_t* s0, const std::uint8_t* s1,
                                const std::uint8_t* s2, const std::uint8_t* s3,
                                const Masks512& k) {
  const __m512i p0 = load(s0), p1 = load(s1), p2 = load(s2), p3 = load(s3);
  const __m512i a = _mm512_unpacklo_epi8(p0, p1), b = _mm512_unpackhi_epi8(p0, p1);
  const __m512i c = _mm512_unpacklo_epi8(p2, p3), e = _mm512_unpackhi_epi8(p2, p3);
  const __m512i e0 = _mm512_unpacklo_epi16(a, c), e1 = _mm512_unpackhi_epi16(a, c);
  const __m512i e2 = _mm512_unpacklo_epi16(b, e), e3 = _mm512_unpackhi_epi16(b, e);
  const __m512i t0 = _mm512_shuffle_i64x2(e0, e1, 0x44), t1 = _mm512_shuffle_i64x2(e2, e3, 0x44);
  const __m512i t2 = _mm512_shuffle_i64x2(e0, e1, 0xEE), t3 = _mm512_shuffle_i64x2(e2, e3, 0xEE);
  store(d, finish<4, T>(_mm512_shuffle_i64x2(t0, t1, 0x88), k));
  store(d + 64, finish<4, T>(_mm512_shuffle_i64x2(t0, t1, 0xDD), k));
  store(d + 128, finish<4, T>(_mm512_shuffle_i64x2(t2, t3, 0x88), k));
  store(d + 192, finish<4, T>(_mm512_shuffle_i64x2(t2, t3, 0xDD), k));
}

}  // namespace

bool transform_avx512_available() {
  return dispatch_allows(DispatchLevel::avx512);
}

NNC_AVX512BW void merge_ptrs_avx512(std::uint8_t* dst, const std::uint8_t* const* planes,
                                    std::size_t count, std::size_t es, Layout layout) {
  const bool tx = layout != Layout::none;
  const Masks512 k = make_masks(tx ? layout : Layout::f16);
  std::size_t i = 0;
  if (es == 2) {
    for (; i + 64 <= count; i += 64) {
      if (tx) merge2<true>(dst + 2 * i, planes[0] + i, planes[1] + i, k);
      else merge2<false>(dst + 2 * i, planes[0] + i, planes[1] + i, k);
    }
  } else if (es == 4) {
    for (; i + 64 <= count; i += 64) {
      if (tx)
        merge4<true>(dst + 4 * i, planes[0] + i, planes[1] + i, planes[2] + i, planes[3] + i, k);
      else
        merge4<false>(dst + 4 * i, planes[0] + i, planes[1] + i, planes[2] + i, planes[3] + i, k);
    }
  } else if (es == 1 && tx) {
    for (; i + 64 <= count; i += 64) store(dst + i, decode_vec<1>(load(planes[0] + i), k));
  }
  // The rest (and 8-byte elements) through the AVX2 kernel.
  const std::uint8_t* rest[256];
  for (std::size_t j = 0; j < es; ++j) rest[j] = planes[j] + i;
  avx2_kernels.merge_ptrs(dst + i * es, rest, count - i, es, layout);
}

}  // namespace detail
}  // namespace nnc

#else

namespace nnc {
namespace detail {
bool transform_avx512_available() { return false; }
void merge_ptrs_avx512(std::uint8_t*, const std::uint8_t* const*, std::size_t, std::size_t,
                       Layout) {}
}  // namespace detail
}  // namespace nnc

#endif

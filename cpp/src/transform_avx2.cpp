// AVX2 kernels. Compiled into every x86-64 build through function target
// attributes (not -mavx2 on the file), so the binary still runs on CPUs
// without AVX2; transform.cpp picks these only when the CPU has it.
#include "transform_kernels.h"

#ifdef NNC_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include "nncodecs/reorder_word.h"

#define NNC_AVX2 __attribute__((target("avx2")))

namespace nnc {
namespace detail {
namespace {

// Masks for the reorder of W-byte words held in a vector. For W = 1 the
// shifts run on 16-bit lanes: the masks drop every bit that would cross
// from one byte into its neighbour.
struct Masks {
  __m256i mant, exp_hi, exp_lo, sign, low_sign;
  __m128i sign_shift;  // W*8 - 1 - m: distance between the sign's two homes
  __m128i one;
};

NNC_AVX2 __m256i set_word(std::size_t w, uint64_t v) {
  switch (w) {
    case 1: return _mm256_set1_epi8(static_cast<char>(v));
    case 2: return _mm256_set1_epi16(static_cast<short>(v));
    case 4: return _mm256_set1_epi32(static_cast<int>(v));
    default: return _mm256_set1_epi64x(static_cast<long long>(v));
  }
}

NNC_AVX2 Masks make_masks(Layout layout) {
  const std::size_t w = layout_width(layout);
  const unsigned bits = static_cast<unsigned>(w * 8), m = layout_mantissa_bits(layout);
  const uint64_t all = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  const uint64_t mant = (uint64_t(1) << m) - 1;
  Masks k;
  k.mant = set_word(w, mant);
  k.exp_hi = set_word(w, all & ~((uint64_t(1) << (m + 1)) - 1));
  k.exp_lo = set_word(w, ((uint64_t(1) << (bits - 1)) - 1) & ~mant);
  k.sign = set_word(w, uint64_t(1) << (bits - 1));
  k.low_sign = set_word(w, uint64_t(1) << m);
  k.sign_shift = _mm_cvtsi32_si128(static_cast<int>(bits - 1 - m));
  k.one = _mm_cvtsi32_si128(1);
  return k;
}

template <int W>
NNC_AVX2 inline __m256i sll(__m256i x, __m128i c) {
  if constexpr (W <= 2) return _mm256_sll_epi16(x, c);
  else if constexpr (W == 4) return _mm256_sll_epi32(x, c);
  else return _mm256_sll_epi64(x, c);
}

template <int W>
NNC_AVX2 inline __m256i srl(__m256i x, __m128i c) {
  if constexpr (W <= 2) return _mm256_srl_epi16(x, c);
  else if constexpr (W == 4) return _mm256_srl_epi32(x, c);
  else return _mm256_srl_epi64(x, c);
}

template <int W>
NNC_AVX2 inline __m256i encode_vec(__m256i x, const Masks& k) {
  __m256i r = _mm256_and_si256(x, k.mant);
  r = _mm256_or_si256(r, _mm256_and_si256(sll<W>(x, k.one), k.exp_hi));
  return _mm256_or_si256(r, srl<W>(_mm256_and_si256(x, k.sign), k.sign_shift));
}

template <int W>
NNC_AVX2 inline __m256i decode_vec(__m256i y, const Masks& k) {
  __m256i r = _mm256_and_si256(y, k.mant);
  r = _mm256_or_si256(r, _mm256_and_si256(srl<W>(y, k.one), k.exp_lo));
  return _mm256_or_si256(r, sll<W>(_mm256_and_si256(y, k.low_sign), k.sign_shift));
}

// Transform of one vector: none, encode or decode.
enum class Tx { none, encode, decode };

template <int W, Tx T>
NNC_AVX2 inline __m256i apply(__m256i v, const Masks& k) {
  if constexpr (T == Tx::encode) return encode_vec<W>(v, k);
  else if constexpr (T == Tx::decode) return decode_vec<W>(v, k);
  else return v;
}

NNC_AVX2 inline __m256i load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
NNC_AVX2 inline void store(uint8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

// ---- reorder alone --------------------------------------------------------

NNC_AVX2 void reorder_avx2(uint8_t* dst, const uint8_t* src, std::size_t begin, std::size_t end,
                           Layout layout, bool decode) {
  const Masks k = make_masks(layout);
  const std::size_t w = layout_width(layout);
  constexpr std::size_t block = 32;
  // Whole vectors here; the tail (under 32 bytes) goes to the scalar kernel.
  const std::size_t per = block / w;
  const std::size_t stop = begin + (end - begin) / per * per;
  switch (w) {
    case 1:
      for (std::size_t i = begin; i < stop; i += per)
        store(dst + i, decode ? decode_vec<1>(load(src + i), k) : encode_vec<1>(load(src + i), k));
      break;
    case 2:
      for (std::size_t i = begin; i < stop; i += per)
        store(dst + 2 * i, decode ? decode_vec<2>(load(src + 2 * i), k)
                                  : encode_vec<2>(load(src + 2 * i), k));
      break;
    case 4:
      for (std::size_t i = begin; i < stop; i += per)
        store(dst + 4 * i, decode ? decode_vec<4>(load(src + 4 * i), k)
                                  : encode_vec<4>(load(src + 4 * i), k));
      break;
    case 8:
      for (std::size_t i = begin; i < stop; i += per)
        store(dst + 8 * i, decode ? decode_vec<8>(load(src + 8 * i), k)
                                  : encode_vec<8>(load(src + 8 * i), k));
      break;
    default: break;
  }
  scalar_kernels.reorder(dst, src, stop, end, layout, decode);
}

// ---- split: 32 elements per step -------------------------------------------

// 2-byte elements: bytes to planes d0 (low) and d1 (high).
template <Tx T>
NNC_AVX2 inline void split2(uint8_t* d0, uint8_t* d1, const uint8_t* s, const Masks& k) {
  const __m256i shuf = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                        0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  __m256i a = apply<2, T>(load(s), k), b = apply<2, T>(load(s + 32), k);
  // Per 128-bit lane: 8 low bytes then 8 high bytes; then gather quadwords.
  a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(a, shuf), 0xD8);
  b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, shuf), 0xD8);
  store(d0, _mm256_permute2x128_si256(a, b, 0x20));
  store(d1, _mm256_permute2x128_si256(a, b, 0x31));
}

// 4-byte elements: a 4x4 transpose of quadwords after an in-lane byte shuffle.
template <Tx T>
NNC_AVX2 inline void split4(uint8_t* d0, uint8_t* d1, uint8_t* d2, uint8_t* d3, const uint8_t* s,
                            const Masks& k) {
  const __m256i shuf = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i gather = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i v[4];
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_shuffle_epi8(apply<4, T>(load(s + 32 * i), k), shuf);
    v[i] = _mm256_permutevar8x32_epi32(v[i], gather);  // [P0 P1 P2 P3], 8 bytes each
  }
  __m256i t0 = _mm256_unpacklo_epi64(v[0], v[1]), t1 = _mm256_unpackhi_epi64(v[0], v[1]);
  __m256i t2 = _mm256_unpacklo_epi64(v[2], v[3]), t3 = _mm256_unpackhi_epi64(v[2], v[3]);
  store(d0, _mm256_permute2x128_si256(t0, t2, 0x20));
  store(d1, _mm256_permute2x128_si256(t1, t3, 0x20));
  store(d2, _mm256_permute2x128_si256(t0, t2, 0x31));
  store(d3, _mm256_permute2x128_si256(t1, t3, 0x31));
}

NNC_AVX2 void split_avx2(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                         std::size_t end, std::size_t es, Layout layout) {
  const bool tx = layout != Layout::none;
  const Masks k = make_masks(tx ? layout : Layout::f16);
  std::size_t i = begin;
  if (es == 1 && tx) {
    // One plane: the split is a copy, so only the reorder remains.
    reorder_avx2(dst, src, begin, end, layout, false);
    return;
  }
  if (es == 2) {
    for (; i + 32 <= end; i += 32) {
      if (tx) split2<Tx::encode>(dst + i, dst + n + i, src + 2 * i, k);
      else split2<Tx::none>(dst + i, dst + n + i, src + 2 * i, k);
    }
  } else if (es == 4) {
    for (; i + 32 <= end; i += 32) {
      uint8_t* d = dst + i;
      if (tx) split4<Tx::encode>(d, d + n, d + 2 * n, d + 3 * n, src + 4 * i, k);
      else split4<Tx::none>(d, d + n, d + 2 * n, d + 3 * n, src + 4 * i, k);
    }
  } else if (es == 8) {
    // Two stages through L1: words of 4 bytes, then pairs (byte j, byte j+4).
    alignas(32) uint8_t words[256], quads[4][64];
    for (; i + 32 <= end; i += 32) {
      const uint8_t* s = src + 8 * i;
      if (tx) {
        for (int v = 0; v < 8; ++v) store(words + 32 * v, encode_vec<8>(load(s + 32 * v), k));
        s = words;
      }
      for (int h = 0; h < 2; ++h)
        split4<Tx::none>(quads[0] + 32 * h, quads[1] + 32 * h, quads[2] + 32 * h,
                         quads[3] + 32 * h, s + 128 * h, k);
      for (std::size_t j = 0; j < 4; ++j)
        split2<Tx::none>(dst + j * n + i, dst + (j + 4) * n + i, quads[j], k);
    }
  }
  scalar_kernels.split(dst, src, n, i, end, es, layout);
}

// ---- merge: 32 elements per step ------------------------------------------

template <Tx T>
NNC_AVX2 inline void merge2(uint8_t* d, const uint8_t* s0, const uint8_t* s1, const Masks& k) {
  __m256i p0 = load(s0), p1 = load(s1);
  __m256i lo = _mm256_unpacklo_epi8(p0, p1), hi = _mm256_unpackhi_epi8(p0, p1);
  store(d, apply<2, T>(_mm256_permute2x128_si256(lo, hi, 0x20), k));
  store(d + 32, apply<2, T>(_mm256_permute2x128_si256(lo, hi, 0x31), k));
}

template <Tx T>
NNC_AVX2 inline void merge4(uint8_t* d, const uint8_t* s0, const uint8_t* s1, const uint8_t* s2,
                            const uint8_t* s3, const Masks& k) {
  __m256i p0 = load(s0), p1 = load(s1), p2 = load(s2), p3 = load(s3);
  __m256i a = _mm256_unpacklo_epi8(p0, p1), b = _mm256_unpackhi_epi8(p0, p1);
  __m256i c = _mm256_unpacklo_epi8(p2, p3), e = _mm256_unpackhi_epi8(p2, p3);
  __m256i e0 = _mm256_unpacklo_epi16(a, c), e1 = _mm256_unpackhi_epi16(a, c);
  __m256i e2 = _mm256_unpacklo_epi16(b, e), e3 = _mm256_unpackhi_epi16(b, e);
  store(d, apply<4, T>(_mm256_permute2x128_si256(e0, e1, 0x20), k));
  store(d + 32, apply<4, T>(_mm256_permute2x128_si256(e2, e3, 0x20), k));
  store(d + 64, apply<4, T>(_mm256_permute2x128_si256(e0, e1, 0x31), k));
  store(d + 96, apply<4, T>(_mm256_permute2x128_si256(e2, e3, 0x31), k));
}

NNC_AVX2 void merge_avx2(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                         std::size_t end, std::size_t es, Layout layout) {
  const bool tx = layout != Layout::none;
  const Masks k = make_masks(tx ? layout : Layout::f16);
  std::size_t i = begin;
  if (es == 1 && tx) {
    reorder_avx2(dst, src, begin, end, layout, true);
    return;
  }
  if (es == 2) {
    for (; i + 32 <= end; i += 32) {
      if (tx) merge2<Tx::decode>(dst + 2 * i, src + i, src + n + i, k);
      else merge2<Tx::none>(dst + 2 * i, src + i, src + n + i, k);
    }
  } else if (es == 4) {
    for (; i + 32 <= end; i += 32) {
      const uint8_t* s = src + i;
      if (tx) merge4<Tx::decode>(dst + 4 * i, s, s + n, s + 2 * n, s + 3 * n, k);
      else merge4<Tx::none>(dst + 4 * i, s, s + n, s + 2 * n, s + 3 * n, k);
    }
  } else if (es == 8) {
    // Inverse of the two-stage split: pairs, then words of 4 bytes.
    alignas(32) uint8_t quads[4][64];
    for (; i + 32 <= end; i += 32) {
      for (std::size_t j = 0; j < 4; ++j)
        merge2<Tx::none>(quads[j], src + j * n + i, src + (j + 4) * n + i, k);
      uint8_t* d = dst + 8 * i;
      for (int h = 0; h < 2; ++h)
        merge4<Tx::none>(d + 128 * h, quads[0] + 32 * h, quads[1] + 32 * h, quads[2] + 32 * h,
                         quads[3] + 32 * h, k);
      if (tx)
        for (int v = 0; v < 8; ++v) store(d + 32 * v, decode_vec<8>(load(d + 32 * v), k));
    }
  }
  scalar_kernels.merge(dst, src, n, i, end, es, layout);
}

NNC_AVX2 void merge_ptrs_avx2(uint8_t* dst, const uint8_t* const* planes, std::size_t count,
                              std::size_t es, Layout layout) {
  const bool tx = layout != Layout::none;
  const Masks k = make_masks(tx ? layout : Layout::f16);
  std::size_t i = 0;
  if (es == 2) {
    for (; i + 32 <= count; i += 32) {
      if (tx) merge2<Tx::decode>(dst + 2 * i, planes[0] + i, planes[1] + i, k);
      else merge2<Tx::none>(dst + 2 * i, planes[0] + i, planes[1] + i, k);
    }
  } else if (es == 4) {
    for (; i + 32 <= count; i += 32) {
      if (tx)
        merge4<Tx::decode>(dst + 4 * i, planes[0] + i, planes[1] + i, planes[2] + i,
                           planes[3] + i, k);
      else
        merge4<Tx::none>(dst + 4 * i, planes[0] + i, planes[1] + i, planes[2] + i, planes[3] + i,
                         k);
    }
  } else if (es == 1 && tx) {
    reorder_avx2(dst, planes[0], 0, count, layout, true);
    return;
  }
  const uint8_t* rest[256];
  for (std::size_t j = 0; j < es; ++j) rest[j] = planes[j] + i;
  scalar_kernels.merge_ptrs(dst + i * es, rest, count - i, es, layout);
}

}  // namespace

const RangeKernels avx2_kernels = {reorder_avx2, split_avx2, merge_avx2, merge_ptrs_avx2};

}  // namespace detail
}  // namespace nnc

#endif  // NNC_HAVE_AVX2_KERNELS

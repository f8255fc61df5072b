// AVX2 rANS decoding of whole 32-lane steps: four vectors of 8 lanes. Each
// lane's table entry comes from a scalar load (on Zen 4 that decodes about
// 10% faster than a gather, together with the byte shuffle below), and one
// byte shuffle of the next 16 words, from a table entry per 8-bit refill
// mask, hands each refilling lane its word in lane order (the prefix count
// the GPU gets from ballot/popc). Two sub-blocks decode interleaved.
// Templated on the precision (immediate shifts). Compiled through target
// attributes; chosen at run time (dispatch level avx2).
#include "rans_simd.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#include "nncodecs/rans_lane.h"

#define NNC_AVX2 __attribute__((target("avx2,popcnt")))

namespace nnc {
namespace detail {
namespace {

// For each 8-bit refill mask: lane i takes bytes 2k and 2k + 1 of 16 word
// bytes (both 128-bit halves hold the same 16), k = popcount(mask below i).
struct WordShuffle {
  alignas(32) std::uint8_t idx[256][32];
  WordShuffle() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int i = 0; i < 8; ++i) {
        idx[m][4 * i] = static_cast<std::uint8_t>(2 * k);
        idx[m][4 * i + 1] = static_cast<std::uint8_t>(2 * k + 1);
        idx[m][4 * i + 2] = idx[m][4 * i + 3] = 0x80;  // zero
        k += (m >> i) & 1;
      }
    }
  }
};
const WordShuffle kWords;

// The table entries of 8 lanes' slots: scalar loads by the slots, which
// leave the vector as four 64-bit halves.
NNC_AVX2 inline __m256i lookup8(const std::uint32_t* table, __m256i slots) {
  const __m128i lo = _mm256_castsi256_si128(slots), hi = _mm256_extracti128_si256(slots, 1);
  const std::uint64_t a = static_cast<std::uint64_t>(_mm_cvtsi128_si64(lo));
  const std::uint64_t b = static_cast<std::uint64_t>(_mm_extract_epi64(lo, 1));
  const std::uint64_t c = static_cast<std::uint64_t>(_mm_cvtsi128_si64(hi));
  const std::uint64_t d = static_cast<std::uint64_t>(_mm_extract_epi64(hi, 1));
  auto at = [table](std::uint64_t i) { return static_cast<int>(table[i]); };
  return _mm256_setr_epi32(at(a & 0xFFFFFFFFu), at(a >> 32), at(b & 0xFFFFFFFFu), at(b >> 32),
                           at(c & 0xFFFFFFFFu), at(c >> 32), at(d & 0xFFFFFFFFu), at(d >> 32));
}

// One 32-symbol step of one sub-block.
template <unsigned P>
NNC_AVX2 inline void step(RansLanes& b, __m256i x[4], const std::uint32_t* table) {
  const __m256i byte = _mm256_set1_epi32(0xFF), freq = _mm256_set1_epi32(0xFFF);
  const __m256i slot = _mm256_set1_epi32((1 << P) - 1);
  const __m256i low = _mm256_set1_epi32(static_cast<int>(rans::kStateLow));
  __m256i y[4], d[4], s01, s23;
  int m[4];
  // First the four vectors' symbols and states (independent), then the
  // refills, whose word positions are a prefix sum of the refill counts.
  for (int v = 0; v < 4; ++v) {
    const __m256i e = lookup8(table, _mm256_and_si256(x[v], slot));
    const __m256i s = _mm256_and_si256(e, byte);
    if (v == 0) s01 = s;
    if (v == 1) s01 = _mm256_packus_epi32(s01, s);
    if (v == 2) s23 = s;
    if (v == 3) s23 = _mm256_packus_epi32(s23, s);
    const __m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 8), freq);
    y[v] = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x[v], P)),
                            _mm256_srli_epi32(e, 20));
    // States stay below 2^31: y - L is negative (its sign bit set, as the
    // blend and the mask read it) exactly where y < L needs a word.
    d[v] = _mm256_sub_epi32(y[v], low);
    m[v] = _mm256_movemask_ps(_mm256_castsi256_ps(d[v]));
  }
  std::size_t wi = b.wi;
  for (int v = 0; v < 4; ++v) {
    const __m256i words = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.words + 2 * wi)));
    const __m256i w = _mm256_shuffle_epi8(
        words, _mm256_load_si256(reinterpret_cast<const __m256i*>(kWords.idx[m[v]])));
    const __m256 refilled = _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(y[v], 16), w));
    x[v] = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(y[v]), refilled, _mm256_castsi256_ps(d[v])));
    wi += static_cast<std::size_t>(_mm_popcnt_u32(static_cast<unsigned>(m[v])));
  }
  b.wi = wi;
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(s01, s23), order);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.out + 32 * b.t), bytes);
  ++b.t;
}

// A step reads at most 32 words: it may run while 32 are surely left.
inline bool can_step(const RansLanes& b) { return b.t < b.steps && b.nwords - b.wi >= 32; }

NNC_AVX2 void load(const RansLanes& b, __m256i x[4]) {
  for (int v = 0; v < 4; ++v)
    x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.state + 8 * v));
}

NNC_AVX2 void store(RansLanes& b, const __m256i x[4]) {
  for (int v = 0; v < 4; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.state + 8 * v), x[v]);
}

template <unsigned P>
NNC_AVX2 void decode_steps(RansLanes* blocks, std::size_t count, const std::uint32_t* table) {
  for (std::size_t p = 0; p + 1 < count; p += 2) {
    RansLanes& a = blocks[p];
    RansLanes& b = blocks[p + 1];
    __m256i xa[4], xb[4];
    load(a, xa);
    load(b, xb);
    while (can_step(a) && can_step(b)) {
      step<P>(a, xa, table);
      step<P>(b, xb, table);
    }
    store(a, xa);
    store(b, xb);
  }
  for (std::size_t i = 0; i < count; ++i) {
    __m256i x[4];
    load(blocks[i], x);
    while (can_step(blocks[i])) step<P>(blocks[i], x, table);
    store(blocks[i], x);
  }
}

}  // namespace

bool rans_avx2_available() { return dispatch_allows(DispatchLevel::avx2); }

NNC_AVX2 void rans_decode_steps_avx2(RansLanes* blocks, std::size_t count,
                                     const std::uint32_t* table, unsigned precision) {
  static_assert(rans::kMinPrecision == 10 && rans::kMaxPrecision == 12, "one copy a precision");
  if (precision == 10) decode_steps<10>(blocks, count, table);
  if (precision == 11) decode_steps<11>(blocks, count, table);
  if (precision == 12) decode_steps<12>(blocks, count, table);
}

}  // namespace detail
}  // namespace nnc

#else

namespace nnc {
namespace detail {
bool rans_avx2_available() { return false; }
void rans_decode_steps_avx2(RansLanes*, std::size_t, const std::uint32_t*, unsigned) {}
}  // namespace detail
}  // namespace nnc

#endif

// AVX2 rANS decoding of whole 32-lane steps: four vectors of 8 lanes, a
// gather for the table, and a permutation that hands each refilling lane its
// word in lane order (the prefix count the GPU gets from ballot/popc).
// Compiled through target attributes; chosen at run time.
#include "rans_simd.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#include "nncodecs/rans_lane.h"

namespace nnc {
namespace detail {
namespace {

// For each 8-bit refill mask: lane i takes word number popcount(mask below i).
struct PrefixTable {
  alignas(32) std::uint32_t idx[256][8];
  PrefixTable() {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int i = 0; i < 8; ++i) {
        idx[m][i] = static_cast<std::uint32_t>(k);
        k += (m >> i) & 1;
      }
    }
  }
};
const PrefixTable kPrefix;

}  // namespace

bool rans_avx2_available() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"); }

__attribute__((target("avx2,popcnt"))) std::size_t rans_decode_steps_avx2(
    std::uint8_t* out, std::size_t steps, std::uint32_t* state, const std::uint32_t* table,
    unsigned precision, const std::uint8_t* words, std::size_t nwords, std::size_t* words_used) {
  const __m256i mask = _mm256_set1_epi32((1 << precision) - 1);
  const __m256i low = _mm256_set1_epi32(static_cast<int>(rans::kStateLow));
  const __m256i byte = _mm256_set1_epi32(0xFF);
  const __m256i freq_mask = _mm256_set1_epi32(0xFFF);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(precision));
  __m256i x[4];
  for (int v = 0; v < 4; ++v)
    x[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + 8 * v));
  std::size_t wi = 0, t = 0;
  // Each step reads at most 32 words: stop while 32 are surely left.
  for (; t < steps && nwords - wi >= 32; ++t) {
    // First the four vectors' symbols and new states (independent of each
    // other), then the refills, which chain through the word position.
    __m256i sym[4], y[4], need[4];
    int m[4];
    for (int v = 0; v < 4; ++v) {
      const __m256i e = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table),
                                               _mm256_and_si256(x[v], mask), 4);
      sym[v] = _mm256_and_si256(e, byte);
      const __m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 8), freq_mask);
      const __m256i bias = _mm256_srli_epi32(e, 20);
      y[v] = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srl_epi32(x[v], shift)), bias);
      // States stay below 2^31, so the signed compare is exact.
      need[v] = _mm256_cmpgt_epi32(low, y[v]);
      m[v] = _mm256_movemask_ps(_mm256_castsi256_ps(need[v]));
    }
    for (int v = 0; v < 4; ++v) {
      const __m256i w16 = _mm256_cvtepu16_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 2 * wi)));
      const __m256i w = _mm256_permutevar8x32_epi32(
          w16, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPrefix.idx[m[v]])));
      const __m256i refilled = _mm256_or_si256(_mm256_slli_epi32(y[v], 16), w);
      x[v] = _mm256_blendv_epi8(y[v], refilled, need[v]);
      wi += static_cast<std::size_t>(_mm_popcnt_u32(static_cast<unsigned>(m[v])));
    }
    const __m256i p01 = _mm256_packus_epi32(sym[0], sym[1]);
    const __m256i p23 = _mm256_packus_epi32(sym[2], sym[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * t), bytes);
  }
  for (int v = 0; v < 4; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + 8 * v), x[v]);
  *words_used = wi;
  return t;
}

}  // namespace detail
}  // namespace nnc

#else

namespace nnc {
namespace detail {
bool rans_avx2_available() { return false; }
std::size_t rans_decode_steps_avx2(std::uint8_t*, std::size_t, std::uint32_t*, const std::uint32_t*,
                                   unsigned, const std::uint8_t*, std::size_t, std::size_t* used) {
  *used = 0;
  return 0;
}
}  // namespace detail
}  // namespace nnc

#endif

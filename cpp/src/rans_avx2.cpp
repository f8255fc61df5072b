// AVX2 rANS decoding of whole 32-lane steps: four vectors of 8 lanes, a
// gather for the table, and a permutation that hands each refilling lane its
// word in lane order (the prefix count the GPU gets from ballot/popc). Two
// sub-blocks decode interleaved: one alone is bound by the latency of its
// gather -> multiply -> refill chain. Compiled through target attributes;
// chosen at run time.
#include "rans_simd.h"

#if defined(__x86_64__) || defined(_M_X64)

#include <immintrin.h>

#include "nncodecs/rans_lane.h"

#define NNC_AVX2 __attribute__((target("avx2,popcnt")))

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

struct Consts {
  __m256i mask, low, byte, freq_mask, order;
  __m128i shift;
};

// One 32-symbol step of one sub-block.
NNC_AVX2 inline void step(RansLanes& b, __m256i x[4], const std::uint32_t* table, const Consts& k) {
  __m256i sym[4], y[4], need[4];
  int m[4];
  // First the four vectors' symbols and states (independent), then the
  // refills, whose word positions are a prefix sum of the refill counts.
  for (int v = 0; v < 4; ++v) {
    const __m256i e = _mm256_i32gather_epi32(reinterpret_cast<const int*>(table),
                                             _mm256_and_si256(x[v], k.mask), 4);
    sym[v] = _mm256_and_si256(e, k.byte);
    const __m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 8), k.freq_mask);
    const __m256i bias = _mm256_srli_epi32(e, 20);
    y[v] = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srl_epi32(x[v], k.shift)), bias);
    need[v] = _mm256_cmpgt_epi32(k.low, y[v]);  // states < 2^31: the signed compare is exact
    m[v] = _mm256_movemask_ps(_mm256_castsi256_ps(need[v]));
  }
  std::size_t wi = b.wi;
  for (int v = 0; v < 4; ++v) {
    const __m256i w16 =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.words + 2 * wi)));
    const __m256i w = _mm256_permutevar8x32_epi32(
        w16, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPrefix.idx[m[v]])));
    x[v] = _mm256_blendv_epi8(y[v], _mm256_or_si256(_mm256_slli_epi32(y[v], 16), w), need[v]);
    wi += static_cast<std::size_t>(_mm_popcnt_u32(static_cast<unsigned>(m[v])));
  }
  b.wi = wi;
  const __m256i p01 = _mm256_packus_epi32(sym[0], sym[1]);
  const __m256i p23 = _mm256_packus_epi32(sym[2], sym[3]);
  const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(p01, p23), k.order);
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

}  // namespace

bool rans_avx2_available() {
  return dispatch_allows(DispatchLevel::avx2);
}

NNC_AVX2 void rans_decode_steps_avx2(RansLanes* blocks, std::size_t count,
                                     const std::uint32_t* table, unsigned precision) {
  Consts k;
  k.mask = _mm256_set1_epi32((1 << precision) - 1);
  k.low = _mm256_set1_epi32(static_cast<int>(rans::kStateLow));
  k.byte = _mm256_set1_epi32(0xFF);
  k.freq_mask = _mm256_set1_epi32(0xFFF);
  k.order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  k.shift = _mm_cvtsi32_si128(static_cast<int>(precision));
  for (std::size_t p = 0; p + 1 < count; p += 2) {
    RansLanes& a = blocks[p];
    RansLanes& b = blocks[p + 1];
    __m256i xa[4], xb[4];
    load(a, xa);
    load(b, xb);
    while (can_step(a) && can_step(b)) {
      step(a, xa, table, k);
      step(b, xb, table, k);
    }
    store(a, xa);
    store(b, xb);
  }
  for (std::size_t i = 0; i < count; ++i) {
    __m256i x[4];
    load(blocks[i], x);
    while (can_step(blocks[i])) step(blocks[i], x, table, k);
    store(blocks[i], x);
  }
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

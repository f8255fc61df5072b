// SIMD variants of the rANS decoder's inner loop (chosen at run time).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nnc {
namespace detail {

// One sub-block being decoded: where its symbols go, its words, its lanes.
struct RansLanes {
  std::uint8_t* out;
  std::size_t steps;  // whole 32-symbol steps in the sub-block
  std::size_t t;      // steps done
  const std::uint8_t* words;
  std::size_t nwords;
  std::size_t wi;  // words read
  std::uint32_t state[32];
};

bool rans_avx2_available();
bool rans_avx512_available();

// Decode whole steps of `count` sub-blocks (up to four at once: independent
// streams interleaved to hide the gather and multiply latency), each until
// its whole steps are done or fewer than 32 of its words remain. Updates t,
// wi, state.
void rans_decode_steps_avx2(RansLanes* blocks, std::size_t count, const std::uint32_t* table,
                            unsigned precision);
// The same with AVX-512 (F, BW, VL, VBMI): 16 lanes a vector, expand refills.
void rans_decode_steps_avx512(RansLanes* blocks, std::size_t count, const std::uint32_t* table,
                              unsigned precision);

}  // namespace detail
}  // namespace nnc

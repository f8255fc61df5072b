// SIMD variants of the rANS decoder's inner loop (chosen at run time).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nnc {
namespace detail {

bool rans_avx2_available();

// Decode up to `steps` whole 32-lane steps of a sub-block, stopping early
// while fewer than 32 words remain. Lane states are read from and written
// back to state[32]. Returns the steps done; *words_used gets the words read.
std::size_t rans_decode_steps_avx2(std::uint8_t* out, std::size_t steps, std::uint32_t* state,
                                   const std::uint32_t* table, unsigned precision,
                                   const std::uint8_t* words, std::size_t nwords,
                                   std::size_t* words_used);

}  // namespace detail
}  // namespace nnc

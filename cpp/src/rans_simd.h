// SIMD variants of the rANS decoder's inner loop (chosen at run time).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nncodecs/dispatch.h"

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

// Encoder tables, per symbol: the reciprocal of rans_lane.h's division-free
// step, and cum | complement << 12 | (shift - 31) << 24 packed in one word
// (frequency = 2^P - complement; the renormalisation bound follows from it).
struct RansEncTables {
  alignas(64) std::uint32_t rcp[256];
  alignas(64) std::uint32_t info[256];
  // Every symbol present lies in [base, base + 32 * span_pairs) with
  // span_pairs 1, 2 or 4 (0: no such window), within the tables: a chunk
  // with so few values (an exponent plane) looks them up by permutation.
  int span_pairs = 0;
  std::uint32_t base = 0;
};

// Encode whole steps [0, steps) of one sub-block, last step first and lanes
// 31 to 0 (the scalar order), words written downwards ending at *wp (which
// moves down; up to 64 bytes below the final *wp may be written as scratch).
using RansEncodeKernel = void (*)(const std::uint8_t* sym, std::size_t steps,
                                  std::uint32_t* state, std::uint8_t** wp,
                                  const RansEncTables& tab, unsigned precision);
// AVX2 (rans_avx2_encode.cpp); AVX-512 F, BW, VL, VBMI (rans_avx512.cpp).
void rans_encode_steps_avx2(const std::uint8_t* sym, std::size_t steps, std::uint32_t* state,
                            std::uint8_t** wp, const RansEncTables& tab, unsigned precision);
void rans_encode_steps_avx512(const std::uint8_t* sym, std::size_t steps, std::uint32_t* state,
                              std::uint8_t** wp, const RansEncTables& tab, unsigned precision);

}  // namespace detail
}  // namespace nnc

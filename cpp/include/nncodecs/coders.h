// What the binding uses of the chunk coders beyond frames: the rANS tables
// the GPU encoder's host writes, and the switch tests use to force each
// SIMD variant.
#pragma once

#include <cstdint>
#include <vector>

namespace nnc {
namespace detail {

// Frequencies summing to 2^precision, each >= 1 where counts > 0 (>= 2 symbols present).
void rans_normalize(const std::uint32_t counts[256], unsigned precision, std::uint32_t freqs[256]);

// A chunk's table (presence map, then P bits a present symbol) appended to out.
void rans_write_table(const std::uint32_t freqs[256], unsigned precision,
                      std::vector<std::uint8_t>* out);

// Force the SIMD variant of the rANS encoder and decoder and of the
// decoder's plane merge, for tests: 0 widest available, 1 scalar, 2 AVX2,
// 3 AVX-512; false if unavailable.
bool set_rans_variant(int variant);

}  // namespace detail

using detail::rans_normalize;
using detail::rans_write_table;
using detail::set_rans_variant;

}  // namespace nnc

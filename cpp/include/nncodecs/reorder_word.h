// Exponent-first bit reorder of one word: the sign+exponent field is rotated
// left by one bit, so the exponent moves to the top bits and the sign lands
// just below it; mantissa bits stay where they are. A bijection on all bit
// patterns (NaN payloads, -0.0, infinities, subnormals survive).
// Compiled by g++ (the CPU kernels), nvcc and NVRTC (the GPU decoder, which
// inlines this text: no standard headers under NVRTC).
#pragma once

#if !defined(__CUDACC_RTC__)
#include <cstdint>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NNC_WORD_HD __host__ __device__ __forceinline__
#else
#define NNC_WORD_HD inline
#endif

namespace nnc {

// U: the unsigned word type of the float; m: its mantissa bits.
template <class U>
NNC_WORD_HD U reorder_encode_word(U x, unsigned m) {
  constexpr unsigned bits = sizeof(U) * 8;
  const U mant = static_cast<U>((U(1) << m) - 1);
  const U exp_hi = static_cast<U>(~((U(1) << (m + 1)) - 1));  // bits m+1 .. top
  return static_cast<U>((x & mant) | (static_cast<U>(x << 1) & exp_hi) |
                        static_cast<U>((x >> (bits - 1)) << m));
}

template <class U>
NNC_WORD_HD U reorder_decode_word(U y, unsigned m) {
  constexpr unsigned bits = sizeof(U) * 8;
  const U mant = static_cast<U>((U(1) << m) - 1);
  const U exp_lo = static_cast<U>(((U(1) << (bits - 1)) - 1) & ~mant);  // bits m .. top-1
  return static_cast<U>((y & mant) | ((y >> 1) & exp_lo) |
                        static_cast<U>(static_cast<U>((y >> m) & 1u) << (bits - 1)));
}

}  // namespace nnc

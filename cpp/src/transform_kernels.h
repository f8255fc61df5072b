// Range kernels behind transform.h, one set per variant. Each works on the
// elements [begin, end) of a buffer of n elements, so the dispatcher can hand
// disjoint ranges to threads. Planes have stride n.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nncodecs/dispatch.h"
#include "nncodecs/transform.h"

namespace nnc {
namespace detail {

struct RangeKernels {
  void (*reorder)(uint8_t* dst, const uint8_t* src, std::size_t begin, std::size_t end,
                  Layout layout, bool decode);
  void (*split)(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                std::size_t end, std::size_t elemsize, Layout layout);
  void (*merge)(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t begin,
                std::size_t end, std::size_t elemsize, Layout layout);
  // Merge `count` elements whose planes lie anywhere: planes[j] holds byte j
  // of each (so a decoder can merge straight from raw chunks of a frame).
  void (*merge_ptrs)(uint8_t* dst, const uint8_t* const* planes, std::size_t count,
                     std::size_t elemsize, Layout layout);
};

extern const RangeKernels scalar_kernels;
// The fastest kernels this CPU runs (what Variant::automatic picks).
const RangeKernels& active_kernels();
#if defined(__x86_64__) || defined(_M_X64)
#define NNC_HAVE_AVX2_KERNELS 1
extern const RangeKernels avx2_kernels;
#endif

// AVX-512 (F, BW) merge_ptrs for the decoder (64 elements a step; the rest
// and 8-byte elements through the AVX2 kernel). Only where available.
bool transform_avx512_available();
void merge_ptrs_avx512(uint8_t* dst, const uint8_t* const* planes, std::size_t count,
                       std::size_t elemsize, Layout layout);

}  // namespace detail
}  // namespace nnc

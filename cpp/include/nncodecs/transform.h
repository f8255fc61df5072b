// Transform kernels: exponent-first bit reorder and byte-plane split / merge,
// alone or fused in one pass. See docs/format.md for the exact bit layout.
//
// Every entry point is dst-first, takes explicit capacities and returns a
// Status. Element bytes are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nncodecs/status.h"

namespace nnc {

// Float layouts the reorder knows. `none` is the identity (integers, bool,
// float4 and raw bytes).
enum class Layout : int {
  none = 0,
  f64 = 1,      // S E11 M52
  f32 = 2,      // S E8 M23
  f16 = 3,      // S E5 M10
  bf16 = 4,     // S E8 M7
  f8_e4m3 = 5,  // S E4 M3 (float8_e4m3fn)
  f8_e5m2 = 6,  // S E5 M2
};

// Implementation choice. `automatic` takes the fastest one this CPU runs.
enum class Variant : int { automatic = 0, scalar = 1, avx2 = 2 };

// Element width in bytes of a float layout (0 for `none`).
std::size_t layout_width(Layout layout);
// Mantissa bits of a float layout (0 for `none`).
unsigned layout_mantissa_bits(Layout layout);
// True when the variant can run on this CPU (scalar always can).
bool variant_available(Variant variant);
// The variant `automatic` resolves to on this CPU.
Variant best_variant();

// Output size of every transform below: the transforms never change the size.
inline std::size_t transform_bound(std::size_t src_len) { return src_len; }

// Bit reorder of whole elements: dst may equal src (in place), but must not
// partially overlap it. src_len must be a multiple of layout_width(layout).
Status reorder_encode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                      Layout layout, Variant variant, int threads);
Status reorder_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                      Layout layout, Variant variant, int threads);

// Plane split: plane j (n = src_len / elemsize bytes, at dst + j * n) holds
// byte j of every element. With a float layout the reorder is fused in
// (elemsize must then equal its width). dst and src must not overlap.
Status planes_split(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::size_t elemsize, Layout reorder, Variant variant, int threads);
// Inverse of planes_split, with the inverse reorder fused in.
Status planes_merge(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::size_t elemsize, Layout reorder, Variant variant, int threads);

// A checkpoint delta's "sub" transform undone in place: dst <- ref + unzigzag(dst),
// as unsigned integers of `width` bytes (1, 2, 4 or 8); the lengths must agree.
Status unzigzag_add(void* dst, std::size_t dst_len, const void* ref, std::size_t ref_len,
                    std::size_t width);

}  // namespace nnc

// Chunk coders behind the frame: each encodes one chunk of one plane
// (m symbols) into a payload, and decodes a payload back, checking it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "nncodecs/coders.h"
#include "nncodecs/frame.h"
#include "rans_simd.h"

namespace nnc {
namespace detail {

// Set err and return false: `return fail(err, Status::corrupt, "...", ...)`.
template <class... Args>
bool fail(Error* err, Status status, const char* fmt, Args... args) {
  if (err != nullptr && err->status == Status::ok) {
    err->status = status;
    std::snprintf(err->message, sizeof(err->message), fmt, args...);
  }
  return false;
}

// Histogram of a chunk.
void histogram(const std::uint8_t* src, std::size_t m, std::uint32_t counts[256]);

// rANS (precision P, sub-blocks of 2^sb symbols). Output appended to out.
// With threads > 1 the sub-blocks encode in parallel (same bytes).
void rans_encode_chunk(const std::uint8_t* src, std::size_t m, const std::uint32_t counts[256],
                       unsigned precision, unsigned subblock_log2, std::vector<std::uint8_t>* out,
                       int threads = 1);
bool rans_decode_chunk(std::uint8_t* dst, std::size_t m, const std::uint8_t* src, std::size_t len,
                       unsigned precision, unsigned subblock_log2, Error* err);

// A rANS chunk decoded in parts: prepare() checks the table and every
// sub-block's extent and states; decode() then runs any range of sub-blocks
// (independent streams: different threads may take different ranges).
class RansChunkDecoder {
 public:
  bool prepare(std::uint8_t* dst, std::size_t m, const std::uint8_t* src, std::size_t len,
               unsigned precision, unsigned subblock_log2, Error* err);
  std::size_t subblocks() const { return lanes_.size(); }
  bool decode(std::size_t first, std::size_t last, Error* err);

 private:
  std::vector<std::uint32_t> table_;
  std::vector<RansLanes> lanes_;
  std::size_t m_ = 0, block_ = 0;
  unsigned precision_ = 0;
};

// SIMD inner loop in use (nullptr: scalar; set_rans_variant forces one).
using RansSimdKernel = void (*)(RansLanes*, std::size_t, const std::uint32_t*, unsigned);
RansSimdKernel rans_simd_kernel();
// The encoder's SIMD kernel under the same setting (nullptr: scalar).
RansEncodeKernel rans_encode_kernel();
// The decoder's plane merge, widest first; set_rans_variant forces it too
// (scalar, AVX2 or AVX-512), so one switch tests every decoder kernel.
using MergePtrsKernel = void (*)(std::uint8_t*, const std::uint8_t* const*, std::size_t,
                                 std::size_t, Layout);
MergePtrsKernel merge_ptrs_kernel();

// Huffman, code lengths <= kHuffmanMaxBits, 4 streams per sub-block.
constexpr unsigned kHuffmanMaxBits = 11;
constexpr unsigned kHuffmanStreams = 4;
void huffman_encode_chunk(const std::uint8_t* src, std::size_t m, const std::uint32_t counts[256],
                          unsigned subblock_log2, std::vector<std::uint8_t>* out);
bool huffman_decode_chunk(std::uint8_t* dst, std::size_t m, const std::uint8_t* src,
                          std::size_t len, unsigned subblock_log2, Error* err);
void huffman_lengths(const std::uint32_t counts[256], unsigned max_bits, std::uint8_t lengths[256]);

// Sizes a chunk would take, from its histogram, without encoding it: the
// table, per-sub-block headers and the order-0 cost of the symbols under the
// coder's own probabilities (rANS: normalised frequencies; Huffman: its code
// lengths, exact to the padding). Integer arithmetic only (see log2_fixed16).
std::size_t rans_estimate(const std::uint32_t counts[256], std::size_t m, unsigned precision,
                          unsigned subblock_log2);
std::size_t huffman_estimate(const std::uint32_t counts[256], std::size_t m,
                             unsigned subblock_log2);

// Little-endian helpers.
inline void put_u32(std::vector<std::uint8_t>* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}

}  // namespace detail
}  // namespace nnc

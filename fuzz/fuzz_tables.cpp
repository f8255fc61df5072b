// Fuzz target for the two table-driven chunk coders alone: a rANS or Huffman
// chunk's payload (its frequency or code-length table, then its sub-blocks'
// streams) decoded into m symbols, without a frame around it.
//
// Input: byte 0 picks the coder (bit 0: Huffman), the rANS precision
// (10 + (b >> 1) % 3) and the sub-block size (2^(12 + (b >> 3) % 5));
// bytes 1-3 the symbol count m (little-endian, at most 2^18, a chunk);
// the rest is the payload.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../cpp/src/coders.h"
#include "targets.h"

namespace {
constexpr std::size_t kHead = 4;
}

void nnc_fuzz_inputs(const std::vector<std::uint8_t>& frame,
                     std::vector<std::vector<std::uint8_t>>* out) {
  nnc::FrameInfo info;
  nnc::Error err;
  if (nnc::frame_info(frame.data(), frame.size(), kFuzzMaxDecoded, &info, &err) !=
      nnc::Status::ok)
    return;
  for (const nnc::ChunkRef& r : info.chunks) {
    if (r.mode != nnc::ChunkMode::rans && r.mode != nnc::ChunkMode::huffman) continue;
    const unsigned b = (r.mode == nnc::ChunkMode::huffman ? 1u : 0u) |
                       ((info.precision - 10) << 1) | ((info.subblock_log2 - 12) << 3);
    std::vector<std::uint8_t> in = {static_cast<std::uint8_t>(b),
                                    static_cast<std::uint8_t>(r.symbols),
                                    static_cast<std::uint8_t>(r.symbols >> 8),
                                    static_cast<std::uint8_t>(r.symbols >> 16)};
    in.insert(in.end(), frame.begin() + r.offset, frame.begin() + r.offset + r.length);
    out->push_back(std::move(in));
  }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kHead) return 0;
  const unsigned b = data[0];
  const std::size_t m = std::min<std::size_t>(
      data[1] | std::size_t(data[2]) << 8 | std::size_t(data[3]) << 16, nnc::kChunkSymbols);
  std::vector<std::uint8_t> dst(m);
  nnc::Error err;
  if (b & 1u)
    nnc::detail::huffman_decode_chunk(dst.data(), m, data + kHead, size - kHead,
                                      12 + (b >> 3) % 5, &err);
  else
    nnc::detail::rans_decode_chunk(dst.data(), m, data + kHead, size - kHead, 10 + (b >> 1) % 3,
                                   12 + (b >> 3) % 5, &err);
  return 0;
}

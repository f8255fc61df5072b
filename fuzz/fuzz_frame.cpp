// Fuzz target for every decoder: the frame parser, the chunk index, rANS,
// Huffman, raw / constant chunks and the fused merge. libFuzzer-compatible
// (clang -fsanitize=fuzzer,address,undefined); fuzz/driver.cpp runs it with
// g++ where there is no libFuzzer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nncodecs/entropy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A bound on the decoded size, as every caller gives one.
  constexpr std::uint64_t kMax = std::uint64_t(1) << 22;
  nnc::FrameInfo info;
  nnc::Error err;
  if (nnc::frame_info(data, size, kMax, &info, &err) != nnc::Status::ok) return 0;
  // Version 3's element type, checked as a caller that expects one does.
  (void)nnc::check_element(info, nnc::Element::bf16, &err);
  std::uint64_t zstd_bytes = 0;
  for (const nnc::ChunkRef& c : info.chunks)
    if (c.mode == nnc::ChunkMode::zstd) zstd_bytes += c.symbols;
  std::vector<std::uint8_t> zstd(zstd_bytes, 0);  // decoded zstd chunks come from the caller
  std::vector<std::uint8_t> out(info.decoded_len);
  nnc::Error e1, e2;
  nnc::frame_decode(out.data(), out.size(), data, size, kMax, nnc::Layout::none, false,
                    zstd.data(), zstd.size(), 1, &e1);
  // The fused path: elements of `planes` bytes, with the reorder of that width.
  nnc::Layout layout = info.planes == 2   ? nnc::Layout::bf16
                       : info.planes == 4 ? nnc::Layout::f32
                       : info.planes == 1 ? nnc::Layout::f8_e4m3
                                          : nnc::Layout::none;
  nnc::frame_decode(out.data(), out.size(), data, size, kMax, layout, true, zstd.data(),
                    zstd.size(), 2, &e2);
  return 0;
}

// Fuzz target for every decoder: the header of either kind (read_header),
// the chunk index, rANS, Huffman, raw / constant and zstd chunks (libzstd),
// the whole-input zstd kind and the fused merge. libFuzzer-compatible
// (clang -fsanitize=fuzzer,address,undefined); fuzz/driver.cpp runs it with
// g++ where there is no libFuzzer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nncodecs/entropy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A bound on the decoded size, as every caller gives one.
  constexpr std::uint64_t kMax = std::uint64_t(1) << 22;
  nnc::Header h;
  nnc::Error err;
  if (nnc::read_header(data, size, kMax, &h, &err) != nnc::Status::ok) return 0;
  // Version 3's element type, checked as a caller that expects one does.
  (void)nnc::check_element(h.info, nnc::Element::bf16, &err);
  std::vector<std::uint8_t> out(h.info.decoded_len);
  nnc::Error e1, e2;
  nnc::decode(out.data(), out.size(), data, size, h, nnc::Layout::none, false, 0, 1, &e1);
  // The fused path: elements of `planes` bytes, with the reorder of that
  // width (the whole-input kind: as bfloat16).
  const unsigned planes = h.whole ? 2 : h.info.planes;
  nnc::Layout layout = planes == 2   ? nnc::Layout::bf16
                       : planes == 4 ? nnc::Layout::f32
                       : planes == 1 ? nnc::Layout::f8_e4m3
                                     : nnc::Layout::none;
  nnc::decode(out.data(), out.size(), data, size, h, layout, true, planes, 2, &e2);
  return 0;
}

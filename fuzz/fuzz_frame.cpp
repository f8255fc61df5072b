// Fuzz target for every decoder: the header of either kind (read_header),
// the chunk index, rANS, Huffman, raw / constant and zstd chunks (libzstd,
// real zstd payloads), the whole-input zstd kind and the fused merge.
// libFuzzer-compatible (clang -fsanitize=fuzzer,address,undefined);
// fuzz/driver.cpp runs it with g++ where there is no libFuzzer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "targets.h"

void nnc_fuzz_inputs(const std::vector<std::uint8_t>& frame,
                     std::vector<std::vector<std::uint8_t>>* out) {
  out->push_back(frame);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nnc::Header h;
  nnc::Error err;
  if (nnc::read_header(data, size, kFuzzMaxDecoded, &h, &err) != nnc::Status::ok) return 0;
  // Version 3's element type, checked as a caller that expects one does.
  (void)nnc::check_element(h.info, nnc::Element::bf16, &err);
  std::vector<std::uint8_t> out(h.info.decoded_len);
  nnc::Error e1, e2;
  const nnc::Status s1 =
      nnc::decode(out.data(), out.size(), data, size, h, nnc::Layout::none, false, 0, 1, &e1);
  // The fused path: elements of `planes` bytes, with the reorder of that
  // width (the whole-input kind: as bfloat16).
  const unsigned planes = h.whole ? 2 : h.info.planes;
  nnc::Layout layout = planes == 2   ? nnc::Layout::bf16
                       : planes == 4 ? nnc::Layout::f32
                       : planes == 1 ? nnc::Layout::f8_e4m3
                                     : nnc::Layout::none;
  std::vector<std::uint8_t> fused(h.info.decoded_len);
  const nnc::Status s2 =
      nnc::decode(fused.data(), fused.size(), data, size, h, layout, true, planes, 2, &e2);
  // Both paths check the same bytes: they agree on whether the frame is valid.
  if ((s1 == nnc::Status::ok) != (s2 == nnc::Status::ok) && layout != nnc::Layout::none &&
      h.info.decoded_len % planes == 0)
    nnc_fuzz_finding("the planar and the fused decode disagree on a frame's validity");
  return 0;
}

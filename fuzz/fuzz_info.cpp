// Fuzz target for the frame's header and chunk index alone (frame_info), as
// the Python layer, the GPU planner and the container's partial reads parse
// them: the whole input, and only its first bytes of a longer frame
// (total_len); then read_header and check_element against every element type.
// An accepted index must describe the frame: every payload inside it, every
// plane's chunks summing to the plane's symbols.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "targets.h"

void nnc_fuzz_inputs(const std::vector<std::uint8_t>& frame,
                     std::vector<std::vector<std::uint8_t>>* out) {
  out->push_back(frame);
}

namespace {

void check_index(const nnc::FrameInfo& info, std::size_t total) {
  if (info.planes == 0 || info.decoded_len % info.planes)
    nnc_fuzz_finding("an accepted frame's length is not whole planes");
  if (info.header_len > total) nnc_fuzz_finding("an accepted header runs past the frame");
  const std::uint64_t per_plane = info.decoded_len / info.planes;
  std::vector<std::uint64_t> symbols(info.planes, 0);
  for (const nnc::ChunkRef& r : info.chunks) {
    if (r.plane >= info.planes) nnc_fuzz_finding("a chunk of a plane the frame does not have");
    if (r.offset > total || r.length > total - r.offset)
      nnc_fuzz_finding("an accepted chunk's payload runs past the frame");
    if (r.offset < info.header_len) nnc_fuzz_finding("a payload inside the header");
    symbols[r.plane] += r.symbols;
  }
  for (std::uint64_t s : symbols)
    if (s != per_plane) nnc_fuzz_finding("a plane's chunks do not sum to its symbols");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nnc::FrameInfo info;
  nnc::Error err;
  const bool whole_ok =
      nnc::frame_info(data, size, kFuzzMaxDecoded, &info, &err) == nnc::Status::ok;
  if (whole_ok) {
    check_index(info, size);
    for (unsigned e = 0; e < nnc::kElementCount; ++e) {
      nnc::Error e2;
      (void)nnc::check_element(info, static_cast<nnc::Element>(e), &e2);
    }
  }
  // The first bytes only, of a frame said to be `size` long: where the whole
  // frame parses, so must its header and index from these bytes once they
  // hold them, and to the same index.
  for (std::size_t cut : {size / 2, size > 64 ? std::size_t(64) : size,
                          whole_ok ? static_cast<std::size_t>(info.header_len) : size}) {
    nnc::FrameInfo part;
    nnc::Error e3;
    const bool ok =
        nnc::frame_info(data, cut, kFuzzMaxDecoded, &part, &e3, size) == nnc::Status::ok;
    if (!whole_ok) continue;
    if (cut >= info.header_len && !ok)
      nnc_fuzz_finding("a frame's first bytes do not parse where the whole frame does");
    if (ok && (part.chunks.size() != info.chunks.size() || part.header_len != info.header_len))
      nnc_fuzz_finding("a frame's first bytes parse to another index");
  }
  nnc::Header h;
  nnc::Error e4;
  if (nnc::read_header(data, size, kFuzzMaxDecoded, &h, &e4) == nnc::Status::ok && !h.whole)
    check_index(h.info, size);
  return 0;
}

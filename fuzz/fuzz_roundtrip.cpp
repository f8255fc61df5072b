// Fuzz target for the encoder: any bytes, any settings, encoded as the
// codecs do (encode(): auto's zstd trials and the whole-input kind
// included), must give a frame within frame_bound that decodes (read_header,
// decode) to the very input, and states the element type it was given.
//
// Input: 8 bytes of settings, then the data.
//   0: element type (code % 17); for `bytes`, planes 1, 2, 3, 4 or 8 (bits 5-7)
//   1: coder (rans, huffman, auto), precision 10..12, checksum, elements
//   2: sub-block log2 12..16, threads 1..2
//   3: zstd level for auto (0, 1, 3, 6; inputs up to 2 KiB take 12 at least),
//      min_gain_permille (0, 50, 500)
//   4-5: row length (little-endian; 0 for none)
//   6: a stretch: below 248 keeps the data; 248 + k repeats it, each copy
//      changed a little, to 2^(12 + k % 4) bytes at least (row shifts of
//      version 2 and sub-blocks of every size from short inputs; frames of
//      several chunks are the frame target's seeds)
//   7: reserved
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "targets.h"

namespace {
constexpr std::size_t kHead = 8;
}

void nnc_fuzz_inputs(const std::vector<std::uint8_t>& frame,
                     std::vector<std::vector<std::uint8_t>>* out) {
  nnc::Header h;
  nnc::Error err;
  if (nnc::read_header(frame.data(), frame.size(), kFuzzMaxDecoded, &h, &err) != nnc::Status::ok)
    return;
  std::vector<std::uint8_t> data(h.info.decoded_len);
  if (nnc::decode(data.data(), data.size(), frame.data(), frame.size(), h, nnc::Layout::none,
                  false, 0, 1, &err) != nnc::Status::ok)
    return;
  if (data.size() > 2048) data.resize(2048);  // (make fuzz: -max_len=2048)
  // The frame's own settings, and two others: bfloat16 elements (auto,
  // zstd 3) and float32 elements with rows of 256 stretched (version 2).
  const std::uint8_t c = static_cast<std::uint8_t>(h.info.element);
  const std::uint8_t coder = static_cast<std::uint8_t>(h.whole ? 2 : int(h.info.coder) - 1);
  const std::vector<std::vector<std::uint8_t>> heads = {
      {c, static_cast<std::uint8_t>(coder | 0x20), 0x04, 0x00, 0, 0, 0, 0},
      {13, 0x2a, 0x01, 0x02, 0, 0, 0, 0},
      {11, 0x3a, 0x03, 0x01, 0, 1, 251, 0},
  };
  for (const auto& head : heads) {
    std::vector<std::uint8_t> in(head);
    in.insert(in.end(), data.begin(), data.end());
    out->push_back(std::move(in));
  }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kHead) return 0;
  const std::uint8_t* s = data;
  nnc::EncodeParams p;
  const unsigned code = s[0] % nnc::kElementCount;
  p.element = static_cast<nnc::Element>(code);
  const nnc::ElementInfo& e = nnc::kElements[code];
  static constexpr unsigned kBytePlanes[8] = {1, 2, 3, 4, 8, 1, 2, 4};
  p.planes = e.width != 0 ? e.width : kBytePlanes[s[0] >> 5];
  p.coder = static_cast<nnc::Coder>(1 + s[1] % 3);
  p.precision = 10 + (s[1] >> 2) % 3;
  p.checksum = (s[1] >> 4) & 1u;
  p.elements = (s[1] >> 5) & 1u;
  // A float layout with elements, as the weights codec encodes them.
  p.layout = p.elements ? e.layout : nnc::Layout::none;
  p.subblock_log2 = 12 + s[2] % 5;
  p.threads = 1 + (s[2] >> 4) % 2;
  static constexpr int kLevels[4] = {0, 1, 3, 6};
  p.zstd_level = p.coder == nnc::Coder::automatic ? kLevels[s[3] % 4] : 0;
  static constexpr unsigned kGains[3] = {0, 50, 500};
  p.min_gain_permille = kGains[(s[3] >> 2) % 3];
  p.row_length = s[4] | unsigned(s[5]) << 8;
  // The data: whole planes, stretched where asked (each copy's first byte
  // bumped, so that copies differ).
  std::vector<std::uint8_t> src(data + kHead, data + size);
  if (s[6] >= 248 && !src.empty()) {
    const std::size_t want = std::size_t(1) << (12 + (s[6] - 248) % 4);
    const std::size_t n = src.size();
    for (std::size_t copy = 1; src.size() < want; ++copy) {
      src.insert(src.end(), src.begin(), src.begin() + n);
      src[src.size() - n] += static_cast<std::uint8_t>(copy);
    }
  }
  src.resize(src.size() - src.size() % p.planes);
  std::vector<std::uint8_t> frame(nnc::frame_bound(src.size(), p.planes));
  std::size_t written = 0;
  nnc::Error err;
  if (nnc::encode(frame.data(), frame.size(), &written, src.data(), src.size(), p, &err) !=
      nnc::Status::ok) {
    std::fprintf(stderr, "%s\n", err.message);
    nnc_fuzz_finding("valid settings did not encode");
  }
  if (written > frame.size()) nnc_fuzz_finding("a frame past frame_bound");
  nnc::Header h;
  if (nnc::read_header(frame.data(), written, src.size(), &h, &err) != nnc::Status::ok) {
    std::fprintf(stderr, "%s\n", err.message);
    nnc_fuzz_finding("an encoded frame's header does not parse");
  }
  if (h.info.decoded_len != src.size()) nnc_fuzz_finding("a frame states another length");
  if (nnc::check_element(h.info, p.element, &err) != nnc::Status::ok)
    nnc_fuzz_finding("a frame does not state the element type it was given");
  std::vector<std::uint8_t> back(src.size() + 1, 0xA5);  // one byte past: never written
  if (nnc::decode(back.data(), src.size(), frame.data(), written, h, p.layout, p.elements,
                  p.planes, p.threads, &err) != nnc::Status::ok) {
    std::fprintf(stderr, "%s\n", err.message);
    nnc_fuzz_finding("an encoded frame does not decode");
  }
  if ((!src.empty() && std::memcmp(back.data(), src.data(), src.size()) != 0) ||
      back[src.size()] != 0xA5)
    nnc_fuzz_finding("a frame decodes to other bytes than were encoded");
  return 0;
}

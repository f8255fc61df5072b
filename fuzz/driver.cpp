// A mutation driver for the fuzz targets where libFuzzer is not available
// (g++), and the seed writer for libFuzzer's corpora. It encodes seed frames
// in every chunk mode (zstd too) and of the whole-input zstd kind, in every
// version a decoder reads, and turns each into the linked target's inputs
// (nnc_fuzz_inputs, fuzz/targets.h); then feeds truncated, bit-flipped,
// byte-replaced and spliced copies to the target. Build it with
// -fsanitize=address,undefined so that any out-of-bounds access or undefined
// behaviour aborts the run.
//
//   driver ITERATIONS [SEED [INPUT ...]]     the seeds and the inputs named (regression
//                                            cases), then ITERATIONS mutated inputs
//   driver --write-seeds DIR [FRAME ...]     the target's inputs from its seed frames
//                                            and from the frame files named, one file
//                                            each in DIR (a libFuzzer corpus)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <random>
#include <vector>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::uint8_t> encode(const std::vector<std::uint8_t>& src, nnc::Coder coder,
                                 unsigned planes, unsigned sb, bool elements,
                                 std::uint64_t row_length = 0) {
  nnc::EncodeParams p;
  p.row_length = row_length;
  p.coder = coder;
  p.planes = planes;
  p.subblock_log2 = sb;
  p.elements = elements;
  p.layout = elements && planes == 2 ? nnc::Layout::bf16 : nnc::Layout::none;
  // Version 3 records an element type: bfloat16 for the elements, else
  // bytes, or a 1-byte type for one plane.
  p.element = p.layout == nnc::Layout::bf16 ? nnc::Element::bf16
              : planes == 1                 ? nnc::Element::f8_e4m3fn
                                            : nnc::Element::bytes;
  p.zstd_level = 3;  // auto: zstd chunks and the whole-input kind where they win
  std::vector<std::uint8_t> out(nnc::frame_bound(src.size(), planes));
  std::size_t written = 0;
  nnc::Error err;
  if (nnc::encode(out.data(), out.size(), &written, src.data(), src.size(), p, &err) !=
      nnc::Status::ok) {
    std::fprintf(stderr, "seed encode failed: %s\n", err.message);
    std::exit(2);
  }
  out.resize(written);
  return out;
}

// The frame earlier releases wrote for the same input: a version 3 frame
// less its element byte (version 1, or 2 with the row section), with the
// element code taken out of the checksum field again (docs/format.md).
std::vector<std::uint8_t> to_old_version(const std::vector<std::uint8_t>& f) {
  if (f.size() < 8 || f[0] != 'N' || f[3] != 'F') return f;  // the whole-input kind
  std::vector<std::uint8_t> out(f.begin(), f.begin() + 7);
  out[4] = (f[7] & nnc::kElementRows) ? nnc::kFrameVersionRows : nnc::kFrameVersion;
  out.insert(out.end(), f.begin() + 8, f.end());
  if (out[5] & 4u) {  // the CRC32C follows the decoded length (a varint)
    std::size_t at = 7;
    while (out[at] & 0x80) ++at;
    out[at + 1] ^= f[7] & nnc::kElementMask;  // the code is below 64: the low byte
  }
  return out;
}

// The seed frames. Fails (exit 2) where none holds zstd or a version is missing.
std::vector<std::vector<std::uint8_t>> seed_frames(std::mt19937_64& rng) {
  // Seeds: skewed, constant, random and mixed planes, every coder, sizes
  // that cross sub-block and chunk edges.
  std::vector<std::vector<std::uint8_t>> seeds;
  std::geometric_distribution<int> geo(0.3);
  for (std::size_t n : {0u, 1u, 33u, 4097u, 70000u, 300000u}) {
    std::vector<std::uint8_t> skew(2 * n), mixed(2 * n);
    for (std::size_t i = 0; i < 2 * n; ++i) {
      skew[i] = static_cast<std::uint8_t>(std::min(geo(rng), 255));
      mixed[i] = i < n ? 7 : static_cast<std::uint8_t>(rng());
    }
    // Text-like repeats: zstd chunks (and the whole-input kind when small).
    std::vector<std::uint8_t> text(n);
    for (std::size_t i = 0; i < n; ++i)
      text[i] = static_cast<std::uint8_t>("nncodecs zstd seed "[(i * 7 / 5) % 19] + (i % 97 == 0));
    // bfloat16 rows of 256 whose exponents centre differently: version 2
    // frames (row offsets) where there are enough of them.
    std::vector<std::uint8_t> rows(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned e = 100 + (i / 256 * 13) % 40 + static_cast<unsigned>(std::min(geo(rng), 5));
      const unsigned x = (e << 7) | static_cast<unsigned>(rng() & 0x807F);
      rows[2 * i] = static_cast<std::uint8_t>(x);
      rows[2 * i + 1] = static_cast<std::uint8_t>(x >> 8);
    }
    for (nnc::Coder c : {nnc::Coder::rans, nnc::Coder::huffman, nnc::Coder::automatic}) {
      seeds.push_back(encode(rows, c, 2, 13, true, 256));
      seeds.push_back(encode(skew, c, 2, 12, false));
      seeds.push_back(encode(mixed, c, 2, 16, true));
      seeds.push_back(encode(skew, c, 1, 14, false));
      seeds.push_back(encode(text, c, 1, 16, false));
    }
  }
  // Every version a decoder reads: 3 as encoded, 1 and 2 as earlier releases wrote them.
  for (std::size_t i = 0, count = seeds.size(); i < count; ++i)
    seeds.push_back(to_old_version(seeds[i]));
  std::size_t versions[4] = {0, 0, 0, 0}, zstd = 0;
  for (const auto& s : seeds) {
    nnc::Header h;
    nnc::Error e;
    if (nnc::read_header(s.data(), s.size(), std::uint64_t(1) << 22, &h, &e) != nnc::Status::ok)
      continue;
    if (!h.whole) ++versions[h.info.version];
    bool has_zstd = h.whole;
    for (const nnc::ChunkRef& r : h.info.chunks) has_zstd |= r.mode == nnc::ChunkMode::zstd;
    zstd += has_zstd;
  }
  if (zstd == 0) {
    std::fprintf(stderr, "no seed holds zstd\n");
    std::exit(2);
  }
  for (unsigned v = 1; v <= 3; ++v)
    if (versions[v] == 0) {
      std::fprintf(stderr, "no seed is a version %u frame\n", v);
      std::exit(2);
    }
  std::printf("%zu seed frames (%zu, %zu, %zu of versions 1, 2, 3; %zu with zstd)\n", seeds.size(),
              versions[1], versions[2], versions[3], zstd);
  return seeds;
}

std::vector<std::uint8_t> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--write-seeds") == 0) {
    std::mt19937_64 rng(1);
    std::vector<std::vector<std::uint8_t>> frames = seed_frames(rng), inputs;
    for (int i = 3; i < argc; ++i) frames.push_back(read_file(argv[i]));
    for (const auto& f : frames) nnc_fuzz_inputs(f, &inputs);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string path = std::string(argv[2]) + "/seed-" + std::to_string(i);
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(inputs[i].data()),
                 static_cast<std::streamsize>(inputs[i].size()));
    }
    std::printf("%zu seed inputs written to %s\n", inputs.size(), argv[2]);
    return 0;
  }
  const long iterations = argc > 1 ? std::atol(argv[1]) : 10000;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  std::vector<std::vector<std::uint8_t>> seeds;
  for (const auto& f : seed_frames(rng)) nnc_fuzz_inputs(f, &seeds);
  for (int i = 3; i < argc; ++i) seeds.push_back(read_file(argv[i]));
  if (seeds.empty()) {
    std::fprintf(stderr, "no seed input for this target\n");
    return 2;
  }
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  for (long it = 0; it < iterations; ++it) {
    std::vector<std::uint8_t> f = seeds[rng() % seeds.size()];
    const int kind = static_cast<int>(rng() % 6);
    const std::size_t n = f.size();
    if (kind == 0 && n) f.resize(rng() % n);                      // truncate
    else if (kind == 1 && n) f[rng() % n] ^= 1u << (rng() % 8);   // flip a bit
    else if (kind == 2 && n)                                      // replace bytes
      for (int k = 0; k < 4; ++k) f[rng() % n] = static_cast<std::uint8_t>(rng());
    else if (kind == 3 && n > 16)                                 // header-area damage
      f[rng() % 16] = static_cast<std::uint8_t>(rng());
    else if (kind == 5 && n > 8)                                  // a forged element byte
      f[7] = static_cast<std::uint8_t>(rng());
    else if (kind == 4 && n) {                                    // splice two seeds
      const auto& g = seeds[rng() % seeds.size()];
      if (!g.empty()) f.resize(rng() % n), f.insert(f.end(), g.begin() + rng() % g.size(), g.end());
    }
    LLVMFuzzerTestOneInput(f.data(), f.size());
  }
  std::printf("fuzz driver: %zu seed inputs, %ld mutated inputs, no fault\n", seeds.size(),
              iterations);
  return 0;
}

// Concurrent callers of the thread pool and the frame coders, for
// ThreadSanitizer (tests/frame/test_sanitizers.py builds it with
// -fsanitize=thread) and as a plain stress run.
//
// Part 1, the pool's rule: outer tasks of several callers fill this
// thread's scratch, call a nested parallel_for, and check their scratch is
// still theirs afterwards. A thread waiting in parallel_for must run only
// tasks of the job it waits for: a foreign task run there would overwrite
// the waiting task's scratch (issue 15).
//
// Part 2, frames: CALLERS threads encode and decode mixed tensors (bfloat16,
// float16, float32, float8 and bytes; 1 KiB up to MAX_BYTES; rANS, Huffman
// and auto; small sub-blocks, so that small tensors nest rANS sub-block
// tasks) with threads = 16, and compare every decode bit for bit.
//
//   threads_driver ROUNDS [CALLERS] [MAX_BYTES] [SEED]
//
// Prints "threads driver: ... no corrupt frame" and exits 0, or exits 1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "nncodecs/frame.h"
#include "nncodecs/threadpool.h"

namespace {

constexpr int kThreads = 16;  // above the core count, as nncodecs.set_threads(16)

// Part 1: returns the outer tasks whose scratch changed under them.
long pool_rule_round(int caller, std::size_t outer) {
  std::atomic<long> broken{0};
  nnc::parallel_for(outer, kThreads, [&](std::size_t t) {
    thread_local std::vector<std::uint32_t> scratch;  // as output_memory.cpp's scratch_buffer
    const std::uint32_t mark = static_cast<std::uint32_t>(caller) << 20 | static_cast<std::uint32_t>(t);
    scratch.assign(64, mark);
    // Nested tasks read the scratch, as rANS sub-blocks read their chunk's
    // planes, after 100 us (asleep: the cores stay free), so that helpers
    // hold some of them while this thread waits with other callers' outer
    // tasks still queued.
    const std::uint32_t* planes = scratch.data();
    std::atomic<std::uint64_t> sum{0};
    nnc::parallel_for(8, kThreads, [&](std::size_t i) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      sum.fetch_add(planes[i * 8], std::memory_order_relaxed);
    });
    if (sum.load() != 8ull * mark) broken.fetch_add(1);
    else if (std::any_of(scratch.begin(), scratch.end(), [&](std::uint32_t v) { return v != mark; }))
      broken.fetch_add(1);
  });
  return broken.load();
}

// A tensor of `bytes` bytes shaped like weights of the given layout.
std::vector<std::uint8_t> tensor(nnc::Layout layout, std::size_t bytes, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::geometric_distribution<int> geo(0.3);
  std::vector<std::uint8_t> v(bytes);
  auto f32_bits = [&] {
    float x = normal(rng);
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  };
  switch (layout) {
    case nnc::Layout::f32:
      for (std::size_t i = 0; i + 4 <= bytes; i += 4) {
        const std::uint32_t u = f32_bits();
        std::memcpy(&v[i], &u, 4);
      }
      break;
    case nnc::Layout::bf16:
      for (std::size_t i = 0; i + 2 <= bytes; i += 2) {
        const std::uint16_t u = static_cast<std::uint16_t>(f32_bits() >> 16);
        std::memcpy(&v[i], &u, 2);
      }
      break;
    case nnc::Layout::f16:
      for (std::size_t i = 0; i + 2 <= bytes; i += 2) {
        const std::uint32_t u = f32_bits();  // exponents of 0.02-sized values fit float16's
        const std::uint32_t e = std::max<int>(1, int((u >> 23) & 0xFF) - 112);
        const std::uint16_t h =
            static_cast<std::uint16_t>((u >> 16 & 0x8000) | (std::min<std::uint32_t>(e, 30) << 10) |
                                       (u >> 13 & 0x3FF));
        std::memcpy(&v[i], &h, 2);
      }
      break;
    default:  // float8 and plain bytes: skewed small values
      for (auto& b : v) b = static_cast<std::uint8_t>(std::min(geo(rng), 15) | (rng() & 0x80));
      break;
  }
  return v;
}

struct Tally {
  std::atomic<long> encodes{0}, decodes{0}, corrupt{0};
};

void frame_caller(int caller, int rounds, std::size_t max_bytes, std::uint64_t seed, Tally* tally) {
  std::mt19937_64 rng(seed * 7919 + caller);
  const nnc::Layout layouts[] = {nnc::Layout::bf16, nnc::Layout::f16, nnc::Layout::f32,
                                 nnc::Layout::f8_e4m3, nnc::Layout::none};
  const nnc::Coder coders[] = {nnc::Coder::rans, nnc::Coder::huffman, nnc::Coder::automatic};
  for (int r = 0; r < rounds; ++r) {
    const nnc::Layout layout = layouts[rng() % 5];
    const unsigned width = layout == nnc::Layout::none ? 1 : nnc::layout_width(layout);
    const double frac = std::uniform_real_distribution<double>(0, 1)(rng);
    std::size_t bytes = static_cast<std::size_t>(1024 * std::pow(double(max_bytes) / 1024, frac));
    bytes -= bytes % width;
    const std::vector<std::uint8_t> src = tensor(layout, bytes, rng);
    nnc::EncodeParams p;
    p.coder = coders[rng() % 3];
    p.planes = width;
    p.subblock_log2 = rng() % 2 ? 12 : 16;
    p.elements = true;
    p.layout = layout == nnc::Layout::none ? nnc::Layout::none : layout;
    p.row_length = rng() % 2 ? 256 : 0;
    p.threads = kThreads;
    std::vector<std::uint8_t> frame(nnc::frame_bound(src.size(), width));
    std::size_t written = 0;
    nnc::Error err;
    if (nnc::frame_encode(frame.data(), frame.size(), &written, src.data(), src.size(), p, {},
                          &err) != nnc::Status::ok) {
      std::fprintf(stderr, "caller %d: encode failed: %s\n", caller, err.message);
      tally->corrupt.fetch_add(1);
      continue;
    }
    tally->encodes.fetch_add(1);
    std::vector<std::uint8_t> back(src.size() + 1, 0xEE);
    const nnc::Status s = nnc::frame_decode(back.data(), src.size(), frame.data(), written,
                                            src.size(), p.layout, true, nullptr, 0, kThreads, &err);
    tally->decodes.fetch_add(1);
    if (s != nnc::Status::ok || std::memcmp(back.data(), src.data(), src.size()) != 0 ||
        back[src.size()] != 0xEE) {
      std::fprintf(stderr, "caller %d: %zu bytes, width %u, coder %d, sub-block 2^%u: %s\n", caller,
                   bytes, width, static_cast<int>(p.coder), p.subblock_log2,
                   s != nnc::Status::ok ? err.message : "decoded bytes differ");
      tally->corrupt.fetch_add(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  const int callers = argc > 2 ? std::atoi(argv[2]) : 8;
  const std::size_t max_bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (4u << 20);
  const std::uint64_t seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1;

  std::atomic<long> broken{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      for (int r = 0; r < rounds; ++r) broken.fetch_add(pool_rule_round(c, 6));
    });
  for (auto& t : threads) t.join();
  threads.clear();

  Tally tally;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back(frame_caller, c, rounds, max_bytes, seed, &tally);
  for (auto& t : threads) t.join();

  std::printf("threads driver: %d callers; pool rule: %ld of %d outer tasks saw foreign scratch; "
              "frames: %ld encodes, %ld decodes, %ld corrupt\n",
              callers, broken.load(), callers * rounds * 6, tally.encodes.load(),
              tally.decodes.load(), tally.corrupt.load());
  if (broken.load() || tally.corrupt.load()) return 1;
  std::printf("no corrupt frame\n");
  return 0;
}

// The encoder's choice for one chunk of one plane: what to try from its
// histogram (or a sample of it), what to keep from the coded sizes, and
// which chunks auto gives a zstd trial. Policy, not format: docs/format.md
// ("Encoder policy").
#include <algorithm>
#include <cstring>

#include "frame_internal.h"

namespace nnc {
namespace detail {
namespace {

// Per-thread buffers the coders write into, reused across chunks and calls.
std::vector<std::uint8_t>& coder_scratch(int which) {
  thread_local std::vector<std::uint8_t> buf[2];
  buf[which].clear();
  return buf[which];
}

// Chunks of at least kEstimateFrom symbols are judged on estimates
// (coders.h) and only the coder that should win runs; smaller ones run every
// coder allowed and compare exact sizes (tables weigh most there, and it is
// cheap).
// A large chunk's sample (sample_histogram): pieces of 1 KiB spread over it.
constexpr std::size_t kSamplePieces = 16, kSamplePiece = 1024;

// From the estimates: which coders to run (false: none; the chunk stays raw
// or takes its zstd candidate, as the caller decides). Estimates miss by well
// under 2%: a chunk stays raw only when it surely misses the threshold by
// that margin. Of rANS and Huffman only the one estimated smaller runs: a
// wrong pick in a near tie costs a fraction of a percent of one chunk, while
// running both would halve the encoder's speed.
bool estimate_choice(const std::uint32_t counts[256], std::size_t m, const EncodeParams& params,
                     const std::uint32_t* zstd_len, bool* try_rans, bool* try_huff) {
  constexpr std::size_t kNone = ~std::size_t(0);
  const std::size_t er =
      *try_rans ? detail::rans_estimate(counts, m, params.precision, params.subblock_log2) : kNone;
  const std::size_t eh =
      *try_huff ? detail::huffman_estimate(counts, m, params.subblock_log2) : kNone;
  const std::size_t best = std::min(er, eh);
  const std::size_t low = best - best / 50;  // the least it may turn out to be
  const std::size_t permille =
      params.coder == Coder::automatic ? std::min(params.min_gain_permille, 1000u) : 50u;
  if (low * 1000 >= m * (1000 - permille)) return false;  // stays raw
  if (zstd_len != nullptr && *zstd_len < low) return false;  // zstd wins
  if (er != kNone && eh != kNone) {  // only the one estimated smaller (rANS on a tie)
    *try_rans = er <= eh;
    *try_huff = !*try_rans;
  }
  return true;
}

// A large chunk's sample: 16 pieces of 1 KiB spread over it (m >= 2^14).
void sample_histogram(const std::uint8_t* p, std::size_t m, std::uint32_t counts[256]) {
  std::memset(counts, 0, 256 * sizeof(std::uint32_t));
  const std::size_t stride = m / kSamplePieces;
  for (std::size_t i = 0; i < kSamplePieces; ++i) {
    const std::uint8_t* q = p + i * stride;
    for (std::size_t j = 0; j < kSamplePiece; ++j) ++counts[q[j]];
  }
}

}  // namespace

std::uint64_t entropy_bits16(const std::uint32_t counts[256]) {
  std::uint64_t n = 0, sum = 0;
  for (int s = 0; s < 256; ++s)
    if (counts[s]) {
      n += counts[s];
      sum += std::uint64_t(counts[s]) * rans::log2_fixed16(counts[s]);
    }
  return n ? n * rans::log2_fixed16(n) - sum : 0;
}

}  // namespace detail

using namespace detail;  // NOLINT: the helpers above

// Whether a large chunk is near-uniform bytes (as mantissa planes are), from
// its sample (sample_histogram): an order-0 entropy of at least 7.8 bits a
// byte there (coding would save under 2.5%, where the thresholds ask 5%)
// skips the whole-chunk histogram. Integer arithmetic (log2_fixed16).
bool sample_is_raw(const std::uint32_t sample[256]) {
  constexpr std::uint64_t n = kSamplePieces * kSamplePiece;
  return entropy_bits16(sample) * 10 >= n * 78 * 65536;  // >= 7.8 bits a byte
}

ChunkPlan plan_chunk(const std::uint32_t* counts, std::size_t m, const EncodeParams& params,
                     bool has_zstd, std::uint32_t zstd_len) {
  ChunkPlan plan;
  if (counts != nullptr) {
    int distinct = 0;
    for (int s = 0; s < 256; ++s)
      if (counts[s]) ++distinct, plan.value = static_cast<std::uint8_t>(s);
    if (distinct == 1) {
      plan.mode = ChunkMode::constant;
      return plan;
    }
  }
  plan.try_rans = params.coder != Coder::huffman;
  plan.try_huff = params.coder != Coder::rans;
  const unsigned permille =
      params.coder == Coder::automatic ? std::min(params.min_gain_permille, 1000u) : 50u;
  if (counts == nullptr ||
      (m >= kEstimateFrom && !estimate_choice(counts, m, params, has_zstd ? &zstd_len : nullptr,
                                              &plan.try_rans, &plan.try_huff))) {
    plan.try_rans = plan.try_huff = false;
    if (has_zstd && params.coder == Coder::automatic &&
        std::size_t(zstd_len) * 1000 < m * (1000 - permille))
      plan.mode = ChunkMode::zstd;
  }
  return plan;
}

ChunkMode settle_chunk(const ChunkPlan& plan, std::size_t m, const EncodeParams& params,
                       std::size_t rans_len, std::size_t huff_len, bool has_zstd,
                       std::uint32_t zstd_len) {
  if (params.coder == Coder::automatic) {
    // The smallest; on a tie the faster to decode (raw, Huffman, rANS, zstd).
    // Raw stays unless the winner saves min_gain_permille of the chunk.
    const unsigned permille = std::min(params.min_gain_permille, 1000u);
    std::size_t winner = m;
    ChunkMode best = ChunkMode::raw;
    if (plan.try_huff && huff_len < winner) best = ChunkMode::huffman, winner = huff_len;
    if (plan.try_rans && rans_len < winner) best = ChunkMode::rans, winner = rans_len;
    if (has_zstd && zstd_len < winner) best = ChunkMode::zstd, winner = zstd_len;
    return winner * 1000 < m * (1000 - permille) ? best : ChunkMode::raw;
  }
  // The format's rule: raw unless coding saves at least 5%, decided in integers.
  const std::size_t size = plan.try_rans ? rans_len : huff_len;
  if (size * 20 < m * 19) return plan.try_rans ? ChunkMode::rans : ChunkMode::huffman;
  return ChunkMode::raw;
}

namespace detail {

// plan_chunk decides from the histogram what to try, settle_chunk from the
// sizes what to keep (the GPU encoder's host calls the same two).
void choose(const std::uint8_t* p, std::size_t m, const EncodeParams& params,
            const std::uint8_t* zstd, std::uint32_t zstd_len, bool copy_raw, std::uint8_t* slot,
            int sub_threads, ChunkOut* out) {
  std::uint32_t counts[256];
  // Large near-uniform chunks stay raw (or take zstd) without a histogram.
  bool uniform = false;
  if (m >= kEstimateFrom) {
    sample_histogram(p, m, counts);
    uniform = sample_is_raw(counts);
  }
  if (!uniform) detail::histogram(p, m, counts);
  const ChunkPlan plan = plan_chunk(uniform ? nullptr : counts, m, params, zstd != nullptr, zstd_len);
  ChunkMode mode = plan.mode;
  const std::vector<std::uint8_t>* coded = nullptr;
  if (mode == ChunkMode::constant) {
    out->mode = mode;
    out->value = plan.value;
    return;
  }
  if (plan.try_rans || plan.try_huff) {
    std::vector<std::uint8_t>& rans = coder_scratch(0);
    std::vector<std::uint8_t>& huff = coder_scratch(1);
    if (plan.try_rans)
      detail::rans_encode_chunk(p, m, counts, params.precision, params.subblock_log2, &rans,
                                sub_threads);
    if (plan.try_huff) detail::huffman_encode_chunk(p, m, counts, params.subblock_log2, &huff);
    mode = settle_chunk(plan, m, params, rans.size(), huff.size(), zstd != nullptr, zstd_len);
    if (mode == ChunkMode::rans) coded = &rans;
    if (mode == ChunkMode::huffman) coded = &huff;
  }
  out->mode = mode;
  if (coded != nullptr) {  // smaller than m: fits the slot
    std::memcpy(slot, coded->data(), coded->size());
    out->data = slot;
    out->length = coded->size();
  } else if (mode == ChunkMode::zstd) {
    out->data = zstd;
    out->length = zstd_len;
  } else if (copy_raw) {  // the planes of fused elements live in scratch only
    std::memcpy(slot, p, m);
    out->data = slot;
    out->length = m;
  } else {
    out->data = p;
    out->length = m;
  }
}


namespace {

// Chunks below this many symbols always get a zstd trial.
constexpr std::size_t kZstdAlwaysBelow = std::size_t(1) << 14;

// Whether at least 1/32 of a plane chunk lies in repeats of 8 bytes or more.
// 8-byte words at every 4th position are hashed; a hit is a word equal to the
// last one hashed into its bucket (kept in the table itself: no reload from
// the chunk, 1.5x faster; an all-ones word may count once on an empty
// bucket). It sees repeats whose distance is a multiple of 4, as in tensors
// whose rows are (rows of most weights are); a quarter of a pass over the
// chunk, where a zstd trial costs several passes.
bool has_long_repeats(const std::uint8_t* p, std::size_t m) {
  constexpr unsigned kBits = 12;
  std::uint64_t table[1u << kBits];
  std::memset(table, 0xFF, sizeof(table));
  std::size_t hits = 0;
  for (std::size_t i = 0; i + 8 <= m; i += 4) {
    std::uint64_t v;
    std::memcpy(&v, p + i, 8);
    const std::uint32_t h = static_cast<std::uint32_t>((v * 0x9E3779B97F4A7C15ull) >> (64 - kBits));
    hits += table[h] == v;
    table[h] = v;
  }
  return hits * 4 * 32 >= m;
}


}  // namespace

bool wants_zstd(const std::uint8_t* q, std::size_t m) {
  return m < kZstdAlwaysBelow || has_long_repeats(q, m);
}


}  // namespace detail
}  // namespace nnc

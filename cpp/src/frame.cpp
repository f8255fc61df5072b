// Frames: header, per-plane chunk index, payloads, CRC32C. Chunks encode and
// decode in parallel; with a float layout the plane split / merge and the
// reorder run fused, chunk by chunk, so full-size planes never exist.
// Byte layout: docs/format.md ("Frame").
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "coders.h"
#include "nncodecs/entropy.h"
#include "nncodecs/rans_lane.h"
#include "nncodecs/threadpool.h"
#include "transform_kernels.h"

namespace nnc {
namespace {

using detail::fail;

constexpr std::uint8_t kMagic[4] = {'N', 'N', 'C', 'F'};
// magic (4), version (1), settings (1), planes (1), and in version 3 the
// element byte (1). The settings byte packs coder (bits 0-1), checksum flag
// (bit 2), precision - 10 (bits 3-4) and sub-block log2 - 12 (bits 5-7):
// small tensors pay for every header byte.
constexpr std::size_t kFixedHeader = 7;
constexpr std::size_t kFixedHeaderTyped = 8;
constexpr std::uint8_t kFlagChecksum = 1u << 2;

void put_varint(std::uint8_t*& p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
}

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Read a LEB128 varint of at most 10 bytes; false when truncated or overlong.
bool get_varint(const std::uint8_t* p, std::size_t len, std::size_t* pos, std::uint64_t* v) {
  std::uint64_t out = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= len) return false;
    const std::uint8_t b = p[(*pos)++];
    if (shift == 63 && b > 1) return false;
    out |= std::uint64_t(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *v = out;
      return true;
    }
  }
  return false;
}

std::size_t chunk_count(std::uint64_t n) { return static_cast<std::size_t>((n + kChunkSymbols - 1) >> kChunkLog2); }

std::size_t chunk_symbols(std::uint64_t n, std::size_t c) {
  const std::uint64_t begin = std::uint64_t(c) << kChunkLog2;
  return static_cast<std::size_t>(std::min<std::uint64_t>(kChunkSymbols, n - begin));
}

// Per-thread scratch reused across chunks and calls: a fresh allocation per
// chunk would page-fault its way through every megabyte again. A task owns
// its thread's scratch until it returns: a thread waiting in parallel_for
// runs no other caller's task (threadpool.h).
std::uint8_t* scratch_buffer(std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// The planes of a whole (small) tensor, for the decoder's fine-grained path:
// the caller holds it for the whole call (its tasks decode into it), so it
// is not scratch_buffer, which is a task's own.
std::uint8_t* tensor_planes_buffer(std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// One encoded chunk of one plane. Payloads that are not external bytes (the
// source, a zstd candidate) go straight into the chunk's slot in the output:
// no allocation per chunk (fresh pages cost more than the coding).
struct ChunkOut {
  ChunkMode mode = ChunkMode::raw;
  std::uint8_t value = 0;
  const std::uint8_t* data = nullptr;  // payload bytes (in its slot, the source or zstd)
  std::size_t length = 0;
  std::uint32_t crc = 0;
};

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

// Order-0 bits of symbols with these counts, in 16.16 fixed point.
std::uint64_t entropy_bits16(const std::uint32_t counts[256]) {
  std::uint64_t n = 0, sum = 0;
  for (int s = 0; s < 256; ++s)
    if (counts[s]) {
      n += counts[s];
      sum += std::uint64_t(counts[s]) * rans::log2_fixed16(counts[s]);
    }
  return n ? n * rans::log2_fixed16(n) - sum : 0;
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
  // FORMAT: raw unless coding saves at least 5%, decided in integers.
  const std::size_t size = plan.try_rans ? rans_len : huff_len;
  if (size * 20 < m * 19) return plan.try_rans ? ChunkMode::rans : ChunkMode::huffman;
  return ChunkMode::raw;
}

namespace {

// Encode one chunk: its mode, and its payload in `slot` (room for m bytes:
// a coded payload is kept only when smaller than raw) or external bytes.
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

// The planes of chunk c: for element input split (and reordered) into this
// thread's scratch, else where they lie in the input.
struct ChunkPlanes {
  const std::uint8_t* scratch = nullptr;  // null: the input holds planes
  const std::uint8_t* in;
  std::uint64_t n;
  std::size_t first, m;
  const std::uint8_t* plane(unsigned j) const {
    return scratch ? scratch + std::size_t(j) * m : in + j * n + first;
  }
};

ChunkPlanes chunk_planes(const EncodeParams& p, const std::uint8_t* in, std::uint64_t n,
                         std::size_t c, const detail::RangeKernels& kern) {
  ChunkPlanes cp{nullptr, in, n, c << kChunkLog2, chunk_symbols(n, c)};
  const unsigned k = p.planes;
  if (p.elements && k > 1) {
    std::uint8_t* scratch = scratch_buffer(k * cp.m);
    kern.split(scratch, in + cp.first * k, cp.m, 0, cp.m, k, p.layout);
    cp.scratch = scratch;
  } else if (p.elements && p.layout != Layout::none) {
    std::uint8_t* scratch = scratch_buffer(cp.m);
    kern.reorder(scratch, in + cp.first, 0, cp.m, p.layout, false);
    cp.scratch = scratch;
  }
  return cp;
}

// A version 2 frame's row shift of the last plane: symbol i holds the
// plane's byte less offsets[i / length] (mod 256). length 0: none.
struct RowShift {
  std::uint64_t length = 0;
  const std::uint8_t* offsets = nullptr;
};

// Apply (undo = false: subtract) or undo (add) the row offsets on the
// symbols [first, first + m) of the last plane, held at p. Cloned for AVX2
// (chosen at load time); decoders run it on L1-resident blocks. Not under
// ThreadSanitizer: the clone resolver runs before it starts, and crashes.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx2", "default")))
#endif
void shift_rows(std::uint8_t* p, std::size_t m, std::uint64_t first, const RowShift& rs,
                bool undo) {
  std::size_t i = 0;
  while (i < m) {
    const std::uint64_t row = (first + i) / rs.length;
    const std::size_t end =
        static_cast<std::size_t>(std::min<std::uint64_t>(m, (row + 1) * rs.length - first));
    const std::uint8_t o =
        undo ? rs.offsets[row] : static_cast<std::uint8_t>(0u - rs.offsets[row]);
    for (; i < end; ++i) p[i] = static_cast<std::uint8_t>(p[i] + o);
  }
}

// Where the exponent field lies in an element (before the reorder): its
// lowest bit and its width, at most the 8 that the last plane holds
// (float64: its top 8 of 11). After the reorder that field is the top
// `bits` bits of the last plane's byte.
struct ExponentField {
  unsigned shift, bits;
};
ExponentField exponent_field(Layout layout) {
  switch (layout) {
    case Layout::f64: return {55, 8};
    case Layout::f32: return {23, 8};
    case Layout::bf16: return {7, 8};
    case Layout::f16: return {10, 5};
    case Layout::f8_e4m3: return {3, 4};
    case Layout::f8_e5m2: return {2, 5};
    default: return {0, 0};
  }
}

// A row's offset comes from a sample of it: the first 64 bytes' worth of
// elements (a cache line) of every 8 x 64 bytes, so that 7/8 of the input
// is never read. The plan's entropies count the first 64 bytes of rows.
constexpr std::uint64_t kSampleBytes = 64, kSampleEvery = 8;

// Rows [row, row + count) of elements of type Word: each row's offset (the
// rounded mean exponent of its sample, moved to the top of the byte), and
// the exponents of the first kSampleBytes of some rows, counted as they
// are (plain) and shifted.
template <class Word>
void plan_rows(const std::uint8_t* in, std::uint64_t n, std::uint64_t len, std::uint64_t row,
               std::uint64_t count, ExponentField f, std::uint8_t* offsets,
               std::uint32_t plain[256], std::uint32_t shifted[256]) {
  const unsigned mask = (1u << f.bits) - 1;
  constexpr std::uint64_t block = kSampleBytes / sizeof(Word);
  // Counted: the first block of every `every`-th row, about 4096 symbols a
  // group (the counts cost far more a symbol than the sums).
  const std::uint64_t every = std::max<std::uint64_t>(1, count * block / 4096);
  for (std::uint64_t r = row; r < row + count; ++r) {
    const std::uint64_t begin = r * len, end = std::min(n, begin + len);
    std::uint64_t sum = 0, samples = 0;
    for (std::uint64_t at = begin; at < end; at += block * kSampleEvery) {
      const std::uint64_t stop = std::min(end, at + block);
      std::uint32_t part = 0;  // vectorised: no histogram here
      for (std::uint64_t i = at; i < stop; ++i) {
        Word x;
        std::memcpy(&x, in + i * sizeof(Word), sizeof(Word));
        part += static_cast<std::uint32_t>(x >> f.shift) & mask;
      }
      sum += part;
      samples += stop - at;
    }
    const unsigned mean = static_cast<unsigned>((sum + samples / 2) / samples);
    offsets[r] = static_cast<std::uint8_t>(mean << (8 - f.bits));
    if ((r - row) % every) continue;
    for (std::uint64_t i = begin; i < std::min(end, begin + block); ++i) {
      Word x;
      std::memcpy(&x, in + i * sizeof(Word), sizeof(Word));
      const unsigned e = static_cast<unsigned>(x >> f.shift) & mask;
      ++plain[e];
      ++shifted[(e - mean) & mask];
    }
  }
}

// Per-row offsets of the last plane, kept only when the order-0 entropy of
// the shifted exponents, in chunk-sized groups of whole rows (a chunk has
// one table), beats that of the plain ones by more than the offsets cost
// plus 1/128 of the plane (the margin keeps marginal gains at version 1:
// the entropies come from samples, and a shifted plane may move a chunk
// from Huffman to the slower-encoding rANS). Only the exponent field is counted: the
// shift moves nothing else. Empty: no shift. Reads an eighth of the input,
// in parallel over the groups.
std::vector<std::uint8_t> plan_row_shift(const EncodeParams& params, const std::uint8_t* in,
                                         std::uint64_t n) {
  std::vector<std::uint8_t> offsets;
  const std::uint64_t len = params.row_length;
  ExponentField f;
  if (!row_shift_field(params.layout, params.elements, n, len, &f.shift, &f.bits))
    return offsets;
  const std::uint64_t rows = (n + len - 1) / len;
  const std::uint64_t group = std::max<std::uint64_t>(1, kChunkSymbols / len);  // rows a group
  const std::size_t groups = static_cast<std::size_t>((rows + group - 1) / group);
  offsets.resize(static_cast<std::size_t>(rows));
  std::vector<std::uint32_t> plain(groups * 256, 0), shifted(groups * 256, 0);
  parallel_for(groups, params.threads, [&](std::size_t g) {
    const std::uint64_t row = g * group, count = std::min(group, rows - row);
    std::uint32_t* pl = &plain[g * 256];
    std::uint32_t* sh = &shifted[g * 256];
    std::uint8_t* o = offsets.data();
    switch (params.planes) {
      case 1: plan_rows<std::uint8_t>(in, n, len, row, count, f, o, pl, sh); break;
      case 2: plan_rows<std::uint16_t>(in, n, len, row, count, f, o, pl, sh); break;
      case 4: plan_rows<std::uint32_t>(in, n, len, row, count, f, o, pl, sh); break;
      default: plan_rows<std::uint64_t>(in, n, len, row, count, f, o, pl, sh); break;
    }
  });
  if (!row_shift_pays(plain.data(), shifted.data(), groups, n, len)) offsets.clear();
  return offsets;
}

}  // namespace

bool row_shift_field(Layout layout, bool elements, std::uint64_t n, std::uint64_t row_length,
                     unsigned* shift, unsigned* bits) {
  const ExponentField f = exponent_field(layout);
  *shift = f.shift;
  *bits = f.bits;
  return elements && f.bits != 0 && row_length >= kMinRowLength && n >= kRowShiftFrom;
}

bool row_shift_pays(const std::uint32_t* plain, const std::uint32_t* shifted, std::size_t groups,
                    std::uint64_t n, std::uint64_t len) {
  if (len == 0) return false;
  const std::uint64_t rows = (n + len - 1) / len;
  const std::uint64_t group = std::max<std::uint64_t>(1, kChunkSymbols / len);
  double total = 0;  // bytes saved, summed in group order
  for (std::size_t g = 0; g < groups; ++g) {
    const std::uint64_t row = g * group, count = std::min(group, rows - row);
    std::uint64_t samples = 0;
    for (int s = 0; s < 256; ++s) samples += plain[g * 256 + s];
    const double elements = double(std::min(n, (row + count) * len) - row * len);
    const double bits =
        double(entropy_bits16(plain + g * 256)) - double(entropy_bits16(shifted + g * 256));
    total += bits / 65536.0 / 8.0 * elements / double(std::max<std::uint64_t>(samples, 1));
  }
  return total > double(rows + varint_size(len) + n / 128);
}

namespace {

bool check_params(const EncodeParams& p, std::size_t src_len, Error* err) {
  if (p.planes < 1 || p.planes > 255)
    return fail(err, Status::bad_argument, "planes must be 1..255, got %u", p.planes);
  if (p.precision < rans::kMinPrecision || p.precision > rans::kMaxPrecision)
    return fail(err, Status::bad_argument, "precision must be 10..12, got %u", p.precision);
  if (p.subblock_log2 < rans::kMinSubblockLog2 || p.subblock_log2 > rans::kMaxSubblockLog2)
    return fail(err, Status::bad_argument, "sub-block log2 must be 12..16, got %u",
                p.subblock_log2);
  if (p.min_gain_permille > 1000)
    return fail(err, Status::bad_argument, "min_gain_permille must be 0..1000, got %u",
                p.min_gain_permille);
  if (p.coder != Coder::rans && p.coder != Coder::huffman && p.coder != Coder::automatic)
    return fail(err, Status::bad_argument, "unknown coder %d", static_cast<int>(p.coder));
  if (src_len % p.planes)
    return fail(err, Status::bad_argument, "%zu bytes is not %u equal planes", src_len, p.planes);
  if (p.layout != Layout::none && (!p.elements || layout_width(p.layout) != p.planes))
    return fail(err, Status::bad_argument, "a float layout needs elements of its width");
  if (static_cast<unsigned>(p.element) >= kElementCount)
    return fail(err, Status::bad_argument, "unknown element type %u",
                static_cast<unsigned>(p.element));
  const ElementInfo& e = kElements[static_cast<unsigned>(p.element)];
  if (e.width != 0 && e.width != p.planes)
    return fail(err, Status::bad_argument, "element type %s is %u bytes, not %u planes", e.name,
                e.width, p.planes);
  if (p.elements && p.layout != Layout::none && p.element != Element::bytes &&
      e.layout != p.layout)
    return fail(err, Status::bad_argument, "element type %s does not take this float layout",
                e.name);
  return true;
}

}  // namespace

std::size_t frame_bound(std::size_t src_len, unsigned planes) {
  const std::size_t n = planes ? src_len / planes : 0;
  // version 2's row length and offsets: at most one a kMinRowLength symbols
  const std::size_t rows = static_cast<std::size_t>(n / kMinRowLength + 1);
  return kFixedHeaderTyped + 10 + 4 + 10 + rows + std::size_t(planes) * chunk_count(n) * 6 +
         src_len;
}

namespace {
bool wants_zstd(const std::uint8_t* q, std::size_t m);

// A frame's header and chunk index (docs/format.md): its size, and the
// bytes, for entries with mode, value and length (the CPU encoder's
// ChunkOut, the GPU host's ChunkEntry).
template <class Entry>
std::size_t frame_head_size(const EncodeParams& params, std::size_t src_len,
                            std::uint64_t row_length, std::size_t rows, const Entry* e,
                            std::size_t count) {
  std::size_t index_len = 0;
  for (std::size_t i = 0; i < count; ++i) {
    index_len += 1;
    if (e[i].mode == ChunkMode::constant) index_len += 1;
    else if (e[i].mode != ChunkMode::raw) index_len += varint_size(e[i].length);
  }
  const std::size_t rows_len = row_length ? varint_size(row_length) + rows : 0;
  return kFixedHeaderTyped + varint_size(src_len) + (params.checksum ? 4 : 0) + rows_len +
         index_len;
}

template <class Entry>
std::size_t payload_size(const Entry* e, std::size_t count) {
  std::size_t len = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (e[i].mode != ChunkMode::constant) len += e[i].length;
  return len;
}

// Returns where the payloads begin.
template <class Entry>
std::uint8_t* write_frame_head(std::uint8_t* p, const EncodeParams& params, std::size_t src_len,
                               std::uint32_t crc, std::uint64_t row_length,
                               const std::uint8_t* offsets, std::size_t rows, const Entry* e,
                               std::size_t count) {
  std::memcpy(p, kMagic, 4);
  p[4] = kFrameVersionTyped;
  p[5] = static_cast<std::uint8_t>(static_cast<unsigned>(params.coder) |
                                   (params.checksum ? kFlagChecksum : 0u) |
                                   (params.precision - rans::kMinPrecision) << 3 |
                                   (params.subblock_log2 - rans::kMinSubblockLog2) << 5);
  p[6] = static_cast<std::uint8_t>(params.planes);
  p[7] = static_cast<std::uint8_t>(static_cast<unsigned>(params.element) |
                                   (row_length ? kElementRows : 0u));
  p += kFixedHeaderTyped;
  put_varint(p, src_len);
  if (params.checksum) {
    // Version 3 folds the element code into the checksum, so that a changed
    // element byte fails the check as a changed byte of data does.
    detail::store_u32(p, crc ^ static_cast<std::uint32_t>(params.element));
    p += 4;
  }
  if (row_length) {
    put_varint(p, row_length);
    std::memcpy(p, offsets, rows);
    p += rows;
  }
  for (std::size_t i = 0; i < count; ++i) {
    *p++ = static_cast<std::uint8_t>(e[i].mode);
    if (e[i].mode == ChunkMode::constant) *p++ = e[i].value;
    else if (e[i].mode != ChunkMode::raw) put_varint(p, e[i].length);
  }
  return p;
}

}  // namespace

std::size_t frame_head(std::vector<std::uint8_t>* dst, const EncodeParams& params,
                       std::size_t src_len, std::uint32_t crc, std::uint64_t row_length,
                       const std::uint8_t* offsets, std::size_t rows, const ChunkEntry* entries,
                       std::size_t count) {
  dst->resize(frame_head_size(params, src_len, row_length, rows, entries, count));
  write_frame_head(dst->data(), params, src_len, crc, row_length, offsets, rows, entries, count);
  return payload_size(entries, count);
}

Status frame_encode(void* dst, std::size_t dst_cap, std::size_t* written, const void* src,
                    std::size_t src_len, const EncodeParams& params, const External& zstd,
                    Error* err, ZstdProbe* probe) {
  *written = 0;
  if (!check_params(params, src_len, err)) return err->status;
  const unsigned k = params.planes;
  const std::uint64_t n = src_len / k;
  const std::size_t chunks = chunk_count(n);
  const auto* in = static_cast<const std::uint8_t*>(src);
  std::vector<ChunkOut> out(std::size_t(k) * chunks);
  const detail::RangeKernels& kern = detail::active_kernels();
  // Each chunk's payload is written into its slot: the room a raw chunk
  // takes in the plane layout, after the largest header and index there can
  // be. The payloads move down into place once the index is known.
  if (dst_cap < frame_bound(src_len, k))
    return fail(err, Status::dst_too_small, "dst has %zu bytes, frame_bound is %zu", dst_cap,
                frame_bound(src_len, k)),
           err->status;
  auto* const slots = static_cast<std::uint8_t*>(dst) + (frame_bound(src_len, k) - src_len);
  // Fewer chunks than threads (a small tensor): rANS sub-blocks in parallel.
  const int workers = resolve_threads(params.threads);
  const int sub_threads = chunks < static_cast<std::size_t>(workers) ? workers : 1;

  const bool probing =
      probe != nullptr && params.coder == Coder::automatic && zstd.data == nullptr;
  std::vector<char> flagged(probing ? std::size_t(k) * chunks : 0, 0);
  std::atomic<bool> any_flagged{false};
  if (probing) probe->pieces.assign(std::size_t(k) * chunks, {});

  // The row shift, decided before any chunk is coded (a version 2 frame).
  const std::vector<std::uint8_t> row_offsets = plan_row_shift(params, in, n);
  const RowShift rs{row_offsets.empty() ? 0 : params.row_length, row_offsets.data()};
  std::vector<std::uint32_t> shifted_crc(rs.length ? chunks : 0, 0);

  parallel_for(chunks, params.threads, [&](std::size_t c) {
    const ChunkPlanes cp = chunk_planes(params, in, n, c, kern);
    const std::size_t m = cp.m;
    if (rs.length) {  // the last plane lies in this thread's scratch
      auto* top = const_cast<std::uint8_t*>(cp.plane(k - 1));
      if (params.checksum) shifted_crc[c] = crc32c(0, top, m);  // of the plane itself
      shift_rows(top, m, cp.first, rs, false);
    }
    if (probing) {
      for (unsigned j = 0; j < k; ++j) {
        const std::uint8_t* p = cp.plane(j);
        const std::size_t idx = std::size_t(j) * chunks + c;
        if (wants_zstd(p, m)) {
          flagged[idx] = 1;
          probe->pieces[idx].assign(p, p + m);
          any_flagged.store(true, std::memory_order_relaxed);
        }
      }
      // Once a chunk wants zstd this frame is thrown away: only probe on.
      if (any_flagged.load(std::memory_order_relaxed)) return;
    }
    for (unsigned j = 0; j < k; ++j) {
      const std::uint8_t* p = cp.plane(j);
      const std::size_t idx = std::size_t(j) * chunks + c;
      const std::uint8_t* z = zstd.data ? zstd.data[idx] : nullptr;
      const std::uint32_t zl = z ? zstd.size[idx] : 0;
      choose(p, m, params, z, zl, cp.scratch != nullptr, slots + j * n + cp.first, sub_threads,
             &out[idx]);
      if (params.checksum)
        out[idx].crc = rs.length && j == k - 1 ? shifted_crc[c] : crc32c(0, p, m);
    }
  });

  if (probing) {
    probe->wanted.assign(flagged.size(), false);
    for (std::size_t i = 0; i < flagged.size(); ++i) probe->wanted[i] = flagged[i] != 0;
    probe->any = std::find(flagged.begin(), flagged.end(), 1) != flagged.end();
    if (probe->any) return Status::ok;  // *written stays 0: encode again with candidates
  }

  std::uint32_t crc = 0;
  if (params.checksum)
    for (std::size_t i = 0; i < out.size(); ++i)
      crc = crc32c_combine(crc, out[i].crc, chunk_symbols(n, i % chunks));
  const std::size_t total = frame_head_size(params, src_len, rs.length, row_offsets.size(),
                                            out.data(), out.size()) +
                            payload_size(out.data(), out.size());
  if (total > dst_cap)
    return fail(err, Status::dst_too_small, "frame needs %zu bytes, dst has %zu", total, dst_cap),
           err->status;
  std::uint8_t* p = write_frame_head(static_cast<std::uint8_t*>(dst), params, src_len, crc,
                                     rs.length, row_offsets.data(), row_offsets.size(),
                                     out.data(), out.size());
  // Slots lie at or after where their payloads go (the index is at most
  // the room left for it): moving them in order never overwrites one unread.
  for (const ChunkOut& o : out) {
    if (o.mode == ChunkMode::constant) continue;
    if (o.length) std::memmove(p, o.data, o.length);
    p += o.length;
  }
  *written = total;
  return Status::ok;
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

bool wants_zstd(const std::uint8_t* q, std::size_t m) {
  return m < kZstdAlwaysBelow || has_long_repeats(q, m);
}

}  // namespace

Status frame_info(const void* src, std::size_t src_len, std::uint64_t max_decoded,
                  FrameInfo* info, Error* err, std::size_t total_len) {
  const auto* p = static_cast<const std::uint8_t*>(src);
  // A prefix of the frame: the header and index must lie in it; the
  // payloads are checked against the whole frame's length.
  const std::size_t total = total_len ? total_len : src_len;
  if (src_len < kFixedHeader + 1)
    return fail(err, Status::corrupt, "frame of %zu bytes is shorter than a header", src_len),
           err->status;
  if (std::memcmp(p, kMagic, 4) != 0)
    return fail(err, Status::corrupt,
                "not an nncodecs frame: magic %02x %02x %02x %02x, expected 'NNCF'", p[0], p[1],
                p[2], p[3]),
           err->status;
  info->version = p[4];
  if (info->version != kFrameVersion && info->version != kFrameVersionRows &&
      info->version != kFrameVersionTyped)
    return fail(err, Status::corrupt, "frame version %u, this build reads versions %u to %u",
                p[4], kFrameVersion, kFrameVersionTyped),
           err->status;
  const unsigned settings = p[5];
  info->coder = static_cast<Coder>(settings & 3u);
  info->has_checksum = settings & kFlagChecksum;
  info->precision = rans::kMinPrecision + ((settings >> 3) & 3u);
  info->subblock_log2 = rans::kMinSubblockLog2 + (settings >> 5);
  info->planes = p[6];
  if ((settings & 3u) == 0 || info->precision > rans::kMaxPrecision ||
      info->subblock_log2 > rans::kMaxSubblockLog2 || info->planes == 0)
    return fail(err, Status::corrupt,
                "bad frame header: settings byte 0x%02x (coder %u, precision %u, sub-block 2^%u), "
                "planes %u",
                settings, settings & 3u, info->precision, info->subblock_log2, info->planes),
           err->status;
  // Version 3's element byte (src_len >= 8 here): the type, and whether
  // the row section follows (version 2 says so by its number).
  bool rows_follow = info->version == kFrameVersionRows;
  info->element = Element::bytes;
  std::size_t pos = kFixedHeader;
  if (info->version == kFrameVersionTyped) {
    const unsigned byte = p[7], code = byte & kElementMask;
    if (code >= kElementCount || (byte & ~(kElementMask | kElementRows)) != 0)
      return fail(err, Status::corrupt,
                  "bad element byte 0x%02x: element type code %u (this build knows 0..%u), "
                  "reserved bit %u",
                  byte, code, kElementCount - 1, (byte >> 6) & 1u),
             err->status;
    const ElementInfo& e = kElements[code];
    if (e.width != 0 && e.width != info->planes)
      return fail(err, Status::corrupt, "element type %s is %u bytes, the frame has %u planes",
                  e.name, e.width, info->planes),
             err->status;
    info->element = static_cast<Element>(code);
    rows_follow = (byte & kElementRows) != 0;
    pos = kFixedHeaderTyped;
  }
  if (!get_varint(p, src_len, &pos, &info->decoded_len))
    return fail(err, Status::corrupt, "truncated or overlong decoded length"), err->status;
  if (info->decoded_len > max_decoded)
    return fail(err, Status::corrupt, "frame declares %llu decoded bytes, expected at most %llu",
                static_cast<unsigned long long>(info->decoded_len),
                static_cast<unsigned long long>(max_decoded)),
           err->status;
  if (info->decoded_len % info->planes)
    return fail(err, Status::corrupt, "decoded length %llu is not %u equal planes",
                static_cast<unsigned long long>(info->decoded_len), info->planes),
           err->status;
  if (info->has_checksum) {
    if (src_len - pos < 4) return fail(err, Status::corrupt, "truncated checksum"), err->status;
    info->checksum = detail::load_u32(p + pos) ^ static_cast<std::uint32_t>(info->element);
    pos += 4;
  }
  const std::uint64_t n = info->decoded_len / info->planes;
  info->row_length = 0;
  info->row_offsets_at = 0;
  if (rows_follow) {
    if (!get_varint(p, src_len, &pos, &info->row_length))
      return fail(err, Status::corrupt, "truncated or overlong row length"), err->status;
    if (info->row_length == 0 || n == 0)
      return fail(err, Status::corrupt, "row shift with row length %llu over %llu symbols",
                  static_cast<unsigned long long>(info->row_length),
                  static_cast<unsigned long long>(n)),
             err->status;
    const std::uint64_t rows = (n - 1) / info->row_length + 1;
    if (rows > src_len - pos)
      return fail(err, Status::corrupt, "%llu row offsets cannot fit the %zu bytes left",
                  static_cast<unsigned long long>(rows), src_len - pos),
             err->status;
    info->row_offsets_at = pos;
    pos += static_cast<std::size_t>(rows);
  }
  const std::size_t chunks = chunk_count(n);
  const std::uint64_t entries = std::uint64_t(info->planes) * chunks;
  if (entries > src_len - pos)  // every entry takes at least one byte
    return fail(err, Status::corrupt, "a chunk index of %llu entries cannot fit %zu bytes",
                static_cast<unsigned long long>(entries), src_len - pos),
           err->status;
  info->chunks.clear();
  info->chunks.reserve(entries);
  for (unsigned j = 0; j < info->planes; ++j)
    for (std::size_t c = 0; c < chunks; ++c) {
      ChunkRef r{};
      r.plane = j;
      r.index = c;
      r.symbols = chunk_symbols(n, c);
      if (pos >= src_len) return fail(err, Status::corrupt, "truncated chunk index"), err->status;
      const std::uint8_t mode = p[pos++];
      if (mode > static_cast<std::uint8_t>(ChunkMode::zstd))
        return fail(err, Status::corrupt, "plane %u chunk %zu: unknown mode %u", j, c, mode),
               err->status;
      r.mode = static_cast<ChunkMode>(mode);
      if (r.mode == ChunkMode::constant) {
        if (pos >= src_len) return fail(err, Status::corrupt, "truncated chunk index"), err->status;
        r.value = p[pos++];
      } else if (r.mode == ChunkMode::raw) {
        r.length = r.symbols;
      } else if (!get_varint(p, src_len, &pos, &r.length)) {
        return fail(err, Status::corrupt, "plane %u chunk %zu: truncated payload length", j, c),
               err->status;
      }
      info->chunks.push_back(r);
    }
  info->header_len = pos;
  std::uint64_t offset = pos;
  for (ChunkRef& r : info->chunks) {
    if (r.length > total - std::min<std::uint64_t>(offset, total))
      return fail(err, Status::corrupt,
                  "plane %u chunk %llu: payload of %llu bytes at offset %llu passes the frame end "
                  "(%zu bytes)",
                  r.plane, static_cast<unsigned long long>(r.index),
                  static_cast<unsigned long long>(r.length),
                  static_cast<unsigned long long>(offset), total),
             err->status;
    r.offset = offset;
    offset += r.length;
  }
  if (offset != total)
    return fail(err, Status::corrupt, "frame has %llu bytes after its last chunk",
                static_cast<unsigned long long>(total - offset)),
           err->status;
  return Status::ok;
}

Status check_element(const FrameInfo& info, Element expected, Error* err) {
  if (expected == Element::bytes || info.element == Element::bytes || info.element == expected)
    return Status::ok;
  const unsigned want = static_cast<unsigned>(expected);
  return fail(err, Status::corrupt, "the frame holds %s elements, expected %s",
              kElements[static_cast<unsigned>(info.element)].name,
              want < kElementCount ? kElements[want].name : "?"),
         err->status;
}

namespace {

// Prefix an error's message with the chunk it came from.
void where(Error* e, const ChunkRef& r) {
  char buf[sizeof(e->message)];
  std::snprintf(buf, sizeof(buf), "plane %u chunk %llu: %.200s", r.plane,
                static_cast<unsigned long long>(r.index), e->message);
  std::memcpy(e->message, buf, sizeof(buf));
}

}  // namespace

namespace {

#if defined(__linux__)
// Whether at least 7/8 of the pages in [begin, end) (page aligned) are
// resident, by mincore() in pieces of 64 Ki pages. False when it cannot tell.
bool mostly_resident(std::uintptr_t begin, std::uintptr_t end) {
  constexpr std::size_t kPage = 4096, kBatch = 65536;
  unsigned char vec[kBatch];
  std::size_t resident = 0;
  const std::size_t pages = (end - begin) / kPage;
  for (std::size_t at = 0; at < pages; at += kBatch) {
    const std::size_t n = std::min(kBatch, pages - at);
    if (mincore(reinterpret_cast<void*>(begin + at * kPage), n * kPage, vec) != 0) return false;
    for (std::size_t i = 0; i < n; ++i) resident += vec[i] & 1u;
  }
  return resident * 8 >= pages * 7;
}
#endif

// Whether this kernel backs madvised memory with transparent huge pages
// ("always" or "madvise" in sysfs), asked once.
bool huge_pages_available() {
  static const bool yes = [] {
    std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == nullptr) return false;
    char buf[128] = {0};
    const std::size_t got = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[got] = 0;
    return std::strstr(buf, "[always]") != nullptr || std::strstr(buf, "[madvise]") != nullptr;
  }();
  return yes;
}

// Get a large output ready before the threads write it. Fresh memory would
// otherwise fault in 4 KiB page by page from the decoding threads, which
// contend in the kernel (32 MiB bfloat16 tensors, 2 threads: 3.2 GB/s into
// fresh memory, 7.2 into memory already faulted in; a page fault costs about
// 1 us on this virtual machine). Where transparent huge pages exist, the
// range is madvised for them (NumPy does the same for its arrays of 4 MiB
// or more): faults then come 2 MiB at a time and a decode into fresh memory
// runs as fast as with the pages populated first (6.4-6.5 GB/s for 12 fresh
// 32 MiB outputs either way). Elsewhere, MADV_POPULATE_WRITE (Linux 5.14+)
// faults the range in with one call, unless mincore() finds it resident
// already (populating resident memory still walks every page). Returns
// whether the caller should populate the rest (see populate()).
bool prepare_output(std::uint8_t* p, std::uint64_t len) {
#if defined(__linux__)
  if (len < (std::uint64_t(1) << 20)) return false;
  if (huge_pages_available()) {
    constexpr std::uintptr_t huge = std::uintptr_t(1) << 21;
    const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) & ~(huge - 1);
    const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + len) & ~(huge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    return false;
  }
  const std::uintptr_t page = 4096;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + len) & ~(page - 1);
  return end > begin && !mostly_resident(begin, end);
#else
  (void)p;
  (void)len;
  return false;
#endif
}

// Fault [p, p + len) in with one call (MADV_POPULATE_WRITE; when refused,
// the pages fault in as the threads write them).
void populate(std::uint8_t* p, std::uint64_t len) {
#if defined(__linux__)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE
  const std::uintptr_t page = 4096;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + len) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateWrite);
#else
  (void)p;
  (void)len;
#endif
}
}  // namespace

Status frame_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::uint64_t max_decoded, Layout layout, bool elements,
                    const std::uint8_t* zstd_decoded, std::size_t zstd_decoded_len, int threads,
                    Error* err) {
  FrameInfo info;
  Status s = frame_info(src, src_len, std::min<std::uint64_t>(max_decoded, dst_cap), &info, err);
  if (s != Status::ok) return s;
  const unsigned k = info.planes;
  if (layout != Layout::none && (!elements || layout_width(layout) != k))
    return fail(err, Status::bad_argument, "layout width differs from the frame's %u planes", k),
           err->status;
  const std::uint64_t n = info.decoded_len / k;
  const std::size_t chunks = chunk_count(n);
  // zstd chunks arrive decoded, in index order.
  std::vector<std::uint64_t> ext_at(info.chunks.size(), 0);
  std::uint64_t ext_total = 0;
  for (std::size_t i = 0; i < info.chunks.size(); ++i)
    if (info.chunks[i].mode == ChunkMode::zstd) {
      ext_at[i] = ext_total;
      ext_total += info.chunks[i].symbols;
    }
  if (ext_total != zstd_decoded_len)
    return fail(err, Status::bad_argument, "%zu decoded zstd bytes given, the frame needs %llu",
                zstd_decoded_len, static_cast<unsigned long long>(ext_total)),
           err->status;

  const auto* in = static_cast<const std::uint8_t*>(src);
  auto* out = static_cast<std::uint8_t*>(dst);
  // Many chunks into fresh 4 KiB pages: fault in the first eighth now; one
  // task faults in the rest while the other threads decode from the start
  // (one thread faulting at a time: concurrent faults contend in the kernel).
  const bool populate_out = prepare_output(out, info.decoded_len);
  const bool staged = populate_out && chunks >= 4 * static_cast<std::size_t>(resolve_threads(threads)) &&
                      resolve_threads(threads) > 1 &&
                      info.decoded_len >= (std::uint64_t(8) << 20);
  const std::uint64_t head = staged ? (info.decoded_len / 8) & ~std::uint64_t(4095) : info.decoded_len;
  if (populate_out) populate(out, head);
  const detail::MergePtrsKernel merge = detail::merge_ptrs_kernel();
  std::vector<Error> errors(info.chunks.size());
  std::vector<std::uint32_t> crcs(info.chunks.size(), 0);
  const bool fused = elements && (k > 1 || layout != Layout::none);
  // Version 2: the last plane's row offsets are undone where it is decoded
  // (that plane is never used in place), before its checksum.
  const RowShift rs{info.row_length, in + info.row_offsets_at};
  auto shifted = [&](unsigned j) { return rs.length != 0 && j == k - 1; };
  // Decode one (plane, chunk) into t; raw chunks are not copied when the
  // caller merges straight from the payload (*view set, t untouched).
  // With `unshift` false the caller undoes the offsets itself (block by
  // block, in L1, right before its checksum and merge).
  auto decode_one = [&](unsigned j, std::size_t c, std::uint8_t* t, const std::uint8_t** view,
                        bool with_crc, bool unshift = true) {
    if (shifted(j)) view = nullptr;
    const std::size_t idx = std::size_t(j) * chunks + c;
    const ChunkRef& r = info.chunks[idx];
    const std::size_t m = chunk_symbols(n, c);
    const std::uint8_t* payload = in + r.offset;
    const std::uint8_t* data = t;
    bool ok = true;
    switch (r.mode) {
      case ChunkMode::raw:
        if (view) data = payload;
        else std::memcpy(t, payload, m);
        break;
      case ChunkMode::constant: std::memset(t, r.value, m); break;
      case ChunkMode::zstd:
        if (view) data = zstd_decoded + ext_at[idx];
        else std::memcpy(t, zstd_decoded + ext_at[idx], m);
        break;
      case ChunkMode::rans:
        ok = detail::rans_decode_chunk(t, m, payload, r.length, info.precision,
                                       info.subblock_log2, &errors[idx]);
        break;
      case ChunkMode::huffman:
        ok = detail::huffman_decode_chunk(t, m, payload, r.length, info.subblock_log2,
                                          &errors[idx]);
        break;
    }
    if (!ok) {
      where(&errors[idx], r);
      return false;
    }
    if (shifted(j) && unshift) shift_rows(t, m, std::uint64_t(c) << kChunkLog2, rs, true);
    if (view) *view = data;
    if (with_crc && info.has_checksum) crcs[idx] = crc32c(0, data, m);
    return true;
  };
  // Below 64 KiB a second thread costs more to wake than it saves.
  if (info.decoded_len < (std::uint64_t(1) << 16)) threads = 1;
  const int workers = resolve_threads(threads);
  if (chunks < 4 * static_cast<std::size_t>(workers) && workers > 1) {
    // Few chunks (a small tensor): split the work finer, down to single rANS
    // sub-blocks, so that every thread has some. Planes go to a buffer of the
    // whole tensor (small here; raw and zstd chunks are used in place). A
    // task holding the only plane of its chunk that needs decoding merges its
    // own elements right after (the common case: one coded exponent plane),
    // from planes still in cache; chunks with no such plane get a merge task,
    // chunks with several are merged once every task is done. Each task
    // checksums what it decoded; the CRCs are joined in index order below.
    std::uint8_t* base = fused ? tensor_planes_buffer(k * n) : out;
    auto target = [&](std::size_t idx) {
      return base + info.chunks[idx].plane * n + (info.chunks[idx].index << kChunkLog2);
    };
    std::vector<const std::uint8_t*> view(info.chunks.size(), nullptr);
    std::vector<unsigned> coded(chunks, 0);  // planes of each chunk decoded by a task
    for (std::size_t idx = 0; idx < info.chunks.size(); ++idx) {
      const ChunkRef& r = info.chunks[idx];
      if (shifted(r.plane)) ++coded[r.index];
      else if (fused && r.mode == ChunkMode::raw) view[idx] = in + r.offset;
      else if (fused && r.mode == ChunkMode::zstd) view[idx] = zstd_decoded + ext_at[idx];
      else ++coded[r.index];
    }
    std::vector<detail::RansChunkDecoder> decoders(info.chunks.size());
    struct Task {
      std::size_t idx;          // chunk entry; for a merge-only task, the chunk number
      std::size_t first, last;  // a rANS sub-block range, or a whole chunk (last == 0)
      std::uint32_t crc;
      std::size_t len;          // symbols of the range
      bool merge_only;
      double cost;              // for the order the tasks are claimed in
    };
    std::vector<Task> tasks;
    const std::size_t block = std::size_t(1) << info.subblock_log2;
    // Four sub-blocks a task decode fastest (the SIMD kernels interleave
    // them), pairs next; single ones balance better when there are few.
    std::size_t subblocks = 0;
    for (const ChunkRef& r : info.chunks)
      if (r.mode == ChunkMode::rans) subblocks += (r.symbols + block - 1) / block;
    const std::size_t w = static_cast<std::size_t>(workers);
    const std::size_t per_task = subblocks >= 4 * w ? 4 : subblocks >= 2 * w ? 2 : 1;
    for (std::size_t idx = 0; idx < info.chunks.size(); ++idx) {
      const ChunkRef& r = info.chunks[idx];
      if (r.mode != ChunkMode::rans) {
        // Raw and zstd chunks used in place: their checksum only (cheap);
        // others decode (or are copied) whole.
        tasks.push_back({idx, 0, 0, 0, r.symbols, false,
                         view[idx] ? double(r.symbols) / 16 : 2.0 * double(r.symbols)});
        continue;
      }
      if (!decoders[idx].prepare(target(idx), r.symbols, in + r.offset, r.length, info.precision,
                                 info.subblock_log2, &errors[idx]))
        return where(&errors[idx], r), *err = errors[idx], err->status;
      for (std::size_t b = 0; b < decoders[idx].subblocks(); b += per_task) {
        const std::size_t last = std::min(b + per_task, decoders[idx].subblocks());
        const std::size_t len = std::min<std::size_t>(last * block, r.symbols) - b * block;
        // A single sub-block decodes about 1.4x slower a symbol than interleaved ones.
        tasks.push_back({idx, b, last, 0, len, false, double(len) * (last - b == 1 ? 1.4 : 1.0)});
      }
    }
    if (fused)
      for (std::size_t c = 0; c < chunks; ++c)
        if (coded[c] == 0) tasks.push_back({c, 0, 0, 0, chunk_symbols(n, c), true, 0.0});
    // Merge elements [from, to) of chunk c from its planes.
    auto merge_range = [&](std::size_t c, std::size_t from, std::size_t to) {
      const std::uint8_t* ptrs[256];
      for (unsigned j = 0; j < k; ++j) {
        const std::size_t idx = std::size_t(j) * chunks + c;
        ptrs[j] = (view[idx] ? view[idx] : target(idx)) + from;
      }
      merge(out + ((c << kChunkLog2) + from) * k, ptrs, to - from, k, layout);
    };
    // Claimed longest first, so that the last tasks to start are short.
    std::vector<std::size_t> order(tasks.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return tasks[a].cost > tasks[b].cost; });
    std::vector<Error> task_errors(tasks.size());
    parallel_for(tasks.size(), threads, [&](std::size_t i) {
      Task& task = tasks[order[i]];
      if (task.merge_only) {
        merge_range(task.idx, 0, task.len);
        return;
      }
      const ChunkRef& r = info.chunks[task.idx];
      const std::uint8_t* data = target(task.idx) + task.first * block;
      if (task.last == 0) {
        if (view[task.idx]) {
          data = view[task.idx];
        } else if (!decode_one(r.plane, r.index, target(task.idx), nullptr, false)) {
          return;
        }
      } else if (!decoders[task.idx].decode(task.first, task.last, &task_errors[order[i]])) {
        where(&task_errors[order[i]], r);
        return;
      } else if (shifted(r.plane)) {
        shift_rows(target(task.idx) + task.first * block, task.len,
                   (std::uint64_t(r.index) << kChunkLog2) + task.first * block, rs, true);
      }
      if (info.has_checksum) task.crc = crc32c(0, data, task.len);
      if (fused && !view[task.idx] && coded[r.index] == 1) {
        const std::size_t from = task.last == 0 ? 0 : task.first * block;
        merge_range(r.index, from, from + task.len);
      }
    });
    for (const Error& e : task_errors)
      if (e.status != Status::ok) return *err = e, err->status;
    for (const Error& e : errors)
      if (e.status != Status::ok) return *err = e, err->status;
    // Fold the tasks' CRCs into per-chunk CRCs (tasks listed in index order).
    for (const Task& task : tasks)
      if (!task.merge_only)
        crcs[task.idx] =
            task.first == 0 ? task.crc : crc32c_combine(crcs[task.idx], task.crc, task.len);
    if (fused) {
      // Chunks with several decoded planes: merged now, in ranges that divide
      // a chunk, so that every thread has some.
      constexpr std::size_t kRangeLog2 = 15;
      std::vector<std::size_t> ranges;
      for (std::size_t first = 0; first < n; first += std::size_t(1) << kRangeLog2)
        if (coded[first >> kChunkLog2] > 1) ranges.push_back(first);
      parallel_for(ranges.size(), threads, [&](std::size_t i) {
        const std::size_t first = ranges[i];
        const std::size_t c = first >> kChunkLog2, off = first - (c << kChunkLog2);
        const std::size_t len = std::min<std::size_t>(std::size_t(1) << kRangeLog2, n - first);
        merge_range(c, off, off + len);
      });
    }
  } else {
    parallel_for(chunks + (staged ? 1 : 0), threads, [&](std::size_t task) {
      if (staged && task == 0) {
        populate(out + head, info.decoded_len - head);
        return;
      }
      const std::size_t c = staged ? task - 1 : task;
      const std::size_t m = chunk_symbols(n, c);
      const std::size_t first = c << kChunkLog2;
      std::uint8_t* scratch = fused ? scratch_buffer(k * m) : nullptr;
      const std::uint8_t* ptrs[256];
      for (unsigned j = 0; j < k; ++j) {
        std::uint8_t* t = fused ? scratch + std::size_t(j) * m : out + j * n + first;
        if (!decode_one(j, c, t, fused ? &ptrs[j] : nullptr, !fused, !fused)) return;
        if (fused && shifted(j)) ptrs[j] = t;
      }
      if (!fused) return;
      // Checksum and merge block by block, so each block is read from memory
      // once (raw chunks come straight from the frame) and the merge finds it
      // in L1.
      constexpr std::size_t kBlock = 24576;  // whole 3 x 4 KiB lanes of the CRC kernel
      std::uint32_t crc[256] = {0};
      const std::uint8_t* at[256];
      for (std::size_t off = 0; off < m; off += kBlock) {
        const std::size_t len = std::min(kBlock, m - off);
        for (unsigned j = 0; j < k; ++j) {
          at[j] = ptrs[j] + off;
          if (shifted(j))  // in this thread's scratch
            shift_rows(const_cast<std::uint8_t*>(at[j]), len, first + off, rs, true);
          if (info.has_checksum) crc[j] = crc32c(crc[j], at[j], len);
        }
        merge(out + (first + off) * k, at, len, k, layout);
      }
      for (unsigned j = 0; j < k; ++j) crcs[std::size_t(j) * chunks + c] = crc[j];
    });
  }
  for (const Error& e : errors)
    if (e.status != Status::ok) {
      *err = e;
      return e.status;
    }
  if (info.has_checksum) {
    std::uint32_t crc = 0;
    for (std::size_t i = 0; i < info.chunks.size(); ++i)
      crc = crc32c_combine(crc, crcs[i], info.chunks[i].symbols);
    if (crc != info.checksum)
      return fail(err, Status::corrupt, "CRC32C mismatch: frame says %08x, decoded data gives %08x",
                  info.checksum, crc),
             err->status;
  }
  return Status::ok;
}

}  // namespace nnc

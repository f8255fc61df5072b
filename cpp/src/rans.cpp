// rANS chunk coder: 32 interleaved lanes, sub-blocks with their own states.
// Bitstream and normalisation: docs/format.md ("rANS chunk").
#include <algorithm>
#include <atomic>
#include <cstring>

#include "coders.h"
#include "nncodecs/threadpool.h"
#include "nncodecs/rans_lane.h"
#include "rans_simd.h"
#include "transform_kernels.h"

namespace nnc {
namespace detail {

using rans::kLanes;
using rans::kStateLow;

void histogram(const std::uint8_t* src, std::size_t m, std::uint32_t counts[256]) {
  // Four sub-histograms break the store-to-load dependency on repeated bytes.
  std::uint32_t h[4][256] = {};
  std::size_t i = 0;
  for (; i + 4 <= m; i += 4) {
    ++h[0][src[i]];
    ++h[1][src[i + 1]];
    ++h[2][src[i + 2]];
    ++h[3][src[i + 3]];
  }
  for (; i < m; ++i) ++h[0][src[i]];
  for (int s = 0; s < 256; ++s) counts[s] = h[0][s] + h[1][s] + h[2][s] + h[3][s];
}

void rans_normalize(const std::uint32_t counts[256], unsigned precision, std::uint32_t freqs[256]) {
  // 1. f = floor(c * M / N), at least 1 for a present symbol.
  // 2. Missing units go, one each, to the symbols with the largest remainder
  //    c * M mod N (ties: lower symbol), among those not raised from 0.
  // 3. Surplus units (from step 1's raises) come, one at a time, from the
  //    symbol with the largest frequency (ties: lower symbol), never below 1.
  const std::uint64_t total_target = std::uint64_t(1) << precision;
  std::uint64_t n = 0;
  for (int s = 0; s < 256; ++s) n += counts[s];
  std::int64_t sum = 0;
  std::uint64_t rem[256];
  bool raised[256];
  for (int s = 0; s < 256; ++s) {
    freqs[s] = 0;
    rem[s] = 0;
    raised[s] = false;
    if (counts[s] == 0) continue;
    const std::uint64_t scaled = std::uint64_t(counts[s]) * total_target;
    std::uint64_t f = scaled / n;
    rem[s] = scaled % n;
    if (f == 0) {
      f = 1;
      raised[s] = true;
    }
    freqs[s] = static_cast<std::uint32_t>(f);
    sum += static_cast<std::int64_t>(f);
  }
  std::int64_t diff = static_cast<std::int64_t>(total_target) - sum;
  if (diff > 0) {
    int order[256], count = 0;
    for (int s = 0; s < 256; ++s)
      if (counts[s] && !raised[s]) order[count++] = s;
    std::stable_sort(order, order + count, [&](int a, int b) { return rem[a] > rem[b]; });
    // diff < number of floored symbols, since each floor lost less than one unit.
    for (int i = 0; diff > 0; i = (i + 1) % count, --diff) ++freqs[order[i]];
  }
  while (diff < 0) {
    int best = -1;
    for (int s = 0; s < 256; ++s)
      if (freqs[s] > 1 && (best < 0 || freqs[s] > freqs[best])) best = s;
    --freqs[best];
    ++diff;
  }
}

std::size_t rans_estimate(const std::uint32_t counts[256], std::size_t m, unsigned precision,
                          unsigned subblock_log2) {
  std::uint32_t freqs[256];
  rans_normalize(counts, precision, freqs);
  std::uint64_t cost = 0;  // bits in 16.16
  unsigned present = 0;
  for (int s = 0; s < 256; ++s) {
    if (!counts[s]) continue;
    ++present;
    cost += std::uint64_t(counts[s]) * ((precision << 16) - rans::log2_fixed16(freqs[s]));
  }
  const std::size_t blocks = (m + (std::size_t(1) << subblock_log2) - 1) >> subblock_log2;
  // Each lane's final state (stored whole) carries about 16 bits of the symbols.
  const std::size_t words = static_cast<std::size_t>(cost >> 19);
  const std::size_t in_states = blocks * kLanes * 2;
  return 32 + (present * precision + 7) / 8 + blocks * (4 + 4 * kLanes) +
         (words > in_states ? words - in_states : 0);
}

void rans_write_table(const std::uint32_t freqs[256], unsigned precision,
                      std::vector<std::uint8_t>* out) {
  const std::size_t start = out->size();
  out->resize(start + 32, 0);
  unsigned present = 0;
  for (int s = 0; s < 256; ++s)
    if (freqs[s]) {
      (*out)[start + s / 8] |= std::uint8_t(1u << (s % 8));
      ++present;
    }
  const std::size_t bits_at = out->size();
  out->resize(bits_at + (present * precision + 7) / 8, 0);
  // P bits a present symbol, least significant first, packed back to back.
  std::uint8_t* o = out->data() + bits_at;
  std::uint64_t acc = 0;
  unsigned held = 0;
  for (int s = 0; s < 256; ++s) {
    if (!freqs[s]) continue;
    acc |= std::uint64_t(freqs[s]) << held;
    held += precision;
    for (; held >= 8; held -= 8, acc >>= 8) *o++ = static_cast<std::uint8_t>(acc);
  }
  if (held) *o = static_cast<std::uint8_t>(acc);
}

namespace {

// The division-free step's constants for every frequency (they do not
// depend on the precision): a chunk's table then costs no division.
struct Reciprocals {
  std::uint32_t rcp[1u << rans::kMaxPrecision];
  std::uint32_t shift[1u << rans::kMaxPrecision];
  Reciprocals() {
    for (std::uint32_t f = 1; f < (1u << rans::kMaxPrecision); ++f) {
      shift[f] = rans::encode_rcp_shift(f);
      rcp[f] = rans::encode_rcp(f, shift[f]);
    }
    rcp[0] = shift[0] = 0;
  }
};
const Reciprocals& reciprocals() {
  static const Reciprocals table;
  return table;
}

// Per-symbol encoder constants: the renormalisation bound and the
// division-free step (rans_lane.h).
struct EncSymbol {
  std::uint32_t x_max, rcp, shift, cum, complement;
};

// One symbol of one lane. Words are written downwards (the stream is the
// reverse of the encode order, docs/format.md); the word is stored always and
// kept only when needed, so the loop has no data-dependent branch.
inline void encode_symbol(std::uint32_t& x, const EncSymbol& e, std::uint8_t*& wp) {
  const std::uint32_t need = x >= e.x_max;
  wp[-2] = static_cast<std::uint8_t>(x);
  wp[-1] = static_cast<std::uint8_t>(x >> 8);
  wp -= 2 * need;
  x >>= 16 * need;  // arithmetic, not a branch: renormalisation is unpredictable
  x = rans::encode_step_rcp(x, e.rcp, e.shift, e.cum, e.complement);
}

}  // namespace

void rans_encode_chunk(const std::uint8_t* src, std::size_t m, const std::uint32_t counts[256],
                       unsigned precision, unsigned subblock_log2, std::vector<std::uint8_t>* out,
                       int threads) {
  std::uint32_t freqs[256];
  rans_normalize(counts, precision, freqs);
  rans_write_table(freqs, precision, out);
  EncSymbol tab[256];
  RansEncTables simd_tab{};
  std::uint32_t cum = 0;
  for (int s = 0; s < 256; ++s) {
    const std::uint32_t f = freqs[s];
    EncSymbol& e = tab[s];
    e.cum = cum;
    cum += f;
    if (!f) {
      e = EncSymbol{};
      continue;
    }
    e.x_max = f << (31 - precision);
    e.shift = reciprocals().shift[f];
    e.rcp = reciprocals().rcp[f];
    e.complement = (1u << precision) - f;
    simd_tab.rcp[s] = e.rcp;
    simd_tab.info[s] = e.cum | e.complement << 12 | (e.shift - 31) << 24;
  }
  {
    int lo = 256, hi = -1;
    for (int s = 0; s < 256; ++s)
      if (freqs[s]) lo = std::min(lo, s), hi = s;
    for (int pairs : {1, 2, 4}) {
      const int base = std::min(lo, 256 - 32 * pairs);
      if (hi >= 0 && hi < base + 32 * pairs) {
        simd_tab.base = static_cast<std::uint32_t>(base);
        simd_tab.span_pairs = pairs;
        break;
      }
    }
  }
  const RansEncodeKernel simd = rans_encode_kernel();

  const std::size_t block = std::size_t(1) << subblock_log2;
  const std::size_t blocks = (m + block - 1) / block;
  const std::size_t counts_at = out->size();
  // At most one 16-bit word per symbol, plus 32 states per sub-block.
  out->resize(counts_at + 4 * blocks + blocks * 4 * kLanes + 2 * m);

  // Sub-block b into the words region ending at `end` (written downwards;
  // 64 bytes of slack below for the stores that keep no word). Returns
  // where its words begin; `state` gets the lanes' final states. Encoding
  // runs backwards (steps last to first, lanes 31 to 0) so that the decoder,
  // reading the reversed words forwards, meets them in order.
  auto encode_block = [&](std::size_t b, std::uint8_t* end, std::uint32_t* state) {
    const std::uint8_t* sym = src + b * block;
    const std::size_t mb = std::min(block, m - b * block);
    for (std::size_t lane = 0; lane < kLanes; ++lane) state[lane] = kStateLow;
    std::uint8_t* wp = end;
    const std::size_t full = mb / kLanes, tail = mb % kLanes;
    for (std::size_t lane = tail; lane-- > 0;)
      encode_symbol(state[lane], tab[sym[full * kLanes + lane]], wp);
    if (simd) {
      simd(sym, full, state, &wp, simd_tab, precision);
    } else {
      for (std::size_t t = full; t-- > 0;) {
        const std::uint8_t* row = sym + t * kLanes;
        for (std::size_t lane = kLanes; lane-- > 0;) encode_symbol(state[lane], tab[row[lane]], wp);
      }
    }
    return wp;
  };
  auto emit = [&](std::size_t b, std::size_t pos, const std::uint8_t* wp, const std::uint8_t* end,
                  const std::uint32_t* state) {
    const std::size_t nbytes = static_cast<std::size_t>(end - wp);
    store_u32(out->data() + counts_at + 4 * b, static_cast<std::uint32_t>(nbytes / 2));
    std::uint8_t* o = out->data() + pos;
    for (std::size_t lane = 0; lane < kLanes; ++lane) store_u32(o + 4 * lane, state[lane]);
    std::memcpy(o + 4 * kLanes, wp, nbytes);
    return pos + 4 * kLanes + nbytes;
  };
  // Every sub-block gets a region of this thread's buffer, and with
  // threads > 1 they encode in parallel (independent streams); then they
  // are laid out in order.
  const std::size_t region = 2 * block + 64;
  thread_local std::vector<std::uint8_t> regions;
  if (regions.size() < blocks * region) regions.resize(blocks * region);
  std::uint8_t* const base = regions.data();
  std::vector<std::uint8_t*> starts(blocks);
  std::vector<std::uint32_t> states(blocks * kLanes);
  auto run = [&](std::size_t b) {
    starts[b] = encode_block(b, base + (b + 1) * region, &states[b * kLanes]);
  };
  if (threads > 1 && blocks > 1)
    parallel_for(blocks, threads, run);
  else
    for (std::size_t b = 0; b < blocks; ++b) run(b);
  std::size_t pos = counts_at + 4 * blocks;
  for (std::size_t b = 0; b < blocks; ++b)
    pos = emit(b, pos, starts[b], base + (b + 1) * region, &states[b * kLanes]);
  out->resize(pos);
}

namespace {

// Decode what SIMD left of a sub-block (everything, without AVX2), then
// check that every word was used and every lane ended in state L.
bool rans_finish_subblock(RansLanes& L, std::size_t mb, const std::uint32_t* tab,
                          unsigned precision, std::size_t b, Error* err) {
  const std::uint32_t mask = (1u << precision) - 1u;
  const std::uint8_t* wp = L.words;
  std::size_t wi = L.wi, t = L.t;
  std::uint32_t* state = L.state;
  // Whole steps while 32 words are surely left: no per-word bound check.
  for (; t < L.steps && L.nwords - wi >= kLanes; ++t) {
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      std::uint32_t x = state[lane];
      const std::uint32_t e = tab[x & mask];
      L.out[t * kLanes + lane] = static_cast<std::uint8_t>(rans::entry_symbol(e));
      x = rans::decode_step(x, e, precision);
      const std::uint16_t w = static_cast<std::uint16_t>(wp[2 * wi] | wp[2 * wi + 1] << 8);
      const bool need = rans::decode_needs_word(x);
      x = need ? rans::decode_refill(x, w) : x;  // branch-free: the word is there to peek at
      wi += need;
      state[lane] = x;
    }
  }
  for (; t * kLanes < mb; ++t) {
    for (std::size_t lane = 0; lane < kLanes && t * kLanes + lane < mb; ++lane) {
      std::uint32_t x = state[lane];
      const std::uint32_t e = tab[x & mask];
      L.out[t * kLanes + lane] = static_cast<std::uint8_t>(rans::entry_symbol(e));
      x = rans::decode_step(x, e, precision);
      if (rans::decode_needs_word(x)) {
        if (wi >= L.nwords)
          return fail(err, Status::corrupt, "rANS sub-block %zu: words run out at symbol %zu", b,
                      t * kLanes + lane);
        x = rans::decode_refill(x, static_cast<std::uint16_t>(wp[2 * wi] | wp[2 * wi + 1] << 8));
        ++wi;
      }
      state[lane] = x;
    }
  }
  if (wi != L.nwords)
    return fail(err, Status::corrupt, "rANS sub-block %zu: %zu of %zu words used", b, wi, L.nwords);
  for (std::size_t lane = 0; lane < kLanes; ++lane)
    if (state[lane] != kStateLow)
      return fail(err, Status::corrupt,
                  "rANS sub-block %zu: lane %zu ends in state %u, not %u (corrupt stream)", b, lane,
                  state[lane], kStateLow);
  return true;
}

}  // namespace

bool RansChunkDecoder::prepare(std::uint8_t* dst, std::size_t m, const std::uint8_t* src,
                               std::size_t len, unsigned precision, unsigned subblock_log2,
                               Error* err) {
  precision_ = precision;
  block_ = std::size_t(1) << subblock_log2;
  m_ = m;
  std::uint32_t freqs[256];
  const std::uint32_t used =
      rans::parse_table(src, static_cast<std::uint32_t>(std::min<std::size_t>(len, 1u << 20)),
                        precision, freqs);
  if (used == 0)
    return fail(err, Status::corrupt,
                "rANS chunk: bad frequency table (truncated, a zero frequency, fewer than two "
                "symbols, or a sum other than 2^%u)",
                precision);
  table_.resize(std::size_t(1) << precision);
  rans::build_decode_table(freqs, precision, table_.data());

  const std::size_t blocks = (m + block_ - 1) / block_;
  std::size_t pos = used;
  if (len - pos < 4 * blocks)
    return fail(err, Status::corrupt, "rANS chunk: %zu bytes cannot hold %zu sub-block counts",
                len - pos, blocks);
  const std::uint8_t* counts = src + pos;
  pos += 4 * blocks;
  // Check every sub-block's extent before decoding any.
  std::size_t need = pos;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t mb = std::min(block_, m - b * block_);
    const std::uint32_t w = load_u32(counts + 4 * b);
    if (w > mb)
      return fail(err, Status::corrupt, "rANS sub-block %zu: %u words for %zu symbols", b, w, mb);
    need += 4 * kLanes + 2 * std::size_t(w);
  }
  if (need != len)
    return fail(err, Status::corrupt, "rANS chunk: sub-blocks need %zu bytes, payload has %zu",
                need, len);
  // Lane states of every sub-block, checked before any decoding.
  lanes_.resize(blocks);
  for (std::size_t b = 0; b < blocks; ++b) {
    RansLanes& L = lanes_[b];
    const std::size_t mb = std::min(block_, m - b * block_);
    L.out = dst + b * block_;
    L.steps = mb / kLanes;
    L.t = 0;
    L.nwords = load_u32(counts + 4 * b);
    L.wi = 0;
    for (std::size_t lane = 0; lane < kLanes; ++lane) {
      L.state[lane] = load_u32(src + pos + 4 * lane);
      if (L.state[lane] < kStateLow || L.state[lane] >= rans::kStateHigh)
        return fail(err, Status::corrupt, "rANS sub-block %zu: lane %zu state %u out of range", b,
                    lane, L.state[lane]);
    }
    pos += 4 * kLanes;
    L.words = src + pos;
    pos += 2 * L.nwords;
  }
  return true;
}

bool RansChunkDecoder::decode(std::size_t first, std::size_t last, Error* err) {
  const auto simd = rans_simd_kernel();
  if (simd)
    for (std::size_t b = first; b < last; b += 4)
      simd(&lanes_[b], std::min<std::size_t>(4, last - b), table_.data(), precision_);
  for (std::size_t b = first; b < last; ++b)
    if (!rans_finish_subblock(lanes_[b], std::min(block_, m_ - b * block_), table_.data(),
                              precision_, b, err))
      return false;
  return true;
}

bool rans_decode_chunk(std::uint8_t* dst, std::size_t m, const std::uint8_t* src, std::size_t len,
                       unsigned precision, unsigned subblock_log2, Error* err) {
  RansChunkDecoder dec;
  return dec.prepare(dst, m, src, len, precision, subblock_log2, err) &&
         dec.decode(0, dec.subblocks(), err);
}

namespace {
std::atomic<int> g_rans_variant{0};  // 0: the widest this CPU runs
}  // namespace

bool set_rans_variant(int variant) {
  if (variant == 2 && !rans_avx2_available()) return false;
  if (variant == 3 && !rans_avx512_available()) return false;
  if (variant < 0 || variant > 3) return false;
  g_rans_variant.store(variant);
  return true;
}

RansEncodeKernel rans_encode_kernel() {
  static const RansEncodeKernel widest = rans_avx512_available() ? rans_encode_steps_avx512
                                         : rans_avx2_available()   ? rans_encode_steps_avx2
                                                                   : nullptr;
  switch (g_rans_variant.load(std::memory_order_relaxed)) {
    case 1: return nullptr;  // scalar
    case 2: return rans_encode_steps_avx2;
    case 3: return rans_encode_steps_avx512;
    default: return widest;
  }
}

MergePtrsKernel merge_ptrs_kernel() {
  static const MergePtrsKernel widest =
      transform_avx512_available() ? merge_ptrs_avx512 : active_kernels().merge_ptrs;
  switch (g_rans_variant.load(std::memory_order_relaxed)) {
    case 1: return scalar_kernels.merge_ptrs;
#ifdef NNC_HAVE_AVX2_KERNELS
    case 2: return avx2_kernels.merge_ptrs;  // settable only where AVX2 runs
    case 3: return merge_ptrs_avx512;        // settable only where AVX-512 BW runs
#endif
    default: return widest;
  }
}

RansSimdKernel rans_simd_kernel() {
  static const RansSimdKernel widest = rans_avx512_available() ? rans_decode_steps_avx512
                                       : rans_avx2_available() ? rans_decode_steps_avx2
                                                               : nullptr;
  switch (g_rans_variant.load(std::memory_order_relaxed)) {
    case 1: return nullptr;  // scalar
    case 2: return rans_decode_steps_avx2;
    case 3: return rans_decode_steps_avx512;
    default: return widest;
  }
}

}  // namespace detail
}  // namespace nnc

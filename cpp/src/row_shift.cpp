// The row shift (frame version 2's row section): the planner that picks a
// per-row offset of the exponent plane, the decision whether it pays, and
// the shift itself. docs/format.md ("Row shift").
#include <algorithm>
#include <cstring>

#include "frame_internal.h"
#include "nncodecs/dispatch.h"
#include "nncodecs/threadpool.h"

namespace nnc {
namespace detail {

namespace {

// Apply (undo = false: subtract) or undo (add) the row offsets on the
// symbols [first, first + m) of the last plane, held at p. Decoders run it
// on L1-resident blocks. Inlined into a portable and an AVX2 copy (the
// compiler vectorises the byte loop for each), chosen by the dispatch level.
__attribute__((always_inline)) inline void shift_rows_body(std::uint8_t* p, std::size_t m,
                                                           std::uint64_t first,
                                                           const RowShift& rs, bool undo) {
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

#if defined(__x86_64__) || defined(_M_X64)
__attribute__((target("avx2"))) void shift_rows_avx2(std::uint8_t* p, std::size_t m,
                                                     std::uint64_t first, const RowShift& rs,
                                                     bool undo) {
  shift_rows_body(p, m, first, rs, undo);
}
#endif

}  // namespace

void shift_rows(std::uint8_t* p, std::size_t m, std::uint64_t first, const RowShift& rs,
                bool undo) {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool avx2 = dispatch_allows(DispatchLevel::avx2);
  if (avx2) return shift_rows_avx2(p, m, first, rs, undo);
#endif
  shift_rows_body(p, m, first, rs, undo);
}

namespace {

// Where the exponent field lies in an element (before the reorder): its
// lowest bit and its width, at most the 8 that the last plane holds
// (float64: its top 8 of 11), from the layout's width and mantissa bits.
// After the reorder that field is the top `bits` bits of the last plane's
// byte.
struct ExponentField {
  unsigned shift, bits;
};
ExponentField exponent_field(Layout layout) {
  if (layout == Layout::none) return {0, 0};
  const unsigned m = layout_mantissa_bits(layout);
  const unsigned e = static_cast<unsigned>(layout_width(layout)) * 8 - 1 - m;
  return e > 8 ? ExponentField{m + e - 8, 8} : ExponentField{m, e};
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
}  // namespace

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

}  // namespace detail

using namespace detail;  // NOLINT: the helpers above

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

}  // namespace nnc

// The step-by-step frame API, for another encoder that must reach the same bytes (the
// GPU encoder's host): each chunk's decision in two steps, the row shift's, a frame's
// header and index for chunks encoded elsewhere, zstd of chunk pieces. Not needed to
// encode or decode a frame: nncodecs/frame.h does that in one call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nncodecs/frame.h"

namespace nnc {

// The encoder's decision for one chunk of one plane, taken in two steps so
// that another encoder (the GPU's host) reaches the same bytes: plan_chunk
// from the histogram (nullptr: the chunk's sample says near-uniform, see
// sample_is_raw) says what to try; settle_chunk from the coded sizes what to
// keep. mode raw, constant (value) or zstd with nothing to try is final.
struct ChunkPlan {
  ChunkMode mode = ChunkMode::raw;
  bool try_rans = false, try_huff = false;
  std::uint8_t value = 0;
};
// Chunks of at least this many symbols are judged on a sample and estimates.
constexpr std::size_t kEstimateFrom = std::size_t(1) << 15;
ChunkPlan plan_chunk(const std::uint32_t* counts, std::size_t m, const EncodeParams& params,
                     bool has_zstd, std::uint32_t zstd_len);
ChunkMode settle_chunk(const ChunkPlan& plan, std::size_t m, const EncodeParams& params,
                       std::size_t rans_len, std::size_t huff_len, bool has_zstd,
                       std::uint32_t zstd_len);
// From the counts of a chunk's sample (16 pieces of 1 KiB at offsets i *
// (m / 16)): whether it is near-uniform bytes (stays raw or takes zstd).
bool sample_is_raw(const std::uint32_t sample[256]);

// The row shift's decision (version 2), from per-group counts of sampled
// exponents as they are (plain) and shifted by their row's offset: groups
// of kChunkSymbols / row_length rows (at least one), 256 counts each.
bool row_shift_pays(const std::uint32_t* plain, const std::uint32_t* shifted, std::size_t groups,
                    std::uint64_t n, std::uint64_t row_length);

// Whether the encoder tries a row shift (version 2) on n elements of a float
// layout in rows of row_length, and the exponent field it then shifts: its
// lowest bit and width in the element before the reorder (at most 8;
// float64 its top 8 of 11).
bool row_shift_field(Layout layout, bool elements, std::uint64_t n, std::uint64_t row_length,
                     unsigned* shift, unsigned* bits);

// A frame's header and chunk index for chunks encoded elsewhere (the GPU
// encoder's host): written into dst (resized to fit); returns the bytes the
// payloads take after it. Entries are plane-major, as the index.
struct ChunkEntry {
  ChunkMode mode = ChunkMode::raw;
  std::uint8_t value = 0;    // constant
  std::uint64_t length = 0;  // payload bytes (raw: the chunk's symbols)
};
// (The element type is params.element.)
std::size_t frame_head(std::vector<std::uint8_t>* dst, const EncodeParams& params,
                       std::size_t src_len, std::uint32_t crc, std::uint64_t row_length,
                       const std::uint8_t* offsets, std::size_t rows, const ChunkEntry* entries,
                       std::size_t count);

// zstd of pieces as frame chunks hold it (magicless, no size, checksum or
// dictionary id), for the GPU encoder's host: out[i] for src[i].
Status zstd_chunks(const std::uint8_t* const* src, const std::size_t* lens, std::size_t count,
                   int level, int threads, std::vector<std::vector<std::uint8_t>>* out,
                   Error* err);

}  // namespace nnc

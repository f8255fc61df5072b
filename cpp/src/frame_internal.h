// What the frame's source files share (private): the header's fixed part
// and varints, chunk geometry, the per-chunk choice, the row shift, output
// memory and libzstd. Byte layout: docs/format.md ("Frame").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "coders.h"
#include "nncodecs/frame_steps.h"
#include "nncodecs/rans_lane.h"

namespace nnc {
namespace detail {

// ---- frame format (frame_format.cpp) ----

constexpr std::uint8_t kMagic[4] = {'N', 'N', 'C', 'F'};
// magic (4), version (1), settings (1), planes (1), and in version 3 the
// element byte (1). The settings byte packs coder (bits 0-1), checksum flag
// (bit 2), precision - 10 (bits 3-4) and sub-block log2 - 12 (bits 5-7):
// small tensors pay for every header byte.
constexpr std::size_t kFixedHeader = 7;
constexpr std::size_t kFixedHeaderTyped = 8;
constexpr std::uint8_t kFlagChecksum = 1u << 2;

inline void put_varint(std::uint8_t*& p, std::uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
}

inline std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Read a LEB128 varint of at most 10 bytes; false when truncated or overlong.
bool get_varint(const std::uint8_t* p, std::size_t len, std::size_t* pos, std::uint64_t* v);

inline std::size_t chunk_count(std::uint64_t n) {
  return static_cast<std::size_t>((n + kChunkSymbols - 1) >> kChunkLog2);
}

inline std::size_t chunk_symbols(std::uint64_t n, std::size_t c) {
  const std::uint64_t begin = std::uint64_t(c) << kChunkLog2;
  return static_cast<std::size_t>(std::min<std::uint64_t>(kChunkSymbols, n - begin));
}

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

// The fixed header, decoded length, checksum and row section; returns where
// the chunk index begins.
std::uint8_t* write_frame_prefix(std::uint8_t* p, const EncodeParams& params, std::size_t src_len,
                                 std::uint32_t crc, std::uint64_t row_length,
                                 const std::uint8_t* offsets, std::size_t rows);

// Returns where the payloads begin.
template <class Entry>
std::uint8_t* write_frame_head(std::uint8_t* p, const EncodeParams& params, std::size_t src_len,
                               std::uint32_t crc, std::uint64_t row_length,
                               const std::uint8_t* offsets, std::size_t rows, const Entry* e,
                               std::size_t count) {
  p = write_frame_prefix(p, params, src_len, crc, row_length, offsets, rows);
  for (std::size_t i = 0; i < count; ++i) {
    *p++ = static_cast<std::uint8_t>(e[i].mode);
    if (e[i].mode == ChunkMode::constant) *p++ = e[i].value;
    else if (e[i].mode != ChunkMode::raw) put_varint(p, e[i].length);
  }
  return p;
}

// Prefix an error's message with the chunk it came from.
void where(Error* e, const ChunkRef& r);

// ---- chunk choice (chunk_choice.cpp) ----

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

// Encode one chunk: its mode, and its payload in `slot` (room for m bytes:
// a coded payload is kept only when smaller than raw) or external bytes.
void choose(const std::uint8_t* p, std::size_t m, const EncodeParams& params,
            const std::uint8_t* zstd, std::uint32_t zstd_len, bool copy_raw, std::uint8_t* slot,
            int sub_threads, ChunkOut* out);

// Whether auto gives a plane chunk a zstd trial (docs/format.md).
bool wants_zstd(const std::uint8_t* q, std::size_t m);

// Order-0 bits of symbols with these counts, in 16.16 fixed point.
std::uint64_t entropy_bits16(const std::uint32_t counts[256]);

// ---- row shift (row_shift.cpp) ----

// A version 2 frame's row shift of the last plane: symbol i holds the
// plane's byte less offsets[i / length] (mod 256). length 0: none.
struct RowShift {
  std::uint64_t length = 0;
  const std::uint8_t* offsets = nullptr;
};

// Apply (undo = false: subtract) or undo (add) the row offsets on the
// symbols [first, first + m) of the last plane, held at p.
void shift_rows(std::uint8_t* p, std::size_t m, std::uint64_t first, const RowShift& rs,
                bool undo);

// The row offsets the encoder writes for this input (empty: no shift).
std::vector<std::uint8_t> plan_row_shift(const EncodeParams& params, const std::uint8_t* in,
                                         std::uint64_t n);

// ---- memory (output_memory.cpp) ----

// Per-thread scratch reused across chunks and calls (a task's own).
std::uint8_t* scratch_buffer(std::size_t bytes);
// The planes of a whole (small) tensor, held by the decoding caller.
std::uint8_t* tensor_planes_buffer(std::size_t bytes);
// Get a large output ready before the threads write it; true when the
// caller should populate() it.
bool prepare_output(std::uint8_t* p, std::uint64_t len);
// Fault [p, p + len) in with one call.
void populate(std::uint8_t* p, std::uint64_t len);

// ---- libzstd (zstd.cpp) ----

// A zstd frame as frames hold it: magicless, no dictionary id; `whole`
// (the whole-input kind) adds the content size and, with `checksum`,
// zstd's checksum. Parameters as zstd's level gives them for this size.
// Appended to out.
bool zstd_compress(const std::uint8_t* src, std::size_t len, int level, bool whole,
                   bool checksum, std::vector<std::uint8_t>* out, Error* err);
// Decode one magicless zstd frame of exactly `len` bytes into exactly
// `m` bytes; corrupt otherwise.
bool zstd_decompress(std::uint8_t* dst, std::size_t m, const std::uint8_t* src, std::size_t len,
                     Error* err);

// The content size a magicless zstd frame's header declares (corrupt when
// it states none).
bool zstd_content_size(const std::uint8_t* src, std::size_t len, std::uint64_t* size,
                       Error* err);

}  // namespace detail
}  // namespace nnc

// What the CPU build, the binding and the GPU kernels share byte for byte:
// the chunk size, and the structs the GPU host lays out in NumPy arrays for
// the kernels (src/nncodecs/gpu/kernels). Compiles unchanged under g++,
// nvcc and NVRTC (no standard headers there), as rans_lane.h does; the
// binding hands each struct's size and field offsets to Python
// (_core.GPU_STRUCTS), which checks its NumPy dtypes against them.
#pragma once

#include "nncodecs/rans_lane.h"

#if !defined(__CUDACC_RTC__)
#include <cstddef>  // offsetof
#endif

namespace nnc {

// Symbols of one plane a chunk: 2^18 (format: docs/format.md, "Frame").
constexpr nnc_u32 kChunkLog2 = 18;

namespace gpu {

// ---- decode (decode.cu, common.cuh) ----

// Where byte j of the elements of one chunk comes from (16 bytes); offsets
// from the start of the frame's own frame, planes or external bytes.
enum : nnc_u32 { kFromFrame = 0, kConstant = 1, kFromPlanes = 2, kFromExternal = 3 };
struct PlaneSource {
  nnc_u64 offset;  // of the chunk's first byte in its buffer
  nnc_u32 kind;
  nnc_u32 value;   // the byte of a constant chunk
};

// One frame of a decode batch (88 bytes): offsets into the batch's buffers.
struct FrameDesc {
  nnc_u64 frame;       // offset of the frame in the frames buffer
  nnc_u64 out;         // of its output (elements, or planes) in the output buffer
  nnc_u64 planes;      // of its planes in the planes buffer (chunks decoded unfused)
  nnc_u64 external;    // of its planes decoded by the CPU (Huffman, zstd chunks)
  nnc_u64 rows;        // of its row offsets in the rows buffer (version 2)
  nnc_u64 row_length;  // symbols a row; 0: no row shift
  nnc_u64 n;           // symbols a plane
  nnc_u32 k, chunks, layout, sources;  // planes, chunks a plane, layout, its first PlaneSource
  nnc_u32 precision, subblock_log2, to_planes, pad;
};

// One rANS chunk to decode (40 bytes).
struct RansChunk {
  nnc_u64 payload;  // offset of the payload in its frame
  nnc_u64 out;      // offset of its first symbol in its frame's planes
  nnc_u64 first;    // index of its first symbol within its plane (row offsets)
  nnc_u32 length;   // payload bytes
  nnc_u32 symbols;  // symbols of the chunk
  nnc_u32 shifted;  // 1: the last plane of a version 2 frame (add row offsets)
  nnc_u32 desc;     // its frame's FrameDesc
};

// A chunk of elements to merge from its planes.
struct MergeTask {
  nnc_u32 desc, chunk;
};

// A (plane, chunk) whose CRC32C the crc_chunks kernel takes.
struct CrcTask {
  nnc_u32 desc, plane, chunk;
  nnc_u32 from_elements;  // 1: the bytes are those of the frame's elements in `elements`
};

// ---- encode (encode.cu) ----

// One rANS chunk to encode (32 bytes).
struct EncodeChunk {
  nnc_u64 input;      // offset of its first symbol in the planes buffer
  nnc_u64 words;      // offset of its word regions in the scratch (2^sb * 2 bytes a sub-block)
  nnc_u32 symbols;    // symbols of the chunk
  nnc_u32 first_sub;  // index of its first sub-block in the states and word counts
  nnc_u32 freqs;      // row of its frequencies (256 a chunk)
  nnc_u32 pad;
};

// One payload of the frame (40 bytes): copied from the planes buffer, from
// the host's payloads, or laid out from a rANS chunk's pieces.
enum : nnc_u32 { kPieceFromPlanes = 0, kPieceFromHost = 1, kPieceRans = 2 };
struct FramePiece {
  nnc_u64 dst;        // offset in the frame
  nnc_u64 src;        // planes / host buffer offset; rANS: the table's offset in the tables
  nnc_u64 words;      // rANS: offset of its word regions in the scratch
  nnc_u32 length;     // bytes copied; rANS: the table's bytes
  nnc_u32 kind;
  nnc_u32 first_sub;  // rANS: its first sub-block
  nnc_u32 subblocks;  // rANS: its sub-blocks
};

// One tensor of an encode batch (64 bytes): offsets into the batch's input,
// planes and row-offset buffers, and its numbers.
struct EncodeDesc {
  nnc_u64 input;       // its bytes in the input buffer
  nnc_u64 planes;      // its planes in the planes buffer
  nnc_u64 rows;        // its row offsets in the rows buffer
  nnc_u64 row_length;  // symbols a row: for row_stats always; for split_planes 0 = no shift
  nnc_u64 n;           // elements (symbols a plane)
  nnc_u32 k, layout;   // bytes an element, nnc::Layout
  nnc_u32 elements;    // 1: the input holds elements (reorder + split); 0: planes already
  nnc_u32 shift, bits; // its exponent field (row_stats)
  nnc_u32 pad;
};

// A block's work in an encode batch: (tensor, plane, index): a group of rows
// (row_stats), a chunk of elements (split_planes), or a (plane, chunk)
// (chunk_stats).
struct EncodeTask {
  nnc_u32 desc, plane, index, pad;
};

static_assert(sizeof(PlaneSource) == 16, "PlaneSource: 16 bytes");
static_assert(sizeof(FrameDesc) == 88, "FrameDesc: 88 bytes");
static_assert(sizeof(RansChunk) == 40, "RansChunk: 40 bytes");
static_assert(sizeof(MergeTask) == 8, "MergeTask: 8 bytes");
static_assert(sizeof(CrcTask) == 16, "CrcTask: 16 bytes");
static_assert(sizeof(EncodeChunk) == 32, "EncodeChunk: 32 bytes");
static_assert(sizeof(FramePiece) == 40, "FramePiece: 40 bytes");
static_assert(sizeof(EncodeDesc) == 64, "EncodeDesc: 64 bytes");
static_assert(sizeof(EncodeTask) == 16, "EncodeTask: 16 bytes");
// Field offsets where offsetof exists (NVRTC has no <cstddef>): the 8-byte
// fields first, then the 4-byte ones, no padding between.
#if !defined(__CUDACC_RTC__)
static_assert(offsetof(FrameDesc, k) == 56 && offsetof(FrameDesc, pad) == 84, "FrameDesc fields");
static_assert(offsetof(RansChunk, length) == 24 && offsetof(RansChunk, desc) == 36,
              "RansChunk fields");
static_assert(offsetof(EncodeChunk, symbols) == 16 && offsetof(EncodeChunk, pad) == 28,
              "EncodeChunk fields");
static_assert(offsetof(FramePiece, length) == 24 && offsetof(FramePiece, subblocks) == 36,
              "FramePiece fields");
static_assert(offsetof(EncodeDesc, k) == 40 && offsetof(EncodeDesc, pad) == 60,
              "EncodeDesc fields");
#endif

}  // namespace gpu
}  // namespace nnc

// The encoded format's constants: frame versions, chunk modes, element types and their
// codes, the row section's bounds, the whole-input kind's magic. What these mean, byte
// by byte: docs/format.md. Codes are format: never renumber one, only add.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nncodecs/gpu_structs.h"
#include "nncodecs/transform.h"

namespace nnc {

enum class Coder : int { rans = 1, huffman = 2, automatic = 3 };

// How one chunk of one plane is stored.
enum class ChunkMode : std::uint8_t { raw = 0, constant = 1, rans = 2, huffman = 3, zstd = 4 };

// kChunkLog2 (symbols of one plane per chunk): gpu_structs.h, shared with the GPU kernels.
constexpr std::size_t kChunkSymbols = std::size_t(1) << kChunkLog2;
constexpr std::uint8_t kFrameVersion = 1;
// Version 2: version 1 plus per-row offsets of the last plane (a row shift).
constexpr std::uint8_t kFrameVersionRows = 2;
// Version 3, what every encoder writes: version 1 or 2 plus the element
// byte after the plane count (its element type, and whether the row section
// follows). Versions 1 and 2 are read, never written.
constexpr std::uint8_t kFrameVersionTyped = 3;
// Version 4: version 3 whose element byte may set bit 6, kElementBigEndian:
// the elements were big-endian. They are coded little-endian, as always, and
// a decoder to elements swaps them back, so the bytes come back as they came
// in. Written only for big-endian input; little-endian input keeps version 3.
constexpr std::uint8_t kFrameVersionOrdered = 4;

// The element type a frame records (version 3): the data type of the array
// whose planes it holds, so that a decoder needs no dtype from its caller
// and refuses to decode as another one. `bytes`: none stated (byte coders
// given no dtype; every version 1 and 2 frame reads as bytes). The codes are
// format: never renumber one, only add.
enum class Element : std::uint8_t {
  bytes = 0,
  boolean = 1,
  u8 = 2,
  i8 = 3,
  u16 = 4,
  i16 = 5,
  u32 = 6,
  i32 = 7,
  u64 = 8,
  i64 = 9,
  f64 = 10,
  f32 = 11,
  f16 = 12,
  bf16 = 13,
  f8_e4m3fn = 14,
  f8_e5m2 = 15,
  f4_e2m1fn = 16,  // one value a byte, in the low 4 bits (ml_dtypes' layout)
};
struct ElementInfo {
  const char* name;  // the dtype name nncodecs uses (nncodecs.dtypes)
  unsigned width;    // bytes an element, the frame's plane count (0: any)
  Layout layout;     // the bit reorder the weights codec applies
};
// Indexed by code: the one table of element types (Python reads it through
// _core.element_types()).
constexpr ElementInfo kElements[] = {
    {"bytes", 0, Layout::none},          {"bool", 1, Layout::none},
    {"uint8", 1, Layout::none},          {"int8", 1, Layout::none},
    {"uint16", 2, Layout::none},         {"int16", 2, Layout::none},
    {"uint32", 4, Layout::none},         {"int32", 4, Layout::none},
    {"uint64", 8, Layout::none},         {"int64", 8, Layout::none},
    {"float64", 8, Layout::f64},         {"float32", 4, Layout::f32},
    {"float16", 2, Layout::f16},         {"bfloat16", 2, Layout::bf16},
    {"float8_e4m3fn", 1, Layout::f8_e4m3}, {"float8_e5m2", 1, Layout::f8_e5m2},
    {"float4_e2m1fn", 1, Layout::none},
};
constexpr unsigned kElementCount = sizeof(kElements) / sizeof(kElements[0]);
// The element byte of a version 3 frame: bits 0-5 the element code, bit 6
// reserved (0; in version 4 the byte order, kElementBigEndian), bit 7 set
// when the row section follows the checksum. The whole-input kind's element
// byte is the same less bit 7.
constexpr std::uint8_t kElementMask = 0x3F;
constexpr std::uint8_t kElementBigEndian = 0x40;
constexpr std::uint8_t kElementRows = 0x80;
// Rows shorter than this never get an offset byte (it would cost more than
// 1/128 of their symbols); planes shorter than kRowShiftFrom are not tried.
constexpr std::uint64_t kMinRowLength = 128;
constexpr std::uint64_t kRowShiftFrom = std::uint64_t(1) << 16;

// The second kind of encoded data: a magicless zstd frame of the whole
// input's planes (with its content size, and zstd's checksum when asked),
// after "NNCW" and the element code. "NNCZ" (read, no longer written): no
// element code. docs/format.md ("Whole-input zstd").
constexpr std::uint8_t kWholeMagic[4] = {'N', 'N', 'C', 'Z'};
constexpr std::uint8_t kWholeTypedMagic[4] = {'N', 'N', 'C', 'W'};

}  // namespace nnc

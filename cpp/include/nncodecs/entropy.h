// Entropy coding of byte planes: rANS, Huffman, automatic choice, in
// self-describing frames with a CRC32C. Byte layout: docs/format.md.
//
// dst-first, explicit capacities, *_bound() sizes; every function returns a
// Status and, on failure, a message in an Error. Nothing throws or aborts,
// and the decoder checks every length and offset before it touches memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nncodecs/gpu_structs.h"
#include "nncodecs/status.h"
#include "nncodecs/transform.h"

namespace nnc {

// Failure detail: the status and a message saying what was expected and found.
struct Error {
  Status status = Status::ok;
  char message[240] = {0};
};

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

struct EncodeParams {
  Coder coder = Coder::rans;
  unsigned planes = 1;          // k: the input is k equal planes (or k-byte elements)
  unsigned precision = 11;      // rANS probability bits, 10..12
  unsigned subblock_log2 = 16;  // rANS / Huffman sub-block symbols, 2^12..2^16
  bool checksum = true;         // CRC32C of the planes
  // Auto only: a coded chunk must be smaller than raw by this many parts per
  // thousand, else it is stored raw (decodes at memcpy speed). rans and
  // huffman use the format's 5% (50).
  unsigned min_gain_permille = 0;
  // With a float layout the input is elements of `planes` bytes: the reorder
  // and the plane split run fused, chunk by chunk (the weights codec).
  Layout layout = Layout::none;
  bool elements = false;  // input holds elements (split fused in), not planes
  // Elements per row (an output channel: the product of every axis but the
  // first), 0 for none. With elements and a float layout, the encoder
  // subtracts a per-row offset from the last (exponent) plane where its
  // estimates say that pays, and writes a version 2 frame (docs/format.md).
  std::uint64_t row_length = 0;
  // Recorded in the frame; its width must be `planes` (bytes: any), and with
  // elements and a float layout its layout must be that one.
  Element element = Element::bytes;
  // The elements are big-endian (given swapped to little-endian, as coded):
  // a version 4 frame, decoded back to big-endian. Elements of 2+ bytes only.
  bool big_endian = false;
  int threads = 0;
  // Auto only, in encode(): zstd's level for the trials (zstd chunks and
  // the whole-input kind); 0 for none. frame_encode takes zstd candidates
  // from its caller instead.
  int zstd_level = 0;
};

// Zstd candidates for auto mode, one per (plane, chunk) in index order:
// data == nullptr where there is none. Made by the caller (Python's zstandard).
struct External {
  const std::uint8_t* const* data = nullptr;
  const std::uint32_t* size = nullptr;
};

// Worst-case frame size for src_len bytes of `planes` planes.
std::size_t frame_bound(std::size_t src_len, unsigned planes);

// Auto's zstd plan from frame_encode: with `probe` given (coder auto, no
// zstd candidates), each (plane, chunk) is also checked for zstd: chunks
// under 2^14 symbols always are worth a trial, larger ones when a quick
// search finds long repeats, which order-0 coders cannot use. If any is, no frame is written
// (*written = 0, probe->any set) and probe->pieces holds their plane bytes,
// to be compressed and passed back as candidates. Most tensors have none,
// and then this costs no second pass over the input.
struct ZstdProbe {
  std::vector<std::vector<std::uint8_t>> pieces;
  std::vector<bool> wanted;
  bool any = false;
};

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

Status frame_encode(void* dst, std::size_t dst_cap, std::size_t* written, const void* src,
                    std::size_t src_len, const EncodeParams& params, const External& zstd,
                    Error* err, ZstdProbe* probe = nullptr);

struct ChunkRef {
  ChunkMode mode;
  std::uint8_t value;        // constant mode
  std::uint32_t plane;
  std::uint64_t index;       // chunk number within its plane
  std::uint64_t offset;      // payload offset from the frame start
  std::uint64_t length;      // payload bytes
  std::uint64_t symbols;     // decoded bytes of this chunk
};

struct FrameInfo {
  std::uint8_t version = 0;
  Element element = Element::bytes;  // version 3's element type; bytes before
  bool big_endian = false;           // version 4: elements decode big-endian
  Coder coder = Coder::rans;
  unsigned planes = 0;
  unsigned precision = 0;
  unsigned subblock_log2 = 0;
  bool has_checksum = false;
  std::uint32_t checksum = 0;
  std::uint64_t decoded_len = 0;
  std::uint64_t header_len = 0;
  // Version 2: symbols per row and where the row offsets lie in the frame
  // (ceil(n / row_length) bytes); row_length 0 in version 1.
  std::uint64_t row_length = 0;
  std::uint64_t row_offsets_at = 0;
  std::vector<ChunkRef> chunks;  // plane-major
};

// Parse and check a frame's header and chunk index against its length.
// `max_decoded` bounds the declared decoded length (the caller's expectation).
// With total_len (not 0), src holds only the first src_len bytes of a frame
// of total_len: its header and index must lie in them (else an error).
Status frame_info(const void* src, std::size_t src_len, std::uint64_t max_decoded,
                  FrameInfo* info, Error* err, std::size_t total_len = 0);

// A checked frame's element type against the one its caller decodes to:
// corrupt when the frame states another (a frame stating none, `bytes`,
// matches any).
Status check_element(const FrameInfo& info, Element expected, Error* err);

// Decode a frame into dst (dst_cap >= decoded length). With a float layout and
// `elements`, the plane merge and inverse reorder run fused and dst receives
// elements; otherwise dst receives the planes. zstd chunks are decoded here
// (libzstd) when `zstd_decoded` is null, else come decoded from the caller
// (concatenated in index order).
Status frame_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::uint64_t max_decoded, Layout layout, bool elements,
                    const std::uint8_t* zstd_decoded, std::size_t zstd_decoded_len, int threads,
                    Error* err);
// The same for a frame frame_info has parsed and checked already.
Status frame_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    const FrameInfo& info, Layout layout, bool elements,
                    const std::uint8_t* zstd_decoded, std::size_t zstd_decoded_len, int threads,
                    Error* err);

// ---- the whole-input zstd kind, and auto's zstd trials ----

// The second kind of encoded data: a magicless zstd frame of the whole
// input's planes (with its content size, and zstd's checksum when asked),
// after "NNCW" and the element code. "NNCZ" (read, no longer written): no
// element code. docs/format.md ("Whole-input zstd").
constexpr std::uint8_t kWholeMagic[4] = {'N', 'N', 'C', 'Z'};
constexpr std::uint8_t kWholeTypedMagic[4] = {'N', 'N', 'C', 'W'};
// Auto's trials (encoder policy): the whole-input kind on inputs up to
// kWholeZstdLimit bytes (always up to kTinyBytes; above, when some chunk
// was worth a zstd trial), no per-chunk trials up to kTinyBytes, and at
// least level kTinyLevel up to kTinyLevelBytes.
constexpr std::size_t kWholeZstdLimit = kChunkSymbols;
constexpr std::size_t kTinyBytes = std::size_t(1) << 14;
constexpr std::size_t kTinyLevelBytes = std::size_t(1) << 11;
constexpr int kTinyLevel = 12;

// Encode as the codecs do, in one call: frame_encode, and with coder auto
// and a zstd_level, its zstd trials made here (libzstd): chunks worth one,
// then the whole-input kind where it is smaller. dst_cap >= frame_bound.
Status encode(void* dst, std::size_t dst_cap, std::size_t* written, const void* src,
              std::size_t src_len, const EncodeParams& params, Error* err);

// Either kind of encoded data, its header parsed and checked once.
struct Header {
  bool whole = false;  // the whole-input zstd kind: info holds decoded_len and element only
  FrameInfo info;
};
Status read_header(const void* src, std::size_t src_len, std::uint64_t max_decoded, Header* h,
                   Error* err);
// Decode what read_header parsed. `planes`: the whole-input kind's element
// size (with elements; a chunked frame states its own). With elements, a
// big-endian frame's elements come back big-endian; its planes are those of
// the little-endian elements, as coded.
Status decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
              const Header& h, Layout layout, bool elements, unsigned planes, int threads,
              Error* err);

// zstd of pieces as frame chunks hold it (magicless, no size, checksum or
// dictionary id), for the GPU encoder's host: out[i] for src[i].
Status zstd_chunks(const std::uint8_t* const* src, const std::size_t* lens, std::size_t count,
                   int level, int threads, std::vector<std::vector<std::uint8_t>>* out,
                   Error* err);

// CRC32C (Castagnoli), with the usual pre- and post-inversion.
std::uint32_t crc32c(std::uint32_t crc, const void* data, std::size_t len);
// Testing: true keeps CRC32C to the crc32-instruction kernel (no VPCLMULQDQ).
void crc32c_set_narrow(bool narrow);
// CRC of A||B from crc(A), crc(B) and len(B).
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::uint64_t len_b);
// CRC of pieces joined in order (crc32c_combine over all), from their CRCs
// and lengths: the GPU decoder's per-chunk CRCs into a frame's.
std::uint32_t crc32c_join(const std::uint32_t* crcs, const std::uint64_t* lens, std::size_t count);

}  // namespace nnc

// The stable frame API: encode and decode self-describing frames of byte planes (rANS,
// Huffman, automatic choice, zstd chunks) with a CRC32C, in one call each; parse and
// check a frame's header; CRC32C. What the codecs and the Python binding use.
//
// dst-first, explicit capacities, *_bound() sizes; every function returns a
// Status and, on failure, a message in an Error. Nothing throws or aborts,
// and the decoder checks every length and offset before it touches memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nncodecs/format.h"
#include "nncodecs/status.h"
#include "nncodecs/transform.h"

namespace nnc {

// Failure detail: the status and a message saying what was expected and found.
struct Error {
  Status status = Status::ok;
  char message[240] = {0};
};

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

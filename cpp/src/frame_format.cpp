// Frame format: the header, varints and chunk index, written (frame_head,
// for the encoders) and parsed and checked (frame_info, for the decoders).
// Byte layout: docs/format.md ("Frame").
#include <cstdio>
#include <cstring>

#include "frame_internal.h"

namespace nnc {
namespace detail {

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

std::uint8_t* write_frame_prefix(std::uint8_t* p, const EncodeParams& params, std::size_t src_len,
                                 std::uint32_t crc, std::uint64_t row_length,
                                 const std::uint8_t* offsets, std::size_t rows) {
  std::memcpy(p, kMagic, 4);
  p[4] = params.big_endian ? kFrameVersionOrdered : kFrameVersionTyped;
  p[5] = static_cast<std::uint8_t>(static_cast<unsigned>(params.coder) |
                                   (params.checksum ? kFlagChecksum : 0u) |
                                   (params.precision - rans::kMinPrecision) << 3 |
                                   (params.subblock_log2 - rans::kMinSubblockLog2) << 5);
  p[6] = static_cast<std::uint8_t>(params.planes);
  const unsigned element = static_cast<unsigned>(params.element) |
                           (params.big_endian ? kElementBigEndian : 0u);
  p[7] = static_cast<std::uint8_t>(element | (row_length ? kElementRows : 0u));
  p += kFixedHeaderTyped;
  put_varint(p, src_len);
  if (params.checksum) {
    // Version 3 folds the element code (version 4: and the byte order) into
    // the checksum, so that a changed element byte fails the check as a
    // changed byte of data does.
    detail::store_u32(p, crc ^ element);
    p += 4;
  }
  if (row_length) {
    put_varint(p, row_length);
    std::memcpy(p, offsets, rows);
    p += rows;
  }
  return p;
}

// Prefix an error's message with the chunk it came from.
void where(Error* e, const ChunkRef& r) {
  char buf[sizeof(e->message)];
  std::snprintf(buf, sizeof(buf), "plane %u chunk %llu: %.200s", r.plane,
                static_cast<unsigned long long>(r.index), e->message);
  std::memcpy(e->message, buf, sizeof(buf));
}

}  // namespace detail

using namespace detail;  // NOLINT: the helpers above

std::size_t frame_bound(std::size_t src_len, unsigned planes) {
  const std::size_t n = planes ? src_len / planes : 0;
  // version 2's row length and offsets: at most one a kMinRowLength symbols
  const std::size_t rows = static_cast<std::size_t>(n / kMinRowLength + 1);
  return kFixedHeaderTyped + 10 + 4 + 10 + rows + std::size_t(planes) * chunk_count(n) * 6 +
         src_len;
}

std::size_t frame_head(std::vector<std::uint8_t>* dst, const EncodeParams& params,
                       std::size_t src_len, std::uint32_t crc, std::uint64_t row_length,
                       const std::uint8_t* offsets, std::size_t rows, const ChunkEntry* entries,
                       std::size_t count) {
  dst->resize(frame_head_size(params, src_len, row_length, rows, entries, count));
  write_frame_head(dst->data(), params, src_len, crc, row_length, offsets, rows, entries, count);
  return payload_size(entries, count);
}

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
  if (info->version < kFrameVersion || info->version > kFrameVersionOrdered)
    return fail(err, Status::corrupt, "frame version %u, this build reads versions %u to %u",
                p[4], kFrameVersion, kFrameVersionOrdered),
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
  info->big_endian = false;
  unsigned folded = 0;  // what the checksum field is xored with
  std::size_t pos = kFixedHeader;
  if (info->version >= kFrameVersionTyped) {
    const unsigned byte = p[7], code = byte & kElementMask;
    const unsigned known = kElementMask | kElementRows |
                           (info->version == kFrameVersionOrdered ? kElementBigEndian : 0u);
    if (code >= kElementCount || (byte & ~known) != 0)
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
    info->big_endian = (byte & kElementBigEndian) != 0;
    if (info->big_endian && info->planes < 2)
      return fail(err, Status::corrupt, "a big-endian frame of %u-byte elements", info->planes),
             err->status;
    folded = byte & ~unsigned(kElementRows);
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
    info->checksum = detail::load_u32(p + pos) ^ folded;
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
  // Two passes over the index: the first checks it (every payload inside the frame,
  // payloads and index filling it exactly) holding nothing, so that a junk frame
  // claiming millions of chunks is refused before a byte is allocated for them;
  // the second records the chunks.
  const std::size_t index_at = pos;
  std::uint64_t payloads = 0;
  for (int pass = 0; pass < 2; ++pass) {
    pos = index_at;
    std::uint64_t offset = 0;  // (second pass: from the end of the index)
    if (pass == 1) {
      info->chunks.clear();
      info->chunks.reserve(entries);
      offset = info->header_len;
    }
    for (unsigned j = 0; j < info->planes; ++j)
      for (std::size_t c = 0; c < chunks; ++c) {
        ChunkRef r{};
        r.plane = j;
        r.index = c;
        r.symbols = chunk_symbols(n, c);
        if (pos >= src_len)
          return fail(err, Status::corrupt, "truncated chunk index"), err->status;
        const std::uint8_t mode = p[pos++];
        if (mode > static_cast<std::uint8_t>(ChunkMode::zstd))
          return fail(err, Status::corrupt, "plane %u chunk %zu: unknown mode %u", j, c, mode),
                 err->status;
        r.mode = static_cast<ChunkMode>(mode);
        if (r.mode == ChunkMode::constant) {
          if (pos >= src_len)
            return fail(err, Status::corrupt, "truncated chunk index"), err->status;
          r.value = p[pos++];
        } else if (r.mode == ChunkMode::raw) {
          r.length = r.symbols;
        } else if (!get_varint(p, src_len, &pos, &r.length)) {
          return fail(err, Status::corrupt, "plane %u chunk %zu: truncated payload length", j,
                      c),
                 err->status;
        }
        if (pass == 0) {
          // (the payloads follow the index, which ends at or after pos)
          if (r.length > total - std::min<std::uint64_t>(pos, total) - payloads)
            return fail(err, Status::corrupt,
                        "plane %u chunk %llu: payload of %llu bytes passes the frame end (%zu "
                        "bytes)",
                        r.plane, static_cast<unsigned long long>(r.index),
                        static_cast<unsigned long long>(r.length), total),
                   err->status;
          payloads += r.length;
          continue;
        }
        r.offset = offset;
        offset += r.length;
        info->chunks.push_back(r);
      }
    if (pass == 0) {
      info->header_len = pos;
      if (pos + payloads != total)
        return fail(err, Status::corrupt, "frame has %llu bytes after its last chunk",
                    static_cast<unsigned long long>(total - pos - payloads)),
               err->status;
    }
  }
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

}  // namespace nnc

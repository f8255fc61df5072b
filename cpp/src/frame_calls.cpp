// auto's zstd, inside the C++ frame code: the trials an encode makes (zstd
// chunks where the probe saw them worth one, the whole-input kind for small
// inputs), and the whole-input kind's header and decoding. Together with
// frame_encode / frame_decode these are the one-call entry points the
// codecs use: one encode call, one header parse a decode.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "frame_internal.h"
#include "nncodecs/threadpool.h"

namespace nnc {
namespace {

using namespace detail;  // NOLINT: the frame's helpers

// Prefix an error's message with what it is about.
void about(Error* e, const char* what) {
  char buf[sizeof(e->message)];
  std::snprintf(buf, sizeof(buf), "%s%.200s", what, e->message);
  std::memcpy(e->message, buf, sizeof(buf));
}

bool is_whole(const std::uint8_t* p, std::size_t len) {
  return len >= 4 &&
         (std::memcmp(p, kWholeMagic, 4) == 0 || std::memcmp(p, kWholeTypedMagic, 4) == 0);
}

// The whole-input kind's magic and element code, and where its zstd frame begins.
std::size_t whole_payload_at(const std::uint8_t* p) {
  return std::memcmp(p, kWholeMagic, 4) == 0 ? 4 : 5;
}

Status whole_header(const std::uint8_t* p, std::size_t len, std::uint64_t max_decoded,
                    FrameInfo* info, Error* err) {
  info->element = Element::bytes;
  if (std::memcmp(p, kWholeTypedMagic, 4) == 0) {
    // The element byte: the code, and bit 6 the byte order (as version 4's).
    const unsigned code = len < 5 ? 0 : p[4] & ~unsigned(kElementBigEndian);
    if (len < 5 || code >= kElementCount) {
      if (len < 5)
        fail(err, Status::corrupt, "whole-input zstd frame: element type code missing, this "
             "build knows 0..%u", kElementCount - 1);
      else
        fail(err, Status::corrupt, "whole-input zstd frame: element type code %u, this build "
             "knows 0..%u (plus 64 for big-endian)", p[4], kElementCount - 1);
      return err->status;
    }
    info->element = static_cast<Element>(code);
    info->big_endian = (p[4] & kElementBigEndian) != 0;
    if (info->big_endian && kElements[code].width < 2)
      return fail(err, Status::corrupt, "whole-input zstd frame: big-endian %s elements",
                  kElements[code].name),
             err->status;
  }
  const std::size_t at = whole_payload_at(p);
  std::uint64_t size = 0;
  if (!zstd_content_size(p + at, len - at, &size, err))
    return about(err, "whole-input zstd frame: "), err->status;
  if (size > max_decoded)
    return fail(err, Status::corrupt,
                "whole-input zstd frame declares %llu decoded bytes, expected at most %llu",
                static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(max_decoded)),
           err->status;
  info->decoded_len = size;
  return Status::ok;
}

// The zstd chunks a probe asked for, compressed (in parallel when there is
// enough of them to pay for waking threads), in index order.
Status compress_pieces(const ZstdProbe& probe, int level, int threads,
                       std::vector<std::vector<std::uint8_t>>* out, Error* err) {
  std::vector<const std::uint8_t*> src(probe.pieces.size(), nullptr);
  std::vector<std::size_t> lens(probe.pieces.size(), 0);
  for (std::size_t i = 0; i < probe.pieces.size(); ++i)
    if (probe.wanted[i]) src[i] = probe.pieces[i].data(), lens[i] = probe.pieces[i].size();
  return zstd_chunks(src.data(), lens.data(), src.size(), level, threads, out, err);
}

// The whole-input kind of the input (its planes), into out.
Status whole_encode(const std::uint8_t* in, std::size_t len, const EncodeParams& params,
                    std::vector<std::uint8_t>* out, Error* err) {
  // Inputs of at most kTinyLevelBytes get kTinyLevel (why that level:
  // docs/development.md, "Benchmarks and where the time goes").
  const int level = len <= kTinyLevelBytes ? std::max(params.zstd_level, kTinyLevel)
                                           : params.zstd_level;
  std::vector<std::uint8_t> split;
  if (params.elements) {  // the whole-input kind holds the planes
    split.resize(len);
    const Status s = planes_split(split.data(), len, in, len, params.planes, params.layout,
                                  Variant::automatic, params.threads);
    if (s != Status::ok)
      return fail(err, s, "plane split: %s", status_message(s)), err->status;
    in = split.data();
  }
  out->assign(kWholeTypedMagic, kWholeTypedMagic + 4);
  out->push_back(static_cast<std::uint8_t>(static_cast<unsigned>(params.element) |
                                           (params.big_endian ? kElementBigEndian : 0u)));
  if (!zstd_compress(in, len, level, true, params.checksum, out, err)) return err->status;
  return Status::ok;
}

}  // namespace

Status zstd_chunks(const std::uint8_t* const* src, const std::size_t* lens, std::size_t count,
                   int level, int threads, std::vector<std::vector<std::uint8_t>>* out,
                   Error* err) {
  out->assign(count, {});
  std::vector<std::size_t> work;
  std::size_t total = 0;
  for (std::size_t i = 0; i < count; ++i)
    if (src[i] != nullptr) work.push_back(i), total += lens[i];
  std::vector<Error> errors(work.size());
  const bool wide = work.size() > 1 && total >= (std::size_t(1) << 20);
  parallel_for(work.size(), wide ? threads : 1, [&](std::size_t w) {
    const std::size_t i = work[w];
    zstd_compress(src[i], lens[i], level, false, false, &(*out)[i], &errors[w]);
  });
  for (const Error& e : errors)
    if (e.status != Status::ok) return *err = e, err->status;
  return Status::ok;
}

Status encode(void* dst, std::size_t dst_cap, std::size_t* written, const void* src,
              std::size_t src_len, const EncodeParams& params, Error* err) {
  if (params.coder != Coder::automatic || params.zstd_level == 0)
    return frame_encode(dst, dst_cap, written, src, src_len, params, {}, err);
  if (params.zstd_level < 1 || params.zstd_level > 22)
    return fail(err, Status::bad_argument, "zstd level must be 1..22, got %d", params.zstd_level),
           err->status;
  // Trials a chunk cost more than they save on tiny inputs: those get the
  // whole-input trial only. When a chunk is worth a trial the probe returns
  // its plan instead of a frame, and the frame is made again with zstd.
  ZstdProbe probe;
  Status s = frame_encode(dst, dst_cap, written, src, src_len, params, {}, err,
                          src_len > kTinyBytes ? &probe : nullptr);
  if (s != Status::ok) return s;
  if (probe.any) {
    std::vector<std::vector<std::uint8_t>> pieces;
    if (compress_pieces(probe, params.zstd_level, params.threads, &pieces, err) != Status::ok)
      return err->status;
    std::vector<const std::uint8_t*> data(pieces.size(), nullptr);
    std::vector<std::uint32_t> sizes(pieces.size(), 0);
    for (std::size_t i = 0; i < pieces.size(); ++i)
      if (probe.wanted[i])
        data[i] = pieces[i].data(), sizes[i] = static_cast<std::uint32_t>(pieces[i].size());
    s = frame_encode(dst, dst_cap, written, src, src_len, params, {data.data(), sizes.data()},
                     err);
    if (s != Status::ok) return s;
  }
  // A small input may do better as one zstd frame, which costs no header,
  // index or chunk lengths of ours: worth a trial when tiny, or when the
  // probe saw chunks zstd could win.
  if (src_len <= kWholeZstdLimit && (src_len <= kTinyBytes || probe.any)) {
    std::vector<std::uint8_t> whole;
    s = whole_encode(static_cast<const std::uint8_t*>(src), src_len, params, &whole, err);
    if (s != Status::ok) return s;
    if (whole.size() < *written) {
      std::memcpy(dst, whole.data(), whole.size());
      *written = whole.size();
    }
  }
  return Status::ok;
}

Status read_header(const void* src, std::size_t src_len, std::uint64_t max_decoded, Header* h,
                   Error* err) {
  const auto* p = static_cast<const std::uint8_t*>(src);
  h->whole = is_whole(p, src_len);
  if (!h->whole) return frame_info(src, src_len, max_decoded, &h->info, err);
  h->info = FrameInfo();
  return whole_header(p, src_len, max_decoded, &h->info, err);
}

namespace {

// Elements of `width` bytes reversed in place: a big-endian frame's elements
// (coded little-endian) back in their own order.
void swap_elements(std::uint8_t* p, std::size_t len, unsigned width) {
  for (std::size_t i = 0; i + width <= len; i += width) std::reverse(p + i, p + i + width);
}

}  // namespace

Status decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
              const Header& h, Layout layout, bool elements, unsigned planes, int threads,
              Error* err) {
  if (!h.whole) {
    const Status s = frame_decode(dst, dst_cap, src, src_len, h.info, layout, elements, nullptr,
                                  0, threads, err);
    if (s == Status::ok && h.info.big_endian && elements)
      swap_elements(static_cast<std::uint8_t*>(dst), h.info.decoded_len, h.info.planes);
    return s;
  }
  const std::uint64_t len = h.info.decoded_len;
  if (len > dst_cap)
    return fail(err, Status::dst_too_small, "dst has %zu bytes, the frame decodes to %llu",
                dst_cap, static_cast<unsigned long long>(len)),
           err->status;
  if (elements && planes == 0)
    return fail(err, Status::bad_argument, "decoding elements needs the element size (planes=)"),
           err->status;
  if (elements && len % planes)
    return fail(err, Status::corrupt, "%llu decoded bytes are not %u planes",
                static_cast<unsigned long long>(len), planes),
           err->status;
  const auto* p = static_cast<const std::uint8_t*>(src);
  const std::size_t at = whole_payload_at(p);
  const std::size_t n = static_cast<std::size_t>(len);
  std::vector<std::uint8_t> planar(elements ? n : 0);
  auto* target = elements ? planar.data() : static_cast<std::uint8_t*>(dst);
  if (!zstd_decompress(target, n, p + at, src_len - at, err))
    return about(err, "whole-input zstd frame: "), err->status;
  if (!elements) return Status::ok;
  const Status s = planes_merge(dst, n, planar.data(), n, planes, layout, Variant::automatic,
                                threads);
  if (s != Status::ok) return fail(err, s, "plane merge: %s", status_message(s)), err->status;
  if (h.info.big_endian) swap_elements(static_cast<std::uint8_t*>(dst), n, planes);
  return Status::ok;
}

}  // namespace nnc

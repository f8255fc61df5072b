// libzstd as frames use it (the system's library, found by CMake). The
// parameters are set as the `zstandard` package's from_level sets them
// (ZSTD_getCParams for the level and size, then every field), so that a
// frame encoded here equals one Python wrote with the same libzstd.
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_c_format / ZSTD_d_format: magicless frames
#include <zstd.h>

#include "frame_internal.h"

namespace nnc {
namespace detail {
namespace {

// One context of each kind a thread, reused across calls (making one
// allocates hundreds of KiB at high levels: more than compressing a bias).
struct Contexts {
  ZSTD_CCtx* c = nullptr;
  ZSTD_DCtx* d = nullptr;
  ~Contexts() {
    ZSTD_freeCCtx(c);
    ZSTD_freeDCtx(d);
  }
};
Contexts& contexts() {
  thread_local Contexts ctx;
  return ctx;
}

bool zstd_failed(std::size_t code, const char* what, Error* err, Status status) {
  if (!ZSTD_isError(code)) return false;
  fail(err, status, "zstd %s: %s", what, ZSTD_getErrorName(code));
  return true;
}

}  // namespace

bool zstd_compress(const std::uint8_t* src, std::size_t len, int level, bool whole,
                   bool checksum, std::vector<std::uint8_t>* out, Error* err) {
  Contexts& ctx = contexts();
  if (ctx.c == nullptr && (ctx.c = ZSTD_createCCtx()) == nullptr)
    return fail(err, Status::bad_argument, "zstd: out of memory for a compression context");
  ZSTD_CCtx* c = ctx.c;
  ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
  const ZSTD_compressionParameters p = ZSTD_getCParams(level, len, 0);
  const std::pair<ZSTD_cParameter, int> settings[] = {
      {ZSTD_c_format, ZSTD_f_zstd1_magicless},
      {ZSTD_c_compressionLevel, level},
      {ZSTD_c_windowLog, static_cast<int>(p.windowLog)},
      {ZSTD_c_hashLog, static_cast<int>(p.hashLog)},
      {ZSTD_c_chainLog, static_cast<int>(p.chainLog)},
      {ZSTD_c_searchLog, static_cast<int>(p.searchLog)},
      {ZSTD_c_minMatch, static_cast<int>(p.minMatch)},
      {ZSTD_c_targetLength, static_cast<int>(p.targetLength)},
      {ZSTD_c_strategy, static_cast<int>(p.strategy)},
      {ZSTD_c_contentSizeFlag, whole ? 1 : 0},
      {ZSTD_c_checksumFlag, whole && checksum ? 1 : 0},
      {ZSTD_c_dictIDFlag, 0},
  };
  for (const auto& [param, value] : settings)
    if (zstd_failed(ZSTD_CCtx_setParameter(c, param, value), "parameter", err,
                    Status::bad_argument))
      return false;
  if (zstd_failed(ZSTD_CCtx_setPledgedSrcSize(c, len), "source size", err, Status::bad_argument))
    return false;
  const std::size_t at = out->size();
  out->resize(at + ZSTD_compressBound(len));
  ZSTD_outBuffer o{out->data() + at, out->size() - at, 0};
  ZSTD_inBuffer i{src, len, 0};
  const std::size_t left = ZSTD_compressStream2(c, &o, &i, ZSTD_e_end);
  if (zstd_failed(left, "compress", err, Status::bad_argument)) return false;
  if (left != 0) return fail(err, Status::bad_argument, "zstd compress: frame not flushed");
  out->resize(at + o.pos);
  return true;
}

bool zstd_decompress(std::uint8_t* dst, std::size_t m, const std::uint8_t* src, std::size_t len,
                     Error* err) {
  Contexts& ctx = contexts();
  if (ctx.d == nullptr && (ctx.d = ZSTD_createDCtx()) == nullptr)
    return fail(err, Status::bad_argument, "zstd: out of memory for a decompression context");
  ZSTD_DCtx* d = ctx.d;
  ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
  if (zstd_failed(ZSTD_DCtx_setParameter(d, ZSTD_d_format, ZSTD_f_zstd1_magicless), "parameter",
                  err, Status::bad_argument))
    return false;
  // One frame, exactly: streaming stops at its end, so bytes after it are
  // told apart from a truncated frame.
  ZSTD_outBuffer o{dst, m, 0};
  ZSTD_inBuffer i{src, len, 0};
  const std::size_t left = ZSTD_decompressStream(d, &o, &i);
  if (ZSTD_isError(left))
    return fail(err, Status::corrupt, "corrupt zstd data (%s)", ZSTD_getErrorName(left));
  if (left != 0) {
    if (o.pos == m && i.pos < len)  // more output than the chunk holds
      return fail(err, Status::corrupt, "zstd data decodes past its %zu bytes", m);
    return fail(err, Status::corrupt, "truncated zstd data (%zu bytes decoded of %zu)", o.pos, m);
  }
  if (i.pos != len)
    return fail(err, Status::corrupt, "%zu bytes after its zstd frame", len - i.pos);
  if (o.pos != m)
    return fail(err, Status::corrupt, "zstd gave %zu bytes, not %zu", o.pos, m);
  return true;
}

// The content size a magicless zstd frame's header declares; false when it
// states none or is not a zstd header.
bool zstd_content_size(const std::uint8_t* src, std::size_t len, std::uint64_t* size,
                       Error* err) {
  ZSTD_frameHeader h;
  const std::size_t r = ZSTD_getFrameHeader_advanced(&h, src, len, ZSTD_f_zstd1_magicless);
  if (ZSTD_isError(r))
    return fail(err, Status::corrupt, "bad zstd header (%s)", ZSTD_getErrorName(r));
  if (r != 0) return fail(err, Status::corrupt, "bad zstd header (truncated)");
  if (h.frameContentSize == ZSTD_CONTENTSIZE_UNKNOWN || h.frameType != ZSTD_frame)
    return fail(err, Status::corrupt, "no decoded size in its zstd header");
  *size = h.frameContentSize;
  return true;
}

}  // namespace detail
}  // namespace nnc

// Frame encoding: the chunks of every plane coded in parallel (with a float
// layout the reorder and plane split fused in, chunk by chunk), then the
// header and index written and the payloads moved into place.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "frame_internal.h"
#include "nncodecs/threadpool.h"
#include "transform_kernels.h"

namespace nnc {
namespace {

using namespace detail;  // NOLINT: the frame's helpers

// The planes of chunk c: for element input split (and reordered) into this
// thread's scratch, else where they lie in the input.
struct ChunkPlanes {
  const std::uint8_t* scratch = nullptr;  // null: the input holds planes
  const std::uint8_t* in;
  std::uint64_t n;
  std::size_t first, m;
  const std::uint8_t* plane(unsigned j) const {
    return scratch ? scratch + std::size_t(j) * m : in + j * n + first;
  }
};

ChunkPlanes chunk_planes(const EncodeParams& p, const std::uint8_t* in, std::uint64_t n,
                         std::size_t c, const detail::RangeKernels& kern) {
  ChunkPlanes cp{nullptr, in, n, c << kChunkLog2, chunk_symbols(n, c)};
  const unsigned k = p.planes;
  if (p.elements && k > 1) {
    std::uint8_t* scratch = scratch_buffer(k * cp.m);
    kern.split(scratch, in + cp.first * k, cp.m, 0, cp.m, k, p.layout);
    cp.scratch = scratch;
  } else if (p.elements && p.layout != Layout::none) {
    std::uint8_t* scratch = scratch_buffer(cp.m);
    kern.reorder(scratch, in + cp.first, 0, cp.m, p.layout, false);
    cp.scratch = scratch;
  }
  return cp;
}

bool check_params(const EncodeParams& p, std::size_t src_len, Error* err) {
  if (p.planes < 1 || p.planes > 255)
    return fail(err, Status::bad_argument, "planes must be 1..255, got %u", p.planes);
  if (p.precision < rans::kMinPrecision || p.precision > rans::kMaxPrecision)
    return fail(err, Status::bad_argument, "precision must be 10..12, got %u", p.precision);
  if (p.subblock_log2 < rans::kMinSubblockLog2 || p.subblock_log2 > rans::kMaxSubblockLog2)
    return fail(err, Status::bad_argument, "sub-block log2 must be 12..16, got %u",
                p.subblock_log2);
  if (p.min_gain_permille > 1000)
    return fail(err, Status::bad_argument, "min_gain_permille must be 0..1000, got %u",
                p.min_gain_permille);
  if (p.coder != Coder::rans && p.coder != Coder::huffman && p.coder != Coder::automatic)
    return fail(err, Status::bad_argument, "unknown coder %d", static_cast<int>(p.coder));
  if (src_len % p.planes)
    return fail(err, Status::bad_argument, "%zu bytes is not %u equal planes", src_len, p.planes);
  if (p.layout != Layout::none && (!p.elements || layout_width(p.layout) != p.planes))
    return fail(err, Status::bad_argument, "a float layout needs elements of its width");
  if (static_cast<unsigned>(p.element) >= kElementCount)
    return fail(err, Status::bad_argument, "unknown element type %u",
                static_cast<unsigned>(p.element));
  const ElementInfo& e = kElements[static_cast<unsigned>(p.element)];
  if (e.width != 0 && e.width != p.planes)
    return fail(err, Status::bad_argument, "element type %s is %u bytes, not %u planes", e.name,
                e.width, p.planes);
  if (p.elements && p.layout != Layout::none && p.element != Element::bytes &&
      e.layout != p.layout)
    return fail(err, Status::bad_argument, "element type %s does not take this float layout",
                e.name);
  if (p.big_endian && (!p.elements || p.planes < 2))
    return fail(err, Status::bad_argument, "a byte order needs elements of 2 or more bytes");
  return true;
}


}  // namespace

Status frame_encode(void* dst, std::size_t dst_cap, std::size_t* written, const void* src,
                    std::size_t src_len, const EncodeParams& params, const External& zstd,
                    Error* err, ZstdProbe* probe) {
  *written = 0;
  if (!check_params(params, src_len, err)) return err->status;
  const unsigned k = params.planes;
  const std::uint64_t n = src_len / k;
  const std::size_t chunks = chunk_count(n);
  const auto* in = static_cast<const std::uint8_t*>(src);
  std::vector<ChunkOut> out(std::size_t(k) * chunks);
  const detail::RangeKernels& kern = detail::active_kernels();
  // Each chunk's payload is written into its slot: the room a raw chunk
  // takes in the plane layout, after the largest header and index there can
  // be. The payloads move down into place once the index is known.
  if (dst_cap < frame_bound(src_len, k))
    return fail(err, Status::dst_too_small, "dst has %zu bytes, frame_bound is %zu", dst_cap,
                frame_bound(src_len, k)),
           err->status;
  auto* const slots = static_cast<std::uint8_t*>(dst) + (frame_bound(src_len, k) - src_len);
  // Fewer chunks than threads (a small tensor): rANS sub-blocks in parallel.
  const int workers = resolve_threads(params.threads);
  const int sub_threads = chunks < static_cast<std::size_t>(workers) ? workers : 1;

  const bool probing =
      probe != nullptr && params.coder == Coder::automatic && zstd.data == nullptr;
  std::vector<char> flagged(probing ? std::size_t(k) * chunks : 0, 0);
  std::atomic<bool> any_flagged{false};
  if (probing) probe->pieces.assign(std::size_t(k) * chunks, {});

  // The row shift, decided before any chunk is coded (a version 2 frame).
  const std::vector<std::uint8_t> row_offsets = plan_row_shift(params, in, n);
  const RowShift rs{row_offsets.empty() ? 0 : params.row_length, row_offsets.data()};
  std::vector<std::uint32_t> shifted_crc(rs.length ? chunks : 0, 0);

  parallel_for(chunks, params.threads, [&](std::size_t c) {
    const ChunkPlanes cp = chunk_planes(params, in, n, c, kern);
    const std::size_t m = cp.m;
    if (rs.length) {  // the last plane lies in this thread's scratch
      auto* top = const_cast<std::uint8_t*>(cp.plane(k - 1));
      if (params.checksum) shifted_crc[c] = crc32c(0, top, m);  // of the plane itself
      shift_rows(top, m, cp.first, rs, false);
    }
    if (probing) {
      for (unsigned j = 0; j < k; ++j) {
        const std::uint8_t* p = cp.plane(j);
        const std::size_t idx = std::size_t(j) * chunks + c;
        if (wants_zstd(p, m)) {
          flagged[idx] = 1;
          probe->pieces[idx].assign(p, p + m);
          any_flagged.store(true, std::memory_order_relaxed);
        }
      }
      // Once a chunk wants zstd this frame is thrown away: only probe on.
      if (any_flagged.load(std::memory_order_relaxed)) return;
    }
    for (unsigned j = 0; j < k; ++j) {
      const std::uint8_t* p = cp.plane(j);
      const std::size_t idx = std::size_t(j) * chunks + c;
      const std::uint8_t* z = zstd.data ? zstd.data[idx] : nullptr;
      const std::uint32_t zl = z ? zstd.size[idx] : 0;
      choose(p, m, params, z, zl, cp.scratch != nullptr, slots + j * n + cp.first, sub_threads,
             &out[idx]);
      if (params.checksum)
        out[idx].crc = rs.length && j == k - 1 ? shifted_crc[c] : crc32c(0, p, m);
    }
  });

  if (probing) {
    probe->wanted.assign(flagged.size(), false);
    for (std::size_t i = 0; i < flagged.size(); ++i) probe->wanted[i] = flagged[i] != 0;
    probe->any = std::find(flagged.begin(), flagged.end(), 1) != flagged.end();
    if (probe->any) return Status::ok;  // *written stays 0: encode again with candidates
  }

  std::uint32_t crc = 0;
  if (params.checksum)
    for (std::size_t i = 0; i < out.size(); ++i)
      crc = crc32c_combine(crc, out[i].crc, chunk_symbols(n, i % chunks));
  const std::size_t total = frame_head_size(params, src_len, rs.length, row_offsets.size(),
                                            out.data(), out.size()) +
                            payload_size(out.data(), out.size());
  if (total > dst_cap)
    return fail(err, Status::dst_too_small, "frame needs %zu bytes, dst has %zu", total, dst_cap),
           err->status;
  std::uint8_t* p = write_frame_head(static_cast<std::uint8_t*>(dst), params, src_len, crc,
                                     rs.length, row_offsets.data(), row_offsets.size(),
                                     out.data(), out.size());
  // Slots lie at or after where their payloads go (the index is at most
  // the room left for it): moving them in order never overwrites one unread.
  for (const ChunkOut& o : out) {
    if (o.mode == ChunkMode::constant) continue;
    if (o.length) std::memmove(p, o.data, o.length);
    p += o.length;
  }
  *written = total;
  return Status::ok;
}

}  // namespace nnc

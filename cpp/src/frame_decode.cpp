// Frame decoding, after the header and index are parsed once (frame_info).
// Two strategies: a small tensor (few chunks for the threads) is split
// finer, down to rANS sub-blocks (decode_fine); a large one is decoded
// chunk by chunk, each chunk's planes checksummed and merged block by block
// while they are in cache (decode_by_chunk).
#include <algorithm>
#include <cstring>

#include "frame_internal.h"
#include "nncodecs/threadpool.h"

namespace nnc {
namespace {

using namespace detail;  // NOLINT: the frame's helpers

// One decode call: the parsed frame, where it goes, and per-chunk results.
struct Decode {
  const FrameInfo& info;
  const std::uint8_t* in;
  std::uint8_t* out;
  Layout layout;
  unsigned k;
  std::uint64_t n;
  std::size_t chunks;
  bool fused;  // elements: merge (and inverse reorder) fused in
  RowShift rs;
  const std::uint8_t* zstd_decoded;  // zstd chunks decoded, in index order
  std::vector<std::uint64_t> ext_at;  // where each zstd chunk's bytes lie there
  std::vector<Error> errors;
  std::vector<std::uint32_t> crcs;
  MergePtrsKernel merge = merge_ptrs_kernel();

  // Version 2: the last plane's row offsets are undone where it is decoded
  // (that plane is never used in place), before its checksum.
  bool shifted(unsigned j) const { return rs.length != 0 && j == k - 1; }

  // Decode one (plane, chunk) into t; raw chunks are not copied when the
  // caller merges straight from the payload (*view set, t untouched).
  // With `unshift` false the caller undoes the offsets itself (block by
  // block, in L1, right before its checksum and merge).
  bool decode_one(unsigned j, std::size_t c, std::uint8_t* t, const std::uint8_t** view,
                  bool with_crc, bool unshift = true) {
    if (shifted(j)) view = nullptr;
    const std::size_t idx = std::size_t(j) * chunks + c;
    const ChunkRef& r = info.chunks[idx];
    const std::size_t m = chunk_symbols(n, c);
    const std::uint8_t* payload = in + r.offset;
    const std::uint8_t* data = t;
    bool ok = true;
    switch (r.mode) {
      case ChunkMode::raw:
        if (view) data = payload;
        else std::memcpy(t, payload, m);
        break;
      case ChunkMode::constant: std::memset(t, r.value, m); break;
      case ChunkMode::zstd:
        if (view) data = zstd_decoded + ext_at[idx];
        else std::memcpy(t, zstd_decoded + ext_at[idx], m);
        break;
      case ChunkMode::rans:
        ok = rans_decode_chunk(t, m, payload, r.length, info.precision, info.subblock_log2,
                               &errors[idx]);
        break;
      case ChunkMode::huffman:
        ok = huffman_decode_chunk(t, m, payload, r.length, info.subblock_log2, &errors[idx]);
        break;
    }
    if (!ok) {
      where(&errors[idx], r);
      return false;
    }
    if (shifted(j) && unshift) shift_rows(t, m, std::uint64_t(c) << kChunkLog2, rs, true);
    if (view) *view = data;
    if (with_crc && info.has_checksum) crcs[idx] = crc32c(0, data, m);
    return true;
  }
};

// Few chunks (a small tensor): split the work finer, down to single rANS
// sub-blocks, so that every thread has some. Planes go to a buffer of the
// whole tensor (small here; raw and zstd chunks are used in place). A task
// holding the only plane of its chunk that needs decoding merges its own
// elements right after (the common case: one coded exponent plane), from
// planes still in cache; chunks with no such plane get a merge task, chunks
// with several are merged once every task is done. Each task checksums
// what it decoded; the CRCs are joined in index order.
Status decode_fine(Decode& d, int threads, int workers, Error* err) {
  const FrameInfo& info = d.info;
  const unsigned k = d.k;
  const std::uint64_t n = d.n;
  const std::size_t chunks = d.chunks;
  std::uint8_t* base = d.fused ? tensor_planes_buffer(k * n) : d.out;
  auto target = [&](std::size_t idx) {
    return base + info.chunks[idx].plane * n + (info.chunks[idx].index << kChunkLog2);
  };
  std::vector<const std::uint8_t*> view(info.chunks.size(), nullptr);
  std::vector<unsigned> coded(chunks, 0);  // planes of each chunk decoded by a task
  for (std::size_t idx = 0; idx < info.chunks.size(); ++idx) {
    const ChunkRef& r = info.chunks[idx];
    if (d.shifted(r.plane)) ++coded[r.index];
    else if (d.fused && r.mode == ChunkMode::raw) view[idx] = d.in + r.offset;
    else if (d.fused && r.mode == ChunkMode::zstd) view[idx] = d.zstd_decoded + d.ext_at[idx];
    else ++coded[r.index];
  }
  std::vector<RansChunkDecoder> decoders(info.chunks.size());
  struct Task {
    std::size_t idx;          // chunk entry; for a merge-only task, the chunk number
    std::size_t first, last;  // a rANS sub-block range, or a whole chunk (last == 0)
    std::uint32_t crc;
    std::size_t len;          // symbols of the range
    bool merge_only;
    double cost;              // for the order the tasks are claimed in
  };
  std::vector<Task> tasks;
  const std::size_t block = std::size_t(1) << info.subblock_log2;
  // Four sub-blocks a task decode fastest (the SIMD kernels interleave
  // them), pairs next; single ones balance better when there are few.
  std::size_t subblocks = 0;
  for (const ChunkRef& r : info.chunks)
    if (r.mode == ChunkMode::rans) subblocks += (r.symbols + block - 1) / block;
  const std::size_t w = static_cast<std::size_t>(workers);
  const std::size_t per_task = subblocks >= 4 * w ? 4 : subblocks >= 2 * w ? 2 : 1;
  for (std::size_t idx = 0; idx < info.chunks.size(); ++idx) {
    const ChunkRef& r = info.chunks[idx];
    if (r.mode != ChunkMode::rans) {
      // Raw and zstd chunks used in place: their checksum only (cheap);
      // others decode (or are copied) whole.
      tasks.push_back({idx, 0, 0, 0, r.symbols, false,
                       view[idx] ? double(r.symbols) / 16 : 2.0 * double(r.symbols)});
      continue;
    }
    if (!decoders[idx].prepare(target(idx), r.symbols, d.in + r.offset, r.length, info.precision,
                               info.subblock_log2, &d.errors[idx]))
      return where(&d.errors[idx], r), *err = d.errors[idx], err->status;
    for (std::size_t b = 0; b < decoders[idx].subblocks(); b += per_task) {
      const std::size_t last = std::min(b + per_task, decoders[idx].subblocks());
      const std::size_t len = std::min<std::size_t>(last * block, r.symbols) - b * block;
      // A single sub-block decodes about 1.4x slower a symbol than interleaved ones.
      tasks.push_back({idx, b, last, 0, len, false, double(len) * (last - b == 1 ? 1.4 : 1.0)});
    }
  }
  if (d.fused)
    for (std::size_t c = 0; c < chunks; ++c)
      if (coded[c] == 0) tasks.push_back({c, 0, 0, 0, chunk_symbols(n, c), true, 0.0});
  // Merge elements [from, to) of chunk c from its planes.
  auto merge_range = [&](std::size_t c, std::size_t from, std::size_t to) {
    const std::uint8_t* ptrs[256];
    for (unsigned j = 0; j < k; ++j) {
      const std::size_t idx = std::size_t(j) * chunks + c;
      ptrs[j] = (view[idx] ? view[idx] : target(idx)) + from;
    }
    d.merge(d.out + ((c << kChunkLog2) + from) * k, ptrs, to - from, k, d.layout);
  };
  // Claimed longest first, so that the last tasks to start are short.
  std::vector<std::size_t> order(tasks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return tasks[a].cost > tasks[b].cost; });
  std::vector<Error> task_errors(tasks.size());
  parallel_for(tasks.size(), threads, [&](std::size_t i) {
    Task& task = tasks[order[i]];
    if (task.merge_only) {
      merge_range(task.idx, 0, task.len);
      return;
    }
    const ChunkRef& r = info.chunks[task.idx];
    const std::uint8_t* data = target(task.idx) + task.first * block;
    if (task.last == 0) {
      if (view[task.idx]) {
        data = view[task.idx];
      } else if (!d.decode_one(r.plane, r.index, target(task.idx), nullptr, false)) {
        return;
      }
    } else if (!decoders[task.idx].decode(task.first, task.last, &task_errors[order[i]])) {
      where(&task_errors[order[i]], r);
      return;
    } else if (d.shifted(r.plane)) {
      shift_rows(target(task.idx) + task.first * block, task.len,
                 (std::uint64_t(r.index) << kChunkLog2) + task.first * block, d.rs, true);
    }
    if (info.has_checksum) task.crc = crc32c(0, data, task.len);
    if (d.fused && !view[task.idx] && coded[r.index] == 1) {
      const std::size_t from = task.last == 0 ? 0 : task.first * block;
      merge_range(r.index, from, from + task.len);
    }
  });
  for (const Error& e : task_errors)
    if (e.status != Status::ok) return *err = e, err->status;
  for (const Error& e : d.errors)
    if (e.status != Status::ok) return *err = e, err->status;
  // Fold the tasks' CRCs into per-chunk CRCs (tasks listed in index order).
  for (const Task& task : tasks)
    if (!task.merge_only)
      d.crcs[task.idx] =
          task.first == 0 ? task.crc : crc32c_combine(d.crcs[task.idx], task.crc, task.len);
  if (d.fused) {
    // Chunks with several decoded planes: merged now, in ranges that divide
    // a chunk, so that every thread has some.
    constexpr std::size_t kRangeLog2 = 15;
    std::vector<std::size_t> ranges;
    for (std::size_t first = 0; first < n; first += std::size_t(1) << kRangeLog2)
      if (coded[first >> kChunkLog2] > 1) ranges.push_back(first);
    parallel_for(ranges.size(), threads, [&](std::size_t i) {
      const std::size_t first = ranges[i];
      const std::size_t c = first >> kChunkLog2, off = first - (c << kChunkLog2);
      const std::size_t len = std::min<std::size_t>(std::size_t(1) << kRangeLog2, n - first);
      merge_range(c, off, off + len);
    });
  }
  return Status::ok;
}

// Many chunks: one task a chunk. A fresh output is faulted in ahead (when
// `staged`, task 0 faults in everything past `head` while the others decode).
void decode_by_chunk(Decode& d, int threads, bool staged, std::uint64_t head) {
  const unsigned k = d.k;
  parallel_for(d.chunks + (staged ? 1 : 0), threads, [&](std::size_t task) {
    if (staged && task == 0) {
      populate(d.out + head, d.info.decoded_len - head);
      return;
    }
    const std::size_t c = staged ? task - 1 : task;
    const std::size_t m = chunk_symbols(d.n, c);
    const std::size_t first = c << kChunkLog2;
    std::uint8_t* scratch = d.fused ? scratch_buffer(k * m) : nullptr;
    const std::uint8_t* ptrs[256];
    for (unsigned j = 0; j < k; ++j) {
      std::uint8_t* t = d.fused ? scratch + std::size_t(j) * m : d.out + j * d.n + first;
      if (!d.decode_one(j, c, t, d.fused ? &ptrs[j] : nullptr, !d.fused, !d.fused)) return;
      if (d.fused && d.shifted(j)) ptrs[j] = t;
    }
    if (!d.fused) return;
    // Checksum and merge block by block, so each block is read from memory
    // once (raw chunks come straight from the frame) and the merge finds it
    // in L1.
    constexpr std::size_t kBlock = 24576;  // whole 3 x 4 KiB lanes of the CRC kernel
    std::uint32_t crc[256] = {0};
    const std::uint8_t* at[256];
    for (std::size_t off = 0; off < m; off += kBlock) {
      const std::size_t len = std::min(kBlock, m - off);
      for (unsigned j = 0; j < k; ++j) {
        at[j] = ptrs[j] + off;
        if (d.shifted(j))  // in this thread's scratch
          shift_rows(const_cast<std::uint8_t*>(at[j]), len, first + off, d.rs, true);
        if (d.info.has_checksum) crc[j] = crc32c(crc[j], at[j], len);
      }
      d.merge(d.out + (first + off) * k, at, len, k, d.layout);
    }
    for (unsigned j = 0; j < k; ++j) d.crcs[std::size_t(j) * d.chunks + c] = crc[j];
  });
}

// The zstd chunks of a frame decoded by libzstd, in index order.
Status decode_zstd_chunks(const FrameInfo& info, const std::uint8_t* in, int threads,
                          std::vector<std::uint8_t>* out, Error* err) {
  std::vector<std::size_t> which;
  std::vector<std::uint64_t> at;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < info.chunks.size(); ++i)
    if (info.chunks[i].mode == ChunkMode::zstd) {
      which.push_back(i);
      at.push_back(total);
      total += info.chunks[i].symbols;
    }
  out->resize(static_cast<std::size_t>(total));
  std::vector<Error> errors(which.size());
  parallel_for(which.size(), which.size() > 1 && total >= (1u << 20) ? threads : 1,
               [&](std::size_t w) {
                 const ChunkRef& r = info.chunks[which[w]];
                 if (!zstd_decompress(out->data() + at[w], r.symbols, in + r.offset, r.length,
                                      &errors[w]))
                   where(&errors[w], r);
               });
  for (const Error& e : errors)
    if (e.status != Status::ok) return *err = e, err->status;
  return Status::ok;
}

}  // namespace

Status frame_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    const FrameInfo& info, Layout layout, bool elements,
                    const std::uint8_t* zstd_decoded, std::size_t zstd_decoded_len, int threads,
                    Error* err) {
  const unsigned k = info.planes;
  if (info.decoded_len > dst_cap)
    return fail(err, Status::dst_too_small, "dst has %zu bytes, the frame decodes to %llu",
                dst_cap, static_cast<unsigned long long>(info.decoded_len)),
           err->status;
  if (layout != Layout::none && (!elements || layout_width(layout) != k))
    return fail(err, Status::bad_argument, "layout width differs from the frame's %u planes", k),
           err->status;
  const auto* in = static_cast<const std::uint8_t*>(src);
  Decode d{info, in, static_cast<std::uint8_t*>(dst), layout, k, info.decoded_len / k,
           chunk_count(info.decoded_len / k), elements && (k > 1 || layout != Layout::none),
           RowShift{info.row_length, in + info.row_offsets_at}, zstd_decoded,
           std::vector<std::uint64_t>(info.chunks.size(), 0),
           std::vector<Error>(info.chunks.size()),
           std::vector<std::uint32_t>(info.chunks.size(), 0)};
  (void)src_len;  // frame_info checked every offset against it
  std::uint64_t ext_total = 0;
  for (std::size_t i = 0; i < info.chunks.size(); ++i)
    if (info.chunks[i].mode == ChunkMode::zstd) {
      d.ext_at[i] = ext_total;
      ext_total += info.chunks[i].symbols;
    }
  // zstd chunks: given decoded by the caller, or decoded here first.
  std::vector<std::uint8_t> zstd_here;
  if (zstd_decoded == nullptr && ext_total != 0) {
    if (decode_zstd_chunks(info, in, threads, &zstd_here, err) != Status::ok) return err->status;
    d.zstd_decoded = zstd_here.data();
  } else if (ext_total != zstd_decoded_len) {
    return fail(err, Status::bad_argument, "%zu decoded zstd bytes given, the frame needs %llu",
                zstd_decoded_len, static_cast<unsigned long long>(ext_total)),
           err->status;
  }
  // Many chunks into fresh 4 KiB pages: fault in the first eighth now; one
  // task faults in the rest while the other threads decode from the start
  // (one thread faulting at a time: concurrent faults contend in the kernel).
  const bool populate_out = prepare_output(d.out, info.decoded_len);
  // Below 64 KiB a second thread costs more to wake than it saves.
  if (info.decoded_len < (std::uint64_t(1) << 16)) threads = 1;
  const int workers = resolve_threads(threads);
  const bool staged = populate_out && d.chunks >= 4 * static_cast<std::size_t>(workers) &&
                      workers > 1 && info.decoded_len >= (std::uint64_t(8) << 20);
  const std::uint64_t head =
      staged ? (info.decoded_len / 8) & ~std::uint64_t(4095) : info.decoded_len;
  if (populate_out) populate(d.out, head);
  if (d.chunks < 4 * static_cast<std::size_t>(workers) && workers > 1) {
    if (decode_fine(d, threads, workers, err) != Status::ok) return err->status;
  } else {
    decode_by_chunk(d, threads, staged, head);
  }
  for (const Error& e : d.errors)
    if (e.status != Status::ok) return *err = e, err->status;
  if (info.has_checksum) {
    std::uint32_t crc = 0;
    for (std::size_t i = 0; i < info.chunks.size(); ++i)
      crc = crc32c_combine(crc, d.crcs[i], info.chunks[i].symbols);
    if (crc != info.checksum)
      return fail(err, Status::corrupt, "CRC32C mismatch: frame says %08x, decoded data gives %08x",
                  info.checksum, crc),
             err->status;
  }
  return Status::ok;
}

Status frame_decode(void* dst, std::size_t dst_cap, const void* src, std::size_t src_len,
                    std::uint64_t max_decoded, Layout layout, bool elements,
                    const std::uint8_t* zstd_decoded, std::size_t zstd_decoded_len, int threads,
                    Error* err) {
  FrameInfo info;
  Status s = frame_info(src, src_len, std::min<std::uint64_t>(max_decoded, dst_cap), &info, err);
  if (s != Status::ok) return s;
  return frame_decode(dst, dst_cap, src, src_len, info, layout, elements, zstd_decoded,
                      zstd_decoded_len, threads, err);
}

}  // namespace nnc

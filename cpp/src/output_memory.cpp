// Memory the frame code writes: per-thread scratch, and the tuning of a
// large output before the decoding threads write it (page faults, THP).
#include <algorithm>
#include <cstdio>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "frame_internal.h"

namespace nnc {
namespace detail {

// Per-thread scratch reused across chunks and calls: a fresh allocation per
// chunk would page-fault its way through every megabyte again. A task owns
// its thread's scratch until it returns: a thread waiting in parallel_for
// runs no other caller's task (threadpool.h).
std::uint8_t* scratch_buffer(std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

// The planes of a whole (small) tensor, for the decoder's fine-grained path:
// the caller holds it for the whole call (its tasks decode into it), so it
// is not scratch_buffer, which is a task's own.
std::uint8_t* tensor_planes_buffer(std::size_t bytes) {
  thread_local std::vector<std::uint8_t> buf;
  if (buf.size() < bytes) buf.resize(bytes);
  return buf.data();
}

namespace {

#if defined(__linux__)
// Whether at least 7/8 of the pages in [begin, end) (page aligned) are
// resident, by mincore() in pieces of 64 Ki pages. False when it cannot tell.
bool mostly_resident(std::uintptr_t begin, std::uintptr_t end) {
  constexpr std::size_t kPage = 4096, kBatch = 65536;
  unsigned char vec[kBatch];
  std::size_t resident = 0;
  const std::size_t pages = (end - begin) / kPage;
  for (std::size_t at = 0; at < pages; at += kBatch) {
    const std::size_t n = std::min(kBatch, pages - at);
    if (mincore(reinterpret_cast<void*>(begin + at * kPage), n * kPage, vec) != 0) return false;
    for (std::size_t i = 0; i < n; ++i) resident += vec[i] & 1u;
  }
  return resident * 8 >= pages * 7;
}
#endif

}  // namespace

// Get a large output ready before the threads write it. Fresh memory would
// otherwise fault in 4 KiB page by page from the decoding threads, which
// contend in the kernel (32 MiB bfloat16 tensors, 2 threads: 3.2 GB/s into
// fresh memory, 7.2 into memory already faulted in). MADV_POPULATE_WRITE
// (Linux 5.14+) faults the range in with one call, unless mincore() finds it
// resident already (populating resident memory still walks every page).
// Returns whether the caller should populate the rest (see populate()).
//
// Transparent huge pages (MADV_HUGEPAGE) were asked for here before: on some
// days of this virtual machine they were as fast, on others a huge page's
// fault (zeroing, compaction: defrag is "madvise") stalled the threads, and
// loading the generated 1 GiB model into torch took 7.7-18 s against 3.4-4.3
// with the populate call alone, the same with huge pages populated first
// (4.3-4.9). The codec's own decode rates did not move beyond the noise.
bool prepare_output(std::uint8_t* p, std::uint64_t len) {
#if defined(__linux__)
  if (len < (std::uint64_t(1) << 20)) return false;
  const std::uintptr_t page = 4096;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + len) & ~(page - 1);
  return end > begin && !mostly_resident(begin, end);
#else
  (void)p;
  (void)len;
  return false;
#endif
}

// Fault [p, p + len) in with one call (MADV_POPULATE_WRITE; when refused,
// the pages fault in as the threads write them).
void populate(std::uint8_t* p, std::uint64_t len) {
#if defined(__linux__)
  constexpr int kPopulateWrite = 23;  // MADV_POPULATE_WRITE
  const std::uintptr_t page = 4096;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) & ~(page - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + len) & ~(page - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateWrite);
#else
  (void)p;
  (void)len;
#endif
}

}  // namespace detail
}  // namespace nnc

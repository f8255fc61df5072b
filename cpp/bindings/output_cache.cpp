// The output cache (output_cache.h), and start_writeback for the files outputs are
// written to.
#include "output_cache.h"

#if defined(__linux__)
#include <fcntl.h>
#endif

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

namespace nncodecs_py {
namespace {

class OutputCache {
 public:
  static constexpr std::size_t kMinBytes = std::size_t(1) << 20;
  static constexpr std::size_t kMaxBytes = std::size_t(128) << 20;
  static constexpr std::size_t kBlocks = 4;
  static constexpr std::size_t kAlign = std::size_t(1) << 21;  // a huge page

  struct Block {
    void* data;
    std::size_t size;
  };

  // A block of at least `bytes` (a cached one when one fits), or null.
  Block take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::size_t best = blocks_.size();
      for (std::size_t i = 0; i < blocks_.size(); ++i)
        if (blocks_[i].size >= bytes && blocks_[i].size <= bytes + bytes / 4 + kAlign &&
            (best == blocks_.size() || blocks_[i].size < blocks_[best].size))
          best = i;
      if (best != blocks_.size()) {
        const Block b = blocks_[best];
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(best));
        held_ -= b.size;
        return b;
      }
    }
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    return {std::aligned_alloc(kAlign, size), size};
  }

  // A block whose array is gone: kept when it is large enough and fits.
  void give(Block b) {
    std::vector<Block> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (b.size < kMinBytes || b.size > kMaxBytes) {
        drop.push_back(b);
      } else {
        while (!blocks_.empty() && (blocks_.size() >= kBlocks || held_ + b.size > kMaxBytes)) {
          drop.push_back(blocks_.front());
          held_ -= blocks_.front().size;
          blocks_.erase(blocks_.begin());
        }
        blocks_.push_back(b);
        held_ += b.size;
      }
    }
    for (const Block& d : drop) std::free(d.data);
  }

  void clear() {
    std::vector<Block> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop.swap(blocks_);
      held_ = 0;
    }
    for (const Block& d : drop) std::free(d.data);
  }

  py::tuple stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return py::make_tuple(blocks_.size(), held_);
  }

 private:
  std::mutex mu_;
  std::vector<Block> blocks_;  // oldest first
  std::size_t held_ = 0;
};

OutputCache& output_cache() {
  static OutputCache* cache = new OutputCache();  // outlives every array (never destroyed)
  return *cache;
}

}  // namespace

py::array_t<std::uint8_t> new_output(std::size_t bytes) {
  if (bytes < OutputCache::kMinBytes) return py::array_t<std::uint8_t>(static_cast<py::ssize_t>(bytes));
  OutputCache::Block b = output_cache().take(bytes);
  if (b.data == nullptr) throw std::bad_alloc();
  auto* owned = new OutputCache::Block(b);
  py::capsule owner(owned, [](void* p) {
    auto* block = static_cast<OutputCache::Block*>(p);
    output_cache().give(*block);
    delete block;
  });
  return py::array_t<std::uint8_t>({static_cast<py::ssize_t>(bytes)}, {1},
                                   static_cast<std::uint8_t*>(b.data), owner);
}

void def_output_cache(py::module_& m) {
  m.def(
      "output_cache_clear", [] { output_cache().clear(); },
      "Free the blocks the output cache holds (decoded arrays of 1 MiB or more go back to "
      "it when they are gone).");
  m.def(
      "output_buffer", [](std::size_t bytes) { return new_output(bytes); }, py::arg("nbytes"),
      "A new uint8 array of `nbytes` (from 1 MiB on, memory the output cache holds, already "
      "mapped: no page faults while it is filled; it goes back to the cache when gone).");
  m.def(
      "start_writeback",
      [](int fd, std::int64_t offset, std::int64_t nbytes) {
#if defined(__linux__)
        py::gil_scoped_release release;
        return sync_file_range(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) == 0;
#else
        (void)fd, (void)offset, (void)nbytes;
        return false;
#endif
      },
      py::arg("fd"), py::arg("offset"), py::arg("nbytes"),
      "Start writing a file's range to disk, without waiting (Linux sync_file_range): the "
      "fsync that makes the file durable then waits for the tail only. False where the "
      "system has no such call (or refused it): nothing was started.");
  m.def(
      "output_cache_stats", [] { return output_cache().stats(); },
      "(blocks, bytes) the output cache holds now.");
}

}  // namespace nncodecs_py

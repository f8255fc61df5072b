// A small persistent thread pool shared by every kernel.
//
// parallel_for(tasks, fn) runs fn(0) .. fn(tasks - 1) and returns when all are
// done. The calling thread works too, and while it waits it runs queued tasks
// of any caller, so concurrent callers (zarr decodes chunks from many Python
// threads) and nested calls never deadlock.
#pragma once

#include <cstddef>
#include <functional>

namespace nnc {

// Number of hardware threads (at least 1).
int hardware_threads();

// Resolve a caller's `threads` setting: 0 or less means all hardware threads.
int resolve_threads(int threads);

void parallel_for(std::size_t tasks, int threads, const std::function<void(std::size_t)>& fn);

}  // namespace nnc

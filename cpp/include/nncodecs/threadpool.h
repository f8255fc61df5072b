// A small persistent thread pool shared by every kernel.
//
// parallel_for(tasks, threads, fn) runs fn(0) .. fn(tasks - 1) on up to
// `threads` threads and returns when all are done. The calling thread works
// too, on tasks of its own call only: while it waits for the tasks workers
// hold it runs nothing else. So a task's thread-local scratch stays its own
// for as long as the task runs, even across a nested parallel_for; the one
// rule left is that a task must not share thread-local scratch with the
// tasks it starts (they may run on its thread). Concurrent callers (zarr
// encodes and decodes chunks from many Python threads) and nested calls
// never deadlock: a thread waits only for tasks of the job it started.
// The pool grows to the most threads any call asked for (up to 256).
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

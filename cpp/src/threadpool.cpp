#include "nncodecs/threadpool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace nnc {
namespace {

// How long an idle worker watches for the next call before it sleeps (adapted
// between these).
constexpr std::chrono::microseconds kSpinLeast{25}, kSpinMost{2000};

// One parallel_for call: its tasks are claimed through `next`; `holders`
// counts the workers that took it from the queue and have not let go
// (changed under the pool's lock; read without it only to spin on).
struct Job {
  const std::function<void(std::size_t)>* fn;
  std::size_t tasks;
  std::atomic<std::size_t> next{0};
  std::atomic<int> holders{0};

  // Run tasks of this job until none is left to claim. True if it ran any.
  bool work() {
    bool ran = false;
    for (std::size_t i; (i = next.fetch_add(1)) < tasks;) {
      (*fn)(i);
      ran = true;
    }
    return ran;
  }
};

class Pool {
 public:
  // Start workers until there are `workers` (it never shrinks). Callers
  // serialise this through g_pool_mu. A thread the system refuses leaves
  // the pool smaller: callers do the work themselves.
  void grow(int workers) {
    while (static_cast<int>(threads_.size()) < workers) {
      try {
        threads_.emplace_back([this] { loop(); });
      } catch (...) {
        return;
      }
      workers_.store(static_cast<int>(threads_.size()), std::memory_order_release);
    }
  }
  // Deliberately never joined: the pool lives for the whole process and is
  // abandoned (not destroyed) after fork, when its threads no longer exist.
  int workers() const { return workers_.load(std::memory_order_acquire); }

  // Run the job's tasks here and on up to `helpers` workers; return when
  // all are done. While it waits this thread runs no other job's task:
  // the caller may be a task itself, whose thread-local scratch (output_memory.cpp)
  // a foreign task would reuse under it (issue 15). Nested calls cannot
  // deadlock without that help: a thread waits only for tasks of a job it
  // created, claimed by threads that, if they wait, wait for jobs created
  // later still.
  void run(Job& job, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // One queue entry per helper: each wakes one worker, which drains the job.
      for (int i = 0; i < helpers; ++i) queue_.push_back(&job);
      pending_.fetch_add(helpers, std::memory_order_relaxed);
    }
    // Wake one sleeping worker an entry, not all: a pool grown past the
    // cores (set_threads) would otherwise have every worker spin after each call.
    for (int i = 0; i < helpers; ++i) cv_.notify_one();
    job.work();
    // Every task is claimed now: drop the entries no worker took (they would
    // find nothing), then wait for the tasks that workers hold. Spin briefly
    // first (most tasks are a chunk: tens of microseconds), then sleep.
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (*it == &job) {
          it = queue_.erase(it);
          pending_.fetch_sub(1, std::memory_order_relaxed);
        } else {
          ++it;
        }
      }
    }
    for (int spin = 0; spin < 2000 && job.holders.load(std::memory_order_acquire) != 0; ++spin)
      std::this_thread::yield();
    // The job lives on the caller's stack: return only once no worker holds it.
    std::unique_lock<std::mutex> lock(mu_);
    released_.wait(lock, [&] { return job.holders.load(std::memory_order_relaxed) == 0; });
  }

 private:
  void loop() {
    std::chrono::microseconds spin_for = kSpinLeast * 8;
    for (;;) {
      // Spin briefly before sleeping: decoding a model is many short
      // parallel_for calls in a row, and a wake-up costs more than a chunk.
      // Bounded in time and adapted: a spin that saw a call arrive doubles
      // the next one, one that ran out halves it. On a busy machine each
      // yield hands the core to another thread (the caller's writer, its
      // Python) for a slice: 20,000 yields a time took a fifth of a 2-core
      // decompress, whose caller often waits on its writer.
      const auto until = std::chrono::steady_clock::now() + spin_for;
      bool arrived = true;
      for (unsigned spin = 1; pending_.load(std::memory_order_relaxed) == 0; ++spin) {
        if (spin % 16 == 0 && std::chrono::steady_clock::now() >= until) {
          arrived = false;
          break;
        }
        std::this_thread::yield();
      }
      spin_for = arrived ? std::min(spin_for * 2, kSpinMost) : std::max(spin_for / 2, kSpinLeast);
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        job = take_locked();
      }
      job->work();
      release(job);
    }
  }

  // Pop a queued job and mark it held, under the lock, so its owner cannot
  // return (and free it) before we are done touching it.
  Job* take_locked() {
    Job* job = queue_.front();
    queue_.pop_front();
    pending_.fetch_sub(1, std::memory_order_relaxed);
    job->holders.fetch_add(1, std::memory_order_relaxed);
    return job;
  }

  void release(Job* job) {
    bool last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = job->holders.fetch_sub(1, std::memory_order_acq_rel) == 1;
    }
    // Notified after the unlock: its owner may return (and free the job) the
    // moment it sees the count at zero, and the job is not touched again here.
    if (last) released_.notify_all();
  }

  std::vector<std::thread> threads_;
  std::atomic<int> workers_{0};  // threads_.size(), readable without g_pool_mu
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable released_;  // a job's last holder let go
  std::deque<Job*> queue_;
  std::atomic<int> pending_{0};  // queue_.size(), readable without the lock
};

std::mutex g_pool_mu;
Pool* g_pool = nullptr;
pid_t g_pool_pid = 0;

// At most this many threads a call (the caller and kMaxThreads - 1 workers).
constexpr int kMaxThreads = 256;

// The pool, with at least want - 1 workers (and at least one fewer than the
// hardware threads): a caller asking for more threads than cores
// (nncodecs.set_threads(16) on 8 cores) gets them.
Pool& pool(int want) {
  std::lock_guard<std::mutex> lock(g_pool_mu);
  // A forked child inherits the pointer but not the threads: start afresh.
  if (g_pool == nullptr || g_pool_pid != getpid()) {
    g_pool = new Pool();
    g_pool_pid = getpid();
  }
  g_pool->grow(std::min(std::max(want, hardware_threads()), kMaxThreads) - 1);
  return *g_pool;
}

}  // namespace

int hardware_threads() {
  // Asked once: glibc reads sysfs for it (5 us a call, more than merging a bias).
  static const int n = [] {
    const unsigned c = std::thread::hardware_concurrency();
    return c == 0 ? 1 : static_cast<int>(c);
  }();
  return n;
}

int resolve_threads(int threads) { return threads <= 0 ? hardware_threads() : threads; }

void parallel_for(std::size_t tasks, int threads, const std::function<void(std::size_t)>& fn) {
  if (tasks == 0) return;
  int want = resolve_threads(threads);
  if (tasks == 1 || want <= 1) {
    for (std::size_t i = 0; i < tasks; ++i) fn(i);
    return;
  }
  Pool& p = pool(want);
  int helpers = std::min<int>({want - 1, p.workers(), static_cast<int>(tasks) - 1});
  Job job;
  job.fn = &fn;
  job.tasks = tasks;
  p.run(job, helpers);
}

}  // namespace nnc

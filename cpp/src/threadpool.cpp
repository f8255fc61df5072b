#include "nncodecs/threadpool.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace nnc {
namespace {

// One parallel_for call: its tasks are claimed through `next`, and `done`
// counts finished tasks so the caller knows when to return.
struct Job {
  const std::function<void(std::size_t)>* fn;
  std::size_t tasks;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};

  // Run tasks of this job until none is left to claim. True if it ran any.
  bool work() {
    bool ran = false;
    for (std::size_t i; (i = next.fetch_add(1)) < tasks;) {
      (*fn)(i);
      done.fetch_add(1, std::memory_order_acq_rel);
      ran = true;
    }
    return ran;
  }
};

class Pool {
 public:
  // Start workers until there are `workers` (it never shrinks). Callers
  // serialise this through g_pool_mu.
  void grow(int workers) {
    while (static_cast<int>(threads_.size()) < workers) {
      threads_.emplace_back([this] { loop(); });
      workers_.store(static_cast<int>(threads_.size()), std::memory_order_release);
    }
  }
  // Deliberately never joined: the pool lives for the whole process and is
  // abandoned (not destroyed) after fork, when its threads no longer exist.
  int workers() const { return workers_.load(std::memory_order_acquire); }

  void run(Job& job, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      // One queue entry per helper: each wakes one worker, which drains the job.
      for (int i = 0; i < helpers; ++i) queue_.push_back(&job);
      pending_.fetch_add(helpers, std::memory_order_relaxed);
    }
    cv_.notify_all();
    job.work();
    // Wait for tasks claimed by workers; help with other callers' jobs meanwhile.
    while (job.done.load(std::memory_order_acquire) < job.tasks) {
      Job* other = nullptr;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!queue_.empty()) other = take_locked();
      }
      if (other == nullptr) {
        std::this_thread::yield();
        continue;
      }
      other->work();
      release(other);
    }
    // The job lives on the caller's stack: drop its queued entries and wait
    // until no worker still holds it before returning.
    for (;;) {
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
        if (std::find(active_.begin(), active_.end(), &job) == active_.end()) return;
      }
      std::this_thread::yield();
    }
  }

 private:
  void loop() {
    for (;;) {
      // Spin briefly before sleeping: decoding a model is many short
      // parallel_for calls in a row, and a wake-up costs more than a chunk.
      for (int spin = 0; spin < 20000 && pending_.load(std::memory_order_relaxed) == 0; ++spin)
        std::this_thread::yield();
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
    active_.push_back(job);
    return job;
  }

  void release(Job* job) {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(std::find(active_.begin(), active_.end(), job));
  }

  std::vector<std::thread> threads_;
  std::atomic<int> workers_{0};  // threads_.size(), readable without g_pool_mu
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;
  std::vector<Job*> active_;
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

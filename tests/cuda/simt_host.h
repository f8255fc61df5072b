// A SIMT emulator for the tests: compiles nncodecs' CUDA kernels as host C++
// and runs a launch with one OS thread per CUDA thread, so that the warp
// collectives (ballot, all, any) and __syncthreads keep their meaning. Blocks
// run one after another, so `__shared__` becomes `static`: shared by the
// threads of the running block. Every thread of a warp must reach each warp
// collective (the kernels are written warp-uniform), as on the GPU with a
// full mask. Slow, and meant for small inputs: it checks the kernels' logic
// on machines without a GPU, not their speed.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace simt {
struct Warp {
  std::barrier<> gate{32};
  unsigned votes[32] = {0};
};
struct Block {
  std::unique_ptr<std::barrier<>> gate;
  std::vector<std::unique_ptr<Warp>> warps;
};
inline thread_local Block* current = nullptr;
}  // namespace simt

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

inline void __syncthreads() { simt::current->gate->arrive_and_wait(); }

inline unsigned __ballot_sync(unsigned /*mask*/, bool pred) {
  simt::Warp& w = *simt::current->warps[threadIdx.x / 32];
  w.votes[threadIdx.x % 32] = pred ? 1u : 0u;
  w.gate.arrive_and_wait();
  unsigned out = 0;
  for (unsigned l = 0; l < 32; ++l) out |= w.votes[l] << l;
  w.gate.arrive_and_wait();  // nobody votes again before everyone has read
  return out;
}
inline bool __all_sync(unsigned mask, bool pred) { return __ballot_sync(mask, pred) == 0xFFFFFFFFu; }
inline bool __any_sync(unsigned mask, bool pred) { return __ballot_sync(mask, pred) != 0u; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
// The warp's threads meet (every lane of a warp calls it, as the kernels do).
inline void __syncwarp(unsigned /*mask*/ = 0xFFFFFFFFu) {
  simt::current->warps[threadIdx.x / 32]->gate.arrive_and_wait();
}
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

namespace simt {
// Run kernel(args...) over grid x block threads (x dimension only).
template <class F>
void launch(unsigned grid, unsigned block, F kernel) {
  gridDim = dim3{grid, 1, 1};
  blockDim = dim3{block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    Block blk;
    blk.gate = std::make_unique<std::barrier<>>(block);
    for (unsigned w = 0; w < (block + 31) / 32; ++w) blk.warps.push_back(std::make_unique<Warp>());
    std::vector<std::thread> threads;
    threads.reserve(block);
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, b, t] {
        current = &blk;
        blockIdx = dim3{b, 1, 1};
        threadIdx = dim3{t, 1, 1};
        kernel();
      });
    for (std::thread& th : threads) th.join();
  }
}
}  // namespace simt

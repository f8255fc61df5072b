// GPU decoding of nncodecs frames (docs/format.md): rANS chunks into a planes
// buffer, one thread block per chunk and one warp per sub-block (lane l is
// rANS lane l; the refill words of a step are shared out by ballot and
// popcount), then the plane merge with the inverse reorder, one thread per
// element. The host (nncodecs/gpu/decode.py) parses and checks the frame's
// header and index and hands the kernels a table of chunks; the kernels
// check every payload themselves and report per chunk, never fault.
//
// Compiled by NVRTC through CuPy with the shared headers inlined
// (nncodecs/gpu/cupy_backend.py), by nvcc in the compile check, and as host C++
// under the SIMT emulator of the tests (tests/cuda/simt_host.h).
#include "common.cuh"

namespace nnc {
namespace gpu {

// Per-chunk status codes written by rans_decode_chunks (0: fine).
enum : int {
  kBadTable = 1,       // presence map / frequencies malformed
  kBadLayout = 2,      // sub-block headers do not add up to the payload
  kBadState = 3,       // a stored lane state outside [2^15, 2^31)
  kBadStream = 4,      // words left over or missing, or a final state not 2^15
  kTooManyWords = 5,   // a sub-block declares more words than symbols
  kTooManyBlocks = 6,  // more sub-blocks than one thread block handles
};

constexpr nnc_u32 kMaxSubblocks = 64;  // 2^18 symbols / 2^12

// Where rans_decode_* put a chunk's symbols: into the planes buffer, or
// (fused) straight into the elements, with the chunk's other planes.
struct ToPlanes {
  nnc_u8* planes;
  NNC_DEV void operator()(const Batch&, const FrameDesc& d, const RansChunk& c, nnc_u64 i,
                          nnc_u8 sym) const {
    planes[d.planes + c.out + i] = sym;
  }
};
struct ToElements {
  nnc_u8* out;
  NNC_DEV void operator()(const Batch& b, const FrameDesc& d, const RansChunk& c, nnc_u64 i,
                          nnc_u8 sym) const {
    const MergeInput in = merge_input(b, d);
    const nnc_u64 g = c.first + i, chunk = c.first >> kChunkLog2;
    nnc_u64 word = nnc_u64(sym) << (8u * (in.k - 1));
    for (nnc_u32 j = 0; j + 1 < in.k; ++j) word |= nnc_u64(source_byte(in, j, chunk, i, g)) << (8u * j);
    word = reorder<true>(word, in.layout);
    nnc_u8* o = out + d.out;
    for (nnc_u32 j = 0; j < in.k; ++j) o[g * in.k + j] = static_cast<nnc_u8>(word >> (8u * j));
  }
};

}  // namespace gpu
}  // namespace nnc

// One rANS chunk per block, symbols to `sink`. grid: one block per rANS
// chunk; block: whole warps (4 is a good start).
template <class Sink>
NNC_DEV void decode_chunk(const Batch& batch, const RansChunk* chunks, int* status,
                          const Sink& sink) {
  __shared__ nnc_u32 table[1u << 12];
  __shared__ nnc_u32 freqs[256];
  __shared__ nnc_u32 cum[257];
  __shared__ nnc_u32 sub_words[kMaxSubblocks];
  __shared__ nnc_u32 sub_at[kMaxSubblocks];  // states of sub-block b, from the payload start
  __shared__ int ok;
  const RansChunk c = chunks[blockIdx.x];
  const FrameDesc d = batch.descs[c.desc];
  const nnc_u8* p = batch.frames + d.frame + c.payload;
  const nnc_u32 precision = d.precision, subblock_log2 = d.subblock_log2;
  const nnc_u8* row_offsets = batch.rows + d.rows;
  const nnc_u64 row_length = d.row_length;
  const nnc_u32 block = 1u << subblock_log2;
  const nnc_u32 subblocks = (c.symbols + block - 1) >> subblock_log2;
  if (threadIdx.x == 0) {
    int code = 0;
    const nnc_u32 tlen = rans::parse_table(p, c.length, precision, freqs);
    if (tlen == 0) {
      code = kBadTable;
    } else if (subblocks > kMaxSubblocks) {
      code = kTooManyBlocks;
    } else if (nnc_u64(tlen) + 4ull * subblocks > c.length) {
      code = kBadLayout;
    } else {
      nnc_u64 at = tlen + 4ull * subblocks;
      for (nnc_u32 b = 0; b < subblocks && code == 0; ++b) {
        const nnc_u32 words = load_u32(p + tlen + 4u * b);
        const nnc_u32 m = c.symbols - b * block < block ? c.symbols - b * block : block;
        if (words > m) code = kTooManyWords;
        sub_words[b] = words;
        sub_at[b] = static_cast<nnc_u32>(at);
        at += 4ull * rans::kLanes + 2ull * words;
      }
      if (code == 0 && at != c.length) code = kBadLayout;
      nnc_u32 sum = 0;
      for (nnc_u32 s = 0; s < 256u; ++s) {
        cum[s] = sum;
        sum += freqs[s];
      }
      cum[256] = sum;
    }
    ok = code == 0;
    if (code) status[blockIdx.x] = code;
  }
  __syncthreads();
  if (!ok) return;
  // The decode table, a slot per thread: the symbol whose range holds it.
  for (nnc_u32 slot = threadIdx.x; slot < (1u << precision); slot += blockDim.x) {
    nnc_u32 lo = 0, hi = 256;  // cum[lo] <= slot < cum[hi]
    while (hi - lo > 1) {
      const nnc_u32 mid = (lo + hi) >> 1;
      if (cum[mid] <= slot) lo = mid;
      else hi = mid;
    }
    table[slot] = rans::pack_entry(lo, freqs[lo], slot - cum[lo]);
  }
  __syncthreads();
  const nnc_u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const nnc_u32 mask = (1u << precision) - 1u;
  for (nnc_u32 b = warp; b < subblocks; b += warps) {
    const nnc_u32 base = b * block;
    const nnc_u32 m = c.symbols - base < block ? c.symbols - base : block;
    const nnc_u8* words = p + sub_at[b] + 4u * rans::kLanes;
    const nnc_u32 nwords = sub_words[b];
    nnc_u32 x = load_u32(p + sub_at[b] + 4u * lane);
    const bool state_ok = x >= rans::kStateLow && x < rans::kStateHigh;
    bool good = state_ok;
    nnc_u32 wi = 0;
    const nnc_u32 steps = (m + 31u) >> 5;  // the same trip count in every lane
    for (nnc_u32 t = 0; t < steps; ++t) {
      const nnc_u32 i = 32u * t + lane;
      bool need = false;
      if (i < m && good) {
        const nnc_u32 e = table[x & mask];
        nnc_u8 sym = static_cast<nnc_u8>(rans::entry_symbol(e));
        if (c.shifted) sym = static_cast<nnc_u8>(sym + row_offsets[(c.first + base + i) / row_length]);
        sink(batch, d, c, base + i, sym);
        x = rans::decode_step(x, e, precision);
        need = rans::decode_needs_word(x);
      }
      const unsigned ballot = __ballot_sync(0xFFFFFFFFu, need);
      if (need) {
        const nnc_u32 at = wi + __popc(ballot & ((1u << lane) - 1u));
        if (at < nwords) x = rans::decode_refill(x, load_u16(words + 2u * at));
        else good = false;
      }
      wi += __popc(ballot);
    }
    const bool end_ok = good && x == rans::kStateLow && wi == nwords;
    const bool bad_state = __any_sync(0xFFFFFFFFu, !state_ok);
    if (!__all_sync(0xFFFFFFFFu, end_ok) && lane == 0)
      status[blockIdx.x] = bad_state ? kBadState : kBadStream;
  }
}

extern "C" __global__ void rans_decode_chunks(const FrameDesc* descs, const RansChunk* chunks,
                                              const nnc_u8* frames, const nnc_u8* rows,
                                              int* status, nnc_u8* planes) {
  const Batch batch{descs, frames, planes, nullptr, nullptr, rows};
  decode_chunk(batch, chunks, status, ToPlanes{planes});
}

// Fused: chunks whose only rANS plane is the last (the exponent plane),
// decoded straight into elements: that plane never goes to memory. The
// other planes of those chunks are raw, constant or the CPU's.
extern "C" __global__ void rans_decode_merge(const FrameDesc* descs, const RansChunk* chunks,
                                             const nnc_u8* frames, const nnc_u8* rows,
                                             int* status, const nnc_u8* external,
                                             const PlaneSource* sources, nnc_u8* out) {
  const Batch batch{descs, frames, nullptr, external, sources, rows};
  decode_chunk(batch, chunks, status, ToElements{out});
}

// The chunks the fused kernel did not write, one block each: every byte
// from its source (source_byte), then the inverse reorder of the frame's
// layout; or, for frames decoded to planes, plane-major bytes.
extern "C" __global__ void merge_chunks(const FrameDesc* descs, const MergeTask* tasks,
                                        const nnc_u8* frames, const nnc_u8* planes,
                                        const nnc_u8* external, const PlaneSource* sources,
                                        const nnc_u8* rows, nnc_u8* out) {
  const MergeTask t = tasks[blockIdx.x];
  const FrameDesc d = descs[t.desc];
  const MergeInput in = merge_input(Batch{descs, frames, planes, external, sources, rows}, d);
  const nnc_u64 first = nnc_u64(t.chunk) << kChunkLog2, c = t.chunk, k = d.k;
  const nnc_u64 m = d.n - first < (nnc_u64(1) << kChunkLog2) ? d.n - first : (nnc_u64(1) << kChunkLog2);
  nnc_u8* o = out + d.out;
  for (nnc_u64 i = threadIdx.x; i < m; i += blockDim.x) {
    const nnc_u64 g = first + i;
    if (d.to_planes) {
      for (nnc_u32 j = 0; j < k; ++j) o[nnc_u64(j) * d.n + g] = source_byte(in, j, c, i, g);
      continue;
    }
    nnc_u64 word = 0;
    for (nnc_u32 j = 0; j < k; ++j) word |= nnc_u64(source_byte(in, j, c, i, g)) << (8u * j);
    word = reorder<true>(word, d.layout);
    for (nnc_u32 j = 0; j < k; ++j) o[g * k + j] = static_cast<nnc_u8>(word >> (8u * j));
  }
}

// GPU encoding of nncodecs frames: the data-parallel parts of the CPU
// encoder (cpp/src/frame_encode.cpp and chunk_choice.cpp), so that the bytes come out the same. The
// host (nncodecs/gpu/encode.py) takes every decision with the CPU
// encoder's own functions (plan_chunk, settle_chunk, row_shift_pays), from
// the statistics these kernels gather:
//   row_stats      the version 2 row plan: each row's offset, and per group
//                  of rows the sampled exponents as they are and shifted;
//   split_planes   bit reorder + plane split, the row offsets subtracted
//                  from the last plane;
//   chunk_stats    per (plane, chunk): histogram, the 16 x 1 KiB sample,
//                  and auto's zstd probe (long repeats);
//   rans_encode_chunks  one block per chunk, one warp per sub-block, lane l
//                  as rANS lane l, steps last to first (the words of a step
//                  placed by ballot and popcount, as the CPU writes them);
//   assemble_frame the payloads into the frame after the host's header.
// The CRC comes from crc_chunks (common.cuh) over the input itself.
#include "common.cuh"

namespace nnc {
namespace gpu {

// An element of k bytes (little-endian) as a word.
NNC_DEV nnc_u64 load_element(const nnc_u8* in, nnc_u64 g, nnc_u32 k) {
  nnc_u64 w = 0;
  for (nnc_u32 b = 0; b < k; ++b) w |= nnc_u64(in[g * k + b]) << (8u * b);
  return w;
}

}  // namespace gpu
}  // namespace nnc

// The version 2 row plan of row_shift.cpp (plan_rows), one block per group of
// rows (a task: the tensor and the group; groups of kChunkSymbols / length
// rows, the last may hold fewer): each warp takes rows in turn; its lanes
// sum the exponents of the row's samples (the first 64 bytes of every 512),
// the offset is the rounded mean moved to the top of the byte; the first 64
// bytes of every `every`-th row of the group are counted as they are and
// shifted, into the task's 256 + 256 counts. Integer sums: the same in any
// order.
extern "C" __global__ void row_stats(const EncodeDesc* descs, const EncodeTask* tasks,
                                     const nnc_u8* input, nnc_u8* offsets_buf, nnc_u32* plain,
                                     nnc_u32* shifted) {
  __shared__ nnc_u32 hist_plain[256];
  __shared__ nnc_u32 hist_shifted[256];
  __shared__ nnc_u64 part_sum[32][32];
  __shared__ nnc_u64 part_samples[32][32];
  for (nnc_u32 s = threadIdx.x; s < 256u; s += blockDim.x) hist_plain[s] = hist_shifted[s] = 0;
  __syncthreads();
  const EncodeTask task = tasks[blockIdx.x];
  const EncodeDesc d = descs[task.desc];
  const nnc_u8* in = input + d.input;
  nnc_u8* offsets = offsets_buf + d.rows;
  const nnc_u64 n = d.n, len = d.row_length;
  const nnc_u32 k = d.k, shift = d.shift, bits = d.bits;
  const nnc_u64 group = (nnc_u64(1) << kChunkLog2) / len > 1u ? (nnc_u64(1) << kChunkLog2) / len : 1u;
  const nnc_u64 rows = (n + len - 1) / len;
  const nnc_u64 row = nnc_u64(task.index) * group;
  const nnc_u64 count = rows - row < group ? rows - row : group;
  const nnc_u64 block = 64u / k;  // elements of a 64-byte sample
  const nnc_u64 every = count * block / 4096u > 1u ? count * block / 4096u : 1u;
  const nnc_u32 mask = (1u << bits) - 1u;
  const nnc_u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (nnc_u64 r = row + warp; r < row + count; r += warps) {
    const nnc_u64 begin = r * len, end = n < begin + len ? n : begin + len;
    nnc_u64 sum = 0, samples = 0;
    for (nnc_u64 at = begin + nnc_u64(lane) * block * 8u; at < end; at += 32u * block * 8u) {
      const nnc_u64 stop = end < at + block ? end : at + block;
      for (nnc_u64 i = at; i < stop; ++i)
        sum += static_cast<nnc_u32>(load_element(in, i, k) >> shift) & mask;
      samples += stop - at;
    }
    part_sum[warp][lane] = sum;
    part_samples[warp][lane] = samples;
    __syncwarp();
    sum = samples = 0;
    for (nnc_u32 l = 0; l < 32u; ++l) sum += part_sum[warp][l], samples += part_samples[warp][l];
    __syncwarp();  // the parts are read before the next row writes them
    const nnc_u32 mean = static_cast<nnc_u32>((sum + samples / 2u) / samples);
    if (lane == 0) offsets[r] = static_cast<nnc_u8>(mean << (8u - bits));
    if ((r - row) % every) continue;
    const nnc_u64 first_end = end < begin + block ? end : begin + block;
    for (nnc_u64 i = begin + lane; i < first_end; i += 32u) {
      const nnc_u32 e = static_cast<nnc_u32>(load_element(in, i, k) >> shift) & mask;
      atomicAdd(&hist_plain[e], 1u);
      atomicAdd(&hist_shifted[(e - mean) & mask], 1u);
    }
  }
  __syncthreads();
  for (nnc_u32 s = threadIdx.x; s < 256u; s += blockDim.x) {
    plain[nnc_u64(blockIdx.x) * 256u + s] = hist_plain[s];
    shifted[nnc_u64(blockIdx.x) * 256u + s] = hist_shifted[s];
  }
}

// A chunk of 2^18 elements a block (a task: the tensor and the chunk) into
// planes, plane j of element g at planes[j * n + g]: the reorder of the
// tensor's layout, and with row_length the last plane less its row's
// offset. Input that already holds planes is copied as it is.
extern "C" __global__ void split_planes(const EncodeDesc* descs, const EncodeTask* tasks,
                                        const nnc_u8* input, const nnc_u8* rows,
                                        nnc_u8* planes_buf) {
  const EncodeTask task = tasks[blockIdx.x];
  const EncodeDesc d = descs[task.desc];
  const nnc_u8* in = input + d.input;
  nnc_u8* planes = planes_buf + d.planes;
  const nnc_u64 first = nnc_u64(task.index) << kChunkLog2;
  const nnc_u64 m = d.n - first < (nnc_u64(1) << kChunkLog2) ? d.n - first : (nnc_u64(1) << kChunkLog2);
  const nnc_u32 k = d.k;
  for (nnc_u64 i = threadIdx.x; i < m; i += blockDim.x) {
    const nnc_u64 g = first + i;
    if (!d.elements) {
      for (nnc_u32 j = 0; j < k; ++j) planes[nnc_u64(j) * d.n + g] = in[nnc_u64(j) * d.n + g];
      continue;
    }
    const nnc_u64 word = reorder<false>(load_element(in, g, k), d.layout);
    for (nnc_u32 j = 0; j < k; ++j) {
      nnc_u8 v = static_cast<nnc_u8>(word >> (8u * j));
      if (d.row_length && j == k - 1) v = static_cast<nnc_u8>(v - rows[d.rows + g / d.row_length]);
      planes[nnc_u64(j) * d.n + g] = v;
    }
  }
}

// Per (plane, chunk) of a tensor, one block each (a task): the histogram, the
// sample's (16 pieces of 1 KiB at multiples of m / 16, chunks of 2^15
// symbols or more), and with `probe` auto's wish for a zstd trial
// (chunk_choice.cpp's wants_zstd: under 2^14 symbols, or long repeats, which
// thread 0 searches in order with the CPU's hash table).
extern "C" __global__ void chunk_stats(const EncodeDesc* descs, const EncodeTask* tasks,
                                       const nnc_u8* planes_buf, nnc_u32 probe, nnc_u32* counts,
                                       nnc_u32* samples, nnc_u32* wants_zstd) {
  __shared__ nnc_u32 hist[256];
  __shared__ nnc_u32 sample[256];
  __shared__ nnc_u64 table[1u << 12];
  for (nnc_u32 s = threadIdx.x; s < 256u; s += blockDim.x) hist[s] = sample[s] = 0;
  __syncthreads();
  const EncodeTask task = tasks[blockIdx.x];
  const EncodeDesc d = descs[task.desc];
  const nnc_u64 n = d.n;
  const nnc_u32 j = task.plane, c = task.index;
  const nnc_u8* planes = planes_buf + d.planes;
  const nnc_u64 first = nnc_u64(c) << kChunkLog2;
  const nnc_u64 m = n - first < (nnc_u64(1) << kChunkLog2) ? n - first : (nnc_u64(1) << kChunkLog2);
  const nnc_u8* p = planes + nnc_u64(j) * n + first;
  for (nnc_u64 i = threadIdx.x; i < m; i += blockDim.x) atomicAdd(&hist[p[i]], 1u);
  if (m >= (1u << 15)) {
    const nnc_u64 stride = m / 16u;
    for (nnc_u32 i = threadIdx.x; i < 16u * 1024u; i += blockDim.x)
      atomicAdd(&sample[p[(i >> 10) * stride + (i & 1023u)]], 1u);
  }
  if (probe && threadIdx.x == 0) {
    nnc_u32 wants = 1;
    if (m >= (1u << 14)) {
      for (nnc_u32 b = 0; b < (1u << 12); ++b) table[b] = ~nnc_u64(0);
      nnc_u64 hits = 0;
      for (nnc_u64 i = 0; i + 8 <= m; i += 4) {
        nnc_u64 v = 0;
        for (nnc_u32 b = 0; b < 8u; ++b) v |= nnc_u64(p[i + b]) << (8u * b);
        const nnc_u32 h = static_cast<nnc_u32>((v * 0x9E3779B97F4A7C15ull) >> (64 - 12));
        hits += table[h] == v;
        table[h] = v;
      }
      wants = hits * 4u * 32u >= m;
    }
    wants_zstd[blockIdx.x] = wants;
  }
  __syncthreads();
  for (nnc_u32 s = threadIdx.x; s < 256u; s += blockDim.x) {
    counts[nnc_u64(blockIdx.x) * 256u + s] = hist[s];
    samples[nnc_u64(blockIdx.x) * 256u + s] = sample[s];
  }
}

// rANS chunks, one block each, one warp per sub-block in turn. Each
// sub-block's words go downwards from the end of its region (2 * 2^sb
// bytes): steps last to first, and in a step lanes 31 to 0, as the CPU's
// encoder writes them (the decoder reads them reversed). Out: the lanes'
// final states and each sub-block's word count.
extern "C" __global__ void rans_encode_chunks(const nnc_u8* planes, const EncodeChunk* chunks,
                                              const nnc_u32* freqs, nnc_u32 precision,
                                              nnc_u32 subblock_log2, nnc_u8* words,
                                              nnc_u32* states, nnc_u32* nwords) {
  __shared__ nnc_u32 x_max[256];
  __shared__ nnc_u32 rcp[256];
  __shared__ nnc_u32 rshift[256];
  __shared__ nnc_u32 cum[256];
  __shared__ nnc_u32 complement[256];
  const EncodeChunk c = chunks[blockIdx.x];
  const nnc_u32* f = freqs + nnc_u64(c.freqs) * 256u;
  for (nnc_u32 s = threadIdx.x; s < 256u; s += blockDim.x) {
    const nnc_u32 fs = f[s];
    x_max[s] = fs << (31u - precision);
    rshift[s] = fs ? rans::encode_rcp_shift(fs) : 0u;
    rcp[s] = fs ? rans::encode_rcp(fs, rshift[s]) : 0u;
    complement[s] = (1u << precision) - fs;
  }
  if (threadIdx.x == 0) {
    nnc_u32 sum = 0;
    for (nnc_u32 s = 0; s < 256u; ++s) {
      cum[s] = sum;
      sum += f[s];
    }
  }
  __syncthreads();
  const nnc_u32 block = 1u << subblock_log2;
  const nnc_u32 subblocks = (c.symbols + block - 1) >> subblock_log2;
  const nnc_u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (nnc_u32 b = warp; b < subblocks; b += warps) {
    const nnc_u8* sym = planes + c.input + nnc_u64(b) * block;
    const nnc_u32 m = c.symbols - b * block < block ? c.symbols - b * block : block;
    nnc_u8* const end = words + c.words + (nnc_u64(b) + 1u) * 2u * block;
    nnc_u8* wp = end;
    nnc_u32 x = rans::kStateLow;
    for (nnc_u32 t = (m + 31u) >> 5; t-- > 0;) {
      const nnc_u32 i = 32u * t + lane;
      const bool active = i < m;
      const nnc_u32 s = active ? sym[i] : 0u;
      const bool need = active && x >= x_max[s];
      const unsigned ballot = __ballot_sync(0xFFFFFFFFu, need);
      if (need) {
        nnc_u8* at = wp - 2u * __popc(ballot >> lane);  // lanes above go higher
        at[0] = static_cast<nnc_u8>(x);
        at[1] = static_cast<nnc_u8>(x >> 8);
        x >>= 16;
      }
      wp -= 2u * __popc(ballot);
      if (active) x = rans::encode_step_rcp(x, rcp[s], rshift[s], cum[s], complement[s]);
    }
    states[(nnc_u64(c.first_sub) + b) * 32u + lane] = x;
    if (lane == 0) nwords[c.first_sub + b] = static_cast<nnc_u32>((end - wp) / 2);
  }
}

// The frame's payloads, one block each: a copy (from the planes buffer or
// the host's payloads), or a rANS chunk laid out as the CPU writes it: the
// table, the sub-blocks' word counts, then each sub-block's 32 states and
// its words (taken from where rans_encode_chunks left them).
extern "C" __global__ void assemble_frame(const FramePiece* pieces, const nnc_u8* planes,
                                          const nnc_u8* host, const nnc_u8* tables,
                                          const nnc_u8* words, const nnc_u32* states,
                                          const nnc_u32* nwords, nnc_u32 subblock_log2,
                                          nnc_u8* frame) {
  __shared__ nnc_u64 sub_at[65];  // each sub-block's states, from the payload's start
  const FramePiece p = pieces[blockIdx.x];
  nnc_u8* out = frame + p.dst;
  if (p.kind != kPieceRans) {
    const nnc_u8* src = (p.kind == kPieceFromPlanes ? planes : host) + p.src;
    for (nnc_u64 i = threadIdx.x; i < p.length; i += blockDim.x) out[i] = src[i];
    return;
  }
  if (threadIdx.x == 0) {
    nnc_u64 at = nnc_u64(p.length) + 4u * p.subblocks;
    for (nnc_u32 b = 0; b < p.subblocks; ++b) {
      sub_at[b] = at;
      at += 4u * rans::kLanes + 2u * nwords[p.first_sub + b];
    }
    sub_at[p.subblocks] = at;
  }
  __syncthreads();
  for (nnc_u32 i = threadIdx.x; i < p.length; i += blockDim.x) out[i] = tables[p.src + i];
  for (nnc_u32 i = threadIdx.x; i < 4u * p.subblocks; i += blockDim.x)
    out[p.length + i] = static_cast<nnc_u8>(nwords[p.first_sub + i / 4u] >> (8u * (i % 4u)));
  const nnc_u64 block_bytes = nnc_u64(2u) << subblock_log2;
  for (nnc_u32 b = 0; b < p.subblocks; ++b) {
    nnc_u8* o = out + sub_at[b];
    const nnc_u32* st = states + (nnc_u64(p.first_sub) + b) * 32u;
    for (nnc_u32 i = threadIdx.x; i < 4u * rans::kLanes; i += blockDim.x)
      o[i] = static_cast<nnc_u8>(st[i / 4u] >> (8u * (i % 4u)));
    const nnc_u64 len = 2u * nnc_u64(nwords[p.first_sub + b]);
    const nnc_u8* w = words + p.words + (nnc_u64(b) + 1u) * block_bytes - len;
    for (nnc_u64 i = threadIdx.x; i < len; i += blockDim.x) o[4u * rans::kLanes + i] = w[i];
  }
}

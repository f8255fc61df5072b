// Device code shared by the decode and encode kernels (decode.cu,
// encode.cu): where a chunk's bytes come from, CRC32C arithmetic, the word
// reorder of every layout, and the per-(plane, chunk) CRC kernel. Both .cu
// files include it; CupyBackend inlines it once into the module's source.
#pragma once

#include "nncodecs/gpu_structs.h"
#include "nncodecs/rans_lane.h"
#include "nncodecs/reorder_word.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NNC_DEV __device__ __forceinline__
#else
#define NNC_DEV inline
#endif

namespace nnc {
namespace gpu {

// CRC32C arithmetic, reflected (bit 31 is x^0): products of polynomials
// modulo the Castagnoli polynomial, for joining the CRCs of pieces.
constexpr nnc_u32 kCrcPoly = 0x82F63B78u;
NNC_DEV nnc_u32 crc_mul(nnc_u32 a, nnc_u32 b) {  // a * b mod P
  nnc_u32 p = 0;
  for (nnc_u32 bit = 0x80000000u; bit; bit >>= 1) {
    if (a & bit) p ^= b;
    b = (b & 1u) ? (b >> 1) ^ kCrcPoly : b >> 1;  // b * x
  }
  return p;
}
NNC_DEV nnc_u32 crc_x8n(nnc_u64 n) {  // x^(8n) mod P
  nnc_u32 result = 0x80000000u, base = 0x00800000u;  // 1, x^8
  for (; n; n >>= 1) {
    if (n & 1u) result = crc_mul(result, base);
    base = crc_mul(base, base);
  }
  return result;
}

NNC_DEV nnc_u32 load_u32(const nnc_u8* p) {
  return nnc_u32(p[0]) | nnc_u32(p[1]) << 8 | nnc_u32(p[2]) << 16 | nnc_u32(p[3]) << 24;
}
NNC_DEV nnc_u16 load_u16(const nnc_u8* p) {
  return static_cast<nnc_u16>(nnc_u32(p[0]) | nnc_u32(p[1]) << 8);
}

// The buffers a batch shares.
struct Batch {
  const FrameDesc* descs;
  const nnc_u8* frames;
  const nnc_u8* planes;
  const nnc_u8* external;
  const PlaneSource* sources;
  const nnc_u8* rows;
};

// What the merge reads for one frame: its frame, decoded planes, the CPU's
// planes, the source of every (plane, chunk), its row offsets.
struct MergeInput {
  const nnc_u8* frame;
  const nnc_u8* planes;
  const nnc_u8* external;
  const PlaneSource* sources;
  const nnc_u8* row_offsets;
  nnc_u64 row_length;
  nnc_u64 n;
  nnc_u32 k, chunks, layout;
};
NNC_DEV MergeInput merge_input(const Batch& b, const FrameDesc& d) {
  return MergeInput{b.frames + d.frame, b.planes + d.planes, b.external + d.external,
                    b.sources + d.sources, b.rows + d.rows, d.row_length, d.n, d.k, d.chunks,
                    d.layout};
}

// Byte j of element g (symbol i of chunk c) from its source; row offsets
// added to raw and constant chunks of the last plane (rans_decode_* and the
// CPU add them to what they decode).
NNC_DEV nnc_u8 source_byte(const MergeInput& in, nnc_u32 j, nnc_u64 c, nnc_u64 i, nnc_u64 g) {
  const PlaneSource s = in.sources[nnc_u64(j) * in.chunks + c];
  nnc_u8 v = s.kind == kConstant      ? static_cast<nnc_u8>(s.value)
             : s.kind == kFromFrame   ? in.frame[s.offset + i]
             : s.kind == kFromPlanes  ? in.planes[s.offset + i]
                                      : in.external[s.offset + i];
  if (in.row_length && j == in.k - 1 && (s.kind == kFromFrame || s.kind == kConstant))
    v = static_cast<nnc_u8>(v + in.row_offsets[g / in.row_length]);
  return v;
}

// The reorder of `layout` (0 none, 1 f64, 2 f32, 3 f16, 4 bf16, 5 f8_e4m3,
// 6 f8_e5m2, as nnc::Layout) on a little-endian word: inverse (Decode) or
// forward.
template <bool Decode, class U>
NNC_DEV nnc_u64 reorder_as(nnc_u64 word, unsigned mantissa) {
  const U w = static_cast<U>(word);
  return Decode ? reorder_decode_word<U>(w, mantissa) : reorder_encode_word<U>(w, mantissa);
}
template <bool Decode>
NNC_DEV nnc_u64 reorder(nnc_u64 word, nnc_u32 layout) {
  switch (layout) {
    case 1: return reorder_as<Decode, nnc_u64>(word, 52);
    case 2: return reorder_as<Decode, nnc_u32>(word, 23);
    case 3: return reorder_as<Decode, nnc_u16>(word, 10);
    case 4: return reorder_as<Decode, nnc_u16>(word, 7);
    case 5: return reorder_as<Decode, nnc_u8>(word, 3);
    case 6: return reorder_as<Decode, nnc_u8>(word, 2);
    default: return word;
  }
}

}  // namespace gpu
}  // namespace nnc

using namespace nnc;
using namespace nnc::gpu;

// The CRC32C of (plane, chunk)s, one block each, from the same sources as
// the merge (row offsets added the same way), or from elements (reordered
// again: chunks the fused kernel wrote, or the encoder's input), so that
// the host joins them into each frame's checksum. Each thread takes a
// contiguous piece with a byte-wise table; thread 0 joins the pieces
// (x^(8 len) products) and turns the raw remainder into CRC32C (initial
// value and final xor ~0).
extern "C" __global__ void crc_chunks(const FrameDesc* descs, const CrcTask* tasks,
                                      const nnc_u8* frames, const nnc_u8* planes,
                                      const nnc_u8* external, const PlaneSource* sources,
                                      const nnc_u8* rows, const nnc_u8* elements, nnc_u32* crcs) {
  __shared__ nnc_u32 table[256];
  __shared__ nnc_u32 pieces[1024];
  for (nnc_u32 b = threadIdx.x; b < 256u; b += blockDim.x) {
    nnc_u32 r = b;
    for (int i = 0; i < 8; ++i) r = (r & 1u) ? (r >> 1) ^ kCrcPoly : r >> 1;
    table[b] = r;
  }
  __syncthreads();
  const CrcTask t = tasks[blockIdx.x];
  const FrameDesc d = descs[t.desc];
  const MergeInput in = merge_input(Batch{descs, frames, planes, external, sources, rows}, d);
  const nnc_u8* el = elements + d.out;
  const nnc_u32 j = t.plane, c = t.chunk, k = d.k;
  const nnc_u64 first = nnc_u64(c) << kChunkLog2;
  const nnc_u64 m = d.n - first < (nnc_u64(1) << kChunkLog2) ? d.n - first : (nnc_u64(1) << kChunkLog2);
  const nnc_u64 piece = (m + blockDim.x - 1) / blockDim.x;
  const nnc_u64 begin = piece * threadIdx.x < m ? piece * threadIdx.x : m;
  const nnc_u64 end = begin + piece < m ? begin + piece : m;
  nnc_u32 crc = 0;  // raw remainder: no initial value, no final xor
  for (nnc_u64 i = begin; i < end; ++i) {
    nnc_u8 v;
    if (t.from_elements) {  // byte j of the reordered element
      nnc_u64 word = 0;
      for (nnc_u32 b = 0; b < k; ++b) word |= nnc_u64(el[(first + i) * k + b]) << (8u * b);
      v = static_cast<nnc_u8>(reorder<false>(word, d.layout) >> (8u * j));
    } else {
      v = source_byte(in, j, c, i, first + i);
    }
    crc = (crc >> 8) ^ table[(crc ^ v) & 0xFFu];
  }
  pieces[threadIdx.x] = crc;
  __syncthreads();
  if (threadIdx.x != 0) return;
  nnc_u32 joined = 0;
  const nnc_u32 step = crc_x8n(piece);  // every piece is `piece` long but the last ones
  for (nnc_u32 p = 0; p < blockDim.x; ++p) {
    const nnc_u64 b0 = piece * p < m ? piece * p : m;
    const nnc_u64 len = (b0 + piece < m ? b0 + piece : m) - b0;
    if (len == 0) break;
    joined = crc_mul(joined, len == piece ? step : crc_x8n(len)) ^ pieces[p];
  }
  // CRC32C with initial value I over m bytes = raw ^ I * x^(8m), then the final xor.
  crcs[blockIdx.x] = joined ^ crc_mul(0xFFFFFFFFu, crc_x8n(m)) ^ 0xFFFFFFFFu;
}

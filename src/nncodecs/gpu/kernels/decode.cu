// GPU decoding of nncodecs frames (docs/format.md): rANS chunks into a planes
// buffer, one thread block per chunk and one warp per sub-block (lane l is
// rANS lane l; the refill words of a step are shared out by ballot and
// popcount), then the plane merge with the inverse reorder, one thread per
// element. The host (nncodecs/gpu/decode.py) parses and checks the frame's
// header and index and hands the kernels a table of chunks; the kernels
// check every payload themselves and report per chunk, never fault.
//
// Compiled by NVRTC through CuPy with the shared headers inlined
// (nncodecs/gpu/_module.py), by nvcc in the compile check, and as host C++
// under the SIMT emulator of the tests (tests/cuda/simt_host.h).
#include "nncodecs/rans_lane.h"
#include "nncodecs/reorder_word.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define NNC_DEV __device__ __forceinline__
#else
#define NNC_DEV inline
#endif

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
constexpr nnc_u32 kChunkLog2 = 18;

// One rANS chunk of one plane (the host fills these; 40 bytes, 8-aligned).
struct RansChunk {
  nnc_u64 payload;  // offset of the payload in the frame
  nnc_u64 out;      // offset of its first symbol in the planes buffer
  nnc_u64 first;    // index of its first symbol within its plane (row offsets)
  nnc_u32 length;   // payload bytes
  nnc_u32 symbols;  // symbols of the chunk
  nnc_u32 shifted;  // 1: the last plane of a version 2 frame (add row offsets)
  nnc_u32 pad;
};

// Where byte j of the elements of one chunk comes from (16 bytes).
// kFromElements (CRC only): the byte of the reordered element already in the
// output, where the fused kernel wrote a chunk without its plane.
enum : nnc_u32 { kFromFrame = 0, kConstant = 1, kFromPlanes = 2, kFromExternal = 3, kFromElements = 4 };
struct PlaneSource {
  nnc_u64 offset;  // of the chunk's first byte in its buffer
  nnc_u32 kind;
  nnc_u32 value;   // the byte of a constant chunk
};

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

// What the merge reads: the frame, the decoded planes, the CPU's planes
// (Huffman and zstd chunks), the source of every (plane, chunk), the row
// offsets of a version 2 frame.
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

// Where rans_decode_* put a chunk's symbols: into the planes buffer, or
// (fused) straight into the elements, with the chunk's other planes.
struct ToPlanes {
  nnc_u8* planes;
  NNC_DEV void operator()(const RansChunk& c, nnc_u64 i, nnc_u8 sym) const { planes[c.out + i] = sym; }
};
struct ToElements {
  MergeInput in;
  nnc_u8* out;
  NNC_DEV void operator()(const RansChunk& c, nnc_u64 i, nnc_u8 sym) const {
    const nnc_u64 g = c.first + i, chunk = c.first >> kChunkLog2;
    nnc_u64 word = nnc_u64(sym) << (8u * (in.k - 1));
    for (nnc_u32 j = 0; j + 1 < in.k; ++j) word |= nnc_u64(source_byte(in, j, chunk, i, g)) << (8u * j);
    word = reorder<true>(word, in.layout);
    for (nnc_u32 j = 0; j < in.k; ++j) out[g * in.k + j] = static_cast<nnc_u8>(word >> (8u * j));
  }
};

}  // namespace gpu
}  // namespace nnc

using namespace nnc;
using namespace nnc::gpu;

// One rANS chunk per block, symbols to `sink`. grid: one block per rANS
// chunk; block: whole warps (4 is a good start).
template <class Sink>
NNC_DEV void decode_chunk(const nnc_u8* frame, const RansChunk* chunks, nnc_u32 precision,
                          nnc_u32 subblock_log2, const nnc_u8* row_offsets, nnc_u64 row_length,
                          int* status, const Sink& sink) {
  __shared__ nnc_u32 table[1u << 12];
  __shared__ nnc_u32 freqs[256];
  __shared__ nnc_u32 cum[257];
  __shared__ nnc_u32 sub_words[kMaxSubblocks];
  __shared__ nnc_u32 sub_at[kMaxSubblocks];  // states of sub-block b, from the payload start
  __shared__ int ok;
  const RansChunk c = chunks[blockIdx.x];
  const nnc_u8* p = frame + c.payload;
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
        sink(c, base + i, sym);
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

extern "C" __global__ void rans_decode_chunks(const nnc_u8* frame, const RansChunk* chunks,
                                              nnc_u32 precision, nnc_u32 subblock_log2,
                                              nnc_u8* planes, const nnc_u8* row_offsets,
                                              nnc_u64 row_length, int* status) {
  decode_chunk(frame, chunks, precision, subblock_log2, row_offsets, row_length, status,
               ToPlanes{planes});
}

// Fused: chunks whose only rANS plane is the last (the exponent plane),
// decoded straight into elements: that plane never goes to memory. The
// other planes of those chunks are raw, constant or the CPU's.
extern "C" __global__ void rans_decode_merge(const nnc_u8* frame, const RansChunk* chunks,
                                             nnc_u32 precision, nnc_u32 subblock_log2,
                                             const nnc_u8* external, const PlaneSource* sources,
                                             nnc_u32 k, nnc_u64 n, nnc_u32 nchunks,
                                             nnc_u32 layout, const nnc_u8* row_offsets,
                                             nnc_u64 row_length, int* status, nnc_u8* out) {
  const MergeInput in{frame, nullptr, external, sources, row_offsets, row_length, n, k, nchunks, layout};
  decode_chunk(frame, chunks, precision, subblock_log2, row_offsets, row_length, status,
               ToElements{in, out});
}

// One thread per element (grid-stride), but for the chunks rans_decode_merge
// wrote (`fused`, a byte per chunk): every byte from its source
// (source_byte), then the inverse reorder of `layout`. to_planes: write
// plane-major bytes instead of elements.
extern "C" __global__ void merge_elements(const nnc_u8* frame, const nnc_u8* planes,
                                          const nnc_u8* external, const PlaneSource* sources,
                                          nnc_u32 k, nnc_u64 n, nnc_u32 chunks, nnc_u32 layout,
                                          const nnc_u8* row_offsets, nnc_u64 row_length,
                                          nnc_u32 to_planes, const nnc_u8* fused, nnc_u8* out) {
  const MergeInput in{frame, planes, external, sources, row_offsets, row_length, n, k, chunks, layout};
  const nnc_u64 stride = nnc_u64(gridDim.x) * blockDim.x;
  for (nnc_u64 g = nnc_u64(blockIdx.x) * blockDim.x + threadIdx.x; g < n; g += stride) {
    const nnc_u64 c = g >> kChunkLog2;
    if (fused[c]) continue;  // written by rans_decode_merge
    const nnc_u64 i = g & ((nnc_u64(1) << kChunkLog2) - 1u);
    if (to_planes) {
      for (nnc_u32 j = 0; j < k; ++j) out[nnc_u64(j) * n + g] = source_byte(in, j, c, i, g);
      continue;
    }
    nnc_u64 word = 0;
    if (layout == 0) {
      for (nnc_u32 j = 0; j < k; ++j) out[g * k + j] = source_byte(in, j, c, i, g);
      continue;
    }
    for (nnc_u32 j = 0; j < k; ++j) word |= nnc_u64(source_byte(in, j, c, i, g)) << (8u * j);
    word = reorder<true>(word, layout);
    for (nnc_u32 j = 0; j < k; ++j) out[g * k + j] = static_cast<nnc_u8>(word >> (8u * j));
  }
}

// The CRC32C of every (plane, chunk)'s decoded bytes, one block each (grid:
// planes x chunks, plane-major as the index), from the same sources as the
// merge (row offsets added the same way), so that the host joins them into
// the frame's checksum. Each thread takes a contiguous piece with a
// byte-wise table; thread 0 joins the pieces (x^(8 len) products) and
// turns the raw remainder into CRC32C (initial value and final xor ~0).
extern "C" __global__ void crc_chunks(const nnc_u8* frame, const nnc_u8* planes,
                                      const nnc_u8* external, const PlaneSource* sources,
                                      nnc_u32 k, nnc_u64 n, nnc_u32 chunks, nnc_u32 layout,
                                      const nnc_u8* row_offsets, nnc_u64 row_length,
                                      const nnc_u8* elements, nnc_u32* crcs) {
  const MergeInput in{frame, planes, external, sources, row_offsets, row_length, n, k, chunks, layout};
  __shared__ nnc_u32 table[256];
  __shared__ nnc_u32 pieces[1024];
  for (nnc_u32 b = threadIdx.x; b < 256u; b += blockDim.x) {
    nnc_u32 r = b;
    for (int i = 0; i < 8; ++i) r = (r & 1u) ? (r >> 1) ^ kCrcPoly : r >> 1;
    table[b] = r;
  }
  __syncthreads();
  const nnc_u32 j = blockIdx.x / chunks, c = blockIdx.x % chunks;
  const PlaneSource s = sources[blockIdx.x];
  const nnc_u64 first = nnc_u64(c) << kChunkLog2;
  const nnc_u64 m = n - first < (nnc_u64(1) << kChunkLog2) ? n - first : (nnc_u64(1) << kChunkLog2);
  const nnc_u64 piece = (m + blockDim.x - 1) / blockDim.x;
  const nnc_u64 begin = piece * threadIdx.x < m ? piece * threadIdx.x : m;
  const nnc_u64 end = begin + piece < m ? begin + piece : m;
  nnc_u32 crc = 0;  // raw remainder: no initial value, no final xor
  for (nnc_u64 i = begin; i < end; ++i) {
    nnc_u8 v;
    if (s.kind == kFromElements) {  // byte j of the reordered element
      nnc_u64 word = 0;
      for (nnc_u32 b = 0; b < k; ++b) word |= nnc_u64(elements[(first + i) * k + b]) << (8u * b);
      v = static_cast<nnc_u8>(reorder<false>(word, layout) >> (8u * j));
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
  for (nnc_u32 t = 0; t < blockDim.x; ++t) {
    const nnc_u64 b0 = piece * t < m ? piece * t : m;
    const nnc_u64 len = (b0 + piece < m ? b0 + piece : m) - b0;
    if (len == 0) break;
    joined = crc_mul(joined, len == piece ? step : crc_x8n(len)) ^ pieces[t];
  }
  // CRC32C with initial value I over m bytes = raw ^ I * x^(8m), then the final xor.
  crcs[blockIdx.x] = joined ^ crc_mul(0xFFFFFFFFu, crc_x8n(m)) ^ 0xFFFFFFFFu;
}
